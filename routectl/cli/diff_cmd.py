"""`routectl diff`: the verdict of `routectl check`, judged against a baseline computed by the
code at another git ref (`--baseline-ref`) or against pre-built snapshots (`--baseline`).

Same verdict, diff output, report schema and exit codes as check. Diff never writes retained
snapshots or `.json.new` files: its baseline is not the retained state, so a fresh snapshot
beside the retained one would claim something diff did not check (`routectl check` writes
them). A category on one side only is judged like any other: only in the candidate, its rows
are added; only in the baseline, its rows are removed.
"""

from __future__ import annotations

from pathlib import Path

import click

from routectl.cli import cli, job_count, jobs_option, project_option, state
from routectl.cli.shared import (
    CATEGORY_HELP,
    VerdictOptions,
    against_baseline,
    cache_options,
    emit_verdict,
    finish,
    note_replayed,
    replay_cache,
    verdict_options,
    warn_todo_reasons,
)
from routectl.review.expected import document_reasons
from routectl.review.snapshot import read_json


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
@cache_options
@jobs_option
@project_option
@click.pass_context
def diff_command(
    ctx: click.Context,
    ref: str | None,
    baseline_path: Path | None,
    categories: tuple[str, ...],
    verdict: VerdictOptions,
    no_cache: bool,
    verbose: bool,
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
    # The candidate's rows, and with --baseline-ref the baseline keyed by REF's tree.
    cache = replay_cache(cli_state, project, no_cache)
    result = against_baseline(
        cli_state,
        project,
        ref,
        baseline_path,
        categories,
        expected_file=expected_changes,
        jobs=job_count(jobs),
        cache=cache,
    )
    note_replayed(cache, verbose)
    command = (
        f"routectl diff --baseline-ref {ref}"
        if ref is not None
        else f"routectl diff --baseline {baseline_path}"
    )
    emit_verdict(result, project, environ=cli_state.environ, options=verdict, command=command)
    finish(result, verdict, command)
