"""Comparison by id, expected-changes parsing and attribution, the verdict, and rendering."""

from __future__ import annotations

import copy
import json
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from routectl.errors import InputError
from routectl.io.schemas import schema_violation
from routectl.io.terminal import use_color
from routectl.review.compare import (
    REORDERED,
    CheckOutcome,
    FieldChange,
    change_path,
    compare_rows,
    field_changes,
    keyed_pair,
    parse_expected,
    path_sort_key,
    split_id,
    unkeyed,
)
from routectl.review.expected import ExpectedChanges, judge_category, resolve_stated
from routectl.review.groups import group_changes
from routectl.review.report import (
    build_report,
    escape_data,
    render_github,
    render_json,
    render_text,
)
from routectl.review.snapshot import build_snapshot

CATEGORIES = ("cat-a", "cat-b")


def make_row(i: int, kernel: str = "K", m: int = 1) -> dict:
    return {
        "id": f"model{i}/float16/tp1/none/c1/q8192",
        "route": {
            "kernel": kernel,
            "verdicts": [
                {"name": kernel, "ok": True, "code": None, "message": None, "not_needed": False}
            ],
            "capability": 70,
            "prepared_layout": None,
            "flags": {"gated": False},
            "fallbacks": [],
            "bytes": {"tensors": {"w": 64}, "total": 64, "scratch": {}},
            "prepare": [],
            "dispatch": [{"op": "mm", "plan": {"m": m, "split_k": 4}}],
            "fallback": False,
            "status": None,
        },
    }


class CountingDiffer:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, old: dict, new: dict) -> list[FieldChange]:
        self.calls += 1
        return field_changes(old, new)


# --- comparison ----------------------------------------------------------------------------


def test_identical_5000_row_snapshots_make_no_deepdiff_call():
    rows = [make_row(i) for i in range(5000)]
    old = build_snapshot("cat-a", "basis", rows)
    new = build_snapshot("cat-a", "basis", [make_row(i) for i in range(5000)])
    differ = CountingDiffer()
    result = compare_rows(old.rows, new.rows, differ=differ)
    assert differ.calls == 0
    assert result.identical and not result.moved
    # The counter does count: one changed row makes exactly one call.
    changed = [make_row(i) for i in range(5000)]
    changed[1234]["route"]["dispatch"][0]["plan"]["split_k"] = 8
    result = compare_rows(old.rows, changed, differ=differ)
    assert differ.calls == 1
    assert list(result.changed) == [rows[1234]["id"]]


def test_added_removed_changed_by_id():
    old = [make_row(1), make_row(2), make_row(3)]
    new = [make_row(2, kernel="Other"), make_row(3), make_row(4)]
    result = compare_rows(old, new)
    assert result.added == (make_row(4)["id"],)
    assert result.removed == (make_row(1)["id"],)
    changes = result.changed[make_row(2)["id"]]
    assert FieldChange("route.kernel", "changed", "K", "Other") in changes
    # Verdicts are matched by kernel name: another kernel is one verdict gone, one new.
    assert (
        FieldChange("route.verdicts[K]", "removed", old[1]["route"]["verdicts"][0], None) in changes
    )
    assert (
        FieldChange("route.verdicts[Other]", "added", None, new[0]["route"]["verdicts"][0])
        in changes
    )
    assert [c.path for c in changes] == sorted(c.path for c in changes)


def stage(m: int, *rejected: tuple[str, str]) -> dict:
    return {
        "m": m,
        "chosen": ["lane.routed", "w13.dense"],
        "rejected": [
            {"name": n, "ok": False, "code": c, "message": c, "not_needed": False}
            for n, c in rejected
        ],
    }


def staged_row(stages: list[dict], dispatch: list[dict]) -> dict:
    row = make_row(1)
    row["route"].update(stages=stages, dispatch=dispatch)
    return row


def test_a_reordered_keyed_list_is_one_change_and_items_are_named_by_key():
    old = staged_row(
        [stage(1, ("a.x", "no")), stage(128, ("w2.chunked", "off"), ("w13.grouped", "off"))],
        [{"op": "p", "plan": {"m": 128}}, {"op": "w13", "plan": {"m": 128}}],
    )
    new = staged_row(
        [stage(1, ("a.x", "no")), stage(128, ("w13.grouped", "cap"), ("w2.chunked", "off"))],
        [{"op": "p", "plan": {"m": 128}}, {"op": "w13_dense", "plan": {"m": 128}}],
    )
    assert field_changes(old, new) == [
        FieldChange("route.dispatch[M=128,1].op", "changed", "w13", "w13_dense"),
        FieldChange(
            "route.stages[M=128].rejected",
            REORDERED,
            ["w2.chunked", "w13.grouped"],
            ["w13.grouped", "w2.chunked"],
        ),
        FieldChange("route.stages[M=128].rejected[w13.grouped].code", "changed", "off", "cap"),
        FieldChange("route.stages[M=128].rejected[w13.grouped].message", "changed", "off", "cap"),
    ]
    # A stage list in another order is one change too, its items' own changes by M.
    swapped = staged_row(list(reversed(old["route"]["stages"])), old["route"]["dispatch"])
    assert field_changes(old, swapped) == [
        FieldChange("route.stages", REORDERED, ["M=1", "M=128"], ["M=128", "M=1"])
    ]


def test_dispatch_records_are_matched_by_position_within_their_m():
    old = staged_row([], [{"op": "a", "plan": {"m": 1}}, {"op": "b", "plan": {"m": 8}}])
    new = staged_row(
        [],
        [
            {"op": "z", "plan": {"m": 1}},
            {"op": "a", "plan": {"m": 1}},
            {"op": "b", "plan": {"m": 8}},
        ],
    )
    # A record put before M=1's first shifts only M=1's records, never M=8's.
    assert [(c.path, c.kind) for c in field_changes(old, new)] == [
        ("route.dispatch[M=1,0].op", "changed"),
        ("route.dispatch[M=1,1]", "added"),
    ]


def test_lists_without_a_unique_key_stay_positional():
    old, new = make_row(1), make_row(1)
    twice = {"name": "K", "ok": True, "code": None, "message": None, "not_needed": False}
    old["route"]["verdicts"] = [twice, dict(twice)]
    new["route"]["verdicts"] = [twice, dict(twice, ok=False)]
    assert [c.path for c in field_changes(old, new)] == ["route.verdicts[1].ok"]
    # An empty list takes the key of the other version's items.
    new = make_row(1)
    new["route"]["fallbacks"] = [
        {"field": "kernel", "requested": "A", "effective": "B", "reason": "r"}
    ]
    assert [(c.path, c.kind) for c in field_changes(make_row(1), new)] == [
        ("route.fallbacks[kernel]", "added")
    ]


def test_no_baseline_means_every_row_is_added():
    result = compare_rows(None, [make_row(1)])
    assert result.added == (make_row(1)["id"],) and not result.identical
    assert compare_rows([], []).identical and not compare_rows(None, []).identical


@pytest.mark.parametrize("old,new", [(1, True), (1, 1.0), (0, False)])
def test_json_types_are_compared_not_python_equality(old, new):
    a, b = make_row(1), make_row(1)
    a["route"]["flags"]["gated"] = old
    b["route"]["flags"]["gated"] = new
    result = compare_rows([a], [b])
    assert result.changed[a["id"]] == (FieldChange("route.flags.gated", "changed", old, new),)


def test_negative_zero_is_not_zero_and_key_order_does_not_matter():
    a, b = make_row(1), make_row(1)
    a["route"]["bytes"] = {"ratio": [0.0]}
    b["route"]["bytes"] = {"ratio": [-0.0]}
    assert a["id"] in compare_rows([a], [b]).changed
    reordered = dict(reversed(list(make_row(1)["route"].items())))
    assert compare_rows([make_row(1)], [{"id": make_row(1)["id"], "route": reordered}]).identical


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, -0.0, 1.0, 2.5])
    | st.sampled_from(["a", "b"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["x", "y", "z"]), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, JSON_VALUES)
def test_rows_are_equal_exactly_when_their_canonical_json_is(old, new):
    a = {"id": make_row(1)["id"], "route": {"v": old}}
    b = {"id": make_row(1)["id"], "route": {"v": new}}
    same_text = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert compare_rows([a], [b]).identical == same_text


def whole_row_changes(old: dict, new: dict) -> list[FieldChange]:
    """The reference: DeepDiff over the whole keyed rows (what `field_changes` returned
    before it handed DeepDiff only the differing parts), with the keyed lists' reorders."""
    from deepdiff import DeepDiff

    orders: list = []
    keyed_old, keyed_new = keyed_pair(old, new, [], orders)
    found = [
        (path_sort_key(parts), FieldChange(change_path(parts), REORDERED, was, now))
        for parts, was, now in orders
    ]
    tree = DeepDiff(keyed_old, keyed_new, threshold_to_diff_deeper=0, verbose_level=2, view="tree")
    for report_type, levels in tree.items():
        kind = (
            "added"
            if report_type.endswith("_added")
            else "removed"
            if report_type.endswith("_removed")
            else "changed"
        )
        for level in levels:
            parts = level.path(output_format="list")
            found.append(
                (
                    path_sort_key(parts),
                    FieldChange(
                        change_path(parts),
                        kind,
                        None if kind == "added" else unkeyed(level.t1),
                        None if kind == "removed" else unkeyed(level.t2),
                    ),
                )
            )
    found.sort(key=lambda item: item[0])
    return [c for _, c in found] or [FieldChange("", "changed", old, new)]


@settings(max_examples=400, deadline=None)
@given(JSON_VALUES, JSON_VALUES)
@example(True, 1)  # equal as items of a list of scalars (DeepDiff matches those by hash)
@example([True], [1])
def test_field_changes_equal_deepdiff_over_whole_rows(old, new):
    a = {"id": make_row(1)["id"], "route": {"v": old, "w": [old, 1], "u": [{"v": old}, old]}}
    b = {"id": make_row(1)["id"], "route": {"v": new, "w": [new, 1], "u": [{"v": new}, new]}}
    if not compare_rows([a], [b]).identical:
        assert field_changes(a, b) == whole_row_changes(a, b)


def containers(node) -> list:
    found = [node] if isinstance(node, dict | list) else []
    for child in node.values() if isinstance(node, dict) else node if found else ():
        found.extend(containers(child))
    return found


EDITS = st.sampled_from(["set", "delete", "add", "append", "pop", "retype"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), EDITS, JSON_VALUES), min_size=1, max_size=4))
def test_field_changes_equal_deepdiff_on_edited_routes(edits):
    old = make_row(1)
    old["route"]["dispatch"].append({"op": "mm", "plan": {"m": 8, "split_k": 4}})
    new = copy.deepcopy(old)
    for pick, edit, value in edits:
        nodes = containers(new["route"])
        node = nodes[pick % len(nodes)]
        if isinstance(node, dict):
            keys = sorted(node)
            key = keys[pick % len(keys)] if keys else "k"
            if edit == "delete" and keys:
                del node[key]
            elif edit == "add":
                node[f"new{pick % 3}"] = value
            elif edit == "retype" and isinstance(node.get(key), int | bool):
                node[key] = float(node[key])
            else:
                node[key] = value
        elif edit in ("pop", "delete") and node:
            node.pop(pick % len(node))
        elif edit in ("append", "add") or not node:
            node.append(value)
        else:
            node[pick % len(node)] = value
    if not compare_rows([old], [new]).identical:
        assert field_changes(old, new) == whole_row_changes(old, new)


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(0, 30)), st.sets(st.integers(0, 30)), st.sets(st.integers(0, 30)))
def test_comparison_is_set_algebra_on_ids(old_ids, new_ids, bumped):
    old = [make_row(i) for i in sorted(old_ids)]
    new = [make_row(i, m=2 if i in bumped else 1) for i in sorted(new_ids)]
    result = compare_rows(old, new)
    ident = {i: make_row(i)["id"] for i in range(31)}
    assert set(result.added) == {ident[i] for i in new_ids - old_ids}
    assert set(result.removed) == {ident[i] for i in old_ids - new_ids}
    assert set(result.changed) == {ident[i] for i in old_ids & new_ids & bumped}


# --- expected changes ----------------------------------------------------------------------


def test_split_id_qualified_bare_and_malformed():
    assert split_id("cat-a:edge:x", CATEGORIES) == ("cat-a", "edge:x")
    assert split_id("edge:x", CATEGORIES) == (None, "edge:x")  # edge is not a category
    assert split_id("m/kv/tp2/none/c1/q8", CATEGORIES) == (None, "m/kv/tp2/none/c1/q8")
    for bad, message in [
        ("cat-a:nope", "malformed row id 'nope'"),
        ("m/kv/tp2", "malformed row id"),
        ("edge:X", "malformed row id"),
        ("cat-z:edge:x", "unknown category 'cat-z'"),
        ("*", "malformed row id"),
    ]:
        with pytest.raises(InputError, match=re.escape(message)):
            split_id(bad, CATEGORIES)


def test_parse_expected_forms_and_rejections():
    entries = parse_expected(
        ["cat-a:edge:x", {"id": "edge:y", "reason": "why"}], CATEGORIES, source="f.json"
    )
    assert [(e.category, e.row_id, e.reason) for e in entries] == [
        ("cat-a", "edge:x", None),
        (None, "edge:y", "why"),
    ]
    for data, message in [
        ({"ids": []}, "'ids' was unexpected"),
        ([{"id": "edge:x"}], "f.json"),
        ([{"id": "edge:x", "reason": "r", "extra": 1}], "f.json"),
        (["edge:*"], "f.json"),
        (["cat-a:edge:x", "cat-a:edge:x"], "listed twice"),
        (["cat-q:edge:x"], "unknown category 'cat-q'"),
    ]:
        with pytest.raises(InputError, match=re.escape(message)):
            parse_expected(data, CATEGORIES, source="f.json")


def _entries(*ids):
    return ExpectedChanges.of_ids(parse_expected(list(ids), CATEGORIES, source="f.json")).entries


def _rows(resolution, name):
    return {i for m in resolution.by_category[name] for i in m.rows}


def test_attribution_of_bare_ids():
    ids = {"cat-a": {"edge:a", "edge:both"}, "cat-b": {"edge:b", "edge:both"}}
    got = resolve_stated(
        _entries("edge:a", "cat-b:edge:b", "edge:none"), CATEGORIES, ids.__getitem__, CATEGORIES
    )
    assert _rows(got, "cat-a") == {"edge:a"}
    assert _rows(got, "cat-b") == {"edge:b"}
    assert got.unattributed == ("edge:none",)
    with pytest.raises(InputError, match=r"several categories \(cat-a, cat-b\)"):
        resolve_stated(_entries("edge:both"), CATEGORIES, ids.__getitem__, CATEGORIES)
    with pytest.raises(InputError, match="repeats"):
        resolve_stated(_entries("edge:a", "cat-a:edge:a"), CATEGORIES, ids.__getitem__, CATEGORIES)
    # A filtered run judges only its own categories; one judged category owns unknown ids.
    got = resolve_stated(
        _entries("edge:b", "cat-b:edge:zz", "edge:none"), ["cat-a"], ids.__getitem__, CATEGORIES
    )
    assert list(got.by_category) == ["cat-a"] and _rows(got, "cat-a") == {"edge:none"}
    assert got.unattributed == ()


def judge(name, comparison, entries):
    groups = group_changes(name, comparison, {}, {})
    resolved = resolve_stated(entries, [name], lambda n: set(), CATEGORIES)
    return judge_category(name, comparison, resolved.by_category[name], groups)[0]


def test_verdict_unexpected_missing_unknown():
    old = [make_row(1), make_row(2), make_row(3)]
    new = [make_row(1, kernel="X"), make_row(2, kernel="X"), make_row(3), make_row(4)]
    comparison = compare_rows(old, new)
    r = {i: make_row(i)["id"] for i in range(1, 6)}
    verdict = judge(
        "cat-a", comparison, _entries(f"cat-a:{r[1]}", f"cat-a:{r[3]}", f"cat-a:{r[5]}")
    )
    assert verdict.unexpected == tuple(sorted([r[2], r[4]]))
    assert verdict.missing == tuple(sorted([r[3], r[5]]))
    assert verdict.unknown == (r[5],)
    assert not verdict.ok
    assert judge("cat-a", comparison, _entries(*(f"cat-a:{r[i]}" for i in (1, 2, 4)))).ok


# --- report --------------------------------------------------------------------------------


def _outcome(
    n_changed: int, fields: int, *, stale=(), expected=(), scattered=False
) -> CheckOutcome:
    old = [make_row(i) for i in range(n_changed)]
    if scattered:  # ids no few patterns describe: model i at tp i
        for i, r in enumerate(old):
            r["id"] = f"model{i}/float16/tp{i}/none/c1/q8192"
    new = copy.deepcopy(old)
    for r in new:
        r["route"]["flags"] = {f"f{j:02d}": j for j in range(fields)}
    comparison = compare_rows(old, new)
    verdict = judge("cat-a", comparison, _entries(*expected))
    return CheckOutcome({"cat-a": verdict}, stale=tuple(stale))


def test_report_json_lists_qualified_ids_and_validates():
    outcome = _outcome(
        3, 2, stale=["gone"], expected=[f"cat-a:{make_row(0)['id']}", "cat-a:edge:nothing"]
    )
    report = build_report(outcome)
    assert schema_violation("report", report) is None
    cat = report["categories"]["cat-a"]
    ids = [f"cat-a:{make_row(i)['id']}" for i in range(3)]
    assert cat["changed"] == ids and cat["unexpected"] == ids[1:]
    assert cat["missing"] == ["cat-a:edge:nothing"]
    assert report["unknown"] == ["cat-a:edge:nothing"] and report["stale"] == ["gone"]
    assert report["ok"] is False
    assert len(cat["diffs"][ids[0]]) == 3  # gated removed, f00 and f01 added
    assert render_json(report).endswith("}\n")


def test_text_prints_a_group_once_and_caps_fields_and_ids():
    outcome = _outcome(53, 24, scattered=True)
    lines = render_text(outcome).splitlines()
    assert lines[:3] == [
        "cat-a: FAILED: 53 rows, 53 changed, 0 added, 0 removed",
        "  changed 53 rows (unexpected)",
        "    route.flags.f00: added 0",
    ]
    assert lines[21:24] == [
        "    route.flags.f19: added 19",
        "    ... 5 more field changes",  # 25 changes, 20 shown
        "    row cat-a:model0/float16/tp0/none/c1/q8192",
    ]
    assert sum(line.startswith("    row cat-a:") for line in lines) == 50
    assert lines[-2:] == [
        "    ... and 3 more",
        "FAILED: 53 unexpected, 0 missing (1 category, 53 rows)",
    ]
    every = render_text(outcome, max_rows=0, max_fields=0).splitlines()
    assert len(every) == 1 + 1 + 25 + 53 + 1
    assert render_text(outcome, quiet=True).splitlines() == [
        "cat-a: FAILED: 53 rows, 53 changed, 0 added, 0 removed",
        "FAILED: 53 unexpected, 0 missing (1 category, 53 rows)",
    ]
    assert "\x1b[" not in "\n".join(lines)
    assert "\x1b[31m" in render_text(_outcome(1, 1), color=True)


def test_github_at_most_ten_errors_then_one_notice():
    expected = ["cat-a:edge:none" + str(i) for i in range(13)]
    lines = render_github(
        _outcome(14, 1, stale=["gone"], expected=expected), command="diff"
    ).splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["::error"] * 10 + ["::notice"]
    assert lines[:2] == [
        "::error title=routectl diff::stale snapshot category gone: it is no longer listed",
        "::error title=routectl diff::14 rows changed unexpectedly: route.flags.f00: added 0 "
        "(+1 more): cat-a:{model0,model1,model10,model11,model12,model13,model2,model3,model4,"
        "model5,model6,model7,model8,model9}/float16/tp1/none/c1/q8192",
    ]
    assert "5 more not shown" in lines[-1]
    passing = render_github(_outcome(0, 1)).splitlines()
    assert len(passing) == 1 and passing[0].startswith("::notice title=routectl check::ok: ")


def test_github_escapes_data():
    comparison = compare_rows([make_row(0, kernel="a%b\nc")], [make_row(0, kernel="d\re")])
    outcome = CheckOutcome({"cat-a": judge("cat-a", comparison, {})})
    line = render_github(outcome).splitlines()[0]
    assert '"a%25b\\nc"' in line  # JSON-quoted value: the newline is already \n text
    assert "\n" not in line and "\r" not in line
    assert escape_data("50%\r\nnext") == "50%25%0D%0Anext"


@pytest.mark.parametrize(
    "choice,environ,tty,expected",
    [
        ("auto", {}, True, True),
        ("auto", {"NO_COLOR": ""}, True, True),
        ("auto", {"NO_COLOR": "1"}, True, False),
        ("auto", {}, False, False),
        ("always", {"NO_COLOR": "1"}, False, True),
        ("never", {}, True, False),
    ],
)
def test_color_rules(choice, environ, tty, expected):
    assert use_color(choice, environ, tty) is expected


def test_a_reorder_reads_as_one_line_and_full_shows_the_orders():
    from routectl.review.report import show_change

    change = FieldChange("route.stages[M=128].rejected", REORDERED, ["a", "b"], ["b", "a"])
    assert show_change(change) == "order of route.stages[M=128].rejected changed"
    assert show_change(change, full=True) == (
        'order of route.stages[M=128].rejected changed: ["a", "b"] -> ["b", "a"]'
    )
