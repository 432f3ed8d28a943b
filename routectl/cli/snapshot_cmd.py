"""`routectl list`, `snapshot`, `check` and `explain`: route snapshots from the command line.

Every input is read and validated before the first write, so an input error (exit 2)
leaves every file as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import click

from routectl.cli import (
    CheckFailed,
    OutputPath,
    cli,
    complete_category,
    complete_row_id,
    job_count,
    jobs_option,
    project_option,
    state,
    warn,
)
from routectl.cli.profile_check import profile_option, profile_verdict, row_layer_name
from routectl.cli.shared import (
    CATEGORY_HELP,
    VerdictOptions,
    cache_options,
    emit_verdict,
    finish,
    is_ci,
    note,
    note_replayed,
    read_expected,
    replay_cache,
    snapshots_folder,
    verdict_options,
    warn_todo_reasons,
)
from routectl.errors import InputError
from routectl.review.check import (
    fresh_snapshots,
    select_categories,
)
from routectl.review.explain import explain, explain_text, resolve_row
from routectl.review.listing import category_summary, list_json, list_text
from routectl.review.retained import check_retained
from routectl.review.snapshot import dump_json, write_snapshot

# --- list ----------------------------------------------------------------------------------


@cli.command("list")
@click.option(
    "-c",
    "--category",
    "categories",
    multiple=True,
    help=CATEGORY_HELP,
    shell_complete=complete_category,
)
@click.option("--rows", "show_rows", is_flag=True, help="Also list every row id (qualified).")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@project_option
@click.pass_context
def list_command(
    ctx: click.Context,
    categories: tuple[str, ...],
    show_rows: bool,
    fmt: str,
    project_dir: Path | None,
) -> None:
    """List the categories, their row counts and descriptions."""
    project = state(ctx).project(project_dir)
    selected = select_categories(project, categories)
    summaries = [category_summary(c, with_rows=show_rows) for c in selected]
    click.echo(list_json(summaries) if fmt == "json" else list_text(summaries), nl=False)


# --- snapshot ------------------------------------------------------------------------------


@cli.command("snapshot")
@click.option(
    "-c",
    "--category",
    "categories",
    multiple=True,
    help=CATEGORY_HELP,
    shell_complete=complete_category,
)
@click.option("--all", "all_categories", is_flag=True, help="Every category.")
@click.option(
    "-o",
    "--output",
    type=OutputPath(path_type=Path, dir_okay=False, allow_dash=True),
    default=None,
    help="Write one category's snapshot to this file (- for stdout).",
)
@click.option(
    "--output-dir",
    type=OutputPath(path_type=Path, file_okay=False),
    default=None,
    help="Write <category>.json per category into this folder.",
)
@cache_options
@jobs_option
@project_option
@click.pass_context
def snapshot_command(
    ctx: click.Context,
    categories: tuple[str, ...],
    all_categories: bool,
    output: Path | None,
    output_dir: Path | None,
    no_cache: bool,
    verbose: bool,
    jobs: int,
    project_dir: Path | None,
) -> None:
    """Replay categories and write their snapshots.

    `python -m routectl snapshot --all --output-dir DIR` is a stable interface.
    """
    if (output is None) == (output_dir is None):
        raise click.UsageError("give exactly one of -o FILE and --output-dir DIR")
    if bool(categories) == all_categories:
        raise click.UsageError("name categories with -c CATEGORY or pass --all (not both)")
    project = state(ctx).project(project_dir)
    selected = select_categories(project, categories)
    if output is not None and len(selected) != 1:
        raise click.UsageError(
            f"-o writes one category; {len(selected)} selected (use --output-dir)"
        )
    # Everything replayed before any write.
    cache = replay_cache(state(ctx), project, no_cache)
    snapshots = fresh_snapshots(project, selected, jobs=job_count(jobs), cache=cache)
    note_replayed(cache, verbose)
    if output is not None and str(output) == "-":
        (snap,) = snapshots.values()
        click.echo(dump_json(snap.to_json()), nl=False)
        return
    for snap in snapshots.values():
        path = output if output is not None else cast(Path, output_dir) / f"{snap.category}.json"
        write_snapshot(path, snap, schema=project.snapshot_schema)
        note(f"wrote {path} ({len(snap.rows)} rows)")


# --- check ---------------------------------------------------------------------------------


@cli.command("check")
@click.option(
    "-c",
    "--category",
    "categories",
    multiple=True,
    help=CATEGORY_HELP,
    shell_complete=complete_category,
)
@verdict_options
@click.option(
    "--update",
    is_flag=True,
    help="Rewrite retained snapshots when the differences are exactly the expected "
    "ones (never in CI).",
)
@click.option("--accept-all", is_flag=True, help="With --update: accept every difference.")
@cache_options
@jobs_option
@project_option
@click.pass_context
def check_command(
    ctx: click.Context,
    categories: tuple[str, ...],
    verdict: VerdictOptions,
    update: bool,
    accept_all: bool,
    no_cache: bool,
    verbose: bool,
    jobs: int,
    project_dir: Path | None,
) -> None:
    """Replay every row and compare it with the retained snapshots.

    Exit 0 when equal or when the differences are exactly the expected ones; 1 otherwise.
    """
    environ = state(ctx).environ
    if accept_all and not update:
        raise click.UsageError("--accept-all only applies with --update")
    if update and is_ci(environ):
        raise InputError(
            f"--update refuses to write retained snapshots in CI "
            f"(CI={environ.get('CI')!r}); run it locally"
        )
    project = state(ctx).project(project_dir)
    expected = read_expected(project, verdict.expected_changes)
    warn_todo_reasons(expected.reasons, verdict.expected_changes, environ)
    cache = replay_cache(state(ctx), project, no_cache)
    checked = check_retained(
        project,
        categories,
        snapshots_folder(project),
        expected=expected,
        jobs=job_count(jobs),
        update=update,
        accept_all=accept_all,
        cache=cache,
    )
    note_replayed(cache, verbose)
    result = checked.result
    emit_verdict(result, project, environ=environ, options=verdict)
    for line in checked.notes:
        note(line)
    if checked.updated:
        return
    if checked.update_refused and any(v.broken for v in result.outcome.categories.values()):
        warn("retained snapshots not updated: a declared invariance is broken")
    elif checked.update_refused:
        warn(
            "retained snapshots not updated: the differences are not exactly the expected "
            "ones (list them with --expected-changes, or pass --accept-all)"
        )
    finish(result, verdict, "routectl check")


# --- explain -------------------------------------------------------------------------------


@cli.command("explain")
@click.argument("row_id", shell_complete=complete_row_id)
@click.option(
    "-c",
    "--category",
    "category_name",
    default=None,
    help="The category of a bare row id held by several categories.",
    shell_complete=complete_category,
)
@click.option(
    "--all-policy",
    is_flag=True,
    help="Show every policy section, not only those the row's family reads.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@profile_option()
@project_option
@click.pass_context
def explain_command(
    ctx: click.Context,
    row_id: str,
    category_name: str | None,
    all_policy: bool,
    fmt: str,
    profile_path: Path | None,
    project_dir: Path | None,
) -> None:
    """Show why one row routes where it does.

    Its policy with sources, every candidate's verdict, the kernel, prepared layout, bytes,
    fallbacks and the dispatch plan.

    ROW_ID may be qualified (CATEGORY:ROW-ID).
    """
    project = state(ctx).project(project_dir)
    document = explain(project, row_id, category_name, all_policy=all_policy)
    verdict = None
    if profile_path is not None:
        _, spec = resolve_row(project, row_id, category_name)
        layer = row_layer_name(document["category"], spec)
        verdict, verdict_text = profile_verdict(
            profile_path, document["id"], layer, document["route"]
        )
        document = {**document, "profile": verdict}
    click.echo(
        dump_json(document)
        if fmt == "json"
        else explain_text(document, project.category(document["category"])),
        nl=False,
    )
    if verdict is not None:
        if fmt != "json":
            click.echo(verdict_text, nl=False)
        if verdict["mismatches"]:
            raise CheckFailed()
