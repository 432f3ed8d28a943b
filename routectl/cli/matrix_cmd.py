"""`routectl matrix` and `routectl report --html`: the route matrix of each category, in the
terminal or as one self-contained HTML file, optionally against a baseline (as `diff`
takes it) with the changed cells marked."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from routectl.cli import OutputPath, cli, job_count, jobs_option, project_option, state
from routectl.cli.shared import (
    CATEGORY_HELP,
    against_baseline,
    baseline_options,
    note,
    shown,
    terminal_columns,
    write_output,
)
from routectl.io.terminal import COLOR_CHOICES, Painter, text_width, use_color
from routectl.project import Project
from routectl.review.check import CheckResult, fresh_snapshots, select_categories
from routectl.review.matrix import Matrix, build_matrices, layout, transition_patterns
from routectl.review.matrix_html import render_report_page
from routectl.review.matrix_text import render_matrix_text


def matrices(
    ctx: click.Context,
    project: Project,
    categories: Sequence[str],
    *,
    ref: str | None,
    baseline_path: Path | None,
    jobs: int,
    field_path: str | None,
    rows_text: str | None,
    cols_text: str | None,
    collapse: bool = True,
) -> tuple[list[Matrix], CheckResult | None]:
    """Replay the categories (and compute or read the baseline when asked, judged as `diff`
    judges it) and lay each out, collapsed by the declared invariances unless `collapse` is
    false."""
    if ref is not None and baseline_path is not None:
        raise click.UsageError("give at most one of --baseline-ref REF and --baseline PATH")
    rows_dims, cols_dims = layout(rows_text, cols_text)
    selected = select_categories(project, categories)
    if ref is None and baseline_path is None:
        fresh = fresh_snapshots(project, selected, jobs=job_count(jobs))
        built = build_matrices(
            selected,
            fresh,
            None,
            field_path=field_path,
            rows_dims=rows_dims,
            cols_dims=cols_dims,
            collapse=collapse,
        )
        return built, None
    result = against_baseline(
        state(ctx),
        project,
        ref,
        baseline_path,
        categories,
        expected_file=None,
        jobs=job_count(jobs),
    )
    selected = [c for c in selected if c.name in result.fresh]
    built = build_matrices(
        selected,
        result.fresh,
        result.baseline,
        field_path=field_path,
        rows_dims=rows_dims,
        cols_dims=cols_dims,
        collapse=collapse,
    )
    return built, result


COLLAPSE_OPTION = click.option(
    "--collapse/--no-collapse",
    default=True,
    show_default=True,
    help="Merge the dimensions a declared invariance says never change the cells "
    "(docs/invariances.md); --no-collapse shows every row.",
)


@cli.command("matrix")
@click.option("-c", "--category", "categories", multiple=True, help=CATEGORY_HELP)
@click.option(
    "--rows",
    "rows_text",
    metavar="DIMS",
    default=None,
    help="Row dimensions, e.g. model,tp,spec (from model kv tp spec c q).",
)
@click.option(
    "--cols",
    "cols_text",
    metavar="DIMS",
    default=None,
    help="Column dimensions, e.g. kv,c,q (default).",
)
@click.option(
    "--field",
    "field_path",
    metavar="FIELD",
    default=None,
    help="Show this route field instead of the kernel: prepared_layout, "
    "bytes.total, fallback, status ...",
)
@click.option("--color", type=click.Choice(COLOR_CHOICES), default="auto", show_default=True)
@COLLAPSE_OPTION
@baseline_options
@jobs_option
@project_option
@click.pass_context
def matrix_command(
    ctx: click.Context,
    categories: tuple[str, ...],
    rows_text: str | None,
    cols_text: str | None,
    field_path: str | None,
    color: str,
    collapse: bool,
    ref: str | None,
    baseline_path: Path | None,
    jobs: int,
    project_dir: Path | None,
) -> None:
    """Print each category as a grid of kernels, with a legend.

    Rows model x tp x spec and columns kv x c x q by default; edge probes follow as a list
    with the reason that decided each one."""
    project = state(ctx).project(project_dir)
    built, _ = matrices(
        ctx,
        project,
        categories,
        ref=ref,
        baseline_path=baseline_path,
        jobs=jobs,
        field_path=field_path,
        rows_text=rows_text,
        cols_text=cols_text,
        collapse=collapse,
    )
    environ = state(ctx).environ
    paint = Painter(use_color(color, environ, sys.stdout.isatty()))
    width = text_width(environ, terminal_columns())
    patterns = transition_patterns(built)
    click.echo(
        "\n".join(
            render_matrix_text(m, paint=paint, patterns=patterns, width=width) for m in built
        ),
        nl=False,
        color=paint.enabled,
    )


@cli.command("report")
@click.option(
    "--html",
    "html_file",
    type=OutputPath(path_type=Path, dir_okay=False, allow_dash=True),
    required=True,
    help="Write the self-contained HTML report to this file (- for stdout).",
)
@click.option("-c", "--category", "categories", multiple=True, help=CATEGORY_HELP)
@click.option(
    "--field",
    "field_path",
    metavar="FIELD",
    default=None,
    help="Colour cells by this route field instead of the kernel.",
)
@COLLAPSE_OPTION
@baseline_options
@jobs_option
@project_option
@click.pass_context
def report_command(
    ctx: click.Context,
    html_file: Path,
    categories: tuple[str, ...],
    field_path: str | None,
    collapse: bool,
    ref: str | None,
    baseline_path: Path | None,
    jobs: int,
    project_dir: Path | None,
) -> None:
    """Write the route matrices as one self-contained HTML page."""
    project = state(ctx).project(project_dir)
    built, result = matrices(
        ctx,
        project,
        categories,
        ref=ref,
        baseline_path=baseline_path,
        jobs=jobs,
        field_path=field_path,
        rows_text=None,
        cols_text=None,
        collapse=collapse,
    )
    against = ref if ref is not None else baseline_path.name if baseline_path is not None else None
    page = render_report_page(
        project.name,
        built,
        basis={c.name: c.basis for c in project.categories},
        against=against,
        outcome=None if result is None else result.outcome,
    )
    write_output(html_file, page)
    note(f"wrote {shown(html_file)} ({len(built)} categor{'y' if len(built) == 1 else 'ies'})")
