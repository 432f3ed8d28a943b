"""Ctrl-C for the command-line program: one `error: interrupted` line and exit 130, from the
first import to the interpreter's exit.

Three phases. Start-up (the imports before the CLI runs) and shutdown (after the command
returned) have nothing to clean up: SIGINT writes the line and ends the process at once.
While a command runs, SIGINT raises KeyboardInterrupt as usual, so that `finally` blocks
(the baseline worktree, temporary files, workers) clean up; `routectl.cli.run` turns it into
the same line and exit code. A SIGINT that was ignored when the process started (a
background job, `nohup`) stays ignored throughout, in forked workers too.

A library user's process is never touched: only the CLI's entry points call these.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

EXIT_INTERRUPTED = 130
MESSAGE = b"error: interrupted\n"


def _exit_now(signum: int, frame: FrameType | None) -> None:
    try:
        os.write(2, MESSAGE)
    finally:
        os._exit(EXIT_INTERRUPTED)


def _ignored() -> bool:
    return signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def exit_on_interrupt() -> None:
    """From now on SIGINT ends the process with one line and exit 130 (kept ignored when
    it was ignored). Start-up and shutdown."""
    if not _ignored():
        signal.signal(signal.SIGINT, _exit_now)


def raise_on_interrupt() -> None:
    """From now on SIGINT raises KeyboardInterrupt (kept ignored when it was ignored): the
    command's cleanup runs."""
    if not _ignored():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def is_cli_start(argv: list[str]) -> bool:
    """Whether this process is starting the routectl program: `python -m routectl` (argv[0]
    is "-m" while the package is imported) or the `routectl` script."""
    return bool(argv) and (argv[0] == "-m" or os.path.basename(argv[0]) == "routectl")


def early_start() -> None:
    """Called by `routectl/__init__.py` when the program starts (`is_cli_start`), before any
    other import; stops at the `startup` checkpoint when a test asks for it."""
    exit_on_interrupt()
    from routectl.runtime import checkpoints

    directory = checkpoints.directory_from_environ(os.environ)
    if directory is not None:
        checkpoints.wait_at(directory, "startup")


def flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
