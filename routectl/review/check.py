"""The check pipeline as a library: fresh rows against a baseline, judged against the
expected changes. `routectl check` passes the retained folder as the baseline; a baseline
built at another git ref is just another source of snapshot files (`routectl.review.sources`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from routectl.category import Category
from routectl.project import Project
from routectl.replay.harness import RowText, plain_row_text, replay_texts, row_text
from routectl.review.compare import (
    CheckOutcome,
    Comparison,
    Differ,
    ExpectedEntry,
    compare_rows,
    field_changes,
)
from routectl.review.expected import (
    ExpectedChanges,
    already_applied,
    judge_category,
    load_expected_changes,
    resolve_stated,
    unmatched_fields,
)
from routectl.review.groups import ChangeGroup, group_changes
from routectl.review.invariances import InvarianceBreak, breaks_of, verify_category
from routectl.review.snapshot import (
    Row,
    Snapshot,
    SnapshotError,
    build_snapshot,
    check_category_names,
    validate_rows,
)
from routectl.review.sources import SnapshotFiles, SnapshotSource
from routectl.rows import RowSpec
from routectl.runtime.workers import available_cpus

if TYPE_CHECKING:
    from routectl.review.cache import ReplayCache

Known = Mapping[str, tuple[str, Row]]  # row id -> (canonical text, the row)
M = TypeVar("M")


def known_rows(snapshot: Snapshot) -> dict[str, tuple[str, Row]]:
    """A baseline's rows by id with their canonical text, for `snapshot_from_texts`."""
    # A validated snapshot's rows were read from JSON or made plain (`Snapshot.validated`).
    text = plain_row_text if snapshot.validated else row_text
    return {r["id"]: (text(r), r) for r in snapshot.rows}


def snapshot_from_texts(
    category: Any,
    rows: Sequence[RowText],
    *,
    known: Known | None = None,
) -> Snapshot:
    """A snapshot of replayed rows, ids checked. A row whose text equals a known (baseline)
    row's is that very row object: equal JSON, parsed once, compared by identity. The schema
    check is left to `run_check`, which validates the rows that moved (a fresh row equal to
    a validated retained row is valid) and to writing, which validates all."""
    known = known or {}
    plain: list[Row] = []
    for row_id, text in rows:
        hit = known.get(row_id)
        plain.append(hit[1] if hit is not None and hit[0] == text else json.loads(text))
    return build_snapshot(category.name, category.basis, plain, validate=False, plain=True)


def _nothing() -> Any:
    return None


def cached_replay(
    project: Project,
    categories: Sequence[Any],
    *,
    jobs: int = 1,
    meanwhile: Callable[[], M] = _nothing,
    cache: ReplayCache | None = None,
) -> tuple[dict[str, list[RowText]], M]:
    """`replay_texts` of `categories`, the rows of those `cache` holds read from it instead
    (the replayed ones stored in it): the same rows either way, so nothing downstream can
    tell them apart. A run whose every category hits replays nothing and imports no torch."""
    if cache is None:
        return replay_texts(project, categories, jobs=jobs, meanwhile=meanwhile)
    found, missing = cache.rows(project, categories)
    # Where a second CPU can take it, the keys' import closures and digests are computed
    # by a forked process while this one imports torch and replays (with any `jobs`: the
    # replay itself forks its workers only after the import).
    with cache.keying(project, missing, background=available_cpus() > 1):
        texts, extra = replay_texts(project, missing, jobs=jobs, meanwhile=meanwhile)
    for category in missing:
        cache.store_rows(project, category, texts[category.name])
    found.update(texts)
    return {c.name: found[c.name] for c in categories}, extra


def fresh_snapshots(
    project: Project,
    categories: Sequence[Any],
    *,
    jobs: int = 1,
    cache: ReplayCache | None = None,
) -> dict[str, Snapshot]:
    """Replay every row of `categories` (up to `jobs` processes; those `cache` holds are
    read from it)."""
    texts, _ = cached_replay(project, categories, jobs=jobs, cache=cache)
    return {c.name: snapshot_from_texts(c, texts[c.name]) for c in categories}


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


def run_check(
    project: Project,
    names: Sequence[str] = (),
    *,
    baseline: SnapshotSource,
    expected: Sequence[ExpectedEntry] | ExpectedChanges = (),
    ready: Mapping[str, Snapshot] | None = None,
    differ: Differ = field_changes,
    jobs: int = 1,
    cache: ReplayCache | None = None,
) -> CheckResult:
    """Compare fresh snapshots of the named categories (all when empty: a complete run)
    with `baseline`, group the changes and judge them against `expected` (id entries, or an
    `ExpectedChanges` with stated entries too). Up to `jobs` processes replay; the
    categories in `ready` are fresh snapshots replayed before (not replayed again), and
    those `cache` holds are read from it (`cached_replay`).

    The baseline is read while workers replay (with one process, before any replay); an
    input error stops them. Stale baseline categories are judged only in complete runs; a
    filtered run judges only its categories. Nothing is written here.
    """
    selected = select_categories(project, names)
    complete = not names
    listed = [c.name for c in project.categories]
    ready = dict(ready or {})

    files = {}
    if cache is not None and isinstance(baseline, SnapshotFiles):
        # The files whose memo may spare their parse (`ReplayCache.retained_shortcut`).
        files = {
            c.name: file
            for c in selected
            if c.name not in ready and (file := baseline.file_of(c.name)) is not None
        }
        if cache.holds_entries(list(files)):
            cache.prefetch_retained([path for path, _ in files.values()])
    parsed: dict[str, bytes] = {}  # the bytes of each file parsed in full

    def read_baseline() -> tuple[dict[str, Snapshot | None], dict[str, Known]]:
        snapshots: dict[str, Snapshot | None] = {}
        known: dict[str, Known] = {}
        for c in selected:
            name = c.name
            if cache is not None and name in files:
                # A file known to hold exactly the cached rows: those rows, not a parse.
                quick = cache.retained_shortcut(project, name, *files[name])
                if quick is not None:
                    snapshots[name], known[name] = quick
                    continue
                assert isinstance(baseline, SnapshotFiles)
                snap, raw = baseline.load_read(name)
                if raw is not None:
                    parsed[name] = raw
            else:
                snap = baseline.load(name)
            snapshots[name] = snap
            if snap is not None and name not in ready:
                known[name] = known_rows(snap)
        return snapshots, known

    texts, (loaded, known) = cached_replay(
        project,
        [c for c in selected if c.name not in ready],
        jobs=jobs,
        meanwhile=read_baseline,
        cache=cache,
    )
    if cache is not None:
        # Now that the rows are in the cache (read or replayed and stored), note each file
        # parsed in full that holds exactly them: the next run spares its parse.
        for name, raw in parsed.items():
            retained = loaded[name]
            if retained is not None:
                cache.remember_retained(project, name, files[name][1], raw, retained, known[name])
    snapshots = {
        c.name: ready[c.name]
        if c.name in ready
        else snapshot_from_texts(c, texts[c.name], known=known.get(c.name))
        for c in selected
    }
    stale = tuple(sorted(set(baseline.names()) - set(listed))) if complete else ()
    comparisons = {
        name: compare_rows(
            retained.rows if (retained := loaded[name]) is not None else None,
            snapshots[name].rows,
            differ=differ,
        )
        for name in snapshots
    }
    for name, snap in snapshots.items():
        if not snap.validated:
            moved = set(comparisons[name].added) | set(comparisons[name].changed)
            moved_rows = [r for r in snap.rows if r["id"] in moved]
            problem = validate_rows(name, snap.basis, moved_rows, project.snapshot_schema)
            if problem is not None:
                raise SnapshotError(f"category {name} produced an invalid snapshot: {problem}")

    declared: dict[str, Collection[str]] = {}

    def known_ids(name: str) -> Collection[str]:
        if name in comparisons:
            return comparisons[name].fresh_ids | comparisons[name].baseline_ids
        if name not in declared:
            declared[name] = {r.id for r in project.category(name).rows()}
        return declared[name]

    changes = (
        expected if isinstance(expected, ExpectedChanges) else ExpectedChanges.of_ids(expected)
    )
    stated = resolve_stated(changes.entries, list(snapshots), known_ids, listed)
    verdicts = {}
    covered: set[tuple[int, int]] = set()
    by_name = {c.name: c for c in selected}
    for name, comparison in comparisons.items():
        base = loaded[name]
        # Every declared invariance, on every run: against the rows just replayed or read
        # from the cache (the same rows), whether or not anything moved.
        broken = verify_category(by_name[name], snapshots[name].rows, texts=texts.get(name))
        groups = _naming_breaks(
            group_changes(
                name,
                comparison,
                {r["id"]: r for r in snapshots[name].rows if r["id"] in comparison.added},
                {}
                if base is None
                else {r["id"]: r for r in base.rows if r["id"] in comparison.removed},
            ),
            broken,
        )
        verdict, hits = judge_category(name, comparison, stated.by_category[name], groups)
        verdicts[name] = dataclasses.replace(verdict, broken=broken) if broken else verdict
        covered |= hits
    missing_stated = (*stated.missing, *unmatched_fields(stated.judged, covered))
    by_id = {name: {r["id"]: r for r in snap.rows} for name, snap in snapshots.items()}
    outcome = CheckOutcome(
        verdicts,
        stale=stale,
        unattributed=stated.unattributed,
        complete=complete,
        missing_stated=missing_stated,
        applied=not stale
        and not stated.unattributed
        and already_applied(
            list(verdicts.values()),
            stated.by_category,
            missing_stated,
            lambda name, row_id: by_id[name].get(row_id),
        ),
    )
    return CheckResult(outcome, snapshots, loaded)


def _naming_breaks(
    groups: Sequence[ChangeGroup], broken: Sequence[InvarianceBreak]
) -> tuple[ChangeGroup, ...]:
    """The change groups, each naming the broken invariances it breaks (a removed row is in
    no fresh class, so `breaks_of` finds none for a removed group)."""
    if not broken:
        return tuple(groups)
    return tuple(
        dataclasses.replace(
            group, breaks=breaks_of((f.path for f in group.fields), group.row_ids, broken)
        )
        for group in groups
    )


def expected_document(result: CheckResult) -> list[dict[str, str]]:
    """The actual change list in the id form, qualified ids sorted; the one reason already
    given for a row (by an id or a stated entry) is kept, others say what moved."""
    out: list[dict[str, str]] = []
    for verdict in result.outcome.categories.values():
        comparison = verdict.comparison
        for row_id in sorted(comparison.moved):
            qid = verdict.q(row_id)
            given = verdict.reasons.get(row_id, ())
            if len(given) == 1:  # kept from an id or stated entry
                reason = given[0]
            elif row_id in comparison.changed:
                paths = [c.path for c in comparison.changed[row_id]]
                more = f" (+{len(paths) - 3} more)" if len(paths) > 3 else ""
                reason = "changed: " + ", ".join(paths[:3]) + more
            else:
                reason = "added" if row_id in comparison.added else "removed"
            out.append({"id": qid, "reason": reason})
    out.sort(key=lambda e: e["id"])
    return out


# --- judging against another baseline ------------------------------------------------------


@dataclass(frozen=True)
class RemovedCategory(Category):
    """A category only the baseline has: it replays no rows, so each baseline row is
    reported removed (and may be listed as an expected change)."""

    name: str
    basis: str = "a category present only in the baseline"

    def rows(self) -> Sequence[RowSpec]:
        return ()


def judge_against(
    project: Project,
    names: Sequence[str],
    baseline: SnapshotSource,
    *,
    expected_file: Path | None = None,
    fresh: Mapping[str, Snapshot] | None = None,
    jobs: int = 1,
    cache: ReplayCache | None = None,
) -> CheckResult:
    """run_check against `baseline`, its categories the project lists no more judged as
    removed ones (`baseline_only` names them). `fresh` holds candidate snapshots already
    replayed (others replay here)."""
    listed = {c.name for c in project.categories}
    removed = tuple(RemovedCategory(n) for n in baseline.names() if n not in listed)
    judged = project.with_categories(removed)
    # Read once the baseline is known: an expected id may name a removed category's row.
    expected = (
        ()
        if expected_file is None
        else load_expected_changes(expected_file, [c.name for c in judged.categories])
    )
    return run_check(
        judged, names, baseline=baseline, expected=expected, ready=fresh, jobs=jobs, cache=cache
    )


def baseline_only(project: Project, result: CheckResult) -> list[str]:
    """The judged categories only the baseline has (their rows are reported removed)."""
    listed = {c.name for c in project.categories}
    return [name for name in result.outcome.categories if name not in listed]
