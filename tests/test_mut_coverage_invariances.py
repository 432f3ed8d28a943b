"""Declared invariances on hand-made rows: which change paths a declared field covers
(`routectl.rows.Invariance.covers`) and what the verifier reports
(`routectl.review.invariances`; docs/invariances.md).

A declared `*` stands for one key or item of a mapping or list, as the review spells it in a
change path (`routectl.review.compare.change_path`): `.name` for an identifier, a JSON-quoted
`["..."]` for any other key (a layer name holds dots; a key may hold `]` or a quote), `[0]`
for an index and `[text]` for a keyed list's item. Before this file, a quoted key holding `]`
(`route.layers["a]b"].kernel`) was not covered, so a broken invariance over such a layer
named the fallback change instead of the real one and a stated field did not cover it. The
verifier's tests compare whole breaks: the pair (fewest differing dimensions, first in the
declared order), the change (a changed value before an added one, the least deep first), the
number of disagreeing classes and every row involved. Written for issue 28's mutation run.
"""

from __future__ import annotations

from typing import Any

import pytest

from routectl.io.schemas import format_path
from routectl.replay.harness import row_text
from routectl.review.compare import FieldChange, ItemKey, change_path
from routectl.review.invariances import (
    GridRows,
    Signatures,
    breaks_of,
    signature,
    verify_category,
    verify_invariance,
)
from routectl.rows import Invariance

LAYERS = Invariance("layers", ("kv",), ("route.layers.*.kernel",), "why")

KEYS = ["a", "model.layers.0.mlp", "a]b", 'a"b]', "x[0]", "a\\]", "ключ", 3]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_a_star_covers_one_key_however_the_path_spells_it(key: Any) -> None:
    path = format_path(["route", "layers", key, "kernel"])
    assert LAYERS.covers(path), path
    assert LAYERS.covers(path + ".name")  # below a declared field
    assert LAYERS.covers(path + "[0]")
    assert not LAYERS.covers(path + "s")  # another field that starts the same
    assert not LAYERS.covers(format_path(["route", "layers", key, "plan"]))
    assert not LAYERS.covers(format_path(["route", "layers", key]))  # above it
    assert not LAYERS.covers(format_path(["route", "layers", key, key, "kernel"]))  # two keys


def test_a_star_covers_a_keyed_item_and_a_declared_name_only_itself() -> None:
    item = change_path(["route", "layers", ItemKey("M=8,0", (8, 0)), "kernel"])
    assert item == "route.layers[M=8,0].kernel" and LAYERS.covers(item)
    plain = Invariance("k", ("c", "q"), ("route.kernel", "route.bytes"))
    assert plain.covers("route.kernel") and plain.covers("route.bytes.total")
    assert not plain.covers("route.kernels") and not plain.covers("route")
    assert not plain.covers("xroute.kernel") and not plain.covers("route_kernel")
    assert plain.statement == "c and q never change route.kernel or route.bytes"
    assert LAYERS.statement == "kv never changes route.layers.*.kernel"
    three = Invariance("t", ("kv", "c", "q"), ("route",))
    assert three.statement == "kv, c and q never change route"


@pytest.mark.parametrize(
    ("dimensions", "fields"),
    [((), ("route",)), (("kv",), ()), (("kv", "size"), ("route",))],
)
def test_a_declaration_needs_known_dimensions_and_a_field(dimensions: Any, fields: Any) -> None:
    with pytest.raises(ValueError, match="needs dimensions among"):
        Invariance("bad", dimensions, fields)


def rid(kv: str = "float16", tp: int = 1, c: int = 1, q: int = 8192, model: str = "m") -> str:
    return f"{model}/{kv}/tp{tp}/none/c{c}/q{q}"


def r(row_id: str, **route: Any) -> dict[str, Any]:
    return {"id": row_id, "route": route}


def test_a_break_over_a_layer_whose_name_holds_a_bracket_names_that_layer() -> None:
    key = "model.layers[0]"
    a = r(rid(), layers={key: {"kernel": "K1", "plan": 1}})
    b = r(rid(kv="fp8"), layers={key: {"kernel": "K2", "plan": 1}})
    broken = verify_invariance("cat", LAYERS, [a, b])
    assert broken is not None
    assert broken.rows == (a["id"], b["id"])
    expected = format_path(["route", "layers", key, "kernel"])
    assert broken.change.path == expected == 'route.layers["model.layers[0]"].kernel'
    assert (broken.change.kind, broken.change.old, broken.change.new) == ("changed", "K1", "K2")
    assert broken.classes == 1 and broken.involved == {a["id"], b["id"]}
    assert breaks_of([expected], [b["id"]], [broken]) == ("layers",)


def test_the_break_names_the_closest_pair_the_first_change_and_every_class() -> None:
    # Invariance over kv and tp; classes are (model, spec, c, q). Class c1 holds three rows:
    # the first unequal pair is two dimensions apart (kv and tp), a later one one apart (tp).
    inv = Invariance("i", ("kv", "tp"), ("route.kernel", "route.bytes", "route.a"))
    base = {"kernel": "A", "bytes": {"total": 1}, "a": 1}
    rows = [
        r(rid(), **base),
        r(rid(kv="fp8", tp=2), kernel="B", bytes={"total": 2}),
        r(rid(kv="fp8"), **base),
        r(rid(c=2), kernel="A"),
        r(rid(c=2, tp=2), kernel="A"),  # c2 agrees
        r(rid(c=4), **base),
        r(rid(c=4, kv="fp8"), **{**base, "bytes": {"total": 3}}),
        r("edge:probe", kernel="Z"),  # not a grid cell
    ]
    broken = verify_invariance("cat", inv, rows, [row["id"] for row in rows])
    assert broken is not None
    assert broken.rows == (rid(kv="fp8", tp=2), rid(kv="fp8"))
    # Between them route.bytes.total and route.kernel changed and route.a was added: a
    # changed value first, the least deep of those.
    assert (broken.change.path, broken.change.old, broken.change.new) == ("route.kernel", "B", "A")
    assert broken.classes == 2
    assert broken.involved == {
        rid(),
        rid(kv="fp8", tp=2),
        rid(kv="fp8"),
        rid(c=4),
        rid(c=4, kv="fp8"),
    }
    statement = "kv and tp never change route.kernel, route.bytes or route.a"
    assert broken.text() == (
        f"invariance i broken ({statement}): "
        f"cat:{rid(kv='fp8', tp=2)} and cat:{rid(kv='fp8')} differ (and 1 more row classes)"
    )
    assert broken.to_json() == {
        "invariance": "i",
        "dimensions": ["kv", "tp"],
        "fields": ["route.kernel", "route.bytes", "route.a"],
        "statement": statement,
        "rows": [f"cat:{rid(kv='fp8', tp=2)}", f"cat:{rid(kv='fp8')}"],
        "change": broken.change.to_json(),
        "classes": 2,
    }
    # Without the declared order the rows follow by id (float16 < fp8/tp1 < fp8/tp2).
    alone = verify_invariance("cat", inv, rows[:3])
    assert alone is not None and alone.rows == (rid(kv="fp8"), rid(kv="fp8", tp=2))
    assert alone.classes == 1 and alone.text().endswith("differ")
    assert (alone.change.path, alone.change.old, alone.change.new) == ("route.kernel", "A", "B")


def test_the_first_pair_with_unequal_values_when_none_is_one_apart() -> None:
    inv = Invariance("i", ("kv", "tp"), ("route.kernel",))
    rows = [
        r(rid(), kernel="A"),
        r(rid(kv="fp8", tp=2), kernel="A"),
        r(rid(kv="bf16", tp=4), kernel="B"),
        r(rid(kv="e5", tp=8), kernel="B"),
    ]
    broken = verify_invariance("cat", inv, rows, [row["id"] for row in rows])
    assert broken is not None and broken.rows == (rid(), rid(kv="bf16", tp=4))


def test_a_changed_value_before_an_added_one_and_absent_fields() -> None:
    inv = Invariance("i", ("q",), ("route.a", "route.b"))
    rows = [
        r(rid(), a={"x": 1}, b={"deep": {"v": 1}}),
        r(rid(q=1), a={"x": 1, "y": 2}, b={"deep": {"v": 2}}),
    ]
    broken = verify_invariance("cat", inv, rows)
    assert broken is not None
    assert (broken.change.path, broken.change.kind) == ("route.b.deep.v", "changed")
    # A declared field one row lacks breaks the statement (absent differs from any value).
    missing = verify_invariance(
        "cat", Invariance("m", ("q",), ("route.z",)), [r(rid(), z=None), r(rid(q=1))]
    )
    assert missing is not None and missing.rows == (rid(q=1), rid())  # by id: q1 < q8192
    assert (
        verify_invariance("cat", Invariance("m", ("q",), ("route.z",)), [r(rid()), r(rid(q=1))])
        is None
    )


def test_signatures_keep_json_types_apart_and_read_star_over_lists_and_mappings() -> None:
    row = r(rid(), layers=[{"kernel": "K"}, {"kernel": "L"}], flag=True, n=1)
    assert signature(row, ("route.layers.*.kernel",)) == b'[[[1,"K"],[1,"L"]]]'
    assert signature(row, ("route.flag", "route.n")) == b"[[1,true],[1,1]]"
    assert signature(row, ("route.n.*",)) == b"[[0]]"  # `*` under a scalar: absent
    assert signature(row, ("route.none",)) == b"[[0]]"
    as_map = r(rid(), layers={"b": {"kernel": 1}, "a": {}})
    assert signature(as_map, ("route.layers.*.kernel",)) == b'[{"a":[0],"b":[1,1]}]'
    assert signature(r(rid(), big=2**70), ("route.big",)) == b"[[1,1180591620717411303424]]"


def test_signatures_from_texts_equal_serialised_ones() -> None:
    import orjson

    rows = {i: r(i, kernel="A", n=1) for i in (rid(), rid(q=1))}
    texts = {i: orjson.dumps(row, option=orjson.OPT_SORT_KEYS).decode() for i, row in rows.items()}
    sigs = Signatures(rows, texts)
    for i in rows:
        assert sigs.of(i, ("route",)) == '{"kernel":"A","n":1}'
        assert sigs.of(i, ("route.kernel",)) == signature(rows[i], ("route.kernel",))
    # A text that is not the row's own: every row serialised.
    bad = Signatures(rows, {**texts, rid(): '{"id":"other","route":{}}'})
    assert bad.of(rid(), ("route",)) == signature(rows[rid()], ("route",))
    grid = GridRows(list(rows.values()), (), texts)
    assert [i for i, _ in grid.grid] == sorted(rows)


def test_breaks_of_needs_a_row_involved_and_a_declared_field_moved() -> None:
    a, b = r(rid(), kernel="A"), r(rid(kv="fp8"), kernel="B")
    broken = verify_invariance("cat", Invariance("k", ("kv",), ("route.kernel",)), [a, b])
    assert broken is not None
    assert breaks_of(["route.kernel"], [a["id"]], [broken]) == ("k",)
    assert breaks_of([], [b["id"]], [broken]) == ("k",)  # an added row moves everything
    assert breaks_of(["route.plan"], [a["id"]], [broken]) == ()
    assert breaks_of(["route.kernel"], ["other"], [broken]) == ()


def test_a_class_of_one_row_agrees_with_itself() -> None:
    # A grid with a hole: the (c=2) class holds one row; the (c=1) class breaks.
    inv = Invariance("i", ("kv",), ("route.kernel",))
    rows = [r(rid(c=2), kernel="A"), r(rid(), kernel="A"), r(rid(kv="fp8"), kernel="B")]
    broken = verify_invariance("cat", inv, rows)
    assert broken is not None
    assert broken.classes == 1 and broken.involved == {rid(), rid(kv="fp8")}
    assert verify_invariance("cat", inv, rows[:1]) is None


def test_the_least_deep_change_counts_dots_and_brackets_alike() -> None:
    # route.a.b is two steps deep, route.l[0][0][0] four (one dot, three brackets).
    inv = Invariance("i", ("kv",), ("route.l", "route.a"))
    rows = [
        r(rid(), l=[[[1]]], a={"b": 1}),
        r(rid(kv="fp8"), l=[[[2]]], a={"b": 2}),
    ]
    broken = verify_invariance("cat", inv, rows)
    assert broken is not None
    assert broken.change.to_json() == FieldChange("route.a.b", "changed", 1, 2).to_json()


def test_a_change_no_declared_path_covers_names_the_first_declared_field() -> None:
    # `*` under a scalar reads as absent and over a list as its items: unequal signatures,
    # yet the only change (route.x itself) is above the declared field.
    inv = Invariance("i", ("kv",), ("route.x.*", "route.y"))
    rows = [r(rid(), x=5, y=1), r(rid(kv="fp8"), x=[1], y=1)]
    broken = verify_invariance("cat", inv, rows)
    assert broken is not None
    assert broken.change.to_json() == FieldChange("route.x.*", "changed", None, None).to_json()


def test_values_beyond_64_bits_compare_with_sorted_keys() -> None:
    # orjson refuses the integer; the fallback must sort keys as orjson does, or two equal
    # mappings built in another order would break the statement.
    inv = Invariance("i", ("kv",), ("route.z",))
    rows = [r(rid(), z={"b": 2**70, "a": 1}), r(rid(kv="fp8"), z={"a": 1, "b": 2**70})]
    assert verify_invariance("cat", inv, rows) is None
    assert signature(rows[0], ("route.z",)) == signature(rows[1], ("route.z",))


class _Declaring:
    """A category as verify_category reads one: a name, its rows' order, its invariances."""

    name = "cat"

    def __init__(self, ids: list[str], declared: tuple[Invariance, ...]) -> None:
        self._ids = ids
        self._declared = declared

    def rows(self) -> list[Any]:
        return [_Spec(i) for i in self._ids]

    def invariances(self) -> tuple[Invariance, ...]:
        return self._declared


class _Spec:
    def __init__(self, row_id: str) -> None:
        self.id = row_id


def test_a_category_verified_from_its_texts_equals_one_verified_from_its_rows() -> None:
    kernel = Invariance("kernel", ("kv",), ("route.kernel",))
    whole = Invariance("whole", ("tp",), ("route",))
    rows = [
        r(rid(), kernel="A", n=1),
        r(rid(kv="fp8"), kernel="A", n=2),  # same kernel, another route text
        r(rid(c=2), kernel="A", n=1),
        r(rid(c=2, kv="fp8"), kernel="B", n=1),  # breaks `kernel` in class c2
        r(rid(tp=2), kernel="A", n=1),
    ]
    category = _Declaring([row["id"] for row in rows], (kernel, whole))
    texts = [(row["id"], row_text(row)) for row in rows]
    from_texts = verify_category(category, rows, texts=texts)
    assert from_texts == verify_category(category, rows)
    assert [(b.category, b.name, b.rows) for b in from_texts] == [
        ("cat", "kernel", (rid(c=2), rid(c=2, kv="fp8"))),
    ]
