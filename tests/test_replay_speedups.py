"""What replay shares within one run to go faster gives the very results it stands for: a
policy resolved once per (config, variables, context) equals the row's own resolution, and
the canonical row text is the standard library's JSON value."""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
from pathlib import Path

import pytest

from policies import PROJECT
from routectl.replay.harness import (
    PolicyMemo,
    ReplayError,
    _typed_key,
    plain_row_text,
    resolve_row,
    row_text,
)
from routectl.review.snapshot import read_snapshot
from routectl.rows import RowSpec
from routectl.workload import Hardware

ROOT = Path(__file__).resolve().parents[1]


class Flag(enum.StrEnum):
    ON = "on"


class Count(int):
    pass


def replayed_rows() -> list[RowSpec]:
    return [s for c in PROJECT.categories for s in c.rows() if s.status is None]


def test_memo_policy_equals_each_rows_own_resolution():
    memo = PolicyMemo(PROJECT)
    rows = replayed_rows()
    for spec in rows:
        assert memo.resolve(spec) == resolve_row(PROJECT, spec), spec.id
    # The memo does share: far fewer policies than rows (else it would be pointless).
    distinct = {id(memo.resolve(spec)) for spec in rows}
    assert len(distinct) < len(rows) / 4


def test_memo_keys_tell_apart_values_python_finds_equal():
    keys = [_typed_key(v) for v in (1, True, 1.0, "1", [1], (1,), {"a": 1}, {"a": True})]
    assert None not in keys
    assert len(set(keys)) == len(keys)
    assert _typed_key({"a": {"b": [1, 2]}}) == _typed_key({"a": {"b": [1, 2]}})
    # Anything else is not keyed (resolved afresh), also when nested.
    assert _typed_key({"a": object()}) is None
    assert _typed_key({"a": [1, {2: 3}]}) is None


def test_memo_separates_rows_whose_context_differs():
    # Same config and variables, another capability: another context, another key.
    spec = next(s for s in replayed_rows() if s.capability == 70)
    other = dataclasses.replace(spec, capability=75)
    assert PROJECT.context(Hardware(70), spec.engine) != PROJECT.context(Hardware(75), spec.engine)
    memo = PolicyMemo(PROJECT)
    assert memo.resolve(spec) == resolve_row(PROJECT, spec)
    assert memo.resolve(other) == resolve_row(PROJECT, other)
    assert memo.resolve(other) is not memo.resolve(spec)


@pytest.mark.parametrize(
    "row",
    [
        {"id": "a", "route": {"x": 1e-05, "y": [1, 2.5, True, None], "z": ("t", "é")}},
        {"id": "big", "route": {"n": 2**70, "m": -(2**63) - 1}},  # beyond orjson: json writes
        {"id": "keys", "route": {1: "int key", 2: {3: [3]}}},  # json turns keys into text
        {"id": "deep", "route": functools.reduce(lambda acc, _: [acc], range(300), [])},
        {"id": "sub", "route": {"flag": Flag.ON, "n": Count(3)}},
    ],
    ids=["floats-tuples-utf8", "big-int", "int-keys", "deep", "subclasses"],
)
def test_row_text_is_the_standard_librarys_json_value(row):
    expected = json.loads(json.dumps(row, sort_keys=True, allow_nan=False))
    assert json.loads(row_text(row)) == expected
    assert json.dumps(json.loads(row_text(row)), sort_keys=True) == json.dumps(
        expected, sort_keys=True
    )


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, object()])
def test_row_text_refuses_what_json_refuses(bad):
    with pytest.raises(ReplayError, match="row 'r' is not JSON"):
        row_text({"id": "r", "route": {"v": [1, {"w": bad}]}})


def test_row_text_of_every_retained_row_reads_back_equal():
    for path in sorted((ROOT / "snapshots").glob("*.json")):
        for row in read_snapshot(path, schema=PROJECT.snapshot_schema).rows:
            text = row_text(row)
            assert json.loads(text) == row
            assert text == row_text(json.loads(text))
            # A baseline's rows take the short way to the very same text.
            assert plain_row_text(row) == text


@pytest.mark.parametrize(
    "row",
    [
        {"id": "a", "n": [2**64 - 1, -(2**63), 0.1, 1e-05, "é\u2028"]},
        {"id": "b", "n": 2**64},  # beyond orjson: the standard library writes it
        {"id": "c", "n": {"2": "\ud800"}},  # a lone surrogate: orjson refuses
    ],
)
def test_plain_row_text_is_row_text_on_plain_rows(row):
    assert plain_row_text(row) == row_text(row)
