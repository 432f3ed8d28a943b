"""The `routectl` command line. The entry point is the one place (with the engine's startup
function) that reads `os.environ`; every command receives the mapping through the context.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
import traceback
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from click.shell_completion import CompletionItem

from routectl import __version__
from routectl.errors import InputError, RoutectlError
from routectl.project import Project, load_project
from routectl.suggest import did_you_mean


class CheckFailed(Exception):
    """A check found differences (exit 1); the report was already printed."""


@dataclass
class CliState:
    environ: Mapping[str, str]
    project_dir: Path | None
    debug: bool

    def project(self, override: Path | None = None) -> Project:
        return load_project(override or self.project_dir)


def state(ctx: click.Context) -> CliState:
    return ctx.find_root().obj


project_option = click.option(
    "--project", "project_dir", type=click.Path(path_type=Path, file_okay=False),
    default=None, help="Project directory (default: nearest pyproject.toml with [tool.routectl]).")


# More processes than this rarely pay for their forks on a few thousand rows.
MAX_AUTO_JOBS = 8

jobs_option = click.option(
    "-j", "--jobs", type=click.IntRange(min=0), default=0, metavar="N",
    help=f"Processes that replay rows: 0 (default) one per available CPU, at most "
         f"{MAX_AUTO_JOBS}; 1 none forked. The rows do not depend on it.")


def job_count(jobs: int) -> int:
    from routectl.workers import available_cpus

    return jobs or min(available_cpus(), MAX_AUTO_JOBS)


class OutputPath(click.Path):
    """A file (or folder) to write: its parent folder must exist, so that a mistyped path is
    refused (exit 2) before any work instead of silently creating folders."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        if self.allow_dash and str(path) == "-":
            return path
        parent = Path(os.fsdecode(path)).absolute().parent
        if not parent.is_dir():
            self.fail(f"folder {parent} does not exist", param, ctx)
        return path


def _completion_project(ctx: click.Context) -> Project | None:
    """The project a completion request runs in, or None: completion never fails loudly."""
    root = ctx.find_root()
    directory = ctx.params.get("project_dir") or root.params.get("project_dir")
    try:
        return load_project(directory)
    except Exception:  # noqa: BLE001 - no project, no completions
        return None


def complete_category(ctx: click.Context, param: click.Parameter, incomplete: str
                      ) -> list[CompletionItem]:
    project = _completion_project(ctx)
    if project is None:
        return []
    return [CompletionItem(c.name, help=getattr(c, "description", None))
            for c in project.categories if c.name.startswith(incomplete)]


def complete_row_id(ctx: click.Context, param: click.Parameter, incomplete: str
                    ) -> list[CompletionItem]:
    """Bare ids of the `-c` category when one is given, else qualified ids."""
    project = _completion_project(ctx)
    if project is None:
        return []
    named = ctx.params.get("category_name")
    ids = [spec.id if named else f"{c.name}:{spec.id}"
           for c in project.categories if named in (None, c.name) for spec in c.rows()]
    return [CompletionItem(i) for i in ids if i.startswith(incomplete)]


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


# Each command's module, imported when the command runs (or help lists it): a check does not
# pay for the imports of diff, config or native probe.
COMMAND_MODULES: Mapping[str, str] = {
    "check": "snapshot_cmd", "config": "config_cmd", "diff": "diff_cmd",
    "explain": "snapshot_cmd", "list": "snapshot_cmd", "native": "native_cmd",
    "snapshot": "snapshot_cmd",
}


class SuggestingGroup(click.Group):
    """A group whose unknown command names the closest known one."""

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if (not ctx.resilient_parsing and self.get_command(ctx, name) is None
                and not name.startswith("-")):
            known = self.list_commands(ctx)
            raise click.UsageError(f"no such command {name!r}{did_you_mean(name, known)} "
                                   f"(commands: {', '.join(known)})", ctx)
        return super().resolve_command(ctx, args)


class LazyGroup(SuggestingGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            importlib.import_module(f"routectl.cli.{module}")  # registers its commands
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="routectl",
                      message="%(prog)s %(version)s")
@click.option("--debug", is_flag=True, help="Show tracebacks of unexpected errors.")
@project_option
@click.pass_context
def cli(ctx: click.Context, debug: bool, project_dir: Path | None) -> None:
    """Route snapshots and kernel policy for quantized inference on Volta/Turing GPUs."""
    if ctx.obj is None:
        ctx.obj = CliState(environ={}, project_dir=project_dir, debug=debug)
    else:
        ctx.obj.project_dir = project_dir or ctx.obj.project_dir
        ctx.obj.debug = debug or ctx.obj.debug


def run(args: Sequence[str] | None, environ: Mapping[str, str]) -> int:
    """Run the CLI with an explicit environment; returns the exit code."""
    argv = list(sys.argv[1:] if args is None else args)
    debug = "--debug" in argv
    obj = CliState(environ=dict(environ), project_dir=None, debug=debug)
    try:
        with warnings.catch_warnings():
            # Policy warnings are printed once, as `warning:` lines, from the resolved
            # policy; Python's own rendering would duplicate them.
            warnings.simplefilter("ignore")
            cli.main(args=argv, prog_name="routectl", standalone_mode=False, obj=obj)
        return 0
    except CheckFailed:
        return 1
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.NoArgsIsHelpError as exc:
        # A group called without a command shows its help, as click groups do: not an error.
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("error: aborted", err=True)
        return 130
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        return 2
    except InputError as exc:
        click.echo(f"error: {exc}", err=True)
        return 2
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        return 130
    except Exception as exc:  # noqa: BLE001 - an unexpected exception must exit 3, never 1
        if debug:
            traceback.print_exc()
        kind = "" if isinstance(exc, RoutectlError) else f"{type(exc).__name__}: "
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        click.echo(f"error: internal error: {kind}{first} (run with --debug for the traceback)",
                   err=True)
        return 3


# A command is a short-lived process that allocates about a million small acyclic objects
# (rows, plans, meta tensors) on top of torch's few hundred thousand: at the default
# thresholds the collector walks all of them again and again, about a quarter of a second of
# a check. Young cycles are still collected; the full walks of long-lived objects stop.
GC_THRESHOLDS = (200_000, 30, 30)


def main() -> None:
    gc.set_threshold(*GC_THRESHOLDS)
    sys.exit(run(None, os.environ))
