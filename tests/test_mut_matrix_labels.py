"""What a matrix cell shows, from the shape of a route (routectl/review/matrix.py's docstrings,
docs/commands.md "routectl matrix"): the kernel label of an error, a multi-layer route, an MoE
route's M = 1 stages, a status or nothing; the `--field` label of a dotted field, of a field
the layers hold, of a route without it; the field paths `--field` accepts and the error that
names the closest one; the dimension names `--rows` and `--cols` accept.

The label's kind decides its symbol class (kernels upper-case letters, statuses lower-case,
errors digits) and so the legend's order: each Label is compared whole, text and kind.
"""

from __future__ import annotations

from typing import Any

import pytest

from routectl.errors import InputError
from routectl.review.matrix import (
    Label,
    check_field,
    field_label,
    kernel_label,
    parse_dimensions,
    route_fields,
    row_label,
)

ERROR = {"error": {"code": "missing_ops", "message": "no ops"}}
STATUS = {"kernel": None, "status": {"code": "not_applicable", "message": "m"}}


def test_kernel_labels_by_the_shape_of_the_route() -> None:
    assert kernel_label({**ERROR, "kernel": "K"}) == Label("error missing_ops", "error")
    assert kernel_label({"kernel": "K"}) == Label("K", "kernel")
    # An empty layer map is no multi-layer route: the route's own kernel.
    assert kernel_label({"kernel": "K", "layers": {}}) == Label("K", "kernel")
    assert kernel_label(STATUS) == Label("status not_applicable", "status")
    assert kernel_label({"kernel": None}) == Label("nothing selected", "none")


def test_an_moe_label_names_the_m1_stages_in_order() -> None:
    stages = [
        {"m": 8, "chosen": ["x"]},
        {"m": 1, "chosen": ["gemv", "reduce"]},
    ]
    assert kernel_label({"kernel": "K", "stages": stages}) == Label(
        "K, M=1 gemv > reduce", "kernel"
    )
    # No M = 1 stage, or one that chose nothing: the kernel alone.
    assert kernel_label({"kernel": "K", "stages": [{"m": 1, "chosen": []}]}) == Label("K", "kernel")


def test_a_multi_layer_label_is_one_label_or_each_layer_named() -> None:
    same = {"layers": {"a": {"kernel": "K"}, "b": {"kernel": "K"}}}
    assert kernel_label(same) == Label("K", "kernel")
    # Mixed layers: each named in order; the kind is the most alarming one present.
    assert kernel_label({"layers": {"a": {"kernel": "K"}, "b": STATUS}}) == Label(
        "a K; b status not_applicable", "kernel"
    )
    assert kernel_label({"layers": {"a": {"kernel": "K"}, "b": ERROR}}) == Label(
        "a K; b error missing_ops", "error"
    )
    assert kernel_label({"layers": {"a": ERROR, "b": {"kernel": "K"}}}) == Label(
        "a error missing_ops; b K", "error"
    )
    assert kernel_label({"layers": {"a": STATUS, "b": {"kernel": None}}}) == Label(
        "a status not_applicable; b nothing selected", "status"
    )


@pytest.mark.parametrize(
    ("path", "route", "label"),
    [
        ("prepared_layout", {"prepared_layout": "qpn4"}, Label("prepared_layout qpn4", "value")),
        ("bytes.total", {"bytes": {"total": 1234567}}, Label("bytes.total 1,234,567", "value")),
        ("fallback", {"fallback": True}, Label("fallback true", "value")),
        ("fallback", {"fallback": False}, Label("fallback false", "value")),
        ("fallback", {"fallback": None}, Label("fallback none", "value")),
        (
            "plan",
            {"plan": {"n": 2, "m": [1, "x"]}},
            Label('plan {"m":[1,"x"],"n":2}', "value"),  # sorted keys, no spaces
        ),
        ("status", STATUS, Label("status not_applicable", "status")),
        ("status", {"status": None}, Label("status none", "value")),
        ("bytes.total", ERROR, Label("error missing_ops", "error")),
        ("bytes.total", STATUS, Label("status not_applicable", "status")),
        ("bytes.total", {"bytes": {}}, Label("no bytes.total", "none")),
        ("bytes.total", {"bytes": 3}, Label("no bytes.total", "none")),
    ],
)
def test_field_labels(path: str, route: dict[str, Any], label: Label) -> None:
    assert field_label(route, path) == label


def test_a_field_of_the_layers_is_one_value_or_each_layer_named() -> None:
    def layered(a: Any, b: Any) -> dict[str, Any]:
        return {"layers": {"a": a, "b": b}}

    assert field_label(layered({"x": 1}, {"x": 1}), "x") == Label("1", "value")
    assert field_label(layered({"x": 1000}, {"x": {"k": 1}}), "x") == Label(
        'a 1,000; b {"k":1}', "value"
    )
    # A layer without the field shows a dash; a None value its JSON.
    assert field_label(layered({"x": None}, {"y": 1}), "x") == Label("null", "value")
    assert field_label(layered({"x": True}, {"x": None}), "x") == Label("a true; b null", "value")
    assert field_label(layered({"x": "p"}, {"y": 1}), "x") == Label("p", "value")
    three = {"layers": {"a": {"x": 1}, "b": {"y": 1}, "c": {"x": 2}}}
    assert field_label(three, "x") == Label("a 1; b -; c 2", "value")
    # No layer holds it: the route's status, else nothing.
    assert field_label({**STATUS, **layered({}, {})}, "x") == Label(
        "status not_applicable", "status"
    )
    assert field_label(layered({}, {}), "x") == Label("no x", "none")
    # The route's own field wins over its layers'.
    assert field_label({"x": 5, **layered({"x": 1}, {"x": 2})}, "x") == Label("x 5", "value")


def test_row_label_takes_the_hook_only_for_the_default_view() -> None:
    def hook(route: Any) -> tuple[str, str] | None:
        return ("own", "status") if route.get("mine") else None

    route = {"kernel": "K", "mine": True, "x": 1}
    assert row_label(route, None, hook) == Label("own", "status")
    assert row_label({"kernel": "K"}, None, hook) == Label("K", "kernel")
    assert row_label(route, "x", hook) == Label("x 1", "value")
    assert row_label(route, None) == Label("K", "kernel")


def test_route_fields_lists_every_dotted_path_and_the_layers_fields_as_their_own() -> None:
    route = {"kernel": "K", "bytes": {"total": 1}, "layers": {"a": {"layout": {"n": 1}}}}
    assert list(route_fields(route)) == [
        "kernel",
        "bytes",
        "bytes.total",
        "layers",
        "layout",
        "layout.n",
        "layers.a",
        "layers.a.layout",
        "layers.a.layout.n",
    ]
    # Only the top level's `layers` is a layer map.
    nested = {"x": {"layers": {"a": {"k": 1}}}}
    assert list(route_fields(nested)) == ["x", "x.layers", "x.layers.a", "x.layers.a.k"]
    assert list(route_fields(["kernel"])) == []


def test_check_field_accepts_a_field_of_some_route_or_layer() -> None:
    check_field("bytes.total", [{"kernel": "K"}, {"bytes": {"total": 0}}])
    check_field("layout", [{"layers": {"a": {"kernel": "K"}, "b": {"layout": None}}}])
    check_field("layers.b", [{"layers": {"a": {}, "b": {}}}])


def test_check_field_names_the_closest_field_of_any_route() -> None:
    routes = [{"kernel": "K"}, {"layers": {"a": {"prepared_layout": "x"}}}]
    with pytest.raises(InputError) as raised:
        check_field("prepared_layuot", routes)
    assert str(raised.value) == (
        "no route has a field 'prepared_layuot'; did you mean prepared_layout?"
    )
    with pytest.raises(InputError) as raised:
        check_field("bytes.totl", [{"bytes": {"total": 1}}])
    assert str(raised.value) == "no route has a field 'bytes.totl'; did you mean bytes.total?"
    with pytest.raises(InputError) as raised:
        check_field("zzzz", [{"kernel": "K"}])
    assert str(raised.value) == "no route has a field 'zzzz'"


def test_dimension_names_aliases_and_their_errors() -> None:
    assert parse_dimensions("model, tp x spec", ()) == ("model", "tp", "spec")
    assert parse_dimensions("concurrency,budget", ()) == ("c", "q")
    assert parse_dimensions("tokens tensor_parallel", ()) == ("q", "tp")
    assert parse_dimensions(None, ["kv"]) == ("kv",)
    with pytest.raises(InputError) as raised:
        parse_dimensions("model,batch", ())
    assert str(raised.value) == (
        "unknown matrix dimension 'batch': choose from model, kv, tp, spec, c, q"
    )
    with pytest.raises(InputError) as raised:
        parse_dimensions("c,concurrency", ())
    assert str(raised.value) == "matrix dimension 'c' is named twice"
    with pytest.raises(InputError) as raised:
        parse_dimensions(" , ", ())
    assert str(raised.value) == "name at least one matrix dimension"
