"""`routectl parity OBSERVED...`: observation records of real runs joined with the retained
snapshot rows (`routectl.review.parity`; docs/observed-routes.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from routectl.cli import CheckFailed, cli, project_option, state
from routectl.cli.shared import snapshots_folder
from routectl.errors import InputError
from routectl.replay.observed import ParsedRecord, read_record
from routectl.review import parity
from routectl.review.snapshot import read_snapshot, retained_files

RENDERERS = {
    "text": parity.render_text,
    "markdown": parity.render_markdown,
    "github": parity.render_github,
}


def _snapshot_rows(
    project: Any, records: list[ParsedRecord]
) -> Mapping[str, Mapping[str, Mapping[str, Any]]]:
    """The retained rows of the categories the records declare (every one when a record
    declares none), by category and id."""
    directory = snapshots_folder(project)
    files = retained_files(directory)
    declared = {r.target["category"] for r in records}
    wanted = sorted(files) if None in declared else sorted(c for c in declared if c in files)
    return {
        name: read_snapshot(files[name], category=name, schema=project.snapshot_schema).by_id()
        for name in wanted
    }


@cli.command("parity")
@click.argument(
    "observed", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False)
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "github"]),
    default="text",
    show_default=True,
)
@click.option(
    "--require-all",
    is_flag=True,
    help="Fail when a predicted call of an observed token count was never observed.",
)
@click.option(
    "--require-route",
    "require_routes",
    multiple=True,
    metavar="PATTERN=KERNEL",
    help="Fail unless the rows PATTERN matches (row ids, as in expected-changes files) ran "
    "KERNEL (a kernel class, a stage or an op). Repeatable.",
)
@project_option
@click.pass_context
def parity_command(
    ctx: click.Context,
    observed: tuple[Path, ...],
    fmt: str,
    require_all: bool,
    require_routes: tuple[str, ...],
    project_dir: Path | None,
) -> None:
    """Join observation records of real runs with their snapshot rows.

    Each record (one per engine session and rank) is matched to its retained row by
    category, workload, native build and policy hash; records of one row are merged. Every
    observed (layer, M) is compared with the row's predicted calls for that M. Exit 1 on a
    disagreement or an unpredicted call (with --require-all also on a predicted call never
    observed), 2 on a record that is invalid or matches no row."""
    project = state(ctx).project(project_dir)
    required = [parity.parse_required(text, project) for text in require_routes]
    known = project.catalogue.ops
    records = [read_record(path, known) for path in observed]
    if not records:
        raise InputError("no observation record given")
    rows = _snapshot_rows(project, records)
    result = parity.check_parity(project, records, rows, require_all=require_all, required=required)
    if fmt == "json":
        click.echo(json.dumps(result.to_json(), indent=2, sort_keys=True))
    else:
        click.echo(RENDERERS[fmt](result), nl=False)
    if not result.ok:
        raise CheckFailed()
