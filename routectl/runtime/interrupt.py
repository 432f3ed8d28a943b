"""Ctrl-C for the command-line program: one `error: interrupted` line and exit 130, from the
first import to the interpreter's exit.

Three phases. Start-up (the imports before the CLI runs) and shutdown (after the command
returned) have nothing to clean up: SIGINT writes the line and ends the process at once.
While a command runs, SIGINT raises KeyboardInterrupt as usual, so that `finally` blocks
(the baseline worktree, temporary files, workers) clean up; `routectl.cli.run` turns it into
the same line and exit code. A SIGINT that was ignored when the process started (a
background job, `nohup`) stays ignored throughout, in forked workers too. Inside
`deferred_interrupt()` (importing torch) a Ctrl-C of the command phase is acted on when the
block ends: torch calls back into Python from C++ there, and a KeyboardInterrupt raised in
such a callback aborts the process (pybind11 terminates) instead of unwinding it.

A library user's process is never touched: only the CLI's entry points call these.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

EXIT_INTERRUPTED = 130
MESSAGE = b"error: interrupted\n"
# Whether the CLI's command phase is on (`raise_on_interrupt`): only then may
# `deferred_interrupt` swap the handler; a library user's process is never touched.
_command_phase = False


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
    global _command_phase
    _command_phase = False
    if not _ignored():
        signal.signal(signal.SIGINT, _exit_now)


def raise_on_interrupt() -> None:
    """From now on SIGINT raises KeyboardInterrupt (kept ignored when it was ignored): the
    command's cleanup runs."""
    global _command_phase
    _command_phase = True
    if not _ignored():
        signal.signal(signal.SIGINT, signal.default_int_handler)


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Run the block with a command-phase Ctrl-C held back: KeyboardInterrupt is raised
    once the block has ended (not inside a C++ callback, where it would abort the process).
    Anywhere else (a library user's process, start-up, another thread, SIGINT ignored or
    handled by someone else) the block runs with nothing changed."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        or not _command_phase
    ):
        yield
        return
    pressed: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pressed:
        raise KeyboardInterrupt


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
