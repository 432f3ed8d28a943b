"""The SM70 AWQ mixture-of-experts family's literal test expectations (`sm70-awq-moe`), written
from docs/contracts/core.md §3; the shared tests merge them with every other family's
(tests/families/__init__.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.policy_helpers import QWEN38_AWQ_MOE

FAMILY = "sm70-awq-moe"

# The policy sections its contract names.
SECTIONS: frozenset[str] = frozenset({"sm70_turbomind", "sm70_awq_moe"})

# The invariances its category's rows declare, written from the policy code as
# (dimensions, fields under `route`; None: the whole route) (tests/test_invariances.py).
INVARIANCES: dict[str, Sequence[tuple[tuple[str, ...], tuple[str, ...] | None]]] = {
    "sm70-awq-moe": [
        (("kv", "spec", "c"), None),
        (("kv", "spec", "c", "q"), ("kernel", "prepared_layout", "fallbacks", "bytes", "prepare")),
    ],
}

# Its category's own route shape: (the route schema definition, a key only that shape has)
# (tests/test_route_schemas.py).
ROUTE_SHAPES: dict[str, tuple[str, str]] = {"sm70-awq-moe": ("moe_route", "stages")}

# capability -> the sections (or `section.field` entries) its record hashes there for every
# engine, in its record's order (tests/test_dflash2_policy.py composes the hashed list).
ALWAYS_HASHED: dict[int, tuple[str, ...]] = {70: ("sm70_turbomind", "sm70_awq_moe")}

# Its engine case (tests/test_engine_api.py): (capability, the layer it loads, the typed
# kernel config), and whether the layer is a linear or a mixture-of-experts layer.
ENGINE_CASE: tuple[int, Any, Any] = (70, QWEN38_AWQ_MOE, {"sm70_awq_moe": {"qpn_m1": True}})
ENGINE_LAYER: str = "moe"
