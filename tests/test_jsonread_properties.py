"""Property tests of the one JSON reader and of the expected-changes parser: whatever the
bytes, the answer is a value or one InputError line, never another exception."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routectl.errors import InputError
from routectl.io.jsonread import nesting_depth_exceeds, parse_json
from routectl.review.compare import ExpectedEntry, parse_expected

CATEGORIES = ("toy-a", "toy-b")
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Text with every character that matters to the depth scan: brackets, quotes, backslashes.
TRICKY_TEXT = st.text(alphabet=st.sampled_from('[]{}"\\/ab\u00e9\u4e2d\n'), max_size=12)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TRICKY_TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(TRICKY_TEXT, children, max_size=4)
    ),
    max_leaves=30,
)


def depth(value: Any) -> int:
    """Reference: how many containers deep `value` nests."""
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


def same(a: Any, b: Any) -> bool:
    """Equal with the same types (1 is not 1.0, nor True)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return bool(a == b)


def wrap(value: Any, levels: int) -> Any:
    for _ in range(levels):
        value = [value]
    return value


@SETTINGS
@given(VALUES, st.booleans(), st.sampled_from([None, 0, 2]))
def test_every_json_value_reads_back_as_itself(value, ascii_only, indent):
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert same(parse_json(text.encode("utf-8"), "doc"), value)


@SETTINGS
@given(VALUES, st.integers(min_value=0, max_value=80))
def test_depth_scan_agrees_with_the_structure(value, extra):
    nested = wrap(value, extra)
    data = json.dumps(nested).encode("utf-8")
    assert nesting_depth_exceeds(data) is (depth(nested) > 64)
    if depth(nested) > 64:
        try:
            parse_json(data, "doc")
        except InputError as exc:
            assert str(exc) == "doc is not accepted: JSON nested deeper than 64 levels"
        else:
            raise AssertionError("a document nested deeper than 64 levels was read")


@SETTINGS
@given(st.integers())
def test_integers_outside_64_bits_are_refused(number):
    data = f"[{number}]".encode()
    if -(2**63) <= number <= 2**64 - 1:
        assert parse_json(data, "doc") == [number]
    else:
        try:
            parse_json(data, "doc")
        except InputError as exc:
            assert "does not fit in 64 bits" in str(exc) and "\n" not in str(exc)
        else:
            raise AssertionError(f"{number} was read")


@SETTINGS
@given(
    st.binary(max_size=300)
    | st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass"))
)
def test_any_bytes_give_a_value_or_one_input_error_line(data):
    try:
        parse_json(data, "doc")
    except InputError as exc:
        message = str(exc)
        assert message.startswith("doc ") and "\n" not in message and len(message) < 400


@SETTINGS
@given(
    st.lists(st.sampled_from('[]{}",:0123456789.eE-+ntrufalse\\ x'), max_size=200).map(
        lambda chars: "".join(chars).encode()
    )
)
def test_json_like_noise_gives_a_value_or_one_input_error_line(data):
    try:
        parse_json(data, "doc")
    except InputError as exc:
        assert "\n" not in str(exc)


# --- the expected-changes parser -----------------------------------------------------------

MODEL = st.from_regex(r"[a-z0-9_]{1,8}", fullmatch=True)
ROW_IDS = st.builds(
    lambda m, kv, tp, spec, c, q: f"{m}/{kv}/tp{tp}/{spec}/c{c}/q{q}",
    MODEL,
    MODEL,
    st.integers(0, 64),
    st.from_regex(r"[a-z]{1,6}", fullmatch=True),
    st.integers(0, 99),
    st.integers(0, 99999),
) | MODEL.map(lambda name: f"edge:{name}")
QUALIFIED = st.tuples(st.sampled_from((None, *CATEGORIES)), ROW_IDS)


@SETTINGS
@given(
    st.lists(QUALIFIED, max_size=8, unique=True),
    st.lists(st.none() | st.text(max_size=20), min_size=8, max_size=8),
)
def test_valid_expected_lists_parse_to_their_entries(ids, reasons):
    document: list[Any] = []
    wanted = []
    for (category, row_id), reason in zip(ids, reasons, strict=False):
        listed = row_id if category is None else f"{category}:{row_id}"
        document.append(listed if reason is None else {"id": listed, "reason": reason})
        wanted.append(ExpectedEntry(listed, category, row_id, reason))
    data = parse_json(json.dumps(document).encode(), "expected")
    assert list(parse_expected(data, CATEGORIES, source="expected")) == wanted


EXPECTED_NOISE = st.recursive(
    SCALARS
    | ROW_IDS
    | QUALIFIED.map(lambda q: q[1] if q[0] is None else f"{q[0]}:{q[1]}")
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.sampled_from(["id", "reason", "x"]) | TRICKY_TEXT, children, max_size=3
        )
    ),
    max_leaves=20,
)


@SETTINGS
@given(EXPECTED_NOISE)
def test_any_expected_document_gives_entries_or_one_input_error_line(document):
    try:
        entries = parse_expected(document, CATEGORIES, source="expected")
    except InputError as exc:
        message = str(exc)
        assert message.startswith("expected") and "\n" not in message
    else:
        assert isinstance(document, list) and len(entries) == len(document)
