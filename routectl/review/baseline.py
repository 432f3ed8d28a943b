"""Baselines for `routectl diff`: snapshots computed by the program at another git ref, or
pre-built snapshot files (a CI cache).

A ref's baseline is the old program itself: a temporary detached `git worktree` of the ref
and a subprocess running `python -m routectl snapshot --all --output-dir DIR` there, with the
worktree first on PYTHONPATH, the worktree's project root as working directory (so its own
`[tool.routectl]` applies) and none of the policy's variables in its environment. The ref's
retained `snapshots/*.json` are never read. Everything temporary lives in one folder made by
`tempfile.mkdtemp`, so concurrent diffs in one repository never share a path; cleanup runs in
`finally`, also on Ctrl-C, SIGTERM or SIGHUP (`routectl.runtime.interrupt`) and on a failed
baseline. Git itself is `routectl.review.git`; the baseline's files are read as
`routectl.review.sources.SnapshotFiles` (migrated when older).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from routectl.errors import InputError
from routectl.io.schemas import LoadedSchema
from routectl.review.git import (
    MAX_TAIL_CHARS,
    add_worktree,
    file_at,
    locate_ref,
    remove_worktree,
)
from routectl.review.sources import SnapshotFiles
from routectl.runtime import checkpoints, interrupt

# The stable interface every routectl version keeps (docs/architecture.md, "Snapshot files").
SNAPSHOT_ARGS = ("-m", "routectl", "snapshot", "--all", "--output-dir")
# Every routectl version accepts `--debug` before the command name.
DEBUG_ARGS = ("-m", "routectl", "--debug", "snapshot", "--all", "--output-dir")
TEMP_PREFIX = "routectl-baseline-"
IMPORT_FAILURES = ("ModuleNotFoundError", "ImportError")
WAIT_POLL_S = 0.1
DEBUG_HINT = " (run with --debug for the traceback)"
# The engine package this code runs from: the baseline subprocess falls back to it when the
# ref's tree holds no `routectl/` of its own (a project that depends on routectl).
ENGINE_PATH = Path(__file__).resolve().parents[2]


class BaselineFailed(InputError):
    """The baseline subprocess failed (exit 2); `output` is everything it printed."""

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message)
        self.output = output


def check_project_at(
    repo: Path, commit: str, ref: str, project_path: Path, environ: Mapping[str, str]
) -> None:
    """REF must hold a `pyproject.toml` with `[tool.routectl]` at the project's path."""
    relative = (project_path / "pyproject.toml").as_posix()
    text = file_at(repo, commit, relative, environ)
    # A missing file is the answer, not a git failure: git's "does not exist" adds nothing.
    if text is None:
        raise InputError(f"{ref} has no routectl project: {relative} does not exist there")
    try:
        tool = tomllib.loads(text).get("tool", {})
    except tomllib.TOMLDecodeError as exc:
        raise InputError(
            f"{ref} has no routectl project: its {relative} is not valid TOML ({exc})"
        ) from None
    # `tool = "x"` (or a list) is valid TOML with no table under it: no project either.
    table = tool.get("routectl") if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        raise InputError(
            f"{ref} has no routectl project: its {relative} has no [tool.routectl] table"
        )


# --- the baseline subprocess ---------------------------------------------------------------


def baseline_environ(
    environ: Mapping[str, str],
    *,
    strip_prefixes: Sequence[str],
    worktree: Path,
    engine_path: Path | None,
) -> dict[str, str]:
    """The caller's environment minus the policy's variables (and the test checkpoints'),
    the worktree first on PYTHONPATH (then the caller's PYTHONPATH, then `engine_path`)."""
    prefixes = tuple(p for p in strip_prefixes if p)
    env = {
        k: v
        for k, v in environ.items()
        if not (prefixes and k.startswith(prefixes)) and k != checkpoints.VARIABLE
    }
    paths = [str(worktree)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    if engine_path is not None:
        paths.append(str(engine_path))
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _failure_message(ref: str, commit: str, code: int, output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    last = "no output"
    if lines:
        # "exit 3" already says the old program crashed, and its --debug hint does not apply
        # here (diff --debug prints the whole output).
        last = lines[-1].removeprefix("error: ").removeprefix("internal error: ")
        last = last.removesuffix(DEBUG_HINT)
    if len(last) > MAX_TAIL_CHARS:
        last = last[: MAX_TAIL_CHARS - 3] + "..."
    how = f"exit {code}" if code >= 0 else f"killed by signal {-code}"
    message = f"the baseline at {ref} ({commit[:12]}) failed ({how}): {last}"
    if any(kind in line for line in lines for kind in IMPORT_FAILURES):
        message += (
            f"; {ref} may need dependencies the current environment lacks (install "
            f"them, or build the baseline elsewhere and pass it with --baseline PATH)"
        )
    return message


# What is kept of a failed baseline's output (its last line is the message; --debug shows
# the rest): a run that printed gigabytes must not be read whole.
MAX_LOG_BYTES = 1 << 20


def _log_tail(path: Path) -> str:
    with open(path, "rb") as log:
        size = log.seek(0, os.SEEK_END)
        log.seek(max(0, size - MAX_LOG_BYTES))
        return log.read().decode("utf-8", errors="replace")


def _wait(process: subprocess.Popen[bytes]) -> int:
    """Wait in short polls: Ctrl-C delivered to another thread (torch starts worker threads)
    does not interrupt a blocking waitpid in the main thread until the subprocess ends."""
    while True:
        try:
            return process.wait(timeout=WAIT_POLL_S)
        except subprocess.TimeoutExpired:
            continue


def ref_advice(ref: str) -> str:
    """What to do with a baseline file that REF's routectl wrote in a format too old."""
    return (
        f"{ref}'s routectl writes an old format; compare against a newer "
        f"ref, or build its snapshots with this routectl and pass them with "
        f"--baseline DIR"
    )


@dataclass
class RefBaseline:
    """One baseline being built at a git ref. `start` adds the worktree and starts the
    subprocess; `wait` returns the folder of snapshot files; `close` removes everything."""

    ref: str
    commit: str
    repository: Path
    project_path: Path  # the project root, relative to the repository root
    temp_dir: Path
    environ: Mapping[str, str]
    strip_prefixes: tuple[str, ...]
    python: str
    debug: bool = False  # the baseline run prints its traceback too
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _worktree_added: bool = field(default=False, repr=False)

    @property
    def worktree(self) -> Path:
        # Named after the unique temp folder, so git's worktree entry is unique too.
        return self.temp_dir / self.temp_dir.name

    @property
    def output_dir(self) -> Path:
        return self.temp_dir / "snapshots"

    @property
    def log_path(self) -> Path:
        return self.temp_dir / "baseline.log"

    def start(self) -> None:
        # Set before the call: an interrupt inside `worktree add` may leave a half-made one.
        self._worktree_added = True
        add_worktree(self.repository, self.worktree, self.commit, self.environ, what=self.ref)
        engine = None if (self.worktree / "routectl" / "__init__.py").is_file() else ENGINE_PATH
        env = baseline_environ(
            self.environ,
            strip_prefixes=self.strip_prefixes,
            worktree=self.worktree,
            engine_path=engine,
        )
        # Output goes to a file, not a pipe: the candidate replays meanwhile and nobody
        # would drain a pipe. A process group of its own, so that `close` ends the baseline
        # and every process it started (its workers) in one kill, whatever routectl version
        # it is; a Ctrl-C or SIGTERM sent to this run's group reaches this process, whose
        # cleanup does that (and an ignored one leaves the baseline undisturbed too).
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [self.python, *(DEBUG_ARGS if self.debug else SNAPSHOT_ARGS), str(self.output_dir)],
                cwd=self.worktree / self.project_path,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                process_group=0,
            )

    def wait(self) -> Path:
        """Wait for the subprocess; the folder of its snapshot files, or BaselineFailed."""
        if self.process is None:
            raise RuntimeError("the baseline was not started")
        code = _wait(self.process)
        with interrupt.signals_ignored():
            self._remove_worktree()
        if code != 0:
            output = _log_tail(self.log_path)
            raise BaselineFailed(_failure_message(self.ref, self.commit, code, output), output)
        return self.output_dir

    def source(self, *, schema: LoadedSchema | None = None) -> SnapshotFiles:
        return SnapshotFiles.baseline_folder(
            self.wait(), advice=ref_advice(self.ref), schema=schema
        )

    def _remove_worktree(self) -> None:
        if not self._worktree_added:
            return
        remove_worktree(self.repository, self.worktree, self.environ)
        self._worktree_added = False

    def close(self) -> None:
        """Stop the subprocess, remove the worktree and every temporary file. Never raises
        for a cleanup failure: the outcome (or the original error) matters more."""
        with interrupt.signals_ignored():
            try:
                if self.process is not None and self.process.returncode is None:
                    # Its whole group: the baseline's own forked workers too. Not yet reaped,
                    # its pid (the group's id) cannot have been reused.
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait()
                self._remove_worktree()
            except (OSError, subprocess.SubprocessError, InputError):
                pass
            finally:
                shutil.rmtree(self.temp_dir, ignore_errors=True)


def _temp_parent(environ: Mapping[str, str], temp_parent: Path | None) -> str | None:
    if temp_parent is not None:
        return str(temp_parent)
    return environ.get("TMPDIR") or None


@contextmanager
def baseline_at_ref(
    project_root: Path,
    ref: str,
    *,
    environ: Mapping[str, str],
    strip_prefixes: Sequence[str] = (),
    temp_parent: Path | None = None,
    python: str | None = None,
    debug: bool = False,
) -> Iterator[RefBaseline]:
    """Check the ref (repository, commit, project), add its worktree and start the baseline
    subprocess; yields the running RefBaseline and removes everything on exit.

    `environ` is the caller's environment (git and the subprocess get it, less git's location
    variables and the `strip_prefixes` variables respectively); temporary files go under
    `temp_parent`, else the mapping's TMPDIR, else the system default.
    """
    root = project_root.resolve()
    repository, project_path, commit = locate_ref(root, ref, environ)
    check_project_at(repository, commit, ref, project_path, environ)
    try:
        temp_dir = Path(
            tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=_temp_parent(environ, temp_parent))
        )
    except OSError as exc:
        raise InputError(
            f"cannot create a temporary folder for the baseline: {exc.strerror or exc}"
        ) from None
    build: RefBaseline | None = None
    try:
        build = RefBaseline(
            ref=ref,
            commit=commit,
            repository=repository,
            project_path=project_path,
            temp_dir=temp_dir,
            environ=environ,
            strip_prefixes=tuple(strip_prefixes),
            python=python or sys.executable,
            debug=debug,
        )
        build.start()
        checkpoints.reach("baseline")
        yield build
    finally:
        if build is not None:
            build.close()
        else:
            shutil.rmtree(temp_dir, ignore_errors=True)
