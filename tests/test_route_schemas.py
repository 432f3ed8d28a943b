"""Each category owns its route shape: routectl's published snapshot schema holds the generic
shapes (selected, error, status) and a slot the project's categories fill; the project's
snapshot schema composes every category's fragment into it."""

from __future__ import annotations

import copy
import json

import pytest

from policies import PROJECT
from routectl.io.schemas import (
    CATEGORY_ROUTE,
    compose_snapshot_schema,
    schema,
    violation,
)
from routectl.review.snapshot import read_snapshot, validate_rows
from tests import families
from tests.test_routes_golden import SNAPSHOTS

# Each category's own route shape and a key only that shape has, as the family that proves it
# writes them (tests/families/, `ROUTE_SHAPES`).
OWN_SHAPES = {name: shape for name, (shape, _) in families.table("ROUTE_SHAPES").items()}
OWN_KEY = {name: key for name, (_, key) in families.table("ROUTE_SHAPES").items()}


def test_the_generic_schema_knows_no_category_shape():
    generic = schema("snapshot")
    assert set(OWN_SHAPES.values()).isdisjoint(generic["$defs"])
    # The slot admits nothing on its own.
    assert generic["$defs"][CATEGORY_ROUTE]["not"] == {}


def test_the_project_composes_every_category_fragment():
    fragments = {c.name: c.route_schema() for c in PROJECT.categories}
    owners = {name for name, fragment in fragments.items() if fragment is not None}
    # Every category with a fragment, by name: a new family states its shape in its module.
    assert set(OWN_SHAPES) == owners
    for name, shape in OWN_SHAPES.items():
        assert fragments[name]["route"] == {"$ref": f"#/$defs/{shape}"}
    composed = PROJECT.snapshot_schema.data
    routes = composed["$defs"][CATEGORY_ROUTE]["oneOf"]
    assert routes == [
        {"$ref": f"#/$defs/{OWN_SHAPES[name]}"} for name in fragments if name in owners
    ]
    for name in owners:
        for key, value in fragments[name]["$defs"].items():
            assert composed["$defs"][key] == value
    # The published file is left as it is.
    assert CATEGORY_ROUTE in schema("snapshot")["$defs"]
    assert "oneOf" not in schema("snapshot")["$defs"][CATEGORY_ROUTE]


@pytest.mark.parametrize("category", sorted(OWN_SHAPES))
def test_a_category_row_validates_only_with_its_fragment(category):
    snap = read_snapshot(SNAPSHOTS / f"{category}.json", schema=PROJECT.snapshot_schema)
    own = next(r for r in snap.rows if OWN_KEY[category] in r["route"])
    assert validate_rows(category, "basis", [own], PROJECT.snapshot_schema) is None
    assert validate_rows(category, "basis", [own]) is not None  # the generic schema alone
    # Strict inside the category's shape too: an extra key is refused.
    broken = {**own, "route": {**own["route"], "extra": 1}}
    assert validate_rows(category, "basis", [broken], PROJECT.snapshot_schema) is not None


def test_every_retained_file_validates_with_the_project_schema():
    for path in sorted(SNAPSHOTS.glob("*.json")):
        document = json.loads(path.read_text())
        assert violation(PROJECT.snapshot_schema, document) is None, path.name


def test_a_fragment_may_not_redefine_a_definition():
    moe = PROJECT.category("sm70-awq-moe").route_schema()
    clash = copy.deepcopy(moe)
    clash["$defs"]["verdict"] = {"type": "string"}
    with pytest.raises(ValueError, match="verdict is defined differently by routectl"):
        compose_snapshot_schema({"sm70-awq-moe": clash})
    other = {"route": {"$ref": "#/$defs/stage_choice"}, "$defs": {"stage_choice": {"type": "null"}}}
    with pytest.raises(ValueError, match="stage_choice is defined differently by sm70-awq-moe"):
        compose_snapshot_schema({"sm70-awq-moe": moe, "x-other": other})
    # The same definition twice is one definition.
    both = compose_snapshot_schema({"a": moe, "b": copy.deepcopy(moe)})
    assert len(both["$defs"][CATEGORY_ROUTE]["oneOf"]) == 2


def test_a_project_without_fragments_validates_with_the_generic_schema():
    from tests.fixtures.toyproj.toyproj import PROJECT as TOY

    assert TOY.snapshot_schema.data == schema("snapshot")
