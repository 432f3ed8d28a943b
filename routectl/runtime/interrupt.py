"""The command-line program's signal policy: Ctrl-C (SIGINT), SIGTERM (a CI runner cancelling
a job) and SIGHUP (the terminal gone) end a run alike, with one line and exit 128 + the
signal's number (130 for SIGINT, with `error: interrupted`), from the first import to the
interpreter's exit.

Three phases. Start-up (the imports before the CLI runs) and shutdown (after the command
returned) have nothing to clean up: the signal writes the line and ends the process at once.
While a command runs, SIGINT raises KeyboardInterrupt as usual and SIGTERM or SIGHUP raise
`Signalled` (a KeyboardInterrupt carrying the signal's number), so that the same `finally`
blocks (the baseline worktree and process, temporary files, workers) clean up;
`routectl.cli.run` turns either into the line and the exit code. A signal that was ignored
when the process started (a background job, `nohup`, a runner that ignores SIGINT) stays
ignored throughout, in forked workers and in every child process too (`child_signals`).
Inside `deferred_interrupt()` (importing torch) a signal of the command phase is acted on
when the block ends: torch calls back into Python from C++ there, and a KeyboardInterrupt
raised in such a callback aborts the process (pybind11 terminates) instead of unwinding it.

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
from typing import Any

# The signals of the policy, in the order a held-back one is reported.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_INTERRUPTED = 128 + signal.SIGINT
MESSAGE = b"error: interrupted\n"
# Whether the CLI's command phase is on (`raise_on_interrupt`): only then may
# `deferred_interrupt` swap the handlers; a library user's process is never touched.
_command_phase = False


class Signalled(KeyboardInterrupt):
    """SIGTERM or SIGHUP in the command phase, raised where Ctrl-C's KeyboardInterrupt would
    be so that exactly the same cleanup runs; `signum` decides the line and exit code."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def signal_of(exc: BaseException | None) -> int:
    """The signal a KeyboardInterrupt stands for (SIGINT unless it is a `Signalled`)."""
    return exc.signum if isinstance(exc, Signalled) else signal.SIGINT


def exit_code(signum: int) -> int:
    """128 + the signal's number, as a shell reports a process the signal ended."""
    return 128 + signum


def message(signum: int) -> str:
    """The one line (without `error: `) a run ended by `signum` prints."""
    if signum == signal.SIGINT:
        return "interrupted"
    return f"terminated by {signal.Signals(signum).name}"


def _exit_now(signum: int, frame: FrameType | None) -> None:
    try:
        os.write(2, f"error: {message(signum)}\n".encode())
    finally:
        os._exit(exit_code(signum))


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Signalled(signum)


def _command_handler(signum: int) -> Any:
    return signal.default_int_handler if signum == signal.SIGINT else _raise


def ignored(signum: int) -> bool:
    return signal.getsignal(signum) is signal.SIG_IGN


def any_ignored() -> bool:
    """Whether one of the policy's signals is ignored in this process (inherited, or held
    ignored for a cleanup)."""
    return any(ignored(s) for s in SIGNALS)


def exit_on_interrupt() -> None:
    """From now on each of the signals ends the process with one line and its exit code
    (kept ignored when it was ignored). Start-up and shutdown."""
    global _command_phase
    _command_phase = False
    for signum in SIGNALS:
        if not ignored(signum):
            signal.signal(signum, _exit_now)


def raise_on_interrupt() -> None:
    """From now on each of the signals raises KeyboardInterrupt (a `Signalled` for SIGTERM
    and SIGHUP; kept ignored when it was ignored): the command's cleanup runs."""
    global _command_phase
    _command_phase = True
    for signum in SIGNALS:
        if not ignored(signum):
            signal.signal(signum, _command_handler(signum))


@contextlib.contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Run the block with the command phase's signals held back: the KeyboardInterrupt (or
    `Signalled`) of the first one is raised once the block has ended (not inside a C++
    callback, where it would abort the process). Anywhere else (a library user's process,
    start-up, another thread) the block runs with nothing changed; a signal ignored or
    handled by someone else is left as it is."""
    if threading.current_thread() is not threading.main_thread() or not _command_phase:
        yield
        return
    held = [s for s in SIGNALS if signal.getsignal(s) is _command_handler(s)]
    pressed: list[int] = []
    for signum in held:
        signal.signal(signum, lambda number, frame: pressed.append(number))
    try:
        yield
    finally:
        for signum in held:
            signal.signal(signum, _command_handler(signum))
    if pressed:
        first = min(pressed, key=SIGNALS.index)
        raise KeyboardInterrupt if first == signal.SIGINT else Signalled(first)


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """Run the block (a cleanup that must finish even when Ctrl-C is pressed again or a
    second SIGTERM comes) with the policy's signals ignored, and every handler back after.
    Only the main thread may change signal handlers: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def child_dispositions() -> dict[int, Any]:
    """What each of the policy's signals is set to in a forked worker: ignored where this
    process ignores it, else the default action (a worker never unwinds a KeyboardInterrupt
    through the caller's code)."""
    return {s: signal.SIG_IGN if ignored(s) else signal.SIG_DFL for s in SIGNALS}


def child_process_group() -> int | None:
    """The `process_group` of a child program that may install handlers of its own for
    these signals (git does, whatever it inherited): 0, a group of its own, while one of them
    is ignored here, so that a Ctrl-C or SIGTERM sent to the whole group leaves it alone as
    it leaves this process alone; None (this group) otherwise. A child in its own group is
    still ended by this process's cleanup when this process is signalled."""
    return 0 if any_ignored() else None


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
