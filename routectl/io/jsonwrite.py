"""The one serialiser of every JSON file routectl writes: 2-space indent, sorted keys, UTF-8
(no ASCII escaping), a trailing newline, and NaN or infinity refused (ValueError).

orjson writes it, byte for byte what `json.dumps(indent=2, sort_keys=True, ensure_ascii=False,
allow_nan=False)` wrote before, except on values where the two differ: orjson writes NaN and
infinity as null, floats such as 1e-05 as 0.00001, serialises Enum and UUID instances, and
raises on integers outside [-2**63, 2**64), on nesting deeper than 255 and on non-string keys. A
document holding any of those is written by `json.dumps`, which also raises where it always
did. One walk over the document decides: only exact dict, list, tuple, str, int, bool and
None values, and floats that orjson writes as `repr` does, take the fast path.

A document the caller knows to be plain (parsed JSON, or rows made plain: exact JSON types
and finite numbers only, `plain=True`) skips the walk, the slowest part of writing 100,000
rows: only its floats can be written differently, and such a float shows in orjson's own text
(below).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE
_SCALARS = frozenset({str, int, bool, type(None)})

# Where orjson's float text differs from `repr`'s, orjson writes a number below 1e-4 either in
# full ("0.00001" for 1e-05) or with a one-digit exponent ("2.5e-7" for 2.5e-07); elsewhere
# (1e-10, 1e+16, 5e-324, -0.0 ...) the two agree. Text in strings that looks alike only sends
# the document down the walk. Two patterns that start with a literal: re finds those fast
# (0.15 s in 200 MB); one pattern with a look-behind took 10 s.
_FLOAT_TEXTS_THAT_MAY_DIFFER = (re.compile(rb"0\.0000"), re.compile(rb"e-[0-9](?![0-9])"))


def json_floats(data: Any) -> list[float] | None:
    """The floats of `data` when it holds only exact dict, list, tuple, str, int, bool, None
    and float values (what orjson and `json.dumps` both write, and alike but for floats);
    None when it holds anything else (a subclass, an Enum, a UUID, a dataclass ...)."""
    stack = [data]
    pop, extend = stack.pop, stack.extend
    floats: list[float] = []
    while stack:
        value = pop()
        kind = type(value)
        if kind is dict:
            extend(value.values())
        elif kind is list or kind is tuple:
            extend(value)
        elif kind is float:
            floats.append(value)
        elif kind not in _SCALARS:
            return None
    return floats


def _orjson_writes_as_json_does(data: Any) -> bool:
    """True when `data` holds only values orjson writes exactly as `json.dumps` does.
    Integers outside 64 bits, deep nesting and non-string keys are left to orjson, which
    raises on them."""
    floats = json_floats(data)
    # repr is json.dumps's float text; orjson's text of a non-finite float is null.
    return floats is not None and all(orjson.dumps(f) == repr(f).encode() for f in floats)


def dumps_bytes(data: Any, *, plain: bool = False) -> bytes:
    """`data` as the UTF-8 bytes of a routectl JSON file. `plain`: the caller knows `data`
    holds exact JSON types and finite numbers only (see the module's docstring)."""
    if plain:
        try:
            text = orjson.dumps(data, option=_OPTIONS)
        except orjson.JSONEncodeError:
            pass  # integers of 64 bits or more, nesting deeper than 255: json decides below
        else:
            if not any(pattern.search(text) for pattern in _FLOAT_TEXTS_THAT_MAY_DIFFER):
                return text
    if _orjson_writes_as_json_does(data):
        try:
            return orjson.dumps(data, option=_OPTIONS)
        except orjson.JSONEncodeError:
            pass  # integers of 64 bits or more, nesting deeper than 255, non-string keys
    return _json_dumps(data).encode("utf-8")


def dumps(data: Any) -> str:
    """`data` as the text of a routectl JSON file."""
    if _orjson_writes_as_json_does(data):
        try:
            return orjson.dumps(data, option=_OPTIONS).decode("utf-8")
        except orjson.JSONEncodeError:
            pass
    return _json_dumps(data)


def _json_dumps(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
