"""Where an output path may be written and how: atomically (a temporary file renamed over it)
only onto a regular file or where nothing exists; a character or block device or a FIFO
(`/dev/null`, `/dev/stdout`, a pipe a reader holds open) written in place, never replaced by a
regular file; a socket, a folder or a FIFO nobody reads refused with one line. A symbolic link
is followed: the file it names is replaced, the link kept.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from routectl.errors import InputError


def special_kind(path: Path) -> str | None:
    """What a non-regular file at `path` is ("device", "FIFO", "socket", "folder"); None
    for a regular file or where nothing exists (a dangling link included)."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    return kind_of_mode(mode)


def kind_of_mode(mode: int) -> str | None:
    """The kind `special_kind` names for a file of `st_mode` `mode`: None for a regular
    file. A pure function of the mode, so that the kinds a Linux machine cannot make (a
    Solaris door, a BSD whiteout) are named too: "special file"."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISDIR(mode):
        return "folder"
    return "socket" if stat.S_ISSOCK(mode) else "special file"


def atomic_target(path: Path) -> Path:
    """The path an atomic write renames onto: the file a symbolic link names (the link
    stays a link), else `path`."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def write_new_synced(temp: Path, data: bytes) -> None:
    """Create `temp` (it must not exist) holding `data`, flushed to disk before it is closed:
    the temporary file of an atomic write, renamed over its target by the caller."""
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def write_in_place(path: Path, data: bytes, kind: str) -> None:
    """Write `data` into the device or FIFO at `path` as it is (no temporary file, no
    rename); a socket, a folder, or a FIFO no process reads is refused with one line."""
    if kind not in ("device", "FIFO"):
        raise InputError(
            f"cannot write {path}: it is a {kind} (give a regular file, a device, a FIFO, "
            f"or - for standard output)"
        )
    # Non-blocking open: a FIFO without a reader fails at once (ENXIO) instead of hanging.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise InputError(f"cannot write {path}: no process reads the FIFO") from None
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
