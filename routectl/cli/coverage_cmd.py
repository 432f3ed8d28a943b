"""`routectl coverage`: which declared decision sites the working tree's replayed rows reach
(docs/coverage.md). Text lists the failing sites first; `--format json|markdown`;
`--fail-under N` and `--strict` make it a check (exit 1 on failure)."""

from __future__ import annotations

from pathlib import Path

import click

from routectl.cli import CheckFailed, cli, job_count, jobs_option, project_option, state
from routectl.cli.shared import (
    CATEGORY_HELP,
    cache_options,
    note,
    note_replayed,
    replay_cache,
)
from routectl.review.check import fresh_snapshots, select_categories
from routectl.review.coverage import (
    compute_coverage,
    coverage_document,
    failure_line,
    render_coverage_json,
    render_markdown,
    render_text,
)


@cli.command("coverage")
@click.option("-c", "--category", "categories", multiple=True, help=CATEGORY_HELP)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--fail-under",
    type=click.FloatRange(0, 100),
    default=None,
    metavar="N",
    help="Exit 1 when fewer than N per cent of the declared sites are covered (reached, "
    "or declared unreachable or recorded-only).",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit 1 unless every category declares its sites and every declared site is "
    "reached or declared unreachable or recorded-only, no reached site is undeclared and no "
    "declaration is stale.",
)
@click.option("--all-sites", is_flag=True, help="Text: list every site, reached ones too.")
@cache_options
@jobs_option
@project_option
@click.pass_context
def coverage_command(
    ctx: click.Context,
    categories: tuple[str, ...],
    fmt: str,
    fail_under: float | None,
    strict: bool,
    all_sites: bool,
    no_cache: bool,
    verbose: bool,
    jobs: int,
    project_dir: Path | None,
) -> None:
    """Report the decision sites the rows reach.

    Replays the working tree (rows the replay cache holds are read from it) and reports,
    per category, each declared site: reached (and by which row), declared unreachable or
    recorded-only (with the reason), or uncovered.
    """
    cli_state = state(ctx)
    project = cli_state.project(project_dir)
    selected = select_categories(project, categories)
    cache = replay_cache(cli_state, project, no_cache)
    fresh = fresh_snapshots(project, selected, jobs=job_count(jobs), cache=cache)
    note_replayed(cache, verbose)
    coverage = compute_coverage(project, selected, {n: s.rows for n, s in fresh.items()})
    if fmt == "json":
        click.echo(render_coverage_json(coverage_document(coverage)), nl=False)
    elif fmt == "markdown":
        click.echo(render_markdown(coverage), nl=False)
    else:
        click.echo(render_text(coverage, verbose=all_sites), nl=False)
    line = failure_line(coverage, strict=strict, fail_under=fail_under)
    if line is not None:
        note(line)
        raise CheckFailed
