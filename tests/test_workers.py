"""Work shared with forked worker processes: every item once, results in item order, the
caller's `meanwhile` run once, failures raised here and no worker left behind."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from routectl.errors import InputError
from routectl.runtime.workers import WorkerFailed, in_background, run_shared, usable_jobs

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="worker processes are forked on Linux only"
)


def no_children_left() -> bool:
    try:
        os.waitpid(-1, os.WNOHANG)  # a child left running or unreaped
    except ChildProcessError:
        return True
    return False


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_results_are_in_item_order_whoever_computed_them(jobs):
    calls: list[str] = []
    results, extra = run_shared(
        200, lambda i: (i * i, os.getpid()), jobs, lambda: calls.append("meanwhile") or "read"
    )
    assert [value for value, _ in results] == [i * i for i in range(200)]
    assert extra == "read" and calls == ["meanwhile"]
    assert no_children_left()


def test_workers_take_items_while_the_caller_runs_meanwhile():
    results, _ = run_shared(50, lambda i: os.getpid(), 2, lambda: time.sleep(0.5))
    assert set(results) - {os.getpid()}, "the worker took no item while the caller waited"
    assert len(results) == 50


def test_an_exception_in_a_worker_is_raised_here_with_its_type():
    parent = os.getpid()

    def work(i: int) -> int:
        if os.getpid() != parent:
            raise InputError(f"bad item {i}")
        time.sleep(0.01)  # leave items for the worker
        return i

    with pytest.raises(InputError, match="bad item") as caught:
        run_shared(40, work, 2, lambda: time.sleep(0.2))
    assert any("raised in worker process" in note for note in caught.value.__notes__)
    assert no_children_left()


def test_a_worker_that_dies_is_reported():
    parent = os.getpid()

    def work(i: int) -> int:
        if os.getpid() != parent:
            os._exit(7)
        return i

    with pytest.raises(WorkerFailed, match="exit status 7"):
        run_shared(40, work, 2, lambda: time.sleep(0.2))
    assert no_children_left()


def test_a_failing_meanwhile_stops_the_workers(tmp_path):
    done = tmp_path / "done"

    def work(i: int) -> None:
        with done.open("a") as out:  # appends from every process land in the one file
            out.write("x")
        time.sleep(0.01)

    def meanwhile() -> None:
        raise InputError("malformed baseline")

    with pytest.raises(InputError, match="malformed baseline"):
        run_shared(10_000, work, 2, meanwhile)
    # Killed, not waited for: most of the 10,000 items never ran.
    assert len(done.read_text() if done.exists() else "") < 5_000
    assert no_children_left()


def test_fork_is_not_used_with_threads_running_or_for_tiny_work():
    assert usable_jobs(4, 100) == 4
    assert usable_jobs(4, 3) == 1
    assert usable_jobs(1, 100) == 1
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert usable_jobs(4, 100) == 1
        results, _ = run_shared(10, lambda i: os.getpid(), 4, lambda: None)
        assert set(results) == {os.getpid()}
    finally:
        stop.set()
        thread.join()


def test_ctrl_c_here_stops_the_workers():
    parent = os.getpid()

    def work(i: int) -> int:
        if os.getpid() == parent and i >= 5:
            os.kill(parent, signal.SIGINT)  # Ctrl-C lands while this process replays
            time.sleep(1)
        time.sleep(0.005)
        return i

    # Python's own Ctrl-C handler, whatever the test run inherited (a suite started as a
    # background job ignores SIGINT).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_shared(2_000, work, 2, lambda: None)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert no_children_left()


def test_the_cli_default_is_one_process_per_cpu_at_most_eight():
    from routectl.cli import MAX_AUTO_JOBS, job_count
    from routectl.runtime.workers import available_cpus

    assert job_count(0) == min(available_cpus(), MAX_AUTO_JOBS) >= 1
    assert job_count(3) == 3 and job_count(1) == 1


def test_background_work_runs_in_another_process_and_answers_here():
    pending = in_background(lambda: (os.getpid(), "answer"))
    pid, answer = pending.result()
    assert pid != os.getpid() and answer == "answer"
    assert no_children_left()


def test_an_exception_in_background_work_is_raised_here_with_its_type():
    pending = in_background(lambda: (_ for _ in ()).throw(InputError("bad tree")))
    with pytest.raises(InputError, match="bad tree") as caught:
        pending.result()
    assert any("raised in worker process" in note for note in caught.value.__notes__)
    assert no_children_left()


def test_background_work_that_dies_is_computed_here():
    parent = os.getpid()

    def work() -> int:
        if os.getpid() != parent:
            os._exit(3)
        return os.getpid()

    assert in_background(work).result() == parent
    assert no_children_left()


def test_cancelled_background_work_leaves_no_process():
    pending = in_background(lambda: time.sleep(30))
    pending.cancel()
    # The child sleeps for 30 s: none left right after cancel() means it was ended, not awaited.
    assert no_children_left()


def test_ctrl_c_while_waiting_for_background_work_leaves_no_process():
    parent = os.getpid()

    def work() -> None:
        time.sleep(0.5)  # the caller is waiting by now
        os.kill(parent, signal.SIGINT)  # Ctrl-C lands while the caller waits for the answer
        time.sleep(30)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        pending = in_background(work)
        with pytest.raises(KeyboardInterrupt):
            pending.result()
    finally:
        signal.signal(signal.SIGINT, previous)
    # The child sleeps for 30 s: none left means the interrupted wait ended it.
    assert no_children_left()


def test_background_work_runs_here_with_threads_running():
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert in_background(os.getpid).result() == os.getpid()
    finally:
        stop.set()
        thread.join()
