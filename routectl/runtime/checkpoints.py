"""Named checkpoints a test can stop a run at, to deliver a signal at a known moment.

Off unless the CLI entry point finds ROUTECTL_TEST_CHECKPOINTS=DIR in its environment (a
test-only variable: no user needs it). Then, on reaching a checkpoint, the process creates
`DIR/<name>` (holding its pid) and waits until that file is removed (at most
MAX_WAIT_S): the test sees the file, sends its signal (or not) and removes the file to let
the run go on. So interruption tests are timed by what the program reached, never by sleeps.

Checkpoints: `startup` (`python -m routectl`, before the CLI's imports), `replay` (workers
forked, the main process about to replay), `worker` (a forked worker, its signal dispositions
set, before it takes work), `baseline` (the baseline worktree added and its subprocess
started), `write` (a temporary file complete, before it replaces its target), `shutdown` (the
command finished, before the interpreter exits). The baseline subprocess of `diff` does not
inherit the variable: only the process a test started stops.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path

VARIABLE = "ROUTECTL_TEST_CHECKPOINTS"
POINTS = ("startup", "replay", "worker", "baseline", "write", "shutdown")
MAX_WAIT_S = 120.0
POLL_S = 0.01

_DIRECTORY: ContextVar[Path | None] = ContextVar("routectl_checkpoints", default=None)


def directory_from_environ(environ: Mapping[str, str]) -> Path | None:
    value = environ.get(VARIABLE)
    return Path(value) if value else None


@contextlib.contextmanager
def enabled(directory: Path | None) -> Iterator[None]:
    """Checkpoints inside the block stop in `directory` (None: they do nothing)."""
    token = _DIRECTORY.set(directory)
    try:
        yield
    finally:
        _DIRECTORY.reset(token)


def wait_at(directory: Path, point: str) -> None:
    flag = directory / point
    flag.write_text(f"{os.getpid()}\n")
    deadline = time.monotonic() + MAX_WAIT_S
    while flag.exists() and time.monotonic() < deadline:
        time.sleep(POLL_S)


def reach(point: str) -> None:
    """Stop at checkpoint `point` when checkpoints are enabled; otherwise nothing."""
    if point not in POINTS:
        raise ValueError(f"unknown checkpoint {point!r}")
    directory = _DIRECTORY.get()
    if directory is not None:
        wait_at(directory, point)
