"""The check pipeline as a library: fresh rows against a baseline, judged against the
expected changes. `routectl check` passes the retained folder as the baseline; a baseline
built at another git ref is just another source of snapshot files.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from routectl.compare import (
    CheckOutcome,
    Comparison,
    Differ,
    ExpectedEntry,
    attribute,
    compare_rows,
    field_changes,
    judge,
)
from routectl.project import Project
from routectl.replay import replay_categories
from routectl.snapshot import (
    Snapshot,
    SnapshotError,
    build_snapshot,
    check_category_names,
    read_snapshot,
    retained_files,
    validate_rows,
)


class SnapshotSource(Protocol):
    """Where baseline rows come from."""

    def names(self) -> Sequence[str]:
        """Every category this source holds a snapshot of (for stale detection)."""
        ...

    def load(self, name: str) -> Snapshot | None:
        """The snapshot of category `name`, None when the source has none. A malformed
        snapshot is an InputError."""
        ...


class DirectorySource:
    """A folder of `<category>.json` files: the retained `snapshots/`, or a baseline folder
    written by `routectl snapshot --all --output-dir DIR`."""

    def __init__(self, directory: Path, *, snapshot_dir: Path | None = None) -> None:
        self.directory = directory
        self._schemas = snapshot_dir  # whose schema/ validates the files
        self._files = retained_files(directory)

    def names(self) -> Sequence[str]:
        return sorted(self._files)

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def load(self, name: str) -> Snapshot | None:
        path = self._files.get(name)
        if path is None:
            return None
        return read_snapshot(path, snapshot_dir=self._schemas, category=name)


M = TypeVar("M")


class FreshSnapshots(Protocol):
    def __call__(self, project: Project, categories: Sequence[Any], *, jobs: int = 1,
                 meanwhile: Callable[[], M]) -> tuple[dict[str, Snapshot], M]: ...


def fresh_snapshots(project: Project, categories: Sequence[Any], *, jobs: int = 1,
                    meanwhile: Callable[[], M] = lambda: None
                    ) -> tuple[dict[str, Snapshot], M]:
    """Replay every row of `categories` (no cache; up to `jobs` processes) into snapshots
    whose ids are checked, and what `meanwhile()` returned (it runs while workers replay).
    The schema check is left to `run_check`, which validates the rows that moved (a fresh
    row equal to a validated retained row is valid) and to writing, which validates all."""
    rows, extra = replay_categories(project, categories, jobs=jobs, meanwhile=meanwhile)
    return {c.name: build_snapshot(c.name, c.basis, rows[c.name],
                                   snapshot_dir=project.snapshot_dir, validate=False,
                                   plain=True)
            for c in categories}, extra


def select_categories(project: Project, names: Sequence[str]) -> list[Any]:
    """The categories named (in project order, duplicates dropped); all when `names` is
    empty. An unknown name is an InputError."""
    check_category_names([c.name for c in project.categories])
    if not names:
        return list(project.categories)
    wanted = {project.category(n).name for n in names}
    return [c for c in project.categories if c.name in wanted]


@dataclass(frozen=True)
class CheckResult:
    outcome: CheckOutcome
    fresh: Mapping[str, Snapshot]
    baseline: Mapping[str, Snapshot | None]

    @property
    def ok(self) -> bool:
        return self.outcome.ok

    def comparison(self, name: str) -> Comparison:
        return self.outcome.categories[name].comparison


def run_check(project: Project, names: Sequence[str] = (), *, baseline: SnapshotSource,
              expected: Sequence[ExpectedEntry] = (),
              fresh: FreshSnapshots = fresh_snapshots, differ: Differ = field_changes,
              jobs: int = 1) -> CheckResult:
    """Compare fresh snapshots of the named categories (all when empty: a complete run)
    with `baseline` and judge them against `expected`; up to `jobs` processes replay.

    The baseline is read while workers replay (with one process, before any replay); an
    input error stops them. Stale baseline categories are judged only in complete runs; a
    filtered run judges only its categories. Nothing is written here.
    """
    selected = select_categories(project, names)
    complete = not names
    listed = [c.name for c in project.categories]

    def read_baseline() -> dict[str, Snapshot | None]:
        return {c.name: baseline.load(c.name) for c in selected}

    snapshots, loaded = fresh(project, selected, jobs=jobs, meanwhile=read_baseline)
    stale = tuple(sorted(set(baseline.names()) - set(listed))) if complete else ()
    comparisons = {
        name: compare_rows(loaded[name].rows if loaded[name] is not None else None,
                           snapshots[name].rows, differ=differ)
        for name in snapshots
    }
    for name, snap in snapshots.items():
        if not snap.validated:
            moved = set(comparisons[name].added) | set(comparisons[name].changed)
            problem = validate_rows(name, snap.basis,
                                    [r for r in snap.rows if r["id"] in moved],
                                    project.snapshot_dir)
            if problem is not None:
                raise SnapshotError(f"category {name} produced an invalid snapshot: {problem}")

    declared: dict[str, Collection[str]] = {}

    def known_ids(name: str) -> Collection[str]:
        if name in comparisons:
            return comparisons[name].fresh_ids | comparisons[name].baseline_ids
        if name not in declared:
            declared[name] = {r.id for r in project.category(name).rows()}
        return declared[name]

    attribution = attribute(expected, list(snapshots), known_ids, listed)
    verdicts = {name: judge(name, comparisons[name], attribution.by_category[name])
                for name in snapshots}
    outcome = CheckOutcome(verdicts, stale=stale, unattributed=attribution.unattributed,
                           complete=complete)
    return CheckResult(outcome, snapshots, loaded)


def expected_document(result: CheckResult) -> list[dict[str, str]]:
    """The actual change list in expected-changes form, qualified ids sorted; a reason
    already given for an id is kept, others say what moved."""
    out: list[dict[str, str]] = []
    for verdict in result.outcome.categories.values():
        comparison = verdict.comparison
        for row_id in sorted(comparison.moved):
            qid = verdict.q(row_id)
            given = verdict.expected.get(row_id)
            if given is not None and given.reason is not None:
                reason = given.reason
            elif row_id in comparison.changed:
                paths = [c.path for c in comparison.changed[row_id]]
                more = f" (+{len(paths) - 3} more)" if len(paths) > 3 else ""
                reason = "changed: " + ", ".join(paths[:3]) + more
            else:
                reason = "added" if row_id in comparison.added else "removed"
            out.append({"id": qid, "reason": reason})
    out.sort(key=lambda e: e["id"])
    return out
