"""Reviewing a route change from the command line on copies of the toy project: written
expected changes fed back (stated and by id), the CI warning on TODO reasons, the next-step
line, Markdown summaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routectl.io.schemas import schema_violation
from tests.fixtures.toy import invoke, load, make_project, ok, row, save

Q64 = [
    "toy_model/float16/tp1/none/c1/q64",
    "toy_model/float16/tp2/none/c1/q64",
    "toy_model/fp8_e4m3/tp1/none/c1/q64",
    "toy_model/fp8_e4m3/tp2/none/c1/q64",
]
OTHER = "toy_model/float16/tp1/none/c1/q4096"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def alter(project: Path, ids, change) -> None:
    path = project / "snapshots" / "toy-a.json"
    data = load(path)
    for row_id in ids:
        change(row(data, row_id)["route"])
    save(path, data)


def old_split_k(route) -> None:
    route["dispatch"][0]["plan"]["split_k"] = 99


def old_kernel(route) -> None:
    route["kernel"] = "OldKernel"


def check(project: Path, *args, environ=None):
    return ok(invoke(["check", *args], cwd=project, environ=environ))


def test_stated_round_trip(project):
    alter(project, Q64, old_split_k)
    stated = project / "stated.json"
    first = check(project, "--write-expected", "stated.json")
    assert first.code == 1
    assert first.stdout.splitlines()[:4] == [
        "toy-a: FAILED: 11 rows, 4 changed, 0 added, 0 removed",
        "  changed 4 rows (unexpected)",
        "    route.dispatch[M=1,0].plan.split_k: 99 -> 4",
        "    rows toy-a:toy_model/{float16,fp8_e4m3}/tp{1,2}/none/c1/q64",
    ]
    assert first.stderr.splitlines()[-1] == (
        "next: review stated.json (one entry per change group), replace each TODO reason, "
        "then routectl check --expected-changes stated.json"
    )
    assert load(stated) == {
        "schema_version": 4,
        "changes": [
            {
                "rows": "toy-a:toy_model/{float16,fp8_e4m3}/tp{1,2}/none/c1/q64",
                "fields": {"route.dispatch[M=1,0].plan.split_k": [99, 4]},
                "reason": "TODO: say why route.dispatch[M=1,0].plan.split_k moves",
            }
        ],
    }

    # Fed back: passes on the same change; in CI it warns while a reason says TODO.
    again = check(project, "--expected-changes", "stated.json", environ={"CI": "true"})
    assert again.code == 0, again.stdout
    assert again.stderr.splitlines() == [
        "warning: stated.json: 1 expected change(s) still have a TODO reason: say why each "
        "change is intended"
    ]
    assert check(project, "--expected-changes", stated).stderr == ""

    # One more moved field in a stated row: unexpected, and the field is named.
    alter(project, Q64[:1], old_kernel)
    more_field = check(project, "--expected-changes", stated, "--format", "json")
    assert more_field.code == 1
    cat = json.loads(more_field.stdout)["categories"]["toy-a"]
    assert cat["unexpected"] == [f"toy-a:{Q64[0]}"]
    assert cat["unstated"] == {
        f"toy-a:{Q64[0]}": [
            {"path": "route.kernel", "kind": "changed", "old": "OldKernel", "new": "FastKernel"}
        ]
    }
    text = check(project, "--expected-changes", stated).stdout
    assert (
        f'    + row toy-a:{Q64[0]} (unexpected): route.kernel: "OldKernel" -> "FastKernel" '
        "<- not stated"
    ) in text.splitlines()


def test_stated_file_fails_when_one_more_row_moves(project):
    alter(project, Q64, old_split_k)
    stated = project / "stated.json"
    check(project, "--write-expected", stated)
    alter(project, [OTHER], old_split_k)
    result = check(project, "--expected-changes", stated)
    assert result.code == 1
    assert "  changed 5 rows (4 expected, 1 unexpected)" in result.stdout
    assert (
        result.stdout.splitlines()[-1] == "FAILED: 1 unexpected, 0 missing (2 categories, 22 rows)"
    )


def test_id_file_round_trip(project):
    alter(project, Q64, old_split_k)
    ids = project / "ids.json"
    assert check(project, "--write-expected-ids", ids).code == 1
    assert [e["id"] for e in load(ids)] == [f"toy-a:{i}" for i in Q64]
    assert check(project, "--expected-changes", ids).code == 0
    alter(project, Q64[:1], old_kernel)  # another field of a listed row: still listed
    assert check(project, "--expected-changes", ids).code == 0
    alter(project, [OTHER], old_split_k)  # another row
    assert check(project, "--expected-changes", ids).code == 1


def test_next_step_names_the_expected_file_given(project):
    alter(project, Q64, old_split_k)
    listed = project / "listed.json"
    listed.write_text(json.dumps([f"toy-a:{Q64[0]}"]))
    result = check(project, "--expected-changes", "listed.json")
    assert result.code == 1
    assert result.stderr.splitlines()[-1] == (
        "next: routectl check --expected-changes listed.json --write-expected listed.json "
        "restates the actual changes for review; once reviewed, pass it again (and, for "
        "check, --update)"
    )
    assert check(project, "--format", "json").stderr.count("next:") == 0


def test_quiet_prints_verdict_lines_only(project):
    alter(project, Q64, old_split_k)
    assert check(project, "-q").stdout.splitlines() == [
        "toy-a: FAILED: 11 rows, 4 changed, 0 added, 0 removed",
        "toy-b: ok: 11 rows, no changes",
        "FAILED: 4 unexpected, 0 missing (2 categories, 22 rows)",
    ]


def test_markdown_summary_is_appended_and_escaped(project):
    alter(project, Q64, old_split_k)
    alter(project, ["edge:slow"], lambda r: r.update(kernel="Old|*Kernel*"))
    summary = project / "summary.md"
    summary.write_text("earlier step\n")
    result = check(project, "--summary", summary, "--format", "github")
    assert result.code == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n## routectl check: FAILED\n")
    assert "| toy-a | 11 | 5 | 0 | 0 | **FAILED** |" in text
    assert "| toy-b | 11 | 0 | 0 | 0 | ok |" in text
    assert (
        "| `route.dispatch[M=1,0].plan.split_k: 99 -> 4` | 4 | "
        "`toy-a:toy_model/{float16,fp8_e4m3}/tp{1,2}/none/c1/q64` | unexpected |"
    ) in text
    # A value with Markdown in it stays text: `|` escaped in the code span and the list item.
    assert '| `route.kernel: "Old\\|*Kernel*" -> "SlowKernel"` | 1 |' in text
    assert (
        '- 1 row changed unexpectedly: route.kernel: "Old\\|\\*Kernel\\*" -\\> '
        '"SlowKernel": toy-a:edge:slow'
    ) in text
    markdown = check(project, "--format", "markdown")
    assert markdown.stdout == text.removeprefix("earlier step\n")


def test_written_stated_file_is_valid_for_added_and_removed_rows(project):
    path = project / "snapshots" / "toy-a.json"
    data = load(path)
    data["rows"] = [r for r in data["rows"] if r["id"] != OTHER]
    save(path, data)
    stated = project / "stated.json"
    assert check(project, "--write-expected", stated).code == 1
    document = load(stated)
    assert schema_violation("expected-changes", document) is None
    assert document["changes"] == [
        {
            "rows": f"toy-a:{OTHER}",
            "reason": "TODO: say why these rows are added (kernel FastKernel)",
        }
    ]
    assert check(project, "--expected-changes", stated).code == 0


def test_writing_expected_changes_twice_keeps_the_reviewed_reasons(project):
    alter(project, Q64, old_split_k)
    stated = project / "stated.json"
    check(project, "--write-expected", stated)
    document = load(stated)
    document["changes"][0]["reason"] = "split-K 4 measured faster"
    save(stated, document)
    reviewed = stated.read_bytes()

    # The `next:` line's command: the file already states every change, so it stays.
    again = check(project, "--expected-changes", stated, "--write-expected", stated)
    assert again.code == 0
    assert again.stderr.splitlines() == [
        f"{stated} already states every change: nothing to write, the file is left as it was"
    ]
    assert stated.read_bytes() == reviewed

    # One more row moves: the reviewed entry is kept as it was, the new change is TODO.
    alter(project, [OTHER], old_kernel)
    more = check(project, "--write-expected", stated)
    assert "(1 kept with their reasons, 1 new)" in more.stderr.splitlines()[0]
    kept, new = load(stated)["changes"]
    assert kept == document["changes"][0]
    assert new["reason"].startswith("TODO") and new["rows"] == f"toy-a:{OTHER}"
    assert not (project / "stated.json.orig").exists()  # nothing was dropped


def test_obsolete_entries_are_listed_and_dropped_only_with_prune(project):
    alter(project, Q64, old_split_k)
    stated = project / "stated.json"
    check(project, "--write-expected", stated)
    document = load(stated)
    gone = {"rows": "toy-a:edge:slow", "fields": {"route.kernel": ["A", "B"]}, "reason": "old"}
    document["changes"].append(gone)
    save(stated, document)
    before = stated.read_bytes()

    listed = check(project, "--write-expected", stated)
    assert listed.stderr.splitlines()[:2] == [
        f"obsolete: {stated} entry [1] (rows toy-a:edge:slow): 1 of its rows did not move",
        f"{stated} already states every change: nothing to write, the file is left as it was "
        "(--prune drops the obsolete entries)",
    ]
    assert stated.read_bytes() == before

    pruned = check(project, "--write-expected", stated, "--prune")
    assert pruned.stderr.splitlines()[0].startswith(f"dropped: {stated} entry [1]")
    assert load(stated)["changes"] == document["changes"][:1]
    assert (project / "stated.json.orig").read_bytes() == before
    assert check(project, "--expected-changes", stated).code == 0


def test_an_older_file_naming_positions_is_restated_with_its_reasons(project):
    alter(project, Q64, old_split_k)
    stated = project / "stated.json"
    save(
        stated,
        {
            "schema_version": 2,
            "changes": [
                {
                    "rows": "toy-a:toy_model/**/q64",
                    "fields": {"route.dispatch[0].plan.split_k": [99, 4]},
                    "reason": "split-K 4 measured faster",
                }
            ],
        },
    )
    refused = check(project, "--expected-changes", stated)
    assert refused.code == 2 and "restate the file with --write-expected" in refused.stderr
    restated = check(project, "--write-expected", stated)
    assert "1 restated by identity" in restated.stderr
    (entry,) = load(stated)["changes"]
    assert entry["fields"] == {"route.dispatch[M=1,0].plan.split_k": [99, 4]}
    assert entry["reason"] == "split-K 4 measured faster"
    assert check(project, "--expected-changes", stated).code == 0


def test_a_file_applied_by_update_is_explained_in_one_line_and_pruned(project):
    alter(project, Q64, old_split_k)
    stated = project / "stated.json"
    check(project, "--write-expected", stated)
    assert check(project, "--expected-changes", stated, "--update").code == 0
    stale = check(project, "--expected-changes", stated)
    assert stale.code == 1
    lines = stale.stdout.splitlines()
    assert lines[-2] == (
        "stale expected changes: every missing change is already in the retained snapshots "
        "(the file was applied, e.g. by check --update): remove the file or its entries "
        "(--write-expected FILE --prune drops them)"
    )
    # A missing change that is not in the snapshots is not explained away.
    document = load(stated)
    document["changes"][0]["fields"] = {"route.dispatch[M=1,0].plan.split_k": [4, 99]}
    save(stated, document)
    assert "stale expected changes" not in check(project, "--expected-changes", stated).stdout

    check(project, "--write-expected", stated, "--prune")
    assert load(stated)["changes"] == []
    assert check(project, "--expected-changes", stated).code == 0
