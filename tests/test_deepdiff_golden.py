"""Golden output of DeepDiff on a fixed pair of rows, with the parameters routectl uses.

Field-level diffs in reports come from DeepDiff; a library change to report types, paths or
the `threshold_to_diff_deeper` behaviour must show up here, not in a reviewer's diff.
"""

from __future__ import annotations

import copy
import json

from deepdiff import DeepDiff

from routectl.review.compare import FieldChange, field_changes


def verdict(name: str, ok: bool, not_needed: bool = False) -> dict:
    return {"name": name, "ok": ok, "code": None, "message": None, "not_needed": not_needed}


OLD = {
    "id": "edge:misaligned_k",
    "route": {
        "kernel": "Qpn2",
        "verdicts": [verdict("Qpn2", True), verdict("Turbo", True, not_needed=True)],
        "capability": 70,
        "prepared_layout": "qpn2",
        "flags": {"compact_scales": True, "gated": False},
        "fallbacks": [],
        "bytes": {"tensors": {"codes": 100, "scales": 10}, "total": 110, "scratch": {}},
        "prepare": [{"op": "prep", "plan": {"k": 5120, "n": 4120}}],
        "dispatch": [
            {"op": "d", "plan": {"m": 1, "split_k": 16}},
            {"op": "d", "plan": {"m": 8, "split_k": 16}},
        ],
        "fallback": False,
        "status": None,
    },
}


def new_row() -> dict:
    new = copy.deepcopy(OLD)
    r = new["route"]
    r["kernel"] = "Turbo"
    r["verdicts"][0].update(ok=False, code="k_align", message="K % 128 != 0")
    r["verdicts"][1]["not_needed"] = False
    r["prepared_layout"] = None
    r["flags"]["compact_scales"] = 1
    del r["flags"]["gated"]
    r["flags"]["batch"] = True
    r["fallbacks"].append(
        {"field": "kernel", "requested": "Qpn2", "effective": "Turbo", "reason": "K"}
    )
    r["bytes"]["tensors"]["codes"] = 200
    r["bytes"]["total"] = 210
    r["dispatch"][0]["plan"]["split_k"] = 1
    del r["dispatch"][1]
    r["fallback"] = True
    return new


def plain(diff: DeepDiff) -> dict:
    return json.loads(diff.to_json())


def test_deepdiff_text_view_is_pinned():
    got = plain(DeepDiff(OLD, new_row(), threshold_to_diff_deeper=0, verbose_level=2))
    assert got == {
        "dictionary_item_added": {"root['route']['flags']['batch']": True},
        "dictionary_item_removed": {"root['route']['flags']['gated']": False},
        "iterable_item_added": {
            "root['route']['fallbacks'][0]": {
                "field": "kernel",
                "requested": "Qpn2",
                "effective": "Turbo",
                "reason": "K",
            }
        },
        "iterable_item_removed": {
            "root['route']['dispatch'][1]": {"op": "d", "plan": {"m": 8, "split_k": 16}}
        },
        "type_changes": {
            "root['route']['flags']['compact_scales']": {
                "old_type": "bool",
                "new_type": "int",
                "old_value": True,
                "new_value": 1,
            },
            "root['route']['prepared_layout']": {
                "old_type": "str",
                "new_type": "NoneType",
                "old_value": "qpn2",
                "new_value": None,
            },
            "root['route']['verdicts'][0]['code']": {
                "old_type": "NoneType",
                "new_type": "str",
                "old_value": None,
                "new_value": "k_align",
            },
            "root['route']['verdicts'][0]['message']": {
                "old_type": "NoneType",
                "new_type": "str",
                "old_value": None,
                "new_value": "K % 128 != 0",
            },
        },
        "values_changed": {
            "root['route']['bytes']['tensors']['codes']": {"new_value": 200, "old_value": 100},
            "root['route']['bytes']['total']": {"new_value": 210, "old_value": 110},
            "root['route']['dispatch'][0]['plan']['split_k']": {"new_value": 1, "old_value": 16},
            "root['route']['fallback']": {"new_value": True, "old_value": False},
            "root['route']['kernel']": {"new_value": "Turbo", "old_value": "Qpn2"},
            "root['route']['verdicts'][0]['ok']": {"new_value": False, "old_value": True},
            "root['route']['verdicts'][1]['not_needed']": {"new_value": False, "old_value": True},
        },
    }


def test_field_changes_are_pinned():
    assert field_changes(OLD, new_row()) == [
        FieldChange("route.bytes.tensors.codes", "changed", 100, 200),
        FieldChange("route.bytes.total", "changed", 110, 210),
        FieldChange("route.dispatch[M=1,0].plan.split_k", "changed", 16, 1),
        FieldChange(
            "route.dispatch[M=8,0]", "removed", {"op": "d", "plan": {"m": 8, "split_k": 16}}, None
        ),
        FieldChange("route.fallback", "changed", False, True),
        FieldChange(
            "route.fallbacks[kernel]",
            "added",
            None,
            {"field": "kernel", "requested": "Qpn2", "effective": "Turbo", "reason": "K"},
        ),
        FieldChange("route.flags.batch", "added", None, True),
        FieldChange("route.flags.compact_scales", "changed", True, 1),
        FieldChange("route.flags.gated", "removed", False, None),
        FieldChange("route.kernel", "changed", "Qpn2", "Turbo"),
        FieldChange("route.prepared_layout", "changed", "qpn2", None),
        FieldChange("route.verdicts[Qpn2].code", "changed", None, "k_align"),
        FieldChange("route.verdicts[Qpn2].message", "changed", None, "K % 128 != 0"),
        FieldChange("route.verdicts[Qpn2].ok", "changed", True, False),
        FieldChange("route.verdicts[Turbo].not_needed", "changed", True, False),
    ]


ERROR_ROUTE = {
    "id": "edge:misaligned_k",
    "route": {"error": {"code": "no_kernel", "message": "no kernel"}, "verdicts": []},
}


def test_threshold_zero_names_fields_when_the_route_shape_changes():
    # A route becoming an error row shares one key of twelve: the default threshold (0.33)
    # would report the whole route as one value; routectl passes 0 to keep field paths.
    collapsed = plain(DeepDiff(OLD, ERROR_ROUTE, verbose_level=2))
    assert list(collapsed) == ["values_changed"]
    assert list(collapsed["values_changed"]) == ["root['route']"]
    paths = [c.path for c in field_changes(OLD, ERROR_ROUTE)]
    assert paths == [
        "route.bytes",
        "route.capability",
        "route.dispatch",
        "route.error",
        "route.fallback",
        "route.fallbacks",
        "route.flags",
        "route.kernel",
        "route.prepare",
        "route.prepared_layout",
        "route.status",
        "route.verdicts[Qpn2]",
        "route.verdicts[Turbo]",
    ]
    kinds = {c.path: c.kind for c in field_changes(OLD, ERROR_ROUTE)}
    assert kinds["route.error"] == "added" and kinds["route.kernel"] == "removed"
