"""Output paths, terminal styling and a library caller's environment, pinned at the level of
their helpers (issue 28's mutation run of `routectl.io.output`, `routectl.io.terminal` and
`routectl.io.environ`).

What is pinned comes from the module docstrings and docs/commands.md: only a regular file or
nothing is replaced (through a new temporary file flushed before the rename: nothing
half-written); a device or a FIFO with a reader is written in place, every byte; a socket, a
folder or a FIFO nobody reads is refused with one line; a symbolic link's file is replaced
and the link kept. Colour: `always`/`never` win, `auto` needs a terminal and NO_COLOR empty
or unset; the width is COLUMNS (ASCII digits, at most six), else the terminal's, else 100,
never under 60. An environment is a mapping of str to str, every other shape one InputError
naming the key. test_output_paths drives the same rules through the CLI; these cases take
each rule's both sides directly, so that no branch of the helpers is left to one caller.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import stat
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from routectl.errors import InputError
from routectl.io.environ import checked_environ
from routectl.io.output import (
    atomic_target,
    kind_of_mode,
    special_kind,
    write_in_place,
    write_new_synced,
)
from routectl.io.terminal import (
    BOLD,
    COLOR_CHOICES,
    DEFAULT_WIDTH,
    INVERSE,
    MAX_COLUMNS_DIGITS,
    MIN_WIDTH,
    Painter,
    text_width,
    use_color,
)

REFUSED_HINT = "(give a regular file, a device, a FIFO, or - for standard output)"


# --- what is at an output path -------------------------------------------------------------


def test_a_regular_file_or_nothing_is_no_special_kind(tmp_path: Path) -> None:
    regular = tmp_path / "report.json"
    regular.write_text("{}")
    assert special_kind(regular) is None
    assert special_kind(tmp_path / "absent.json") is None
    # A path below a regular file (NotADirectoryError) is nothing there either.
    assert special_kind(regular / "below.json") is None
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere.json")
    assert special_kind(dangling) is None
    link = tmp_path / "link.json"
    link.symlink_to(regular)
    assert special_kind(link) is None


def test_each_special_kind_is_named(tmp_path: Path) -> None:
    assert special_kind(tmp_path) == "folder"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert special_kind(fifo) == "FIFO"
    sock = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(sock))
        assert special_kind(sock) == "socket"
    # /dev/null is a character device on every POSIX system (CI included).
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert special_kind(Path("/dev/null")) == "device"
    # A link is followed: a link to a FIFO is a FIFO.
    link = tmp_path / "to-pipe"
    link.symlink_to(fifo)
    assert special_kind(link) == "FIFO"


# Every file type POSIX names, and one Linux cannot make (a Solaris door, 0o150000): the
# mode alone decides, permission bits aside.
@pytest.mark.parametrize(
    ("file_type", "kind"),
    [
        (stat.S_IFREG, None),
        (stat.S_IFCHR, "device"),
        (stat.S_IFBLK, "device"),
        (stat.S_IFIFO, "FIFO"),
        (stat.S_IFDIR, "folder"),
        (stat.S_IFSOCK, "socket"),
        (stat.S_IFLNK, "special file"),
        (0o150000, "special file"),
    ],
)
def test_each_file_type_has_its_kind(file_type: int, kind: str | None) -> None:
    assert kind_of_mode(file_type | 0o644) == kind
    assert kind_of_mode(file_type | 0o7777) == kind


def test_a_path_that_cannot_be_looked_at_is_one_line(tmp_path: Path) -> None:
    # A loop of symbolic links: os.stat fails with ELOOP, which is no "nothing there".
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to(b)
    b.symlink_to(a)
    with pytest.raises(InputError) as info:
        special_kind(a)
    assert str(info.value) == f"cannot write {a}: {os.strerror(errno.ELOOP)}"


def test_the_atomic_target_of_a_link_is_the_file_it_names(tmp_path: Path) -> None:
    target = tmp_path / "real" / "report.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to(target)
    assert atomic_target(link) == Path(os.path.realpath(target))
    chain = tmp_path / "chain.json"
    chain.symlink_to(link)
    assert atomic_target(chain) == Path(os.path.realpath(target))
    # A path that is no link is kept as given (not resolved: a relative path stays so).
    assert atomic_target(target) == target
    relative = Path("some/relative/out.json")
    assert atomic_target(relative) == relative
    # A dangling link names where the new file goes.
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "later.json")
    assert atomic_target(dangling) == Path(os.path.realpath(tmp_path / "later.json"))


# --- the temporary file of an atomic write -------------------------------------------------


def test_the_temporary_file_is_new_and_holds_every_byte(tmp_path: Path) -> None:
    temp = tmp_path / ".out.json.routectl-1-ab.tmp"
    data = bytes(range(256)) * 5000  # more than one buffer's worth
    old = os.umask(0o022)  # set here: the mode below depends on it
    try:
        write_new_synced(temp, data)
    finally:
        os.umask(old)
    assert temp.read_bytes() == data
    # Created as 0o666 less the umask: the mode a plain open() gives a new file.
    assert stat.S_IMODE(temp.stat().st_mode) == 0o644
    assert stat.S_ISREG(temp.stat().st_mode)


def test_the_temporary_file_must_not_exist(tmp_path: Path) -> None:
    temp = tmp_path / "taken.tmp"
    temp.write_bytes(b"someone else's")
    with pytest.raises(FileExistsError):
        write_new_synced(temp, b"mine")
    assert temp.read_bytes() == b"someone else's"
    # Nor may it be a link to another file (O_EXCL does not follow it).
    other = tmp_path / "other"
    other.write_bytes(b"keep")
    link = tmp_path / "link.tmp"
    link.symlink_to(other)
    with pytest.raises(FileExistsError):
        write_new_synced(link, b"mine")
    assert other.read_bytes() == b"keep"


def test_an_empty_temporary_file_is_written(tmp_path: Path) -> None:
    temp = tmp_path / "empty.tmp"
    write_new_synced(temp, b"")
    assert temp.exists() and temp.read_bytes() == b""


# --- writing in place ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["socket", "folder", "special file"])
def test_a_kind_that_cannot_be_written_is_refused_with_the_choices(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "x"
    with pytest.raises(InputError) as info:
        write_in_place(path, b"data", kind)
    assert str(info.value) == f"cannot write {path}: it is a {kind} {REFUSED_HINT}"
    assert not path.exists()


def test_a_fifo_nobody_reads_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as info:
        write_in_place(fifo, b"data", "FIFO")
    assert str(info.value) == f"cannot write {fifo}: no process reads the FIFO"


def test_a_device_or_fifo_that_is_gone_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "gone"
    with pytest.raises(InputError) as info:
        write_in_place(path, b"data", "FIFO")
    assert str(info.value) == f"cannot write {path}: No such file or directory"
    assert not path.exists()


def test_the_null_device_takes_everything() -> None:
    write_in_place(Path("/dev/null"), b"x" * 1_000_000, "device")
    write_in_place(Path("/dev/null"), b"", "device")


@contextlib.contextmanager
def _reader(fifo: Path, got: list[bytes], limit: int | None = None) -> Iterator[None]:
    """Hold `fifo` open for reading in a thread (opened before the write starts), collecting
    what it reads (at most `limit` bytes, then it closes its end). A writer end held here
    until the write is over keeps the reader from seeing end-of-file before the writer came."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    keep = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    os.set_blocking(fd, True)

    def run() -> None:
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                got.append(chunk)
                if limit is not None and sum(map(len, got)) >= limit:
                    return
        finally:
            os.close(fd)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        os.close(keep)
        thread.join(timeout=10)


def test_a_fifo_with_a_reader_gets_every_byte_in_order(tmp_path: Path) -> None:
    # More than a pipe holds (64 KiB): the writer must loop over partial writes, blocking.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    data = os.urandom(1 << 20)
    got: list[bytes] = []
    with _reader(fifo, got):
        write_in_place(fifo, data, "FIFO")
    assert b"".join(got) == data


def test_a_reader_that_leaves_early_is_one_line(tmp_path: Path) -> None:
    # With SIGPIPE ignored (set here: Python's default, stated rather than assumed) a write
    # to a FIFO whose reader left fails with EPIPE, phrased as one line.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    previous = signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        got: list[bytes] = []
        with pytest.raises(InputError) as info:
            with _reader(fifo, got, limit=1):
                write_in_place(fifo, b"y" * (8 << 20), "FIFO")
    finally:
        signal.signal(signal.SIGPIPE, previous)
    assert str(info.value) == f"cannot write {fifo}: Broken pipe"


# --- colour and width ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "environ", "isatty", "wanted"),
    [
        ("always", {"NO_COLOR": "1"}, False, True),
        ("always", {}, False, True),
        ("never", {}, True, False),
        ("never", {"NO_COLOR": ""}, True, False),
        ("auto", {}, True, True),
        ("auto", {"NO_COLOR": ""}, True, True),
        ("auto", {"NO_COLOR": "1"}, True, False),
        ("auto", {"NO_COLOR": "0"}, True, False),  # any non-empty value turns it off
        ("auto", {}, False, False),
        ("auto", {"NO_COLOR": ""}, False, False),
    ],
)
def test_use_color(choice: str, environ: dict[str, str], isatty: bool, wanted: bool) -> None:
    assert choice in COLOR_CHOICES
    assert use_color(choice, environ, isatty) is wanted


def test_the_colour_choices() -> None:
    assert COLOR_CHOICES == ("auto", "always", "never")


@pytest.mark.parametrize(
    ("columns", "terminal", "wanted"),
    [
        (None, None, DEFAULT_WIDTH),
        (None, 0, DEFAULT_WIDTH),
        (None, -5, DEFAULT_WIDTH),
        (None, 1, MIN_WIDTH),
        (None, 59, MIN_WIDTH),
        (None, 60, 60),
        (None, 61, 61),
        (None, 250, 250),
        ("61", None, 61),
        ("60", 200, 60),
        ("59", 200, MIN_WIDTH),
        ("0", 200, MIN_WIDTH),
        (" 120 ", None, 120),
        ("999999", None, 999999),  # six digits: a width
        ("1000000", 80, 80),  # seven: no terminal's width, ignored
        ("1000000", None, DEFAULT_WIDTH),
        ("", 90, 90),
        ("wide", 90, 90),
        ("-80", None, DEFAULT_WIDTH),
        ("8\u0660", 70, 70),  # an Arabic-Indic digit: not ASCII
    ],
)
def test_text_width(columns: str | None, terminal: int | None, wanted: int) -> None:
    assert (DEFAULT_WIDTH, MIN_WIDTH, MAX_COLUMNS_DIGITS) == (100, 60, 6)
    environ = {} if columns is None else {"COLUMNS": columns}
    assert text_width(environ, terminal) == wanted


def test_a_painter_that_is_off_returns_the_text() -> None:
    paint = Painter()
    assert paint.enabled is False
    assert paint("text", color=31, bold=True, inverse=True) == "text"
    assert Painter(False)("x", color=32) == "x"


def test_a_painter_that_is_on_wraps_each_attribute_in_order() -> None:
    paint = Painter(True)
    assert (BOLD, INVERSE) == (1, 7)
    assert paint("ok", color=32) == "\x1b[32mok\x1b[0m"
    assert paint("ok", bold=True) == "\x1b[1mok\x1b[0m"
    assert paint("ok", inverse=True) == "\x1b[7mok\x1b[0m"
    assert paint("ok", color=31, bold=True) == "\x1b[31m\x1b[1mok\x1b[0m"
    assert paint("ok", color=90, bold=True, inverse=True) == "\x1b[90m\x1b[1m\x1b[7mok\x1b[0m"
    assert paint("ok", bold=True, inverse=True) == "\x1b[1m\x1b[7mok\x1b[0m"
    # No attribute, or no text: nothing to wrap.
    assert paint("ok") == "ok"
    assert paint("", color=32, bold=True) == ""


# --- a library caller's environment --------------------------------------------------------


class Odd(Mapping[str, str]):
    """A mapping whose iteration or lookup fails as told."""

    def __init__(self, iterate: Exception | None = None, lookup: Exception | None = None):
        self.iterate, self.lookup = iterate, lookup

    def __getitem__(self, key: str) -> str:
        if self.lookup is not None:
            raise self.lookup
        return "1"

    def __iter__(self) -> Iterator[str]:
        if self.iterate is not None:
            raise self.iterate
        return iter(["VLLM_A", "VLLM_B"])

    def __len__(self) -> int:
        return 2


def test_a_mapping_of_str_is_copied_as_a_dict() -> None:
    source = {"VLLM_SM70_X": "1", "PATH": "/bin"}
    copied = checked_environ(source)
    assert copied == source and type(copied) is dict and copied is not source
    assert checked_environ({}) == {}
    assert checked_environ(Odd()) == {"VLLM_A": "1", "VLLM_B": "1"}


@pytest.mark.parametrize(
    ("environ", "name"), [(None, "NoneType"), ([("A", "1")], "list"), ("A=1", "str")]
)
def test_not_a_mapping_is_named_by_its_type(environ: object, name: str) -> None:
    with pytest.raises(InputError) as info:
        checked_environ(environ)
    assert str(info.value) == (
        f"environ must be a mapping of variable names to values (str to str), got {name}"
    )


def test_a_key_that_is_no_str_is_named() -> None:
    with pytest.raises(InputError) as info:
        checked_environ({"A": "1", 7: "x"})
    assert str(info.value) == "environ key 7 is a int; variable names are str"
    with pytest.raises(InputError) as info:
        checked_environ({b"VLLM": "x"})
    assert str(info.value) == "environ key b'VLLM' is a bytes; variable names are str"


def test_a_value_that_is_no_str_is_named_with_its_key() -> None:
    with pytest.raises(InputError) as info:
        checked_environ({"A": "1", "VLLM_SM70_Y": 1})
    assert str(info.value) == "environ['VLLM_SM70_Y'] is a int (1); variable values are str"
    with pytest.raises(InputError) as info:
        checked_environ({"K" * 100: None})
    assert str(info.value) == (
        f"environ[{'K' * 80!r}... (100 characters)] is a NoneType (None); variable values are str"
    )


def test_a_mapping_that_fails_names_the_failure() -> None:
    with pytest.raises(InputError) as info:
        checked_environ(Odd(iterate=OSError("store gone")))
    assert str(info.value) == "environ cannot be iterated: OSError: 'store gone'"
    with pytest.raises(InputError) as info:
        checked_environ(Odd(lookup=KeyError("VLLM_A")))
    assert str(info.value) == "environ['VLLM_A'] raised KeyError: \"'VLLM_A'\""
    long = "e" * 300
    with pytest.raises(InputError) as info:
        checked_environ(Odd(lookup=RuntimeError(long)))
    assert str(info.value) == (
        f"environ['VLLM_A'] raised RuntimeError: {long[:80]!r}... (300 characters)"
    )
