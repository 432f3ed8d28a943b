"""What replay shares within one run to go faster gives the very results it stands for: a
policy resolved once per (config, variables, context) equals the row's own resolution, and
the canonical row text is the standard library's JSON value."""

from __future__ import annotations

import dataclasses

from policies import PROJECT
from routectl.replay import PolicyMemo, _typed_key, resolve_row
from routectl.rows import RowSpec
from routectl.workload import Hardware


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
