"""The DFlash2 verifier family's literal test expectations (`sm70-dflash2-verifier`), written
from docs/contracts/dflash2.md; the shared tests merge them with every other family's
(tests/families/__init__.py)."""

from __future__ import annotations

from collections.abc import Sequence

FAMILY = "sm70-dflash2-verifier"

# The policy sections its contract names.
SECTIONS: frozenset[str] = frozenset({"sm70_dflash2"})

# The invariances its category's rows declare, written from the policy code as
# (dimensions, fields under `route`; None: the whole route) (tests/test_invariances.py).
INVARIANCES: dict[str, Sequence[tuple[tuple[str, ...], tuple[str, ...] | None]]] = {
    "sm70-dflash2-policy": [(("kv", "c", "q"), None)]
}

# Its category's own route shape: (the route schema definition, a key only that shape has)
# (tests/test_route_schemas.py).
ROUTE_SHAPES: dict[str, tuple[str, str]] = {
    "sm70-dflash2-policy": ("policy_route", "qualification")
}

# What its category's cells show in `routectl matrix` (tests/test_matrix.py).
MATRIX_SHOWS: dict[str, str] = {"sm70-dflash2-policy": "verifier policy"}

# capability -> the sections (or `section.field` entries) its record hashes there for every
# engine, in its record's order (tests/test_dflash2_policy.py composes the hashed list).
# Hashed only for DFlash engines or an explicit field (docs/contracts/dflash2.md §1.5).
ALWAYS_HASHED: dict[int, tuple[str, ...]] = {}
