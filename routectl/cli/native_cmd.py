"""`routectl native probe`: check a real op namespace against the catalogue."""

from __future__ import annotations

import json
from pathlib import Path

import click

from routectl.cli import CheckFailed, SuggestingGroup, cli, project_option, state
from routectl.io.jsonread import shorten
from routectl.io.schemas import SCHEMA_VERSION, schema_violation
from routectl.namespaces.native_ns import TorchOpsNamespace
from routectl.project import import_module
from routectl.replay.probe import probe, render_text


def check_module_name(name: str) -> None:
    """`--import` takes an absolute dotted module name; anything else is a usage error."""
    if not name.strip():
        raise click.BadParameter(
            "needs a module name (e.g. native.reference), got ''", param_hint="--import"
        )
    if name.startswith("."):
        raise click.BadParameter(
            f"takes an absolute module name, not the relative {shorten(name)}",
            param_hint="--import",
        )
    if not all(part.isidentifier() for part in name.split(".")):
        raise click.BadParameter(
            f"{shorten(name)} is not a dotted module name", param_hint="--import"
        )


@cli.group("native", cls=SuggestingGroup)
def native_group() -> None:
    """Native operator contracts."""


@native_group.command("probe")
@click.option(
    "--namespace",
    default="_C",
    show_default=True,
    help="torch.ops namespace to inspect (the engine's is _C).",
)
@click.option(
    "--import",
    "imports",
    multiple=True,
    metavar="MODULE",
    help="Import MODULE first (e.g. native.reference registers the routectl ops).",
)
@click.option(
    "--kernel",
    "kernels",
    multiple=True,
    metavar="NAME",
    help="Probe only this kernel or MoE stage (repeatable; default: all).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@project_option
@click.pass_context
def probe_command(
    ctx: click.Context,
    namespace: str,
    imports: tuple[str, ...],
    kernels: tuple[str, ...],
    fmt: str,
    project_dir: Path | None,
) -> None:
    """Check a torch.ops namespace against the op catalogue.

    Report every required op as present/missing and its schema against the pin; exit 1 when
    an op is missing or a pinned schema differs."""
    for module in imports:
        check_module_name(module)
    project = state(ctx).project(project_dir)
    for module in imports:
        import_module(module)
    results = probe(project.catalogue, TorchOpsNamespace(namespace), kernels)
    ok = all(r.ok for r in results)
    if results and not any(s.present for r in results for s in r.ops):
        # Most likely the extension was never loaded, not a build missing every op.
        click.echo(
            f"note: no native operators were found in torch.ops.{namespace}: import "
            f"the engine's extension with --import MODULE and name its op namespace "
            f"with --namespace NAME (e.g. --namespace routectl --import "
            f"native.reference)",
            err=True,
        )
    if fmt == "json":
        document = {
            "schema_version": SCHEMA_VERSION,
            "namespace": namespace,
            "imports": list(imports),
            "ok": ok,
            "kernels": [r.to_json() for r in results],
        }
        problem = schema_violation("probe", document)
        if problem:
            raise RuntimeError(f"probe output violates its schema: {problem}")
        click.echo(json.dumps(document, indent=2, sort_keys=True))
    else:
        for line in render_text(namespace, results):
            click.echo(line)
        missing = sorted({s.op for r in results for s in r.ops if not s.present})
        mismatched = sorted({s.op for r in results for s in r.ops if s.schema == "schema mismatch"})
        summary = f"{len(results)} probed: {sum(r.ok for r in results)} served"
        if missing:
            summary += f"; missing: {', '.join(missing)}"
        if mismatched:
            summary += f"; schema mismatch: {', '.join(mismatched)}"
        click.echo(summary)
    if not ok:
        raise CheckFailed()
