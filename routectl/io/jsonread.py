"""The one reader of every JSON input (retained snapshots, baselines, expected changes,
`--kernel-config` text and files, schemas): bounded, strict and phrased as one line.

A file must be a regular file no larger than the size cap (`Limits.max_bytes`; the CLI takes
it from ROUTECTL_MAX_INPUT_BYTES, the default admits the 100,000-row benchmark snapshot with
room to spare); it is read as UTF-8 with at most cap + 1 bytes ever read, so `/dev/zero` or a
FIFO cannot exhaust memory. The text may nest at most MAX_DEPTH containers deep (the parsers
and every walk of the data after them recurse), integers must fit in 64 bits and numbers
must be finite. Every failure is an InputError of one line; the user's text it quotes is
shortened by `shorten`.

orjson parses (several times faster than the standard library). It has no depth limit of
its own and reads integers beyond 64 bits as floats, so depth is measured on the bytes before
parsing, and a text holding a run of 19 or more digits is parsed by the standard library with
hooks that refuse out-of-range integers instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from routectl.errors import InputError

MAX_BYTES_VARIABLE = "ROUTECTL_MAX_INPUT_BYTES"
# The 100,000-row benchmark snapshot is about 206 MB; real snapshots are a few MB.
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
# Real documents nest under 10 levels; the bound keeps every recursive walk (the parsers,
# jsonschema, DeepDiff, json.dumps) far below Python's recursion limit.
MAX_DEPTH = 64
INT_MIN = -(2**63)
INT_MAX = 2**64 - 1
# A user's value quoted in a message is cut to this many characters.
QUOTE_CHARS = 80
READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class Limits:
    max_bytes: int = DEFAULT_MAX_BYTES


DEFAULT_LIMITS = Limits()
_LIMITS: ContextVar[Limits] = ContextVar("routectl_json_limits", default=DEFAULT_LIMITS)


def is_decimal(text: str, max_digits: int = 19) -> bool:
    """Whether `text` is a whole number in ASCII digits, at most `max_digits` of them: what
    `int()` reads quickly. `str.isdigit()` alone also accepts "²" (which `int()` refuses) and
    any number of digits (over 4,300 `int()` refuses too)."""
    return text.isascii() and text.isdigit() and len(text) <= max_digits


def limits_from_environ(environ: Mapping[str, str]) -> Limits:
    """The limits a run asks for through its environment (an InputError when malformed)."""
    text = environ.get(MAX_BYTES_VARIABLE)
    if text is None or text == "":
        return DEFAULT_LIMITS
    value = text.strip()
    if not is_decimal(value) or int(value) <= 0:
        raise InputError(
            f"{MAX_BYTES_VARIABLE} must be a positive number of bytes, got {shorten(text)}"
        )
    return Limits(max_bytes=int(value))


def current_limits() -> Limits:
    return _LIMITS.get()


@contextlib.contextmanager
def using_limits(limits: Limits) -> Iterator[None]:
    """Every JSON input read inside the block obeys `limits` (the CLI sets them per run)."""
    token = _LIMITS.set(limits)
    try:
        yield
    finally:
        _LIMITS.reset(token)


def shorten(value: Any, limit: int = QUOTE_CHARS) -> str:
    """`repr(value)` for a message, cut to `limit` characters with an ellipsis and the full
    length when longer: a 200 MB string must not become a 200 MB line."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value):,} characters)"
    if isinstance(value, bytes) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value):,} bytes)"
    text = repr(value)
    if len(text) > limit:
        return f"{text[:limit]}... ({len(text):,} characters)"
    return text


# A list of names in a message (unknown variables, say) shows this many, then "and N more".
MAX_NAMES = 20


def name_list(names: Sequence[str], limit: int = MAX_NAMES) -> str:
    """`names` comma-separated for a message: at most `limit` of them, then "and N more";
    each cut to QUOTE_CHARS characters (5,000 typos, or one name of 100,000 characters, must
    not become a 100 KB line)."""
    shown = [
        name if len(name) <= QUOTE_CHARS else f"{name[:QUOTE_CHARS]}... ({len(name):,} characters)"
        for name in names[:limit]
    ]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more:,} more" if more > 0 else "")


def _size_error(what: str, size_text: str, limits: Limits) -> InputError:
    return InputError(
        f"{what} is {size_text}, over the {limits.max_bytes:,}-byte limit on input "
        f"files (set {MAX_BYTES_VARIABLE} to a larger number of bytes to read "
        f"it)"
    )


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bytes(path: Path, what: str, limits: Limits | None = None) -> bytes:
    """The bytes of a regular file no larger than the cap; anything else is an InputError."""
    limits = limits or current_limits()
    label = f"{what} {path}"
    try:
        # Non-blocking: opening a FIFO with no writer must not hang (it is refused below).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"cannot read {label}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
            raise InputError(f"cannot read {label}: it is {kind}, not a regular file")
        if info.st_size > limits.max_bytes:
            raise _size_error(label, f"{info.st_size:,} bytes", limits)
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        total = 0
        # At most cap + 1 bytes, whatever the file grows to meanwhile.
        while total <= limits.max_bytes:
            chunk = os.read(fd, min(READ_CHUNK, limits.max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limits.max_bytes:
            raise _size_error(label, "larger than that", limits)
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read {label}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


# --- the checks before parsing -------------------------------------------------------------

_STRUCTURE = bytes(range(256)).translate(None, b'[]{}"')  # every byte but these
_TO_SQUARE = bytes.maketrans(b"{}", b"[]")
_STRING = re.compile(rb'"[^"]*"')
_DIGITS = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_RUN = b"0" * 19


def nesting_depth_exceeds(data: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether containers nest deeper than `limit` in a JSON text, measured on the bytes in
    a few C-speed passes (no Python loop per byte). Unbalanced text is left to the parser.

    Escapes go first (a `\\\\` pair, then `\\"`), so that every remaining quote delimits a
    string; strings go next (with them any bracket inside one); each pass of removing `[]`
    then peels exactly one level of nesting.
    """
    if len(data) <= 2 * limit:
        return False
    text = data
    if b"\\" in text:  # a search is much cheaper than a replace that finds nothing
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    text = text.translate(_TO_SQUARE, _STRUCTURE).replace(b'""', b"")
    if b'"' in text:
        text = _STRING.sub(b"", text)
    for _ in range(limit):
        if not text:
            return False
        peeled = text.replace(b"[]", b"")
        if len(peeled) == len(text):
            return False  # unbalanced: the parser says where
        text = peeled
    return bool(text) and len(text.replace(b"[]", b"")) != len(text)


def _may_hold_long_integer(data: bytes) -> bool:
    """A run of 19+ digits somewhere (a number or inside a string): the only texts whose
    integers might not fit in 64 bits."""
    return _LONG_RUN in data.translate(_DIGITS)


def _strict_int(text: str) -> int:
    # Length first: int() of thousands of digits is refused by Python's own limit, or slow.
    if len(text.lstrip("-")) > 20 or not INT_MIN <= int(text) <= INT_MAX:
        raise _NumberError(f"integer {shorten(text)} does not fit in 64 bits")
    return int(text)


def _strict_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NumberError(f"number {shorten(text)} is out of range for a 64-bit float")
    return value


def _no_constant(name: str) -> Any:
    raise _NumberError(f"{name} is not JSON")


class _NumberError(ValueError):
    pass


def _position(data: bytes | str, offset: int) -> str:
    prefix = data[:offset]
    newline = b"\n" if isinstance(prefix, bytes) else "\n"
    line = prefix.count(newline) + 1  # type: ignore[arg-type]
    column = offset - (prefix.rfind(newline) + 1)  # type: ignore[arg-type]
    return f"line {line} column {column + 1}"


def _utf8_problem(data: bytes) -> str | None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 ({exc.reason} at byte {exc.start}, {_position(data, exc.start)})"
    return None


def parse_json(data: bytes | str, source: str) -> Any:
    """Parse a JSON text under the limits; every failure is one InputError line starting
    with `source` (what and where the text came from)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.startswith(b"\xef\xbb\xbf"):
        raise InputError(
            f"{source} is not valid JSON: it starts with a UTF-8 byte order mark "
            f"(save it without one)"
        )
    if nesting_depth_exceeds(raw):
        raise InputError(f"{source} is not accepted: JSON nested deeper than {MAX_DEPTH} levels")
    if _may_hold_long_integer(raw):
        return _parse_strict(raw, source)
    if not raw.strip():
        raise InputError(f"{source} is not valid JSON: it is empty")
    # Imported here: `import routectl` (the engine's start-up) reads no JSON.
    import orjson

    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        # The standard library phrases the error (as routectl always has); it refuses what
        # orjson refuses, but for a lone surrogate escape, which orjson's message names.
        _parse_strict(raw, source)
        message = str(exc.msg).split(": line ")[0]
        raise InputError(
            f"{source} is not valid JSON: {message} at {_position(raw, exc.pos)}"
        ) from None


def _parse_strict(raw: bytes, source: str) -> Any:
    """The standard library's parser with hooks that refuse what orjson would read wrong."""
    import json  # here: `import routectl` (the engine's start-up) reads no JSON

    problem = _utf8_problem(raw)
    if problem is not None:
        raise InputError(f"{source} is not valid JSON: {problem}")
    text = raw.decode("utf-8")
    try:
        return json.loads(
            text, parse_int=_strict_int, parse_float=_strict_float, parse_constant=_no_constant
        )
    except _NumberError as exc:
        if str(exc).endswith("is not JSON"):
            raise InputError(f"{source} is not valid JSON: {exc}") from None
        raise InputError(f"{source} is not accepted: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:  # not reached below MAX_DEPTH; kept as a one-line answer
        raise InputError(f"{source} is not accepted: JSON nested too deeply") from None


def read_json_file(path: Path, what: str, limits: Limits | None = None) -> Any:
    """Read and parse the JSON file `path` (`what` names it in messages: "snapshot")."""
    return parse_json(read_bytes(path, what, limits), f"{what} {path}")
