"""Atomic writes and their temporary files, as `routectl.review.snapshot` states them.

Every file routectl writes goes to `.<target name>.routectl-<pid>-<random>.tmp` beside its
target, then replaces it (`os.replace`): a reader sees the old file or the new one. The temp
file is removed on any failure; stale ones whose process is gone are removed before a write,
a live process's never. A failing file system is an InputError naming the file. Pinned here
in process with real files in a temporary folder (tests/test_interrupts.py kills real
processes; these pin each rule's both sides): the temp name's exact shape, the pid rule
(dead, alive, beyond any pid), a name the pattern does not own, a folder of that name, the
callback's view of the complete temp file, the InputError's text with and without an OS
error text, parents made, bytes and text, a symbolic link kept a link.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from routectl.errors import InputError
from routectl.review.snapshot import (
    TEMP_GLOB,
    TEMP_NAME,
    dump_json,
    remove_stale_temp_files,
    temp_path,
    write_json,
    write_text,
    write_text_atomic,
)
from tests.fixtures.limits import at_the_open_files_limit


def dead_pid() -> int:
    """The pid of a child that has exited and been reaped: no process has it now (the
    kernel does not hand a pid out again at once)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_temp_name_is_hidden_beside_its_target_with_pid_and_random() -> None:
    target = Path("/some/folder/toy-a.json")
    first, second = temp_path(target), temp_path(target)
    assert first.parent == target.parent
    assert re.fullmatch(rf"\.toy-a\.json\.routectl-{os.getpid()}-[0-9a-f]{{12}}\.tmp", first.name)
    assert first != second  # two writers of one process never share a temp file
    match = TEMP_NAME.match(first.name)
    assert match is not None and int(match["pid"]) == os.getpid()
    assert Path(target.parent).joinpath(first.name).match(TEMP_GLOB)


def make(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text("partial")
    return path


def test_only_stale_temp_files_are_removed(tmp_path: Path) -> None:
    gone = dead_pid()
    # A live process of another program: a concurrent run's file is never touched.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        check_stale_removal(tmp_path, gone, other.pid)
    finally:
        other.kill()
        other.wait()


def check_stale_removal(tmp_path: Path, gone: int, other: int) -> None:
    stale = [
        make(tmp_path, f".toy-a.json.routectl-{gone}-0a1b2c.tmp"),
        make(tmp_path, f".b.routectl-{gone}-ff.tmp"),
    ]
    kept = [
        make(tmp_path, f".toy-a.json.routectl-{os.getpid()}-0a1b2c.tmp"),  # this live process
        make(tmp_path, f".toy-a.json.routectl-{other}-0a1b2c.tmp"),  # another live process
        make(tmp_path, f".toy-a.json.routectl-{2**70}-0a1b.tmp"),  # no process can have it
        make(tmp_path, f".toy-a.json.routectl-{gone}-0A1B.tmp"),  # upper-case: not ours
        make(tmp_path, f".toy-a.json.routectl-x{gone}-0a.tmp"),  # no pid
        make(tmp_path, f"toy-a.json.routectl-{gone}-0a.tmp"),  # not hidden
        make(tmp_path, f"..routectl-{gone}-0a.tmp"),  # no target name
        make(tmp_path, "toy-a.json"),
    ]
    folder = tmp_path / f".c.routectl-{gone}-0a.tmp"
    folder.mkdir()  # the pattern's name, but a folder: left alone
    removed = remove_stale_temp_files(tmp_path)
    assert removed == sorted(stale)
    assert sorted(p for p in tmp_path.iterdir()) == sorted([*kept, folder])
    assert remove_stale_temp_files(tmp_path) == []


def test_telling_a_live_process_signals_nothing(tmp_path: Path) -> None:
    # Liveness is asked with signal 0: the process whose temp file is probed (here this
    # one) must receive no signal. Handlers installed here, so the outcome does not hang on
    # the dispositions this test process inherited.
    received: list[int] = []
    probed = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
    saved = {s: signal.signal(s, lambda signum, _frame: received.append(signum)) for s in probed}
    try:
        own = make(tmp_path, f".toy-a.json.routectl-{os.getpid()}-0a1b2c.tmp")
        assert remove_stale_temp_files(tmp_path) == []
        time.sleep(0.05)  # a signal sent to this process would have run its handler by now
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
    assert received == [] and own.exists()


def test_a_missing_folder_has_nothing_to_remove(tmp_path: Path) -> None:
    assert remove_stale_temp_files(tmp_path / "absent") == []


def test_write_replaces_the_target_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "er" / "toy-a.json"  # parents are made
    write_text_atomic(target, "first é\n")
    assert target.read_bytes() == "first é\n".encode()
    write_text_atomic(target, b"\x00second")
    assert target.read_bytes() == b"\x00second"
    assert [p.name for p in target.parent.iterdir()] == ["toy-a.json"]


def test_a_write_removes_stale_temp_files_of_its_folder_first(tmp_path: Path) -> None:
    stale = make(tmp_path, f".other.json.routectl-{dead_pid()}-ab.tmp")
    live = make(tmp_path, f".other.json.routectl-{os.getpid()}-ab.tmp")
    write_text_atomic(tmp_path / "toy-a.json", "x")
    assert not stale.exists() and live.exists()


def test_the_callback_sees_the_complete_temp_file_before_the_target_changes(
    tmp_path: Path,
) -> None:
    target = tmp_path / "toy-a.json"
    target.write_text("old")
    seen: list[tuple[str, str, str]] = []

    def before(temp: Path) -> None:
        seen.append((temp.name, temp.read_text(), target.read_text()))

    write_text_atomic(target, "new text", before_replace=before)
    assert len(seen) == 1
    name, temp_text, target_text = seen[0]
    assert TEMP_NAME.match(name) and name.startswith(".toy-a.json.routectl-")
    assert (temp_text, target_text) == ("new text", "old")
    assert target.read_text() == "new text"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy-a.json"]


class Stop(BaseException):
    """Not an Exception: an interruption (as KeyboardInterrupt is) still removes the temp."""


@pytest.mark.parametrize("error", [Stop(), RuntimeError("bug")])
def test_any_failure_before_the_rename_keeps_the_old_file_and_removes_the_temp(
    tmp_path: Path, error: BaseException
) -> None:
    target = tmp_path / "toy-a.json"
    target.write_text("old")

    def fail(_temp: Path) -> None:
        raise error

    with pytest.raises(type(error)):
        write_text(target, "new", before_replace=fail)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["toy-a.json"]


def test_a_file_system_error_is_an_input_error_naming_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    target = blocker / "toy-a.json"  # its folder is a file: mkdir fails
    with pytest.raises(InputError) as caught:
        write_text(target, "x")
    assert str(caught.value) == f"cannot write {target}: {os.strerror(17)}"

    def fail(_temp: Path) -> None:
        raise OSError("no strerror here")

    other = tmp_path / "toy-b.json"
    with pytest.raises(InputError) as caught:
        write_text(other, "x", before_replace=fail)
    assert str(caught.value) == f"cannot write {other}: no strerror here"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
    with pytest.raises(InputError) as caught:
        write_json(target, {"a": 1})
    assert str(caught.value).startswith(f"cannot write {target}: ")


def test_a_symbolic_link_stays_a_link_to_the_new_file(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_text_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


@pytest.mark.parametrize("plain", [False, True])
def test_write_json_writes_the_canonical_text(tmp_path: Path, plain: bool) -> None:
    data = {"rows": [{"id": "edge:x", "v": 1.5}], "basis": "b"}
    target = tmp_path / "out.json"
    seen: list[str] = []
    write_json(target, data, plain=plain, before_replace=lambda t: seen.append(t.read_text()))
    assert (
        target.read_text() == dump_json(data) == json.dumps(data, indent=2, sort_keys=True) + "\n"
    )
    assert seen == [dump_json(data)]


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        ("a" * 195 + ".json", "a" * 195 + ".json"),  # 200 bytes: whole
        ("a" * 196 + ".json", "a" * 196 + ".jso"),  # 201 bytes: cut to 200
        ("b" * 250 + ".json", "b" * 200),  # 255 bytes, the longest valid name
        ("é" * 127, "é" * 100),  # 254 bytes, cut between two characters
        ("a" + "é" * 127, "a" + "é" * 99 + os.fsdecode(b"\xc3")),  # cut inside one
    ],
    ids=["200-bytes", "201-bytes", "255-bytes", "cut-between", "cut-inside"],
)
def test_a_target_named_near_the_limit_gets_a_temp_name_that_fits(
    tmp_path: Path, name: str, kept: str
) -> None:
    target = tmp_path / name
    temp = temp_path(target)
    assert temp.name.startswith(f".{kept}.routectl-{os.getpid()}-")
    assert len(os.fsencode(temp.name)) <= 255
    assert TEMP_NAME.match(temp.name) and temp.match(TEMP_GLOB)
    write_text(target, "new")  # a valid name is written, whatever its length
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_a_create_that_fails_before_the_temp_exists_keeps_its_own_error(tmp_path: Path) -> None:
    # At the open-files limit the temp file is never created: the cleanup must not replace the
    # error by one about the missing temp file. A child process, so the limit is its own.
    imports = (
        "from routectl.errors import InputError\nfrom routectl.review.snapshot import write_text\n"
    )
    body = "try:\n    write_text(target, 'new')\nexcept InputError as exc:\n    print(exc)\n"
    target = tmp_path / "toy-a.json"
    assert (
        at_the_open_files_limit(imports, body, target)
        == f"cannot write {target}: {os.strerror(24)}\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_write_json_refuses_what_json_cannot_hold_unless_told_it_is_plain(tmp_path: Path) -> None:
    # `plain` is the caller's promise; without it the document is checked (NaN is refused, not
    # written as null).
    target = tmp_path / "out.json"
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        write_json(target, {"v": float("nan")})
    assert not target.exists()
    write_json(target, {"v": 1e-05, "w": (1, 2)})
    assert target.read_text() == '{\n  "v": 1e-05,\n  "w": [\n    1,\n    2\n  ]\n}\n'
