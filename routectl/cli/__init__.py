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
from routectl.io.jsonread import limits_from_environ, using_limits
from routectl.project import Project, load_project
from routectl.runtime import checkpoints, interrupt
from routectl.runtime.interrupt import EXIT_INTERRUPTED
from routectl.suggest import did_you_mean


class CheckFailed(Exception):
    """A check found differences (exit 1); the report was already printed."""


@dataclass
class CliState:
    environ: Mapping[str, str]
    project_dir: Path | None
    debug: bool
    # `--project-name NAME`: the project an installed engine registers (entry point group
    # `routectl.projects`), found with no pyproject.toml around.
    project_name: str | None = None

    def project(self, override: Path | None = None) -> Project:
        directory = override or self.project_dir
        if self.project_name is not None and directory is None:
            return load_project(name=self.project_name)
        if self.project_name is not None:
            raise InputError("give --project DIR or --project-name NAME, not both")
        return load_project(directory)


def state(ctx: click.Context) -> CliState:
    return ctx.find_root().obj


project_option = click.option(
    "--project",
    "project_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Project directory (default: nearest pyproject.toml with [tool.routectl]).",
)


# More processes than this rarely pay for their forks on a few thousand rows.
MAX_AUTO_JOBS = 8

jobs_option = click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=0),
    default=0,
    metavar="N",
    help=f"Processes that replay rows: 0 (default) one per available CPU, at most "
    f"{MAX_AUTO_JOBS}; 1 this process only. The rows do not depend on it.",
)


def job_count(jobs: int) -> int:
    from routectl.runtime.workers import available_cpus

    return jobs or min(available_cpus(), MAX_AUTO_JOBS)


class OutputPath(click.Path):
    """A file (or folder) to write: its parent folder must exist, so that a mistyped path is
    refused (exit 2) before any work instead of silently creating folders."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
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
    name = root.params.get("project_name")
    try:
        return load_project(name=name) if name and not directory else load_project(directory)
    except Exception:  # noqa: BLE001 - no project, no completions
        return None


def complete_category(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    project = _completion_project(ctx)
    if project is None:
        return []
    return [
        CompletionItem(c.name, help=c.description or None)
        for c in project.categories
        if c.name.startswith(incomplete)
    ]


def complete_row_id(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Bare ids of the `-c` category when one is given, else qualified ids."""
    project = _completion_project(ctx)
    if project is None:
        return []
    named = ctx.params.get("category_name")
    ids = [
        spec.id if named else f"{c.name}:{spec.id}"
        for c in project.categories
        if named in (None, c.name)
        for spec in c.rows()
    ]
    return [CompletionItem(i) for i in ids if i.startswith(incomplete)]


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


# Each command's module, imported when the command runs (or help lists it): a check does not
# pay for the imports of diff, config or native probe.
COMMAND_MODULES: Mapping[str, str] = {
    "check": "snapshot_cmd",
    "config": "config_cmd",
    "coverage": "coverage_cmd",
    "diff": "diff_cmd",
    "explain": "snapshot_cmd",
    "list": "snapshot_cmd",
    "matrix": "matrix_cmd",
    "native": "native_cmd",
    "parity": "parity_cmd",
    "report": "matrix_cmd",
    "snapshot": "snapshot_cmd",
}


def _set_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and isinstance(ctx.find_root().obj, CliState):
        ctx.find_root().obj.debug = True


def debug_option() -> click.Option:
    """`--debug` after a command name too (`routectl check --debug`), as before it."""
    return click.Option(
        ["--debug"],
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_set_debug,
        help="Show tracebacks of unexpected errors.",
    )


def with_debug_option(command: click.Command) -> click.Command:
    """`command` (and every subcommand of a group) accepting `--debug`."""
    if not any(isinstance(p, click.Option) and "--debug" in p.opts for p in command.params):
        command.params.append(debug_option())
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            with_debug_option(sub)
    return command


class Interrupted(BaseException):  # noqa: N818 - a Ctrl-C, not an error
    """Ctrl-C (or SIGTERM, SIGHUP) inside a command, carried past click's own handler (which
    would print a blank line and call it "aborted") to `run`: one line, exit 128 + N."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class SuggestingGroup(click.Group):
    """A group whose unknown command names the closest known one."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if (
            not ctx.resilient_parsing
            and self.get_command(ctx, name) is None
            and not name.startswith("-")
        ):
            known = self.list_commands(ctx)
            raise click.UsageError(
                f"no such command {name!r}{did_you_mean(name, known)} "
                f"(commands: {', '.join(known)})",
                ctx,
            )
        return super().resolve_command(ctx, args)


class LazyGroup(SuggestingGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise Interrupted(interrupt.signal_of(exc)) from exc

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMAND_MODULES.get(cmd_name)
        if module is not None and cmd_name not in self.commands:
            importlib.import_module(f"routectl.cli.{module}")  # registers its commands
        command = super().get_command(ctx, cmd_name)
        return None if command is None else with_debug_option(command)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(
    __version__, "-V", "--version", prog_name="routectl", message="%(prog)s %(version)s"
)
@click.option("--debug", is_flag=True, help="Show tracebacks of unexpected errors.")
@project_option
@click.option(
    "--project-name",
    "project_name",
    default=None,
    metavar="NAME",
    help="The project an installed engine registers as NAME (entry point group "
    "routectl.projects); no pyproject.toml needed.",
)
@click.pass_context
def cli(
    ctx: click.Context, debug: bool, project_dir: Path | None, project_name: str | None
) -> None:
    """Route snapshots and kernel policy for quantized inference on Volta/Turing GPUs."""
    if ctx.obj is None:
        ctx.obj = CliState(environ={}, project_dir=project_dir, debug=debug)
    else:
        ctx.obj.project_dir = project_dir or ctx.obj.project_dir
        ctx.obj.debug = debug or ctx.obj.debug
    ctx.obj.project_name = project_name


# Longer error lines are cut: whatever a message quotes, stderr gets one readable line.
MAX_ERROR_CHARS = 2000


def one_line(message: str) -> str:
    """`message` as one line of at most MAX_ERROR_CHARS characters."""
    text = " ".join(part.strip() for part in message.strip().splitlines() if part.strip())
    if len(text) > MAX_ERROR_CHARS:
        text = f"{text[:MAX_ERROR_CHARS]}... ({len(text):,} characters)"
    return text


def error(message: str) -> None:
    click.echo(f"error: {one_line(message)}", err=True)


def signalled(signum: int) -> int:
    """The line and exit code of a run ended by `signum` (`routectl.runtime.interrupt`). The
    code stands even where the line cannot be written (SIGHUP: the terminal may be gone)."""
    try:
        error(interrupt.message(signum))
    except (OSError, ValueError):
        pass
    return interrupt.exit_code(signum)


def _debug_requested(argv: Sequence[str]) -> bool:
    # Before `--`, anywhere: `--debug` is accepted before and after the command name.
    return "--debug" in argv[: argv.index("--")] if "--" in argv else "--debug" in argv


def run(args: Sequence[str] | None, environ: Mapping[str, str]) -> int:
    """Run the CLI with an explicit environment; returns the exit code."""
    argv = list(sys.argv[1:] if args is None else args)
    debug = _debug_requested(argv)
    obj = CliState(environ=dict(environ), project_dir=None, debug=debug)
    try:
        limits = limits_from_environ(environ)
        with (
            warnings.catch_warnings(),
            using_limits(limits),
            checkpoints.enabled(checkpoints.directory_from_environ(environ)),
        ):
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
    except click.exceptions.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # a signal while click parsed
            return signalled(interrupt.signal_of(exc.__cause__))
        error("aborted")
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        error(exc.format_message())
        return 2
    except InputError as exc:
        if debug and exc.__cause__ is not None:  # e.g. the project's own import failure
            traceback.print_exc()
        error(str(exc))
        return 2
    except Interrupted as exc:
        return signalled(exc.signum)
    except KeyboardInterrupt as exc:
        return signalled(interrupt.signal_of(exc))
    except RecursionError:
        if debug:
            traceback.print_exc()
        error(
            "internal error: RecursionError: maximum recursion depth exceeded (run with "
            "--debug for the traceback)"
        )
        return 3
    except Exception as exc:  # noqa: BLE001 - an unexpected exception must exit 3, never 1
        if debug:
            traceback.print_exc()
        kind = "" if isinstance(exc, RoutectlError) else f"{type(exc).__name__}: "
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        error(f"internal error: {kind}{first} (run with --debug for the traceback)")
        return 3


# A command is a short-lived process that allocates about a million small acyclic objects
# (rows, plans, meta tensors) on top of torch's few hundred thousand: at the default
# thresholds the collector walks all of them again and again, about a quarter of a second of
# a check. Young cycles are still collected, once a million new objects are alive: a check
# (torch's objects and the retained rows) stays below that and runs no collection at all (at
# 200,000, two took a tenth of a second; its peak memory is the same either way); the full
# walks of long-lived objects stop.
GC_THRESHOLDS = (1_000_000, 30, 30)


def main() -> None:
    """The program: the one place that reads `os.environ` (with the engine's start-up)."""
    try:
        gc.set_threshold(*GC_THRESHOLDS)
        interrupt.raise_on_interrupt()  # the command's cleanup runs on Ctrl-C or SIGTERM
        code = run(None, os.environ)
        interrupt.flush_streams()
        interrupt.exit_on_interrupt()  # nothing left to clean up: a signal exits at once
    except KeyboardInterrupt as exc:  # between run's handlers and the switch above
        code = signalled(interrupt.signal_of(exc))
    directory = checkpoints.directory_from_environ(os.environ)
    if directory is not None:
        checkpoints.wait_at(directory, "shutdown")
    # Interpreter shutdown walks every object still alive (torch's and the command's: about
    # a third of a second after a check) in one last collection, to free cycles whose memory
    # the system takes back a moment later anyway. Frozen objects are left out of that walk;
    # atexit handlers and the flushing of streams still run.
    gc.freeze()
    sys.exit(code)
