"""`routectl diff`: the verdict of `routectl check`, judged against a baseline computed by the
code at another git ref (`--baseline-ref`) or against pre-built snapshots (`--baseline`).

Same verdict, diff output, report schema and exit codes as check. Diff never writes retained
snapshots or `.json.new` files: its baseline is not the retained state, so a fresh snapshot
beside the retained one would claim something diff did not check (`routectl check` writes
them). A category on one side only is judged like any other: only in the candidate, its rows
are added; only in the baseline, its rows are removed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import click

from routectl.cli import CliState, cli, job_count, jobs_option, project_option, state
from routectl.cli.snapshot_cmd import (
    CATEGORY_HELP,
    VerdictOptions,
    emit_verdict,
    finish,
    note,
    verdict_options,
    warn_todo_reasons,
)
from routectl.errors import InputError
from routectl.project import Project
from routectl.review.baseline import BaselineFailed, BaselineFile, baseline_at_ref, open_baseline
from routectl.review.check import CheckResult, SnapshotSource, fresh_snapshots, run_check
from routectl.review.expected import document_reasons, load_expected_changes
from routectl.review.snapshot import Snapshot, read_json
from routectl.rows import RowSpec


@dataclass(frozen=True)
class RemovedCategory:
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
) -> CheckResult:
    """run_check against `baseline`, its categories the project lists no more judged as
    removed ones. `fresh` holds candidate snapshots already replayed (others replay here)."""
    listed = {c.name for c in project.categories}
    removed = tuple(RemovedCategory(n) for n in baseline.names() if n not in listed)
    judged = replace(project, categories=(*project.categories, *removed))
    # Read once the baseline is known: an expected id may name a removed category's row.
    expected = (
        ()
        if expected_file is None
        else load_expected_changes(
            expected_file, [c.name for c in judged.categories], snapshot_dir=project.snapshot_dir
        )
    )
    result = run_check(judged, names, baseline=baseline, expected=expected, ready=fresh, jobs=jobs)
    for category in removed:
        if category.name in result.outcome.categories:
            note(f"category {category.name} is only in the baseline: its rows are reported removed")
    return result


def _against_ref(
    project: Project,
    ref: str,
    names: Sequence[str],
    *,
    environ: Mapping[str, str],
    expected_file: Path | None,
    debug: bool,
    jobs: int,
) -> CheckResult:
    if project.root is None:
        raise InputError(f"project {project.name} has no root folder")
    prefixes = (project.variable_prefix,) if project.variable_prefix else ()
    with baseline_at_ref(
        project.root, ref, environ=environ, strip_prefixes=prefixes, debug=debug
    ) as build:
        # The candidate replays here while the baseline runs in its own process.
        fresh = fresh_snapshots(
            project, [c for c in project.categories if not names or c.name in names], jobs=jobs
        )
        try:
            source = build.source(snapshot_dir=project.snapshot_dir)
        except BaselineFailed as exc:
            if debug:  # prefixed: its `error:` lines are the old program's, not ours
                for line in exc.output.splitlines():
                    click.echo(f"baseline> {line}", err=True)
            raise
        result = judge_against(project, names, source, expected_file=expected_file, fresh=fresh)
    note(f"baseline: {ref} = {build.commit[:12]}, computed by that commit's own code")
    return result


def _against_files(
    project: Project, path: Path, names: Sequence[str], *, expected_file: Path | None, jobs: int
) -> CheckResult:
    source = open_baseline(path, snapshot_dir=project.snapshot_dir)
    if isinstance(source, BaselineFile):
        # One file is one category: the run judges that category only.
        others = sorted(set(names) - {source.category})
        if others:
            raise click.UsageError(
                f"--baseline {path} holds only category {source.category}; "
                f"-c also names {', '.join(others)}"
            )
        names = (source.category,)
    return judge_against(project, names, source, expected_file=expected_file, jobs=jobs)


def against_baseline(
    cli_state: CliState,
    project: Project,
    ref: str | None,
    baseline_path: Path | None,
    categories: Sequence[str],
    *,
    expected_file: Path | None,
    jobs: int,
) -> CheckResult:
    """The working tree's rows judged against REF's own rows or pre-built snapshots (the
    caller gives exactly one); `diff` and the route matrix views share it."""
    if ref is not None:
        return _against_ref(
            project,
            ref,
            categories,
            environ=cli_state.environ,
            expected_file=expected_file,
            debug=cli_state.debug,
            jobs=jobs,
        )
    assert baseline_path is not None
    return _against_files(
        project, baseline_path, categories, expected_file=expected_file, jobs=jobs
    )


@cli.command("diff")
@click.option(
    "--baseline-ref",
    "ref",
    metavar="REF",
    default=None,
    help="Git ref whose own code computes the baseline, in a temporary worktree.",
)
@click.option(
    "--baseline",
    "baseline_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Pre-built baseline: one snapshot file, or a folder written by "
    "`routectl snapshot --all --output-dir DIR`.",
)
@click.option("-c", "--category", "categories", multiple=True, help=CATEGORY_HELP)
@verdict_options
@jobs_option
@project_option
@click.pass_context
def diff_command(
    ctx: click.Context,
    ref: str | None,
    baseline_path: Path | None,
    categories: tuple[str, ...],
    verdict: VerdictOptions,
    jobs: int,
    project_dir: Path | None,
) -> None:
    """Compare the working tree's rows with another git ref's.

    The baseline is the rows the code at git ref REF computes, or pre-built snapshot files.

    Exit 0 when equal or when the differences are exactly the expected ones; 1 otherwise.
    Never writes retained snapshots or .json.new files.
    """
    if (ref is None) == (baseline_path is None):
        raise click.UsageError("give exactly one of --baseline-ref REF and --baseline PATH")
    cli_state = state(ctx)
    project = cli_state.project(project_dir)
    expected_changes = verdict.expected_changes
    if expected_changes is not None:
        # Unreadable or not JSON: fail before any git work or replay (ids are checked later,
        # once the baseline's categories are known).
        warn_todo_reasons(
            document_reasons(read_json(expected_changes, "expected-changes file")),
            expected_changes,
            cli_state.environ,
        )
    result = against_baseline(
        cli_state,
        project,
        ref,
        baseline_path,
        categories,
        expected_file=expected_changes,
        jobs=job_count(jobs),
    )
    command = (
        f"routectl diff --baseline-ref {ref}"
        if ref is not None
        else f"routectl diff --baseline {baseline_path}"
    )
    emit_verdict(result, project, environ=cli_state.environ, options=verdict, command=command)
    finish(result, verdict, command)
