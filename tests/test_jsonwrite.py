"""The one serialiser (`routectl.io.jsonwrite`) writes byte for byte what `json.dumps` wrote:
on every retained snapshot, on the values where orjson differs, and on generated documents."""

from __future__ import annotations

import enum
import json
import math
import uuid
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routectl.io import jsonwrite
from routectl.review.snapshot import dump_json, write_json

ROOT = Path(__file__).resolve().parents[1]
RETAINED = sorted((ROOT / "snapshots").glob("*.json"))


def reference(data: object) -> str:
    """How every file was written before orjson."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


@pytest.mark.parametrize("path", RETAINED, ids=lambda p: p.name)
def test_every_retained_file_is_rewritten_byte_for_byte(path, tmp_path):
    raw = path.read_bytes()
    data = json.loads(raw)
    assert jsonwrite.dumps_bytes(data) == raw
    assert dump_json(data) == raw.decode("utf-8")
    # orjson itself writes these files: the fast path is the one taken, not the fallback.
    assert orjson.dumps(data, option=jsonwrite._OPTIONS) == raw
    out = tmp_path / path.name
    write_json(out, data)
    assert out.read_bytes() == raw


class Colour(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    HIGH = 3


class Tag(str):
    pass


def nested(depth: int) -> object:
    value: object = 1.5
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


EDGE_VALUES = [
    1e-05,
    -1e-05,
    1.2345e-05,
    1e-06,
    1e-07,
    5e-08,
    9.87654321e-09,
    1e-10,
    1e-4,
    5e-324,
    1e16,
    1e-300,
    1.7976931348623157e308,
    -0.0,
    0.1,
    1.0,
    123456789.125,
    2**63 - 1,
    2**63,
    2**64 - 1,
    2**64,
    -(2**63),
    -(2**63) - 1,
    10**30,
    -(10**30),
    nested(254),
    nested(255),
    nested(256),
    nested(300),
    {"a": 1e-05, "b": [2**64, "x"]},
    (1, 2, (3,)),
    [],
    {},
    {"z": {}, "a": []},
    {1: "int key"},
    {"b": 1, "a": {"d": 2, "c": 3}},
    '\u2028\u2029\x00\x1f\x7f"\\/é😀',
    Level.HIGH,
    Tag("sub"),
    {"k": Tag("v")},
    True,
    False,
    None,
]


@pytest.mark.parametrize("value", EDGE_VALUES, ids=lambda v: repr(v)[:40])
def test_edge_values_match_json_dumps(value):
    assert jsonwrite.dumps(value) == reference(value)
    assert jsonwrite.dumps_bytes(value) == reference(value).encode("utf-8")


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf, {"rows": [{"x": math.nan}]}, [1.0, -math.inf]]
)
def test_nan_and_infinity_are_refused(value):
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        jsonwrite.dumps_bytes(value)
    with pytest.raises(ValueError):
        jsonwrite.dumps(value)


@pytest.mark.parametrize("value", [Colour.RED, uuid.UUID(int=1), {"when": b"bytes"}, {1, 2}])
def test_values_json_cannot_write_still_raise(value):
    # orjson would write an Enum or a UUID; json.dumps never did.
    with pytest.raises(TypeError):
        jsonwrite.dumps_bytes(value)


def test_a_lone_surrogate_is_refused_when_written_as_bytes():
    assert jsonwrite.dumps("\ud800") == reference("\ud800")
    with pytest.raises(UnicodeEncodeError):
        jsonwrite.dumps_bytes("\ud800")


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=30,
)


@pytest.mark.parametrize("plain", [False, True], ids=["walked", "plain"])
@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_generated_documents_match_json_dumps(plain, value):
    # Generated values are exact JSON types and finite numbers: the plain path applies too.
    try:
        expected = reference(value).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: both refuse it
        with pytest.raises(UnicodeEncodeError):
            jsonwrite.dumps_bytes(value, plain=plain)
        return
    assert jsonwrite.dumps_bytes(value, plain=plain) == expected


# The plain path (a document of exact JSON types and finite numbers, as parsed or made plain)
# skips the walk: the same bytes must come out, floats whose orjson text differs included.
PLAIN_FLOATS = [
    1e-05,
    -1e-05,
    1.2345e-05,
    1e-06,
    2.5e-07,
    5e-08,
    9.87654321e-09,
    1e-10,
    1e-4,
    9.9999e-05,
    5e-324,
    1e16,
    1.2345678901234568e17,
    1e-300,
    1.7976931348623157e308,
    -0.0,
    0.1,
    10.00001,
]


@pytest.mark.parametrize("value", PLAIN_FLOATS, ids=repr)
def test_plain_documents_with_any_float_match_json_dumps(value):
    document = {"rows": [{"id": "a", "x": value, "xs": [1, value, "s"]}]}
    assert jsonwrite.dumps_bytes(document, plain=True) == reference(document).encode("utf-8")


@pytest.mark.parametrize(
    "text", ["gate-1", "0.00001", "e-5", "x 0.0000 y", "w2-0.0000", "10.00001", "1e-05"]
)
def test_plain_documents_with_float_like_strings_match_json_dumps(text):
    document = {"id": text, "values": [text, 0.5]}
    assert jsonwrite.dumps_bytes(document, plain=True) == reference(document).encode("utf-8")


@pytest.mark.parametrize("path", RETAINED, ids=lambda p: p.name)
def test_every_retained_file_is_rewritten_byte_for_byte_on_the_plain_path(path):
    raw = path.read_bytes()
    assert jsonwrite.dumps_bytes(orjson.loads(raw), plain=True) == raw


@pytest.mark.parametrize(
    "value", [2**64, -(2**63) - 1, nested(300)], ids=["2**64", "-2**63-1", "deep"]
)
def test_plain_documents_orjson_cannot_write_still_match_json_dumps(value):
    assert jsonwrite.dumps_bytes(value, plain=True) == reference(value).encode("utf-8")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=4), JSON_VALUES, max_size=4), max_size=4))
def test_plain_rows_equal_the_json_round_trip_in_types_and_key_order(rows):
    from routectl.review.snapshot import plain_rows

    try:
        expected = json.loads(json.dumps(rows, allow_nan=False, sort_keys=True))
    except ValueError:
        return
    got = plain_rows(rows)
    assert json.dumps(got) == json.dumps(expected)  # key order and 1 / 1.0 / true kept apart
    assert reference(got) == reference(expected)


@pytest.mark.parametrize("value", [math.nan, Colour.RED, uuid.UUID(int=1)])
def test_plain_rows_refuse_what_json_refuses(value):
    from routectl.review.snapshot import SnapshotError, plain_rows

    with pytest.raises(SnapshotError, match="row 'r' is not JSON"):
        plain_rows([{"id": "r", "v": value}])


def test_plain_rows_keep_integers_beyond_64_bits_and_turn_tuples_into_lists():
    from routectl.review.snapshot import plain_rows

    assert plain_rows([{"id": "r", "v": (2**70, (1,))}]) == [{"id": "r", "v": [2**70, [1]]}]
