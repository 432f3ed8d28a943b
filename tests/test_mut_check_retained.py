"""`routectl.review.retained`: what `check_retained` does to the retained folder, on copies of
the toy project, compared as the whole folder's bytes and the whole tuple of notes.

Pins the module's contract (its docstring, docs/reviewing-changes.md): an update rewrites
exactly the files whose rows moved, in the bytes `routectl snapshot` writes, and removes stale
retained files only in a complete run; a failing check leaves `<category>.json.new` beside
each file whose rows differ (the fresh rows) and removes every other `.json.new` of the
categories it judged; a passing one removes them; `--accept-all` accepts differences but
never a broken declared invariance; notes are one line per file touched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import routectl
from routectl.errors import InputError
from routectl.project import Project
from routectl.review.cache import ReplayCache
from routectl.review.check import run_check
from routectl.review.compare import ExpectedEntry
from routectl.review.expected import ExpectedChanges
from routectl.review.retained import RetainedCheck, check_retained, new_path, update_retained
from routectl.review.sources import SnapshotFiles
from tests.fixtures.toy import (
    declaring,
    edit_row,
    invoke,
    load,
    make_project,
    ok,
    row,
    save,
    tree_bytes,
)

ROW_A = "toy_model/float16/tp1/none/c1/q64"
ROW_B = "toy_other/float16/tp2/none/c1/q64"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path)


@pytest.fixture
def fresh(tmp_path: Path, project: Path) -> dict[str, bytes]:
    """The bytes `routectl snapshot --all` writes for the toy (what an update must write)."""
    out = tmp_path / "fresh"
    result = ok(invoke(["snapshot", "--all", "--output-dir", out], cwd=project))
    assert result.code == 0, result.stderr
    return tree_bytes(out)


def folder(project: Path) -> Path:
    return project / "snapshots"


def move_row(project: Path, category: str, row_id: str, split_k: int) -> None:
    def move(r: dict[str, Any]) -> None:
        r["route"]["dispatch"][0]["plan"]["split_k"] = split_k

    edit_row(project, category, row_id, move)


def run(
    project: Path,
    names: Sequence[str] = (),
    *,
    toy: Project | None = None,
    **options: Any,
) -> RetainedCheck:
    return check_retained(
        toy or routectl.load_project(project),
        names,
        folder(project),
        expected=options.pop("expected", ExpectedChanges()),
        jobs=1,
        **options,
    )


def test_new_path_is_beside_the_retained_file(tmp_path: Path) -> None:
    assert new_path(tmp_path, "toy-a") == tmp_path / "toy-a.json.new"


def test_a_failing_check_leaves_the_fresh_rows_for_each_differing_file(
    project: Path, fresh: dict[str, bytes]
) -> None:
    move_row(project, "toy-a", "toy_model/float16/tp1/none/c1/q64", 9)
    move_row(project, "toy-b", ROW_B, 9)
    before = tree_bytes(folder(project))
    done = run(project)
    assert not done.result.ok
    assert (done.updated, done.update_refused) == (False, False)
    d = folder(project)
    assert done.notes == (f"wrote {d / 'toy-a.json.new'}", f"wrote {d / 'toy-b.json.new'}")
    # The retained files untouched; each .json.new holds what a fresh snapshot holds.
    assert tree_bytes(d) == {
        **before,
        "toy-a.json.new": fresh["toy-a.json"],
        "toy-b.json.new": fresh["toy-b.json"],
    }


def test_a_failing_check_removes_the_new_file_of_a_category_now_identical(
    project: Path, fresh: dict[str, bytes]
) -> None:
    d = folder(project)
    (d / "toy-b.json.new").write_text("left by an earlier failing check")
    move_row(project, "toy-a", ROW_A, 9)
    before = tree_bytes(d)
    done = run(project)
    assert done.notes == (f"wrote {d / 'toy-a.json.new'}",)
    del before["toy-b.json.new"]
    assert tree_bytes(d) == {**before, "toy-a.json.new": fresh["toy-a.json"]}


def test_a_passing_check_removes_every_new_file_and_touches_nothing_else(project: Path) -> None:
    d = folder(project)
    (d / "toy-a.json.new").write_text("stale")
    (d / "toy-gone.json.new").write_text("of a category no longer listed")
    (d / "notes.txt.new").write_text("not a snapshot's")
    before = tree_bytes(d)
    done = run(project)
    assert done.result.ok and done.notes == ()
    assert (done.updated, done.update_refused) == (False, False)
    for name in ("toy-a.json.new", "toy-gone.json.new"):
        del before[name]
    assert tree_bytes(d) == before


def test_a_filtered_run_settles_only_its_categories_new_files(project: Path) -> None:
    d = folder(project)
    (d / "toy-a.json.new").write_text("stale")
    (d / "toy-b.json.new").write_text("not judged")
    (d / "toy-gone.json.new").write_text("not judged either")
    done = run(project, ["toy-a"])
    assert done.result.ok and done.notes == ()
    assert sorted(p.name for p in d.iterdir()) == [
        "toy-a.json",
        "toy-b.json",
        "toy-b.json.new",
        "toy-gone.json.new",
    ]


def test_an_update_of_a_passing_check_says_the_files_already_match(project: Path) -> None:
    d = folder(project)
    (d / "toy-a.json.new").write_text("stale")
    before = tree_bytes(d)
    done = run(project, update=True)
    assert (done.updated, done.update_refused) == (True, False)
    assert done.notes == ("retained snapshots already match",)
    del before["toy-a.json.new"]
    assert tree_bytes(d) == before


def test_an_update_with_the_expected_change_rewrites_only_that_file(
    project: Path, fresh: dict[str, bytes]
) -> None:
    d = folder(project)
    move_row(project, "toy-b", ROW_B, 9)
    (d / "toy-b.json.new").write_text("from before")
    before = tree_bytes(d)
    expected = ExpectedChanges.of_ids([ExpectedEntry(f"toy-b:{ROW_B}", "toy-b", ROW_B)])
    done = run(project, update=True, expected=expected)
    assert done.result.ok
    assert (done.updated, done.update_refused) == (True, False)
    assert done.notes == (f"updated {d / 'toy-b.json'} (11 rows)",)
    assert tree_bytes(d) == {"toy-a.json": before["toy-a.json"], "toy-b.json": fresh["toy-b.json"]}


def test_accept_all_rewrites_every_moved_file_and_removes_stale_ones(
    project: Path, fresh: dict[str, bytes]
) -> None:
    d = folder(project)
    move_row(project, "toy-a", ROW_A, 9)
    move_row(project, "toy-b", ROW_B, 9)
    stale = load(d / "toy-a.json")
    stale["category"] = "toy-old"
    save(d / "toy-old.json", stale)
    done = run(project, update=True, accept_all=True)
    assert not done.result.ok  # accepted, not expected
    assert (done.updated, done.update_refused) == (True, False)
    assert done.notes == (
        f"updated {d / 'toy-a.json'} (11 rows)",
        f"updated {d / 'toy-b.json'} (11 rows)",
        f"removed stale {d / 'toy-old.json'}",
    )
    assert tree_bytes(d) == fresh


def test_an_update_with_only_a_stale_file_removes_it(
    project: Path, fresh: dict[str, bytes]
) -> None:
    d = folder(project)
    stale = load(d / "toy-b.json")
    stale["category"] = "toy-old"
    save(d / "toy-old.json", stale)
    done = run(project, update=True, accept_all=True)
    assert done.notes == (f"removed stale {d / 'toy-old.json'}",)  # no "already match"
    assert tree_bytes(d) == fresh


def test_a_filtered_update_keeps_stale_files(project: Path, fresh: dict[str, bytes]) -> None:
    d = folder(project)
    move_row(project, "toy-a", ROW_A, 9)
    save(d / "toy-old.json", {**load(d / "toy-a.json"), "category": "toy-old"})
    old = (d / "toy-old.json").read_bytes()
    (d / "toy-b.json.new").write_text("not judged")
    done = run(project, ["toy-a"], update=True, accept_all=True)
    assert (done.updated, done.update_refused) == (True, False)
    assert done.notes == (f"updated {d / 'toy-a.json'} (11 rows)",)
    assert tree_bytes(d) == {
        **fresh,
        "toy-old.json": old,
        "toy-b.json.new": b"not judged",
    }


def test_an_update_without_the_expected_changes_is_refused(
    project: Path, fresh: dict[str, bytes]
) -> None:
    d = folder(project)
    move_row(project, "toy-a", ROW_A, 9)
    before = tree_bytes(d)
    done = run(project, update=True)
    assert (done.updated, done.update_refused) == (False, True)
    assert done.notes == (f"wrote {d / 'toy-a.json.new'}",)
    assert tree_bytes(d) == {**before, "toy-a.json.new": fresh["toy-a.json"]}


def test_accept_all_without_update_writes_no_retained_file(
    project: Path, fresh: dict[str, bytes]
) -> None:
    d = folder(project)
    move_row(project, "toy-a", ROW_A, 9)
    before = tree_bytes(d)
    done = run(project, accept_all=True)
    assert (done.updated, done.update_refused) == (False, False)
    assert tree_bytes(d) == {**before, "toy-a.json.new": fresh["toy-a.json"]}


def test_accept_all_never_accepts_a_broken_invariance(project: Path) -> None:
    d = folder(project)
    toy = declaring(routectl.load_project(project))
    move_row(project, "toy-b", ROW_B, 9)  # a difference --accept-all would accept
    before = tree_bytes(d)
    done = run(project, toy=toy, update=True, accept_all=True)
    assert [b.invariance.name for b in done.result.outcome.categories["toy-a"].broken] == [
        "toy_flags_ignore_tp"
    ]
    assert (done.updated, done.update_refused) == (False, True)
    assert done.notes == (f"wrote {d / 'toy-b.json.new'}",)
    assert set(tree_bytes(d)) == {*before, "toy-b.json.new"}
    assert {k: v for k, v in tree_bytes(d).items() if k in before} == before


# --- a category that owns its route shape ---------------------------------------------------


def owning(toy: Project) -> Project:
    """The toy with toy-a's selected routes carrying a key of its own (`tiles`), admitted only
    by the route shape toy-a declares (`Category.route_schema`): routectl's generic schema
    refuses such a row, so only the project's composed schema reads and writes toy-a."""
    first: Any = toy.categories[0]
    base: Any = type(first)

    @dataclasses.dataclass(frozen=True)
    class Owning(base):
        def route(self, ctx: Any) -> dict[str, Any]:
            route: dict[str, Any] = super().route(ctx)
            return {**route, "tiles": "toy"} if route["status"] is None else route

        def route_schema(self) -> dict[str, Any]:
            shape = {
                "type": "object",
                "required": ["tiles"],
                "properties": {"tiles": {"const": "toy"}},
            }
            return {"route": shape}

    changed = Owning(first.name, first.model, first.capability)
    return dataclasses.replace(toy, categories=(changed, *toy.categories[1:]))


@pytest.fixture
def owned(tmp_path: Path) -> tuple[Path, Project]:
    """A toy copy whose retained snapshots the owning toy wrote (by an update from none)."""
    root = make_project(tmp_path, snapshot=False)
    folder(root).mkdir()
    toy = owning(routectl.load_project(root))
    done = run(root, toy=toy, update=True, accept_all=True)
    assert done.updated and len(done.notes) == 2
    assert row(load(folder(root) / "toy-a.json"), ROW_A)["route"]["tiles"] == "toy"
    return root, toy


@pytest.fixture
def moved(owned: tuple[Path, Project]) -> tuple[Path, Project, dict[str, bytes]]:
    """The owning toy's copy with one toy-a row moved; the bytes its folder held before."""
    root, toy = owned
    written = tree_bytes(folder(root))
    move_row(root, "toy-a", ROW_A, 9)
    return root, toy, written


def test_an_update_reads_and_writes_with_the_projects_own_route_shapes(
    moved: tuple[Path, Project, dict[str, bytes]],
) -> None:
    root, toy, written = moved
    d = folder(root)
    done = run(root, toy=toy, update=True, accept_all=True)
    assert (done.updated, done.update_refused) == (True, False)
    assert done.notes == (f"updated {d / 'toy-a.json'} (11 rows)",)
    assert tree_bytes(d) == written


def test_a_failing_check_writes_new_files_with_the_projects_own_route_shapes(
    moved: tuple[Path, Project, dict[str, bytes]],
) -> None:
    root, toy, written = moved
    d = folder(root)
    done = run(root, toy=toy)
    assert not done.result.ok
    assert done.notes == (f"wrote {d / 'toy-a.json.new'}",)
    assert (d / "toy-a.json.new").read_bytes() == written["toy-a.json"]


def test_a_retained_row_outside_the_projects_route_shapes_is_refused(
    owned: tuple[Path, Project],
) -> None:
    root, toy = owned
    # The generic schema refuses every row of toy-a (each has `tiles`); the project's names
    # the one row whose `tiles` its own shape refuses.
    edit_row(root, "toy-a", ROW_A, lambda r: r["route"].update(tiles=5))
    with pytest.raises(InputError) as info:
        run(root, toy=toy)
    assert str(info.value).startswith(f"{folder(root) / 'toy-a.json'}: row '{ROW_A}': route")


def test_a_cache_given_is_the_one_the_check_replays_into_and_reads(project: Path) -> None:
    directory = project / ".cache"
    first = ReplayCache(directory, [].append)
    run(project, cache=first)
    assert sorted(first.replayed) == ["toy-a", "toy-b"] and first.hits == []
    again = ReplayCache(directory, [].append)
    done = run(project, cache=again)
    assert done.result.ok
    assert again.replayed == [] and sorted(again.hits) == ["toy-a", "toy-b"]


def test_a_stale_file_another_update_removed_is_no_error(
    project: Path, fresh: dict[str, bytes]
) -> None:
    # Two updates at once: the other removed the stale file after this one's check read it.
    d = folder(project)
    save(d / "toy-old.json", {**load(d / "toy-b.json"), "category": "toy-old"})
    toy = routectl.load_project(project)
    result = run_check(toy, baseline=SnapshotFiles.retained(d, schema=toy.snapshot_schema))
    assert result.outcome.stale == ("toy-old",)
    (d / "toy-old.json").unlink()
    assert update_retained(result, d, schema=toy.snapshot_schema) == [
        f"removed stale {d / 'toy-old.json'}"
    ]
    assert tree_bytes(d) == fresh
