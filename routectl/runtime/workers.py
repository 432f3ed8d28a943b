"""Independent work items (row replays) shared between this process and forked workers.

Every item is computed exactly once, by whichever process takes it from a shared queue: a
pipe holding chunk numbers, written in full before any worker starts, so a read that finds
it empty means the work is all taken. Workers inherit the caller's state through fork
(project, categories, imported torch); each sends back its results, pickled, when the queue
is empty and then exits. The caller's process takes items too, after running `meanwhile`
(work of its own, such as reading the baseline), so the processes stay busy until the end.

Results are returned in item order, whoever computed them: the output does not depend on
the number of processes. Off Linux, or with threads running (where forking is unsafe),
everything runs here, in order.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from routectl.runtime import checkpoints, interrupt

T = TypeVar("T")
M = TypeVar("M")

CHUNK = struct.Struct("<I")
# Chunk numbers written into the queue pipe before any process reads it must fit in the
# smallest pipe buffer among supported systems (16 KiB on macOS), or the write blocks.
MAX_CHUNKS = 2048


class WorkerFailed(RuntimeError):
    """A worker process died or sent back something that is not a result."""


def available_cpus() -> int:
    """CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def usable_jobs(jobs: int, items: int) -> int:
    """How many processes `jobs` can be here: 1 off Linux (macOS system libraries are not
    safe in a forked child that does not exec; Windows has no fork), with other threads
    running (a forked child would inherit their locks, held), or with fewer than two items
    per process."""
    if jobs <= 1 or not can_fork():
        return 1
    return max(1, min(jobs, items // 2))


def can_fork() -> bool:
    """Whether a forked child that does not exec is safe here: on Linux, with no other
    thread running."""
    return sys.platform.startswith("linux") and threading.active_count() == 1


def _chunks(count: int) -> list[range]:
    size = -(-count // MAX_CHUNKS)
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def _taken(queue: int, chunks: list[range]) -> Iterator[int]:
    """Item numbers of the chunks this process takes from the queue, until it is empty.
    Every read asks for one record; a pipe read never splits a record written whole."""
    while record := os.read(queue, CHUNK.size):
        yield from chunks[CHUNK.unpack(record)[0]]


def _worker(queue: int, chunks: list[range], work: Callable[[int], T], out: int) -> None:
    """A forked worker's whole life: results or the failure, pickled to `out`; never
    returns."""
    _answer(lambda: [(i, work(i)) for i in _taken(queue, chunks)], out)


def _answer(results: Callable[[], list[tuple[int, Any]]], out: int) -> None:
    """`results()` or the failure, pickled to `out`, then exit (os._exit skips the parent's
    atexit handlers and unflushed buffers)."""
    status = 0
    try:
        payload = pickle.dumps(("ok", results()), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
        status = 1
        text = traceback.format_exc()
        try:
            payload = pickle.dumps(("error", exc, text), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an exception that does not pickle: its text
            payload = pickle.dumps(("error", None, text), protocol=pickle.HIGHEST_PROTOCOL)
    try:
        with os.fdopen(out, "wb") as stream:
            stream.write(payload)
    finally:
        os._exit(status)


def _fork(
    child: Callable[[int], None], others: Iterable[int] = (), *, point: str | None = None
) -> tuple[int, int]:
    """Fork a process that closes the `others` streams it inherited, reaches checkpoint
    `point` (if any) and runs `child(out)` (which writes to `out` and never returns); its
    pid and the stream it writes to."""
    reader, writer = os.pipe()
    # Ctrl-C, SIGTERM and SIGHUP are held back across fork until the child is recorded
    # (parent) or back to the default action (child): a KeyboardInterrupt must never unwind
    # a child through the caller's code. An ignored signal (a background job, nohup) stays
    # ignored in the child, as in the parent.
    dispositions = interrupt.child_dispositions()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(dispositions))
    try:
        pid = os.fork()
        if pid == 0:
            try:
                for signum, disposition in dispositions.items():
                    signal.signal(signum, disposition)
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                os.close(reader)
                for other in others:
                    os.close(other)
                if point is not None:
                    checkpoints.reach(point)
                child(writer)
            finally:
                os._exit(1)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    os.close(writer)
    return pid, reader


def _send(work: Callable[[], T], out: int) -> None:
    """A background child's whole life: `work()`'s result (as item 0) or its failure,
    pickled to `out` in the shape `_collect` reads; never returns."""
    _answer(lambda: [(0, work())], out)


class Background(Generic[T]):
    """`work()` computed in a forked process while this one goes on (`in_background`);
    `result()` waits for it. Where no process can be forked (`can_fork`), `work()` has run
    here already, when it was started: either way it ran from the state of that moment.
    An exception `work` raised in the child is raised by `result()`; a child that ends
    without an answer has `result()` compute it here. `cancel()` stops the child, if any."""

    def __init__(self, work: Callable[[], T]) -> None:
        self._work = work
        self._child: tuple[int, int] | None = None
        if can_fork():
            self._child = _fork(lambda out: _send(work, out))
        else:
            self._value = work()

    def result(self) -> T:
        # Taken first: `_collect` stops and reaps the child however the wait ends.
        child, self._child = self._child, None
        if child is None:
            return self._value
        try:
            [(_, value)] = _collect(*child)
        except WorkerFailed:
            self._value = self._work()
            return self._value
        self._value = value
        return self._value

    def cancel(self) -> None:
        child, self._child = self._child, None
        if child is not None:
            _stop(*child)


def in_background(work: Callable[[], T]) -> Background[T]:
    """Start `work()` in a forked process (see `Background`)."""
    return Background(work)


def _collect(pid: int, stream: int) -> list[tuple[int, Any]]:
    """A worker's results once it has sent them all and exited. However this ends (a Ctrl-C
    while it waits included) the stream is closed and the worker reaped, killed if need be,
    so that the caller has nothing of it left to stop."""
    try:
        with os.fdopen(stream, "rb", closefd=False) as reader:
            payload = reader.read()
    except BaseException:
        _stop(pid, stream)
        raise
    os.close(stream)
    try:
        _, status = os.waitpid(pid, 0)
    except BaseException:  # the child has sent everything: it is ending, or about to
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
        raise
    if not payload:
        how = (
            f"signal {os.WTERMSIG(status)}"
            if os.WIFSIGNALED(status)
            else f"exit status {os.waitstatus_to_exitcode(status)}"
        )
        raise WorkerFailed(f"worker process {pid} ended with {how} and sent no results")
    message = pickle.loads(payload)
    if message[0] == "ok":
        return message[1]
    _, exc, text = message
    if exc is None:
        raise WorkerFailed(f"worker process {pid} failed:\n{text}")
    exc.add_note(f"raised in worker process {pid}:\n{text}")
    raise exc


def _stop(pid: int, stream: int) -> None:
    """Kill and reap a worker and close its stream, whatever of that already happened."""
    with contextlib.suppress(OSError):
        os.close(stream)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.waitpid(pid, 0)


def run_shared(
    count: int, work: Callable[[int], T], jobs: int, meanwhile: Callable[[], M]
) -> tuple[list[T], M]:
    """`[work(0), ..., work(count - 1)]` computed by up to `jobs` processes, and what
    `meanwhile()` returned (it runs here once workers have started). An exception from
    either, here or in a worker, is raised here after every worker is stopped."""
    jobs = usable_jobs(jobs, count)
    if jobs == 1:
        extra = meanwhile()
        return [work(i) for i in range(count)], extra
    chunks = _chunks(count)
    queue, feed = os.pipe()
    os.write(feed, b"".join(CHUNK.pack(n) for n in range(len(chunks))))
    os.close(feed)  # an empty queue now reads as end of file
    workers: dict[int, int] = {}
    try:
        for _ in range(jobs - 1):
            pid, reader = _fork(
                lambda out: _worker(queue, chunks, work, out), workers.values(), point="worker"
            )
            workers[pid] = reader
        extra = meanwhile()
        results: list[Any] = [None] * count
        for i in _taken(queue, chunks):
            results[i] = work(i)
        for pid in list(workers):
            # Off the list first: `_collect` closes and reaps it however it ends.
            for i, value in _collect(pid, workers.pop(pid)):
                results[i] = value
        return results, extra
    finally:
        os.close(queue)
        for pid, stream in workers.items():  # left only when something failed
            _stop(pid, stream)
