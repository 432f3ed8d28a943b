"""`routectl check`, `list` and `explain` on copies of the toy project, through the CLI with an
explicit environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from routectl.io.schemas import schema_violation
from tests.fixtures.toy import invoke, load, make_project, ok, row, save, tree_bytes

ROW_A = "toy_model/float16/tp1/none/c1/q64"
ROW_A2 = "toy_model/fp8_e4m3/tp2/none/c1/q4096"
ROW_B = "toy_other/float16/tp2/none/c1/q64"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def snapshots(project: Path) -> Path:
    return project / "snapshots"


def alter(project: Path, category: str, change) -> None:
    path = snapshots(project) / f"{category}.json"
    data = load(path)
    change(data)
    save(path, data)


def set_split_k(value: int):
    def change(data):
        row(data, ROW_A)["route"]["dispatch"][0]["plan"]["split_k"] = value

    return change


def check(project: Path, *args, environ=None):
    return ok(invoke(["check", *args], cwd=project, environ=environ))


def write_expected(project: Path, entries) -> Path:
    path = project / "expected.json"
    path.write_text(json.dumps(entries))
    return path


# --- verdicts ------------------------------------------------------------------------------


def test_fresh_copy_passes(project):
    result = check(project)
    assert result.code == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "ok: 2 categories, 22 rows, 0 expected changes"
    assert result.stderr == ""
    assert sorted(p.name for p in snapshots(project).iterdir()) == ["toy-a.json", "toy-b.json"]


def test_altered_row_is_unexpected_with_a_field_diff(project):
    alter(project, "toy-a", set_split_k(99))
    retained = (snapshots(project) / "toy-a.json").read_bytes()
    result = check(project, "--report", project / "report.json")
    assert result.code == 1
    assert result.stdout.splitlines()[1:4] == [
        "  changed 1 row (unexpected)",
        "    route.dispatch[M=1,0].plan.split_k: 99 -> 4",
        f"    rows toy-a:{ROW_A}",
    ]
    report = load(project / "report.json")
    assert schema_violation("report", report) is None
    assert report["categories"]["toy-a"]["unexpected"] == [f"toy-a:{ROW_A}"]
    assert report["categories"]["toy-a"]["diffs"][f"toy-a:{ROW_A}"] == [
        {"path": "route.dispatch[M=1,0].plan.split_k", "kind": "changed", "old": 99, "new": 4}
    ]
    # A failing check leaves the fresh snapshot beside the retained one, which is untouched.
    new = snapshots(project) / "toy-a.json.new"
    assert row(load(new), ROW_A)["route"]["dispatch"][0]["plan"]["split_k"] == 4
    assert (snapshots(project) / "toy-a.json").read_bytes() == retained
    assert not (snapshots(project) / "toy-b.json.new").exists()

    # Listed as expected: passes, and the stale .json.new goes.
    expected = write_expected(project, [{"id": f"toy-a:{ROW_A}", "reason": "split_k tuned"}])
    result = check(project, "--expected-changes", expected)
    assert result.code == 0, result.stdout
    assert "(expected: split_k tuned)" in result.stdout
    assert not new.exists()


def test_a_number_written_as_a_float_is_a_change(project):
    """4.0 == 4 in Python, not in the snapshot's JSON text."""
    alter(project, "toy-a", set_split_k(4.0))
    result = check(project)
    assert result.code == 1
    assert "route.dispatch[M=1,0].plan.split_k: 4.0 -> 4" in result.stdout


def test_the_number_of_processes_changes_nothing_but_speed(project):
    alter(project, "toy-a", set_split_k(99))
    runs = [check(project, "--jobs", str(jobs), "--format", "json") for jobs in (1, 3)]
    assert [r.code for r in runs] == [1, 1]
    assert runs[0].stdout == runs[1].stdout
    assert json.loads(runs[0].stdout)["categories"]


@pytest.mark.parametrize("extra", [f"toy-a:{ROW_A2}", "toy-a:edge:never_declared"])
def test_an_extra_listed_id_is_missing(project, extra):
    alter(project, "toy-a", set_split_k(99))
    expected = write_expected(project, [f"toy-a:{ROW_A}", extra])
    result = check(project, "--expected-changes", expected, "--format", "json")
    assert result.code == 1
    report = json.loads(result.stdout)
    assert report["categories"]["toy-a"]["missing"] == [extra]
    assert report["categories"]["toy-a"]["unexpected"] == []
    assert report["unknown"] == ([extra] if "never" in extra else [])
    text = check(project, "--expected-changes", expected).stdout
    if "never" in extra:
        assert f"  missing {extra} (unknown id)" in text
    else:
        assert f"  missing 1 row (expected to move, did not change)\n    rows {extra}\n" in text


def test_bare_ids_attribute_to_their_category(project):
    alter(project, "toy-b", lambda d: row(d, ROW_B)["route"].update(kernel="SlowKernel"))
    assert check(project, "--expected-changes", write_expected(project, [ROW_B])).code == 0
    result = check(project, "--expected-changes", write_expected(project, ["edge:slow"]))
    assert result.code == 2 and len(result.lines) == 1
    assert "several categories (toy-a, toy-b)" in result.stderr
    result = check(
        project, "--expected-changes", write_expected(project, [ROW_B, "edge:no_such_probe"])
    )
    assert result.code == 1
    assert "missing edge:no_such_probe (unknown id: no category has this row)" in result.stdout


def test_deleted_row_is_added_and_extra_row_is_removed(project):
    extra = {
        "id": "edge:retired",
        "route": {
            "kernel": None,
            "verdicts": [],
            "status": {"code": "not_modelled", "message": "retired probe"},
        },
    }

    def change(data):
        data["rows"] = [r for r in data["rows"] if r["id"] != ROW_A2] + [extra]

    alter(project, "toy-a", change)
    result = check(project, "--format", "json")
    assert result.code == 1
    cat = json.loads(result.stdout)["categories"]["toy-a"]
    assert cat["added"] == [f"toy-a:{ROW_A2}"]
    assert cat["removed"] == ["toy-a:edge:retired"]
    assert cat["changed"] == [] and cat["unexpected"] == ["toy-a:edge:retired", f"toy-a:{ROW_A2}"]


def test_write_expected_output_passes_when_fed_back(project):
    alter(project, "toy-a", set_split_k(7))
    alter(project, "toy-b", lambda d: d["rows"].pop())
    listed = project / "listed.json"
    first = check(project, "--write-expected-ids", listed)
    assert first.code == 1
    entries = load(listed)
    assert [e["id"] for e in entries] == [
        f"toy-a:{ROW_A}",
        "toy-b:toy_other/fp8_e4m3/tp2/none/c1/q64",
    ]
    assert entries[0]["reason"] == "changed: route.dispatch[M=1,0].plan.split_k"
    assert schema_violation("expected-changes", entries) is None
    again = check(project, "--expected-changes", listed, "--write-expected-ids", listed)
    assert again.code == 0, again.stdout
    assert load(listed) == entries  # reasons kept


def test_stale_and_unlisted_categories(project):
    stale = snapshots(project) / "toy-old.json"
    data = load(snapshots(project) / "toy-a.json")
    data["category"] = "toy-old"
    save(stale, data)
    result = check(project)
    assert result.code == 1
    assert "stale toy-old:" in result.stdout
    assert check(project, "--format", "json").stdout.count('"toy-old"') == 1
    assert check(project, "-c", "toy-a").code == 0  # a filtered run judges only toy-a
    stale.unlink()
    odd = snapshots(project) / "Old Notes.json"
    odd.write_text("not even JSON")  # stale files are named, never read
    result = check(project, "--format", "json")
    assert result.code == 1 and json.loads(result.stdout)["stale"] == ["Old Notes"]
    odd.unlink()

    (snapshots(project) / "toy-b.json").unlink()
    result = check(project, "--format", "json")
    assert result.code == 1
    assert len(json.loads(result.stdout)["categories"]["toy-b"]["added"]) == 11
    assert (snapshots(project) / "toy-b.json.new").exists()
    assert check(project, "-c", "toy-a").code == 0
    assert (snapshots(project) / "toy-b.json.new").exists()  # not judged, not touched
    assert check(project, "-c", "toy-b").code == 1


def test_filtered_run_ignores_other_categories_expected_ids(project):
    alter(project, "toy-a", set_split_k(3))
    expected = write_expected(project, [f"toy-a:{ROW_A}", f"toy-b:{ROW_B}"])
    assert check(project, "-c", "toy-a", "--expected-changes", expected).code == 0
    assert check(project, "--expected-changes", expected).code == 1  # toy-b:... is missing


# --- update --------------------------------------------------------------------------------


@pytest.mark.parametrize("ci", ["true", "1", "yes", "False"])
def test_update_refuses_in_ci(project, ci):
    alter(project, "toy-a", set_split_k(5))
    before = tree_bytes(snapshots(project))
    result = check(project, "--update", "--accept-all", environ={"CI": ci})
    assert result.code == 2 and len(result.lines) == 1
    assert "--update refuses to write retained snapshots in CI" in result.stderr
    assert tree_bytes(snapshots(project)) == before


@pytest.mark.parametrize("ci", ["", "0", "false"])
def test_update_outside_ci_needs_exactly_the_expected_changes(project, ci):
    env = {"CI": ci}
    alter(project, "toy-a", set_split_k(5))
    retained = (snapshots(project) / "toy-a.json").read_bytes()
    refused = check(project, "--update", environ=env)
    assert refused.code == 1
    assert "not updated" in refused.stderr
    assert (snapshots(project) / "toy-a.json").read_bytes() == retained
    assert (snapshots(project) / "toy-a.json.new").exists()

    wrong = write_expected(project, [f"toy-a:{ROW_A}", f"toy-a:{ROW_A2}"])
    assert check(project, "--update", "--expected-changes", wrong, environ=env).code == 1
    assert (snapshots(project) / "toy-a.json").read_bytes() == retained

    right = write_expected(project, [f"toy-a:{ROW_A}"])
    assert check(project, "--update", "--expected-changes", right, environ=env).code == 0
    assert not (snapshots(project) / "toy-a.json.new").exists()
    assert check(project, environ=env).code == 0


def test_update_accept_all_accepts_everything_and_prunes_stale(project):
    alter(project, "toy-a", set_split_k(5))
    (snapshots(project) / "toy-b.json").rename(snapshots(project) / "toy-gone.json")
    alter(project, "toy-gone", lambda d: d.update(category="toy-gone"))
    result = check(project, "--update", "--accept-all")
    assert result.code == 0
    assert sorted(p.name for p in snapshots(project).iterdir()) == ["toy-a.json", "toy-b.json"]
    assert check(project).code == 0
    assert ok(invoke(["check", "--accept-all"], cwd=project)).code == 2


# --- input and internal errors -------------------------------------------------------------


@pytest.mark.parametrize(
    "content,message",
    [
        ('["toy-a:edge:slow"', "is not valid JSON"),
        ('["toy-a:edge:*"]', "expected.json: [0]"),
        ('["toy-a:edge:slow", "toy-a:edge:slow"]', "listed twice"),
        ('["toy-z:edge:slow"]', "unknown category 'toy-z'"),
        ('{"ids": []}', "'ids' was unexpected"),
    ],
)
def test_bad_expected_changes_file_is_one_line_and_writes_nothing(project, content, message):
    alter(project, "toy-a", set_split_k(5))
    (project / "expected.json").write_text(content)
    before = tree_bytes(project)
    result = check(
        project,
        "--expected-changes",
        project / "expected.json",
        "--report",
        project / "report.json",
        "--write-expected",
        project / "out.json",
    )
    assert result.code == 2 and result.stdout == ""
    assert len(result.lines) == 1 and message in result.stderr, result.stderr
    assert tree_bytes(project) == before


def test_unreadable_expected_changes_and_unknown_category(project):
    (project / "expected.json").mkdir()
    result = check(project, "--expected-changes", project / "expected.json")
    assert result.code == 2 and len(result.lines) == 1
    result = check(project, "--expected-changes", project / "missing.json")
    assert result.code == 2 and len(result.lines) == 1 and "No such file" in result.stderr
    before = tree_bytes(project)
    result = check(project, "-c", "toy-z", "--report", project / "report.json")
    assert result.code == 2 and result.lines == [
        "error: unknown category 'toy-z'; did you mean toy-b? (known: toy-a, toy-b)"
    ]
    assert tree_bytes(project) == before


BROKEN_ROUTE = """
from dataclasses import replace

from toyproj import PROJECT as TOY, ToyCategory


class Broken(ToyCategory):
    def route(self, ctx):
        return {"kernel": "K"} if ctx.row.id.startswith("edge:") else {}["layer_k"]


PROJECT = replace(TOY, categories=(Broken("toy-a", "toy_model", 70),))
"""
BROKEN_SCHEMA = BROKEN_ROUTE.replace('else {}["layer_k"]', "else super().route(ctx)")


@pytest.mark.parametrize(
    "source,code,prefix,message",
    [
        (BROKEN_ROUTE, 3, "error: internal error: ", "KeyError: 'layer_k'"),
        (
            BROKEN_SCHEMA,
            3,
            "error: internal error: ",
            "category toy-a produced an invalid snapshot: row 'edge:refused': route",
        ),
        # An error raised while importing the project is the project's input (exit 2).
        (
            "raise RuntimeError('half-written module')",
            2,
            "error: ",
            "cannot import toybroken: RuntimeError: half-written module",
        ),
    ],
)
def test_broken_category_module_exits_with_one_line(project, source, code, prefix, message):
    (project / "toybroken").mkdir()
    (project / "toybroken" / "__init__.py").write_text(source)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"toyproj:PROJECT"', '"toybroken:PROJECT"'))
    before = tree_bytes(snapshots(project))
    result = invoke(["check"], cwd=project)
    assert result.code == code and result.stdout == ""
    assert len(result.lines) == 1 and result.lines[0].startswith(prefix)
    assert message in result.stderr
    assert tree_bytes(snapshots(project)) == before


# --- formats -------------------------------------------------------------------------------


def test_github_format_and_report_file(project):
    def change(data):
        for r in data["rows"]:
            if "dispatch" in r["route"]:
                r["route"]["kernel"] = "Old"

    alter(project, "toy-a", change)
    alter(project, "toy-b", change)
    result = check(project, "--format", "github", "--report", project / "r.json")
    assert result.code == 1
    # One annotation per change group, not one per row.
    assert result.stdout.splitlines() == [
        '::error title=routectl check::8 rows changed unexpectedly: route.kernel: "Old" -> '
        '"FastKernel": toy-a:toy_model/{float16,fp8_e4m3}/tp{1,2}/none/c1/q{64,4096}',
        '::error title=routectl check::1 row changed unexpectedly: route.kernel: "Old" -> '
        '"SlowKernel": toy-a:edge:slow',
        '::error title=routectl check::8 rows changed unexpectedly: route.kernel: "Old" -> '
        '"FastKernel": toy-b:toy_other/{float16,fp8_e4m3}/tp{1,2}/none/c1/q{64,4096}',
        '::error title=routectl check::1 row changed unexpectedly: route.kernel: "Old" -> '
        '"SlowKernel": toy-b:edge:slow',
        "::notice title=routectl check::FAILED: 18 unexpected, 0 missing (2 categories, 22 rows)",
    ]
    assert load(project / "r.json")["categories"]["toy-a"]["unexpected"]
    text = check(project, "--report", project / "r2.json")
    assert text.stdout.startswith("toy-a: FAILED")  # text to stdout, JSON to the file
    assert load(project / "r2.json") == load(project / "r.json")


@pytest.mark.parametrize(
    "flag,environ,colored",
    [
        ("always", {"NO_COLOR": "1"}, True),
        ("never", {}, False),
        ("auto", {}, False),  # the test runner's stdout is not a terminal
    ],
)
def test_color_flag(project, flag, environ, colored):
    alter(project, "toy-a", set_split_k(5))
    result = check(project, "--color", flag, environ=environ)
    assert result.code == 1
    assert ("\x1b[" in result.stdout) is colored


# --- list and explain ----------------------------------------------------------------------


def test_list(project):
    result = ok(invoke(["list"], cwd=project))
    assert result.stdout == "toy-a  11 rows (9 + 2 probes)\ntoy-b  11 rows (9 + 2 probes)\n"
    rows = ok(invoke(["list", "--rows", "--project", project])).stdout.splitlines()
    assert rows[0] == "toy-a  11 rows (9 + 2 probes)" and "  toy-a:edge:slow" in rows
    assert len(rows) == 24


def test_explain_text(project):
    result = ok(invoke(["explain", "toy-a:edge:slow"], cwd=project))
    assert result.code == 0
    text = result.stdout
    for expected in [
        "row toy-a:edge:slow",
        "variables TOY_FAST=0",
        "toy.fast = false  (alias:TOY_FAST)",
        "FastKernel  rejected  [policy_off] toy.fast is off",
        "SlowKernel  chosen",
        "kernel: SlowKernel",
        "prepared layout: none",
        "bytes: total 1,024",
        "tensor weight: 1,024",
        "fallbacks: none",
        "toy_mm  m=128  split_k=1",
    ]:
        assert expected in text, expected
    same = ok(invoke(["explain", "edge:slow", "-c", "toy-a"], cwd=project)).stdout
    assert same == text
    error_row = ok(invoke(["explain", "-c", "toy-b", "edge:refused"], cwd=project)).stdout
    assert "error [toy_refused] the toy refuses this layer" in error_row


def test_explain_json_matches_the_snapshot_row(project):
    result = ok(invoke(["explain", ROW_A, "--format", "json"], cwd=project))
    document = json.loads(result.stdout)
    assert document["id"] == f"toy-a:{ROW_A}"
    assert document["policy"]["values"]["toy.fast"] == {"value": True, "source": "default"}
    assert document["route"] == row(load(snapshots(project) / "toy-a.json"), ROW_A)["route"]


@pytest.mark.parametrize(
    "args,message",
    [
        (["edge:slow"], "several categories (toy-a, toy-b): pass -c CATEGORY"),
        (["toy-a:edge:nope"], "unknown row id 'edge:nope' in category toy-a"),
        (["toy_model/float16/tp9/none/c1/q64"], "no category has it"),
        (["not-an-id"], "malformed row id 'not-an-id'"),
        (["-c", "toy-z", "edge:slow"], "unknown category 'toy-z'"),
        (["-c", "toy-b", "toy-a:edge:slow"], "qualified by toy-a, but -c names toy-b"),
    ],
)
def test_explain_input_errors(project, args, message):
    before = tree_bytes(project)
    result = ok(invoke(["explain", *args], cwd=project))
    assert result.code == 2 and result.stdout == ""
    assert len(result.lines) == 1 and message in result.stderr, result.stderr
    assert tree_bytes(project) == before


# --- the library call behind the command ---------------------------------------------------


def test_check_retained_is_the_whole_check_but_its_output(project):
    """`routectl check` is options, `check_retained` and echo: the library call judges,
    leaves `.json.new` files, refuses or makes an update, and reports each file touched."""
    import routectl
    from routectl.review.expected import ExpectedChanges
    from routectl.review.retained import check_retained

    toy = routectl.load_project(project)
    folder = snapshots(project)
    alter(project, "toy-a", set_split_k(5))
    retained = (folder / "toy-a.json").read_bytes()

    refused = check_retained(toy, (), folder, expected=ExpectedChanges(), jobs=1, update=True)
    assert not refused.result.ok
    assert (refused.updated, refused.update_refused) == (False, True)
    assert refused.notes == (f"wrote {folder / 'toy-a.json.new'}",)
    assert (folder / "toy-a.json").read_bytes() == retained

    accepted = check_retained(
        toy, (), folder, expected=ExpectedChanges(), jobs=1, update=True, accept_all=True
    )
    assert (accepted.updated, accepted.update_refused) == (True, False)
    assert accepted.notes == (f"updated {folder / 'toy-a.json'} (11 rows)",)
    assert not (folder / "toy-a.json.new").exists()

    again = check_retained(toy, (), folder, expected=ExpectedChanges(), jobs=1)
    assert again.result.ok
    assert again.notes == ()
    assert (again.updated, again.update_refused) == (False, False)
