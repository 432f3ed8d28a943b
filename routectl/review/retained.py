"""The retained snapshot folder after a check: `--update` rewrites the files whose rows
moved and removes stale ones; a failing check leaves `<category>.json.new` beside each
retained file whose rows differ, and a passing one removes the stale `.json.new` files.
Each function returns the lines to tell the user, one per file touched; `check_retained` is
the whole of `routectl check` but its output."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from routectl.io.schemas import LoadedSchema
from routectl.project import Project
from routectl.review.cache import ReplayCache
from routectl.review.check import CheckResult, run_check
from routectl.review.expected import ExpectedChanges
from routectl.review.snapshot import NEW_SUFFIX, stale_new_files, write_snapshot
from routectl.review.sources import SnapshotFiles


@dataclass(frozen=True)
class RetainedCheck:
    """A check against the retained folder, with what it did to the folder: `notes` (one
    line per file touched), `updated` (the retained files were rewritten) and
    `update_refused` (an update was asked for but the differences were not exactly the
    expected ones)."""

    result: CheckResult
    notes: tuple[str, ...]
    updated: bool
    update_refused: bool


def check_retained(
    project: Project,
    names: Sequence[str],
    directory: Path,
    *,
    expected: ExpectedChanges,
    jobs: int,
    update: bool = False,
    accept_all: bool = False,
    cache: ReplayCache | None = None,
) -> RetainedCheck:
    """Replay, compare with the retained snapshots in `directory` and judge; then rewrite
    them (`update`, when the check passes, or with `accept_all` when no declared invariance
    is broken), or leave `.json.new` files for the categories that differ (a failing check)
    and remove stale ones. `cache` holds rows replayed before (`routectl.review.cache`)."""
    schema = project.snapshot_schema
    baseline = SnapshotFiles.retained(directory, schema=schema)
    result = run_check(project, names, baseline=baseline, expected=expected, jobs=jobs, cache=cache)
    # --accept-all accepts differences; a broken declared invariance is no difference to
    # accept: the retained files are left alone until the code or the declaration is fixed.
    broken = any(v.broken for v in result.outcome.categories.values())
    if update and (result.ok or (accept_all and not broken)):
        notes = update_retained(result, directory, schema=schema)
        notes += settle_new_files(result, directory, failed=False, schema=schema)
        return RetainedCheck(result, tuple(notes), updated=True, update_refused=False)
    notes = settle_new_files(result, directory, failed=not result.ok, schema=schema)
    return RetainedCheck(result, tuple(notes), updated=False, update_refused=update)


def new_path(directory: Path, name: str) -> Path:
    return directory / f"{name}.json{NEW_SUFFIX}"


def update_retained(
    result: CheckResult, directory: Path, *, schema: LoadedSchema | None = None
) -> list[str]:
    """Rewrite the retained files whose rows moved; remove stale ones after a complete run."""
    lines: list[str] = []
    moved = [n for n in result.fresh if not result.comparison(n).identical]
    for name in moved:
        snap = result.fresh[name]
        write_snapshot(directory / f"{name}.json", snap, schema=schema)
        lines.append(f"updated {directory / f'{name}.json'} ({len(snap.rows)} rows)")
    if result.outcome.complete:
        for name in result.outcome.stale:
            path = directory / f"{name}.json"
            # Gone already (another update removed it since the check read it): as asked.
            path.unlink(missing_ok=True)
            lines.append(f"removed stale {path}")
    if not moved and not result.outcome.stale:
        lines.append("retained snapshots already match")
    return lines


def settle_new_files(
    result: CheckResult, directory: Path, *, failed: bool, schema: LoadedSchema | None = None
) -> list[str]:
    """A failing check leaves `<category>.json.new` for each category whose rows differ; any
    other `.json.new` of a judged category (of every category, in a complete run) goes."""
    lines: list[str] = []
    keep: set[str] = set()
    if failed:
        for name, snap in result.fresh.items():
            if not result.comparison(name).identical:
                path = new_path(directory, name)
                write_snapshot(path, snap, schema=schema)
                lines.append(f"wrote {path}")
                keep.add(name)
    scope = None if result.outcome.complete else list(result.fresh)
    for path in stale_new_files(directory, scope):
        if path.name.removesuffix(".json" + NEW_SUFFIX) not in keep:
            path.unlink(missing_ok=True)
    return lines
