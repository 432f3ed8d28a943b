"""Row comparison as docs/reviewing-changes.md and `routectl.review.compare` state it.

Pins, with whole outputs compared (every field change of a row, in order, never a few
keys), what a refactor of the comparison could move unnoticed by the property tests of
tests/test_compare.py (those compare `field_changes` with DeepDiff over the same keyed rows,
so a wrong key rule or a wrong sort agrees with itself):

- list item identity: the rule order (name, field, variable, stage M, dispatch M and
  position), an empty or non-text name, a repeated key, a stage without `chosen`, a dispatch
  record without `op`, a boolean M, and an item of one version only;
- change kinds (added, removed, changed, reordered) with the absent side None, and the values
  of a one-sided item as plain JSON (never the internal keyed mapping);
- the order of changes: by path, positions and M numerically (M=8 before M=128);
- path spelling: `[key]`, `[index]`, identifiers dotted, other keys quoted;
- JSON equality: exact types and float bits, also for rows orjson cannot write (integers
  beyond 64 bits), and the whole-row change when DeepDiff sees no difference;
- `Comparison` and `compare_rows`: sorted ids, the id sets, `baseline_present`, `moved`,
  `identical`, and the differ's argument order.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from routectl.review.compare import (
    REORDERED,
    Comparison,
    FieldChange,
    ItemKey,
    change_path,
    compare_rows,
    field_changes,
    item_keys,
    keyed,
    row_values,
    unkeyed,
)

RID = "model1/float16/tp1/none/c1/q8192"


def row(**route: Any) -> dict[str, Any]:
    """A row whose route holds only the fields a test gives (comparison is schema-free)."""
    return {"id": RID, "route": route}


def verdict(name: str, ok: bool = True, code: str | None = None) -> dict[str, Any]:
    return {"name": name, "ok": ok, "code": code}


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str, Any, Any]]:
    return [(c.path, c.kind, c.old, c.new) for c in field_changes(old, new)]


# --- list item identity --------------------------------------------------------------------


def test_items_keyed_by_name_are_matched_by_name_whatever_their_position() -> None:
    # A verdict moved and edited is one reorder and one field change under its name.
    old = row(verdicts=[verdict("A"), verdict("B"), verdict("C")])
    new = row(verdicts=[verdict("C"), verdict("A"), verdict("B", ok=False, code="off")])
    assert changes(old, new) == [
        ("route.verdicts", REORDERED, ["A", "B", "C"], ["C", "A", "B"]),
        ("route.verdicts[B].code", "changed", None, "off"),
        ("route.verdicts[B].ok", "changed", True, False),
    ]


def test_a_reorder_names_only_the_items_both_versions_hold() -> None:
    # B gone and D new: the order change is judged over A and C, the common items.
    old = row(verdicts=[verdict("A"), verdict("B"), verdict("C")])
    new = row(verdicts=[verdict("C"), verdict("D"), verdict("A")])
    assert changes(old, new) == [
        ("route.verdicts", REORDERED, ["A", "C"], ["C", "A"]),
        ("route.verdicts[B]", "removed", verdict("B"), None),
        ("route.verdicts[D]", "added", None, verdict("D")),
    ]
    # An insertion or a removal alone is no reorder.
    inserted = row(verdicts=[verdict("A"), verdict("D"), verdict("B"), verdict("C")])
    assert changes(old, inserted) == [("route.verdicts[D]", "added", None, verdict("D"))]
    assert changes(inserted, old) == [("route.verdicts[D]", "removed", verdict("D"), None)]


@pytest.mark.parametrize(
    "key,items",
    [
        ("field", [{"field": "kernel", "to": "A"}, {"field": "split", "to": "B"}]),
        ("variable", [{"variable": "VAR_A", "text": "a"}, {"variable": "VAR_B", "text": "b"}]),
    ],
)
def test_fallbacks_by_field_and_warnings_by_variable(key: str, items: list[dict[str, Any]]) -> None:
    old = row(xs=items)
    new = row(xs=[dict(items[1], extra=1), items[0]])
    first, second = items[0][key], items[1][key]
    assert changes(old, new) == [
        ("route.xs", REORDERED, [first, second], [second, first]),
        (f"route.xs[{second}].extra", "added", None, 1),
    ]


def test_the_first_rule_every_item_fits_wins() -> None:
    # Names unique: keyed by name although the fields are unique too.
    both = [{"name": "a", "field": "x"}, {"name": "b", "field": "y"}]
    assert item_keys(both) == [[ItemKey("a", ("a",)), ItemKey("b", ("b",))]]
    # A name repeated: the next rule, the field, keys the list.
    repeated = [{"name": "a", "field": "x"}, {"name": "a", "field": "y"}]
    assert item_keys(repeated) == [[ItemKey("x", ("x",)), ItemKey("y", ("y",))]]
    # Keyed by variable when neither name nor field is there.
    warned = [{"variable": "V", "field": 1}]
    assert item_keys(warned) == [[ItemKey("V", ("V",))]]
    # Both versions must fit the same rule: the first rule that fits all of them.
    assert item_keys([{"name": "a", "field": "x"}], [{"field": "x"}]) == [
        [ItemKey("x", ("x",))],
        [ItemKey("x", ("x",))],
    ]


@pytest.mark.parametrize(
    "items",
    [
        [{"name": ""}, {"name": "b"}],  # an empty name is no key
        [{"name": 1}, {"name": 2}],  # nor a number
        [{"name": "a"}, "a"],  # an item that is no mapping
        [{"name": "a"}, {"name": "a"}],  # a name repeated, no other rule fits
        [{"m": 1, "rejected": []}, {"m": 2, "rejected": []}],  # a stage needs `chosen`
        [{"m": True, "chosen": []}, {"m": 2, "chosen": []}],  # an M must be an integer
        [{"plan": {"m": 1}}, {"plan": {"m": 2}}],  # a dispatch record needs `op`
        [{"op": "a", "plan": {"m": 1.0}}],  # a dispatch record's M must be an integer
        [{"op": "a", "plan": 1}],  # a plan that is no mapping
        [],  # no items decide nothing
    ],
)
def test_lists_whose_items_have_no_unique_key_are_positional(items: list[Any]) -> None:
    assert item_keys(items) is None
    assert item_keys(items, items) is None


def test_no_items_in_either_version_decide_nothing_but_one_version_with_items_does() -> None:
    assert item_keys([], []) is None
    assert item_keys([], [{"name": "a"}]) == [[], [ItemKey("a", ("a",))]]


def test_stage_and_dispatch_keys() -> None:
    stages = [{"m": 128, "chosen": []}, {"m": 8, "chosen": []}]
    assert item_keys(stages) == [[ItemKey("M=128", (128,)), ItemKey("M=8", (8,))]]
    records = [
        {"op": "a", "plan": {"m": 8}},
        {"op": "b", "plan": {"m": 1}},
        {"op": "c", "plan": {"m": 8}},
        {"op": "d", "plan": {"m": 8}},
    ]
    assert item_keys(records) == [
        [
            ItemKey("M=8,0", (8, 0)),
            ItemKey("M=1,0", (1, 0)),
            ItemKey("M=8,1", (8, 1)),
            ItemKey("M=8,2", (8, 2)),
        ]
    ]
    # Each version counts its own positions: the keys of one never leak into the other.
    assert item_keys(records[:1], records[:1]) == [
        [ItemKey("M=8,0", (8, 0))],
        [ItemKey("M=8,0", (8, 0))],
    ]


def test_a_positional_list_of_other_length_reports_items_added_at_their_index() -> None:
    old = row(chain=[{"a": 1}, {"a": 2}])
    new = row(chain=[{"a": 1}, {"a": 3}, {"a": 4}])
    assert changes(old, new) == [
        ("route.chain[1].a", "changed", 2, 3),
        ("route.chain[2]", "added", None, {"a": 4}),
    ]
    assert changes(new, old) == [
        ("route.chain[1].a", "changed", 3, 2),
        ("route.chain[2]", "removed", {"a": 4}, None),
    ]


def test_a_one_sided_value_is_reported_as_plain_json() -> None:
    # A new verdict holding keyed lists of its own: the value shown is the JSON list it is.
    inner = [verdict("x"), verdict("y")]
    added = {"name": "N", "checks": inner, "stages": [{"m": 1, "chosen": ["a"]}]}
    old = row(verdicts=[verdict("A")], extra=None)
    new = row(verdicts=[verdict("A"), added], flags={"checks": inner})
    assert changes(old, new) == [
        ("route.extra", "removed", None, None),
        ("route.flags", "added", None, {"checks": inner}),
        ("route.verdicts[N]", "added", None, added),
    ]
    # Plain lists, not the internal keyed mappings (which would compare unequal above).
    assert all(type(c.new["checks"]) is list for c in field_changes(old, new) if c.new)


def test_changes_are_sorted_by_path_numbers_as_numbers() -> None:
    # Text order would put M=128 before M=8 and [10] before [2]; the paths sort numerically.
    stages = [{"m": m, "chosen": ["a"]} for m in (8, 128)]
    chain = list(range(12))
    old = row(stages=stages, chain=[{"v": v} for v in chain], z=0, a=0)
    new = copy.deepcopy(old)
    for item in new["route"]["stages"]:
        item["chosen"] = ["b"]
    new["route"]["chain"][2]["v"] = -1
    new["route"]["chain"][10]["v"] = -1
    new["route"]["a"] = new["route"]["z"] = 1
    assert [c.path for c in field_changes(old, new)] == [
        "route.a",
        "route.chain[2].v",
        "route.chain[10].v",
        "route.stages[M=8].chosen[0]",
        "route.stages[M=128].chosen[0]",
        "route.z",
    ]
    records = [{"op": "a", "plan": {"m": m}} for m in (128, 8, 8)]
    edited = [dict(r, op="b") for r in records]
    assert [c.path for c in field_changes(row(d=records), row(d=edited))] == [
        "route.d[M=8,0].op",
        "route.d[M=8,1].op",
        "route.d[M=128,0].op",
    ]


def test_a_change_of_type_is_a_change() -> None:
    old = row(v=1, w={"a": 1}, x=[1])
    new = row(v="1", w=[1], x={"a": 1})
    assert changes(old, new) == [
        ("route.v", "changed", 1, "1"),
        ("route.w", "changed", {"a": 1}, [1]),
        ("route.x", "changed", [1], {"a": 1}),
    ]


def test_a_row_differing_only_where_deepdiff_sees_no_difference_is_shown_whole() -> None:
    # DeepDiff matches the items of a list of scalars by hash: [true] and [1] read equal to
    # it, not to JSON. The row still changed; the change is the whole row.
    old, new = row(v=[True]), row(v=[1])
    assert field_changes(old, new) == [FieldChange("", "changed", old, new)]


# --- paths ---------------------------------------------------------------------------------


def test_change_paths_spell_keys_indexes_and_quoted_names() -> None:
    key = ItemKey("w2.chunked", ("w2.chunked",))
    assert change_path(["route", "stages", ItemKey("M=8", (8,)), "rejected", key, "code"]) == (
        "route.stages[M=8].rejected[w2.chunked].code"
    )
    assert change_path(["route", "bytes", "a-b", 3, "_x1"]) == 'route.bytes["a-b"][3]._x1'
    assert change_path(["a b"]) == '["a b"]'
    assert change_path([2, "x"]) == "[2].x"
    assert change_path([key, "x"]) == "[w2.chunked].x"
    assert change_path([]) == ""
    old, new = row(**{"odd key": 1}), row(**{"odd key": 2})
    assert changes(old, new) == [('route["odd key"]', "changed", 1, 2)]


def test_row_values_names_every_value_by_its_change_path() -> None:
    value = row(verdicts=[verdict("K")], stages=[{"m": 8, "chosen": ["a"]}], n=[1])
    assert row_values(value) == {
        "id": RID,
        "route": value["route"],
        "route.verdicts": [verdict("K")],
        "route.verdicts[K]": verdict("K"),
        "route.verdicts[K].name": "K",
        "route.verdicts[K].ok": True,
        "route.verdicts[K].code": None,
        "route.stages": [{"m": 8, "chosen": ["a"]}],
        "route.stages[M=8]": {"m": 8, "chosen": ["a"]},
        "route.stages[M=8].m": 8,
        "route.stages[M=8].chosen": ["a"],
        "route.stages[M=8].chosen[0]": "a",
        "route.n": [1],
        "route.n[0]": 1,
    }
    # Containers are plain JSON again: a keyed list reads back as the list it is.
    assert type(row_values(value)["route.verdicts"]) is list


# --- JSON equality -------------------------------------------------------------------------


BIG = 2**70  # orjson writes no integer beyond 64 bits: these rows are compared by a walk


@pytest.mark.parametrize(
    "old,new,same",
    [
        ([BIG, 0.0], [BIG, 0.0], True),
        ([BIG, {"a": 1, "b": 2}], [BIG, {"b": 2, "a": 1}], True),  # key order is no datum
        ([BIG, 0.0], [BIG, -0.0], False),  # float bits
        ([BIG, 1], [BIG, True], False),
        ([BIG, 1], [BIG, 1.0], False),
        ([BIG, {"a": 1}], [BIG, {"a": 1.0}], False),  # inside a mapping
        ([BIG, [[0]]], [BIG, [[False]]], False),  # inside nested lists
        ({"big": BIG, "v": 0}, {"big": BIG, "v": False}, False),
        (BIG, BIG + 1, False),
    ],
)
def test_rows_orjson_cannot_write_are_equal_only_as_json(old: Any, new: Any, same: bool) -> None:
    result = compare_rows([row(v=old)], [row(v=new)])
    assert result.identical is same
    assert result.changed == ({} if same else {RID: tuple(field_changes(row(v=old), row(v=new)))})


def test_equal_rows_of_other_key_order_are_identical_and_reach_no_differ() -> None:
    calls: list[Any] = []

    def differ(old: dict[str, Any], new: dict[str, Any]) -> list[FieldChange]:
        calls.append((old, new))
        return []

    old = row(a=1, b={"x": [1.5, None], "y": "s"})
    new = {"route": {"b": {"y": "s", "x": [1.5, None]}, "a": 1}, "id": RID}
    assert compare_rows([old], [new], differ=differ).identical
    assert calls == []


# --- the comparison ------------------------------------------------------------------------


def rid(i: int) -> str:
    return f"model{i}/float16/tp1/none/c1/q8192"


def test_compare_rows_whole_comparison() -> None:
    calls: list[tuple[Any, Any]] = []

    def differ(old: dict[str, Any], new: dict[str, Any]) -> list[FieldChange]:
        calls.append((old["route"]["v"], new["route"]["v"]))
        return [FieldChange("route.v", "changed", old["route"]["v"], new["route"]["v"])]

    # Given in no order: every list of the comparison is sorted by id.
    old = [{"id": rid(i), "route": {"v": i}} for i in (5, 1, 4, 3, 9)]
    new = [{"id": rid(i), "route": {"v": -i if i in (4, 3) else i}} for i in (4, 8, 3, 1, 2)]
    result = compare_rows(old, new, differ=differ)
    assert result == Comparison(
        added=(rid(2), rid(8)),
        removed=(rid(5), rid(9)),
        changed={
            rid(3): (FieldChange("route.v", "changed", 3, -3),),
            rid(4): (FieldChange("route.v", "changed", 4, -4),),
        },
        fresh_ids=frozenset(rid(i) for i in (1, 2, 3, 4, 8)),
        baseline_ids=frozenset(rid(i) for i in (1, 3, 4, 5, 9)),
        baseline_present=True,
    )
    assert list(result.changed) == [rid(3), rid(4)]
    assert calls == [(3, -3), (4, -4)]  # old first, once per changed row, in id order
    assert result.moved == frozenset(rid(i) for i in (2, 3, 4, 5, 8, 9))
    assert not result.identical


@pytest.mark.parametrize(
    "comparison,identical",
    [
        (Comparison((), (), {}), True),
        (Comparison((rid(1),), (), {}), False),
        (Comparison((), (rid(1),), {}), False),
        (Comparison((), (), {rid(1): ()}), False),
        (Comparison((), (), {}, baseline_present=False), False),
    ],
)
def test_identical_needs_no_moved_row_and_a_baseline(
    comparison: Comparison, identical: bool
) -> None:
    assert comparison.identical is identical


def test_no_baseline_file_versus_an_empty_one() -> None:
    fresh = [{"id": rid(1), "route": {}}]
    missing = compare_rows(None, fresh)
    assert missing == Comparison(
        added=(rid(1),),
        removed=(),
        changed={},
        fresh_ids=frozenset({rid(1)}),
        baseline_ids=frozenset(),
        baseline_present=False,
    )
    empty = compare_rows([], fresh)
    assert empty.baseline_present and empty.added == (rid(1),)


def test_a_field_change_as_json() -> None:
    change = FieldChange("route.v", "changed", [1], {"a": None})
    assert change.to_json() == {
        "path": "route.v",
        "kind": "changed",
        "old": [1],
        "new": {"a": None},
    }


# --- keyed lists inside lists compared by position ---------------------------------------------

NESTED = {"x": [{"items": [{"name": "a", "sub": [{"name": "s"}, {"name": "t"}]}]}]}


def test_a_keyed_list_inside_a_list_by_position_is_keyed_at_every_depth() -> None:
    # The outer list has no identity (by position); `items` and `sub` are keyed by name.
    assert list(row_values(NESTED)) == [
        "x",
        "x[0]",
        "x[0].items",
        "x[0].items[a]",
        "x[0].items[a].name",
        "x[0].items[a].sub",
        "x[0].items[a].sub[s]",
        "x[0].items[a].sub[s].name",
        "x[0].items[a].sub[t]",
        "x[0].items[a].sub[t].name",
    ]
    assert row_values(NESTED)["x[0].items[a].sub"] == [{"name": "s"}, {"name": "t"}]
    assert unkeyed(keyed(NESTED)) == NESTED


def test_a_reorder_inside_a_list_by_position_is_one_reordered_change() -> None:
    old = {"id": "r", "route": {"x": [{"items": [{"name": "a"}, {"name": "b"}]}]}}
    new = {"id": "r", "route": {"x": [{"items": [{"name": "b"}, {"name": "a"}]}]}}
    assert field_changes(old, new) == [
        FieldChange("route.x[0].items", "reordered", ["a", "b"], ["b", "a"])
    ]
    # Deeper still: a keyed list inside a keyed item inside a list by position.
    old2 = {"id": "r", "route": copy.deepcopy(NESTED)}
    new2 = copy.deepcopy(old2)
    new2["route"]["x"][0]["items"][0]["sub"].reverse()
    assert field_changes(old2, new2) == [
        FieldChange("route.x[0].items[a].sub", "reordered", ["s", "t"], ["t", "s"])
    ]


def test_a_mapping_whose_keys_all_changed_is_each_key_added_and_removed() -> None:
    # DeepDiff's default threshold reports a mostly different dict as one changed value;
    # routectl names each key.
    old = {"id": "r", "route": {"k": {"a": 1, "b": 2}}}
    new = {"id": "r", "route": {"k": {"c": 3, "d": 4}}}
    assert field_changes(old, new) == [
        FieldChange("route.k.a", "removed", 1, None),
        FieldChange("route.k.b", "removed", 2, None),
        FieldChange("route.k.c", "added", None, 3),
        FieldChange("route.k.d", "added", None, 4),
    ]
