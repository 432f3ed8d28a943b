"""The schema helpers' edges, pinned whole (issue 28's mutation run of `routectl.io.schemas`).

The module's contract (its docstrings): the schemas of routectl's own formats are package
data, one per SCHEMA_NAMES entry, loaded once, for schema_version 1 only; a project's route
shapes are composed into the snapshot schema's `category_route` slot, a `$defs` name defined
twice differently being a ValueError naming both owners; the first violation of a document is
one line, "WHERE: MESSAGE" (a row named by its id, a path as `route.dispatch[0].plan.m`),
the message cut to 200 characters, and for a failed `oneOf` the branch the instance was meant
for (its type, its required keys present, the fewest errors). The CLI tests meet these
through real snapshots; here each rule is taken on a small schema built for it, so that a
changed rank, bound or phrase shows as a different line.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from routectl.errors import InputError
from routectl.io.schemas import (
    CATEGORY_ROUTE,
    SCHEMA_NAMES,
    SCHEMA_VERSION,
    SOURCE_SCHEMA_DIR,
    compose_snapshot_schema,
    format_path,
    load_schema,
    load_schema_file,
    schema,
    schema_of,
    schema_path,
    schema_violation,
    violation,
)


def loaded(data: dict[str, Any]) -> Any:
    return schema_of(data, Path("test.schema.json"))


# --- the package's schemas -----------------------------------------------------------------


def test_every_named_schema_is_package_data_for_version_1() -> None:
    assert SCHEMA_VERSION == 1
    assert SOURCE_SCHEMA_DIR == Path(__file__).resolve().parents[1] / "routectl" / "schemas"
    for name in SCHEMA_NAMES:
        path = schema_path(name)
        assert path == SOURCE_SCHEMA_DIR / f"{name}.schema.json" and path.is_file()
        assert load_schema(name).path == path
        assert load_schema(name).data == json.loads(path.read_text())


def test_an_unknown_schema_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError) as info:
        schema_path("snapshots")
    assert str(info.value) == "unknown schema 'snapshots' (known: " + ", ".join(SCHEMA_NAMES) + ")"


def test_a_schema_is_loaded_once_and_handed_out_as_a_copy() -> None:
    assert load_schema("report") is load_schema("report")
    before = json.dumps(load_schema("report").data, sort_keys=True)
    first = schema("report")
    assert first == load_schema("report").data and first is not load_schema("report").data
    first["title"] = "changed"
    first.setdefault("properties", {})["x"] = {}
    # A deep copy: changing a nested value of the copy leaves the cached schema as it was.
    nested = next(v for v in first["properties"].values() if isinstance(v, dict) and v)
    nested["changed"] = True
    assert schema("report") == load_schema("report").data != first
    assert json.dumps(load_schema("report").data, sort_keys=True) == before


def test_a_composed_schema_shares_nothing_with_the_cached_one() -> None:
    before = json.dumps(load_schema("snapshot").data, sort_keys=True)
    for fragments in ({}, {"cat-a": {"route": route("a"), "$defs": {"d": {"type": "integer"}}}}):
        composed = compose_snapshot_schema(fragments)
        for value in composed["$defs"].values():
            if isinstance(value, dict):
                value["changed"] = True
        composed["properties"]["rows"]["changed"] = True
        assert json.dumps(load_schema("snapshot").data, sort_keys=True) == before


def test_a_composed_schema_shares_nothing_with_its_fragments() -> None:
    fragment = {
        "route": {"type": "object", "properties": {"p": {"type": "integer"}}},
        "$defs": {"d": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }
    before = copy.deepcopy(fragment)
    composed = compose_snapshot_schema({"cat-a": fragment})
    composed["$defs"]["d"]["properties"]["x"]["changed"] = True
    composed["$defs"]["category_route"]["oneOf"][0]["properties"]["p"]["changed"] = True
    assert fragment == before


def test_a_schema_file_must_be_an_object(tmp_path: Path) -> None:
    path = tmp_path / "list.schema.json"
    path.write_text("[]")
    with pytest.raises(InputError) as info:
        load_schema_file(str(path))
    assert str(info.value) == f"{path} is not a valid JSON Schema: not an object"


def test_a_schema_file_of_another_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "v2.schema.json"
    path.write_text('{"properties": {"schema_version": {"const": 2}}}')
    with pytest.raises(InputError) as info:
        load_schema_file(str(path))
    assert str(info.value) == (
        f"{path} describes schema_version 2; this routectl reads and writes 1"
    )
    zero = tmp_path / "v0.schema.json"
    zero.write_text('{"properties": {"schema_version": {"const": 0}}}')
    with pytest.raises(InputError) as info:
        load_schema_file(str(zero))
    assert str(info.value) == (
        f"{zero} describes schema_version 0; this routectl reads and writes 1"
    )


@pytest.mark.parametrize(
    "text",
    [
        '{"properties": {"schema_version": {"const": 1}}}',
        '{"properties": {"schema_version": {"type": "integer"}}}',
        '{"properties": {}}',
        '{"type": "object"}',
    ],
)
def test_a_schema_file_for_version_1_or_of_no_version_is_read(tmp_path: Path, text: str) -> None:
    path = tmp_path / "ok.schema.json"
    path.write_text(text)
    result = load_schema_file(str(path))
    assert result.data == json.loads(text) and result.path == path
    assert load_schema_file(str(path)) is result  # loaded once per path
    assert violation(result, {"schema_version": 1}) is None


def test_a_schema_file_is_read_by_the_one_reader(tmp_path: Path) -> None:
    path = tmp_path / "bad.schema.json"
    path.write_text('{"type": ')
    with pytest.raises(InputError) as info:
        load_schema_file(str(path))
    assert str(info.value) == (
        f"schema {path} is not valid JSON: Expecting value at line 1 column 10"
    )


def test_an_invalid_schema_is_one_line_naming_the_file() -> None:
    with pytest.raises(InputError) as info:
        schema_of({"type": 5}, Path("route.schema.json"))
    message = str(info.value)
    assert message.startswith("route.schema.json is not a valid JSON Schema: ")
    assert "\n" not in message and len(message) > len(
        "route.schema.json is not a valid JSON Schema: "
    )
    with pytest.raises(InputError) as info:
        schema_of({"minimum": "low"}, Path("m.json"))
    # The validator's first line, whole (jsonschema-rs is pinned: its wording is ours).
    assert str(info.value) == 'm.json is not a valid JSON Schema: "low" is not of type "number"'
    with pytest.raises(InputError) as info:
        schema_of({"type": 5}, Path("t.json"))
    assert str(info.value) == (
        "t.json is not a valid JSON Schema: 5 is not valid under any of the schemas listed "
        "in the 'anyOf' keyword"
    )


# --- composing the snapshot schema ---------------------------------------------------------


def route(tag: str) -> dict[str, Any]:
    return {"type": "object", "required": ["tag"], "properties": {"tag": {"const": tag}}}


def test_no_fragments_leave_the_generic_snapshot_schema() -> None:
    assert compose_snapshot_schema({}) == load_schema("snapshot").data


def test_fragments_fill_the_route_slot_in_order_and_add_their_defs() -> None:
    generic = copy.deepcopy(load_schema("snapshot").data)
    fragments = {
        "cat-a": {"route": route("a"), "$defs": {"a_plan": {"type": "integer"}}},
        "cat-b": {"route": route("b")},
        "cat-c": {"route": route("c"), "$defs": {"a_plan": {"type": "integer"}}},
    }
    composed = compose_snapshot_schema(fragments)
    slot = composed["$defs"][CATEGORY_ROUTE]
    assert slot == {
        "description": generic["$defs"][CATEGORY_ROUTE]["description"],
        "oneOf": [route("a"), route("b"), route("c")],
    }
    assert composed["$defs"]["a_plan"] == {"type": "integer"}
    # Everything else is the generic schema, which itself is left as it was.
    rest = {k: v for k, v in composed["$defs"].items() if k not in (CATEGORY_ROUTE, "a_plan")}
    assert rest == {k: v for k, v in generic["$defs"].items() if k != CATEGORY_ROUTE}
    assert {k: v for k, v in composed.items() if k != "$defs"} == {
        k: v for k, v in generic.items() if k != "$defs"
    }
    assert load_schema("snapshot").data == generic
    # The composed copy shares nothing with the fragments.
    composed["$defs"]["a_plan"]["type"] = "string"
    slot["oneOf"][0]["required"].append("x")
    assert fragments["cat-a"]["$defs"]["a_plan"] == {"type": "integer"}
    assert fragments["cat-a"]["route"] == route("a")


def test_a_def_defined_differently_names_its_first_owner() -> None:
    fragments = {
        "cat-a": {"route": route("a"), "$defs": {"plan": {"type": "integer"}}},
        "cat-b": {"route": route("b"), "$defs": {"plan": {"type": "string"}}},
    }
    with pytest.raises(ValueError) as info:
        compose_snapshot_schema(fragments)
    assert str(info.value) == "route schema of cat-b: $defs/plan is defined differently by cat-a"
    # A third fragment agreeing with the first keeps the first as the owner.
    fragments = {
        "cat-a": {"route": route("a"), "$defs": {"plan": {"type": "integer"}}},
        "cat-b": {"route": route("b"), "$defs": {"plan": {"type": "integer"}}},
        "cat-c": {"route": route("c"), "$defs": {"plan": {"type": "null"}}},
    }
    with pytest.raises(ValueError) as info:
        compose_snapshot_schema(fragments)
    assert str(info.value) == "route schema of cat-c: $defs/plan is defined differently by cat-a"


def test_a_def_the_generic_schema_owns_names_routectl() -> None:
    generic = load_schema("snapshot").data["$defs"]["row_id"]
    same = {"cat-a": {"route": route("a"), "$defs": {"row_id": copy.deepcopy(generic)}}}
    assert compose_snapshot_schema(same)["$defs"]["row_id"] == generic
    other = {"cat-a": {"route": route("a"), "$defs": {"row_id": {"type": "integer"}}}}
    with pytest.raises(ValueError) as info:
        compose_snapshot_schema(other)
    assert str(info.value) == (
        "route schema of cat-a: $defs/row_id is defined differently by routectl"
    )


# --- the first violation, phrased ----------------------------------------------------------

ROWS = loaded(
    {
        "type": "object",
        "properties": {
            "zeta": {"type": "integer"},
            "alpha": {"type": "integer"},
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "n": {"type": "integer"}},
                },
            },
        },
    }
)


REQUIRED = loaded(
    {
        "type": "object",
        "properties": {
            "rows": {"type": "array", "items": {"type": "object", "required": ["id", "n"]}}
        },
    }
)


def test_a_valid_document_has_no_violation() -> None:
    assert violation(ROWS, {"rows": [{"id": "r", "n": 1}], "alpha": 2}) is None
    assert schema_violation("expected-changes", {"schema_version": 4, "changes": []}) is None


def test_a_root_violation_is_the_message_alone() -> None:
    assert violation(ROWS, 5) == "5 is not of type 'object'"
    assert violation(ROWS, []) == "[] is not of type 'object'"


def test_a_row_is_named_by_its_id_and_the_rest_of_the_path_follows() -> None:
    assert violation(ROWS, {"rows": [{"id": "r0"}, {"id": "m/x", "n": "4"}]}) == (
        "row 'm/x': n: '4' is not of type 'integer'"
    )
    # A row itself of the wrong type: the row's label alone.
    assert violation(ROWS, {"rows": [{"id": "r0"}, 7]}) == "rows[1]: 7 is not of type 'object'"
    # A violation at a row itself (path rows[1]): labelled by the row's id all the same.
    assert violation(REQUIRED, {"rows": [{"id": "r0", "n": 1}, {"id": "m/y"}]}) == (
        "row 'm/y': 'n' is a required property"
    )
    assert violation(REQUIRED, {"rows": [{"id": 2}]}) == "rows[0]: 'n' is a required property"


def test_a_row_without_a_string_id_is_named_by_its_position() -> None:
    assert violation(ROWS, {"rows": [{"n": 1}, {"id": 3}]}) == (
        "rows[1]: id: 3 is not of type 'string'"
    )
    assert violation(ROWS, {"rows": [{"n": "x"}]}) == "rows[0]: n: 'x' is not of type 'integer'"


def test_a_long_row_id_is_quoted_short() -> None:
    row_id = "r" * 300
    assert violation(ROWS, {"rows": [{"id": row_id, "n": None}]}) == (
        f"row {'r' * 80!r}... (300 characters): n: None is not of type 'integer'"
    )


def test_a_path_outside_rows_is_not_a_row() -> None:
    document = {"items": [{"id": "x", "n": "y"}]}
    other = loaded(
        {
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"properties": {"n": {"type": "integer"}}}},
                "rows": {"type": "object", "properties": {"n": {"type": "integer"}}},
            },
        }
    )
    assert violation(other, document) == "items[0].n: 'y' is not of type 'integer'"
    # `rows` whose next step is no index: a plain path.
    assert violation(other, {"rows": {"n": "z"}}) == "rows.n: 'z' is not of type 'integer'"


def test_the_first_violation_is_the_first_by_path() -> None:
    # `zeta` comes first in the schema, `alpha` first by path: the path order decides.
    assert violation(ROWS, {"zeta": "z", "alpha": "a"}) == "alpha: 'a' is not of type 'integer'"
    assert violation(ROWS, {"zeta": "z", "rows": [{"n": "q"}]}) == (
        "rows[0]: n: 'q' is not of type 'integer'"
    )


@pytest.mark.parametrize(("length", "cut"), [(173, False), (174, True), (500, True)])
def test_a_message_is_cut_to_200_characters(length: int, cut: bool) -> None:
    value = "v" * length
    full = f"{value!r} is not of type 'integer'"
    assert len(full) == length + 27
    got = violation(ROWS, {"alpha": value})
    assert got == ("alpha: " + (full[:197] + "..." if cut else full))


def test_a_value_json_cannot_hold_is_named_by_its_type() -> None:
    assert violation(ROWS, {"alpha": object()}) == "Unsupported type: 'object'"


# --- which branch of a oneOf is phrased ----------------------------------------------------


def one_of(*branches: dict[str, Any], keyword: str = "oneOf") -> Any:
    return loaded({"type": "object", "properties": {"a": {keyword: list(branches)}}})


# Python's `re` reads \d as any Unicode digit, the regex dialect jsonschema-rs follows as
# 0-9 only: a document jsonschema accepts and the authority refuses, phrased in the
# authority's words, its row named as every other violation's.
DIGIT = loaded(
    {
        "type": "object",
        "properties": {
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"n": {"type": "string", "pattern": "^\\d$"}},
                },
            }
        },
    }
)


def test_what_only_the_authority_refuses_is_phrased_in_its_words() -> None:
    arabic_three = "\u0663"
    assert list(DIGIT.validator.iter_errors({"rows": [{"n": arabic_three}]})) == []
    assert violation(DIGIT, {"rows": [{"id": "r0", "n": "1"}, {"id": "r", "n": arabic_three}]}) == (
        f'row \'r\': n: "{arabic_three}" does not match "^\\d$"'
    )
    assert violation(DIGIT, {"rows": [{"n": arabic_three}]}) == (
        f'rows[0]: n: "{arabic_three}" does not match "^\\d$"'
    )


def test_the_branch_of_the_instances_type_is_phrased() -> None:
    checker = one_of(
        {"type": "string"},
        {"type": "object", "properties": {"k": {"type": "integer"}}},
    )
    assert violation(checker, {"a": {"k": "s"}}) == "a.k: 's' is not of type 'integer'"
    # Neither of its type: the first branch, by position.
    assert violation(checker, {"a": 5}) == "a: 5 is not of type 'string'"


def test_the_branch_whose_required_keys_are_present_is_phrased() -> None:
    checker = one_of(
        {"type": "object", "required": ["x"], "properties": {"k": {"type": "string"}}},
        {"type": "object", "required": ["k"], "properties": {"k": {"type": "integer"}}},
    )
    assert violation(checker, {"a": {"k": "s"}}) == "a.k: 's' is not of type 'integer'"


def test_the_branch_with_the_fewest_errors_is_phrased() -> None:
    checker = one_of(
        {"type": "object", "properties": {"k": {"type": "integer"}, "m": {"type": "integer"}}},
        {"type": "object", "properties": {"k": {"type": "boolean"}}},
    )
    assert violation(checker, {"a": {"k": "s", "m": "t"}}) == "a.k: 's' is not of type 'boolean'"
    # One error in each: the first branch, by position.
    assert violation(checker, {"a": {"k": "s"}}) == "a.k: 's' is not of type 'integer'"


def test_a_root_error_other_than_required_does_not_rank_a_branch_down() -> None:
    # minProperties fails at the branch's root, as `required` would: only a missing required
    # key says the instance was meant for another branch; the fewest errors decide here.
    checker = one_of(
        {"type": "object", "minProperties": 5},
        {"type": "object", "properties": {"k": {"type": "integer"}, "m": {"type": "integer"}}},
    )
    assert violation(checker, {"a": {"k": "s", "m": "t"}}) == (
        "a: {'k': 's', 'm': 't'} does not have enough properties"
    )


def test_of_branches_alike_the_first_by_position_is_phrased_past_ten() -> None:
    # Two branches of another type, then nine alike (one error each): branch 2, not branch
    # 10 (which a ranking by the index's text put first).
    branches = [{"type": "string"}] * 2 + [{"minimum": 100 + i} for i in range(2, 11)]
    assert violation(one_of(*branches), {"a": 5}) == "a: 5 is less than the minimum of 102"


def test_a_one_of_that_more_than_one_branch_accepts_is_its_own_message() -> None:
    # No branch failed, so there is no branch error to descend to (an empty context).
    checker = one_of({"type": "integer"}, {"minimum": 0})
    assert violation(checker, {"a": 5}) == (
        "a: 5 is valid under each of {'minimum': 0}, {'type': 'integer'}"
    )


def test_the_deepest_error_of_the_chosen_branch_is_phrased() -> None:
    checker = one_of(
        {"type": "string"},
        {
            "type": "object",
            "properties": {
                "k": {"type": "integer"},
                "d": {"type": "object", "properties": {"e": {"type": "integer"}}},
            },
        },
    )
    assert violation(checker, {"a": {"k": "x", "d": {"e": "y"}}}) == (
        "a.d.e: 'y' is not of type 'integer'"
    )


def test_nested_branches_are_followed_down() -> None:
    inner = {
        "type": "object",
        "properties": {
            "b": {
                "anyOf": [
                    {"type": "string"},
                    {"type": "object", "properties": {"c": {"type": "integer"}}},
                ]
            }
        },
    }
    checker = one_of({"type": "integer"}, inner)
    assert violation(checker, {"a": {"b": {"c": "deep"}}}) == (
        "a.b.c: 'deep' is not of type 'integer'"
    )
    assert violation(
        one_of({"type": "integer"}, inner, keyword="anyOf"), {"a": {"b": {"c": 1.5}}}
    ) == ("a.b.c: 1.5 is not of type 'integer'")


# --- paths ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "text"),
    [
        ([], ""),
        (["route"], "route"),
        (["route", "dispatch", 0, "plan", "m"], "route.dispatch[0].plan.m"),
        ([0, "a"], "[0].a"),
        ([3], "[3]"),
        (["_x1", "B_2"], "_x1.B_2"),
        (["route", "a-b"], 'route["a-b"]'),
        (["1abc"], '["1abc"]'),
        (["a b", 2, "c"], '["a b"][2].c'),
        (["r", 'q"x'], 'r["q\\"x"]'),
        (["r", ""], 'r[""]'),
        (["r", "x\n"], 'r["x\\n"]'),
        (["caf\u00e9"], '["caf\\u00e9"]'),
    ],
)
def test_format_path(parts: list[Any], text: str) -> None:
    assert format_path(parts) == text
