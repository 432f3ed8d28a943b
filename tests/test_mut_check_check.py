"""`routectl.review.check` as a library, on copies of the toy project: the categories a run
selects, the change list `--write-expected` prints, a baseline's rows reused by identity,
categories only the baseline has, and the change groups naming broken invariances.

Pins the functions' docstrings (the contract `routectl check` and `routectl diff` print from):
whole outputs are compared (every entry of the change list, every verdict's lists), on both
sides of each boundary (the "(+N more)" after three paths; one reason given or several).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import routectl
from routectl.errors import InputError
from routectl.review.cache import ReplayCache
from routectl.review.check import (
    CheckResult,
    RemovedCategory,
    baseline_only,
    expected_document,
    fresh_snapshots,
    judge_against,
    known_rows,
    run_check,
    select_categories,
    snapshot_from_texts,
)
from routectl.review.compare import ExpectedEntry
from routectl.review.expected import ExpectedChanges, load_expected_changes
from routectl.review.sources import SnapshotFiles
from tests.fixtures.toy import declaring, edit_row, load, make_project, row, save

ROW_A = "toy_model/float16/tp1/none/c1/q64"
ROW_A2 = "toy_model/float16/tp2/none/c1/q64"
ROW_B = "toy_other/float16/tp2/none/c1/q64"
SPLIT_K = "route.dispatch[M=1,0].plan.split_k"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


def folder(project: Path) -> Path:
    return project / "snapshots"


def split_k(value: int) -> Any:
    def change(r: dict[str, Any]) -> None:
        r["route"]["dispatch"][0]["plan"]["split_k"] = value

    return change


def check(project: Path, names: Sequence[str] = (), **options: Any) -> CheckResult:
    toy = options.pop("toy", None) or routectl.load_project(project)
    return run_check(toy, names, baseline=SnapshotFiles.retained(folder(project)), **options)


def entry(qualified: str, reason: str | None = None) -> ExpectedEntry:
    category, _, row_id = qualified.partition(":")
    return ExpectedEntry(qualified, category, row_id, reason)


# --- selection -------------------------------------------------------------------------------


def test_select_categories_in_project_order_without_duplicates(project: Path) -> None:
    toy = routectl.load_project(project)
    names = lambda cs: [c.name for c in cs]  # noqa: E731
    assert names(select_categories(toy, ())) == ["toy-a", "toy-b"]
    assert names(select_categories(toy, ["toy-b", "toy-a", "toy-b"])) == ["toy-a", "toy-b"]
    assert names(select_categories(toy, ["toy-b"])) == ["toy-b"]
    with pytest.raises(InputError, match="toy-z"):
        select_categories(toy, ["toy-z"])


def test_fresh_snapshots_equal_the_retained_rows(project: Path) -> None:
    toy = routectl.load_project(project)
    fresh = fresh_snapshots(toy, list(toy.categories))
    assert list(fresh) == ["toy-a", "toy-b"]
    for name, snap in fresh.items():
        assert list(snap.rows) == load(folder(project) / f"{name}.json")["rows"]


# --- rows reused from the baseline -----------------------------------------------------------


def test_a_fresh_row_equal_to_a_baseline_row_is_that_row(project: Path) -> None:
    edit_row(project, "toy-a", ROW_A, split_k(9))
    result = check(project)
    fresh = {r["id"]: r for r in result.fresh["toy-a"].rows}
    base = result.baseline["toy-a"]
    assert base is not None
    retained = {r["id"]: r for r in base.rows}
    assert fresh.keys() == retained.keys()
    for row_id, r in fresh.items():
        # The moved row is parsed from its fresh text; every other row is the baseline's.
        assert (r is retained[row_id]) is (row_id != ROW_A), row_id
    assert fresh[ROW_A]["route"]["dispatch"][0]["plan"]["split_k"] == 4


def test_known_rows_key_the_canonical_text_by_id(project: Path) -> None:
    base = SnapshotFiles.retained(folder(project)).load("toy-b")
    assert base is not None
    known = known_rows(base)
    assert list(known) == [r["id"] for r in base.rows]
    for row_id, (text, r) in known.items():
        assert r["id"] == row_id and json.loads(text) == r
    # A fresh snapshot of those texts reuses every row object.
    toy = routectl.load_project(project)
    category = toy.category("toy-b")
    again = snapshot_from_texts(category, [(i, t) for i, (t, _) in known.items()], known=known)
    assert all(a is b for a, b in zip(again.rows, base.rows, strict=True))
    unknown = snapshot_from_texts(category, [(i, t) for i, (t, _) in known.items()])
    assert unknown.rows == base.rows and not any(
        a is b for a, b in zip(unknown.rows, base.rows, strict=True)
    )
    assert (again.category, again.basis) == ("toy-b", category.basis)


# --- the change list --write-expected prints ------------------------------------------------


def test_expected_document_lists_every_moved_row_sorted_with_its_reason(project: Path) -> None:
    edit_row(project, "toy-b", ROW_B, split_k(9))
    path = folder(project) / "toy-a.json"
    data = load(path)
    removed = row(data, ROW_A)
    data["rows"] = [r for r in data["rows"] if r["id"] != ROW_A]  # fresh: added
    extra = {**removed, "id": "toy_model/zz/tp1/none/c1/q64"}
    data["rows"].append(extra)  # only retained: removed
    save(path, data)
    result = check(project)
    assert expected_document(result) == [
        {"id": f"toy-a:{ROW_A}", "reason": "added"},
        {"id": "toy-a:toy_model/zz/tp1/none/c1/q64", "reason": "removed"},
        {"id": f"toy-b:{ROW_B}", "reason": f"changed: {SPLIT_K}"},
    ]


# Four top-level route fields of a row (each one change path) and a value for each.
FOUR = {"kernel": "OtherKernel", "capability": 1, "prepared_layout": "other", "fallback": True}


def change_fields(count: int) -> Any:
    def change(r: dict[str, Any]) -> None:
        for key in list(FOUR)[:count]:
            r["route"][key] = FOUR[key]

    return change


def test_three_changed_paths_are_listed_and_a_fourth_is_counted(project: Path) -> None:
    paths = {f"route.{key}" for key in FOUR}
    edit_row(project, "toy-a", ROW_A, change_fields(3))
    (three,) = expected_document(check(project))
    listed = three["reason"].removeprefix("changed: ").split(", ")
    assert three["reason"].startswith("changed: ") and len(listed) == 3
    assert set(listed) == {f"route.{k}" for k in list(FOUR)[:3]}
    edit_row(project, "toy-a", ROW_A, change_fields(4))
    (four,) = expected_document(check(project))
    assert four["reason"].startswith("changed: ") and four["reason"].endswith(" (+1 more)")
    listed = four["reason"].removeprefix("changed: ").removesuffix(" (+1 more)").split(", ")
    assert len(listed) == 3 and set(listed) < paths


def test_expected_document_keeps_the_one_reason_given(project: Path) -> None:
    edit_row(project, "toy-a", ROW_A, split_k(9))
    edit_row(project, "toy-b", ROW_B, split_k(9))
    result = check(
        project,
        expected=[entry(f"toy-a:{ROW_A}", "the toy kernel now splits K in four")],
    )
    assert expected_document(result) == [
        {"id": f"toy-a:{ROW_A}", "reason": "the toy kernel now splits K in four"},
        {"id": f"toy-b:{ROW_B}", "reason": f"changed: {SPLIT_K}"},
    ]


# --- categories only the baseline has -------------------------------------------------------


def test_judge_against_reports_a_baseline_only_category_removed(
    project: Path, tmp_path: Path
) -> None:
    base_dir = tmp_path / "base"
    base_dir.mkdir()
    for name in ("toy-a", "toy-b"):
        (base_dir / f"{name}.json").write_bytes((folder(project) / f"{name}.json").read_bytes())
    old = load(base_dir / "toy-b.json")
    old["category"] = "toy-old"
    save(base_dir / "toy-old.json", old)
    expected_file = tmp_path / "expected.json"
    expected_file.write_text(json.dumps([f"toy-old:{ROW_B}"]))
    toy = routectl.load_project(project)
    source = SnapshotFiles.baseline_folder(base_dir, advice="")
    result = judge_against(toy, (), source, expected_file=expected_file)
    assert list(result.outcome.categories) == ["toy-a", "toy-b", "toy-old"]
    verdict = result.outcome.categories["toy-old"]
    ids = sorted(r["id"] for r in old["rows"])
    assert sorted(verdict.comparison.removed) == ids
    assert verdict.missing == ()
    assert sorted(verdict.unexpected) == [i for i in ids if i != ROW_B]  # row ids
    assert result.outcome.stale == ()
    assert baseline_only(toy, result) == ["toy-old"]
    assert list(result.fresh["toy-old"].rows) == []


def test_judge_against_with_fresh_rows_given_replays_nothing_of_them(
    project: Path, tmp_path: Path
) -> None:
    toy = routectl.load_project(project)
    fresh = fresh_snapshots(toy, list(toy.categories))
    source = SnapshotFiles.baseline_folder(folder(project), advice="")
    result = judge_against(toy, (), source, fresh=fresh)
    assert result.ok and baseline_only(toy, result) == []
    assert all(result.fresh[n] is fresh[n] for n in ("toy-a", "toy-b"))


def test_a_removed_category_replays_no_rows() -> None:
    removed = RemovedCategory("gone")
    assert (removed.name, list(removed.rows())) == ("gone", [])
    assert removed.basis == "a category present only in the baseline"


# --- check results and broken invariances ---------------------------------------------------


def test_check_result_ok_and_comparison(project: Path) -> None:
    edit_row(project, "toy-a", ROW_A, split_k(9))
    result = check(project)
    assert not result.ok
    assert list(result.comparison("toy-a").changed) == [ROW_A]
    assert result.comparison("toy-b").identical
    assert check(project, ["toy-b"]).ok


def test_a_change_group_names_the_invariance_it_breaks_a_removed_row_none(project: Path) -> None:
    toy = declaring(routectl.load_project(project))
    edit_row(project, "toy-a", ROW_A2, lambda r: r["route"]["flags"].update(tp=1))
    path = folder(project) / "toy-a.json"
    data = load(path)
    extra = {**row(data, ROW_A), "id": "toy_model/zz/tp1/none/c1/q64"}
    data["rows"].append(extra)
    save(path, data)
    result = check(project, toy=toy)
    verdict = result.outcome.categories["toy-a"]
    assert [b.invariance.name for b in verdict.broken] == ["toy_flags_ignore_tp"]
    by_kind = {g.kind: g for g in verdict.groups}
    assert set(by_kind) == {"changed", "removed"}
    assert by_kind["changed"].breaks == ("toy_flags_ignore_tp",)
    assert by_kind["removed"].breaks == ()
    # Without the declaration nothing is broken and no group names anything.
    plain = check(project).outcome.categories["toy-a"]
    assert plain.broken == () and all(g.breaks == () for g in plain.groups)


def test_an_id_expected_change_passes_and_an_extra_one_is_missing(project: Path) -> None:
    edit_row(project, "toy-a", ROW_A, split_k(9))
    assert check(project, expected=ExpectedChanges.of_ids([entry(f"toy-a:{ROW_A}")])).ok
    result = check(project, expected=[entry(f"toy-a:{ROW_A}"), entry(f"toy-b:{ROW_B}")])
    assert result.outcome.categories["toy-b"].missing == (ROW_B,)
    # A filtered run judges only its categories: the toy-b id is not missing there.
    assert check(project, ["toy-a"], expected=[entry(f"toy-a:{ROW_A}"), entry(f"toy-b:{ROW_B}")]).ok


# --- the cache given, and a filtered judge -----------------------------------------------------


def test_fresh_snapshots_replay_into_the_cache_given_and_read_it_next(project: Path) -> None:
    toy = routectl.load_project(project)
    first = ReplayCache(project / ".cache", [].append)
    fresh = fresh_snapshots(toy, list(toy.categories), cache=first)
    assert (sorted(first.replayed), first.hits) == (["toy-a", "toy-b"], [])
    again = ReplayCache(project / ".cache", [].append)
    assert fresh_snapshots(toy, list(toy.categories), cache=again) == fresh
    assert (again.replayed, sorted(again.hits)) == ([], ["toy-a", "toy-b"])


def test_a_second_check_with_the_cache_spares_the_retained_files_parse(project: Path) -> None:
    toy = routectl.load_project(project)
    retained = SnapshotFiles.retained(folder(project))
    first = ReplayCache(project / ".cache", [].append)
    assert run_check(toy, baseline=retained, cache=first).ok
    assert first.retained_hits == []
    again = ReplayCache(project / ".cache", [].append)
    result = run_check(toy, baseline=SnapshotFiles.retained(folder(project)), cache=again)
    assert result.ok and sorted(again.hits) == ["toy-a", "toy-b"]
    # Each retained file was parsed in full once, then known by its memo: no parse now.
    assert sorted(again.retained_hits) == ["toy-a", "toy-b"]
    # A category whose fresh rows are given is no file to spare (it is not read for them).
    third = ReplayCache(project / ".cache", [].append)
    fresh = {"toy-a": result.fresh["toy-a"]}
    run_check(toy, baseline=SnapshotFiles.retained(folder(project)), ready=fresh, cache=third)
    assert third.retained_hits == ["toy-b"]


def test_judge_against_judges_only_the_categories_named_and_uses_the_cache(
    project: Path,
) -> None:
    toy = routectl.load_project(project)
    source = SnapshotFiles.baseline_folder(folder(project), advice="")
    cache = ReplayCache(project / ".cache", [].append)
    result = judge_against(toy, ["toy-b"], source, cache=cache)
    assert list(result.outcome.categories) == ["toy-b"] and result.ok
    assert result.outcome.complete is False
    assert cache.replayed == ["toy-b"]


def test_a_filtered_run_leaves_an_expected_row_of_another_category_unjudged(
    project: Path,
) -> None:
    # ROW_B is toy-b's alone: a bare id of it belongs to toy-b (found among its declared rows,
    # not replayed in a run of toy-a) and is not judged here: neither missing nor unattributed.
    bare = [ExpectedEntry(ROW_B, None, ROW_B, "toy-b's change")]
    result = check(project, ["toy-a"], expected=bare)
    assert list(result.outcome.categories) == ["toy-a"]
    assert result.ok
    assert (result.outcome.unattributed, result.outcome.missing_stated) == ((), ())
    # The same id in a run of toy-b is judged there: stated but not changed, so missing.
    judged = check(project, ["toy-b"], expected=bare)
    assert not judged.ok
    assert list(judged.outcome.categories["toy-b"].missing) == [ROW_B]


def test_a_removed_rows_group_names_what_the_baseline_row_routed_to(project: Path) -> None:
    d = folder(project)
    data = load(d / "toy-a.json")
    gone = {**row(data, ROW_A), "id": "toy_model/float16/tp4/none/c1/q64"}
    gone["route"] = {**gone["route"], "kernel": "SlowKernel"}
    data["rows"] = sorted([*data["rows"], gone], key=lambda r: r["id"])
    save(d / "toy-a.json", data)
    verdict = check(project).outcome.categories["toy-a"]
    assert [(g.kind, g.row_ids, g.label) for g in verdict.groups] == [
        ("removed", ("toy_model/float16/tp4/none/c1/q64",), "kernel SlowKernel")
    ]


def test_a_stated_entry_that_matches_no_row_is_missing_from_the_outcome(
    project: Path, tmp_path: Path
) -> None:
    path = tmp_path / "expected.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": 2,
                "changes": [{"rows": "toy-a:nomodel/**", "reason": "a model the toy lacks"}],
            }
        )
    )
    expected = load_expected_changes(path, ["toy-a", "toy-b"])
    result = check(project, expected=expected)
    assert not result.ok
    assert [(m.entry, m.rows, m.why) for m in result.outcome.missing_stated] == [
        (0, "toy-a:nomodel/**", "matches no row")
    ]
