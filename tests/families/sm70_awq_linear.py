"""The SM70 AWQ dense linear family's literal test expectations (`sm70-awq-linear`), written
from docs/contracts/core.md §2.3; the shared tests merge them with every other family's
(tests/families/__init__.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from native.layers import AwqLayer

FAMILY = "sm70-awq-linear"

# The policy sections its contract names.
SECTIONS: frozenset[str] = frozenset({"sm70_turbomind", "sm70_awq"})

# The invariances its category's rows declare, written from the policy code as
# (dimensions, fields under `route`; None: the whole route) (tests/test_invariances.py).
INVARIANCES: dict[str, Sequence[tuple[tuple[str, ...], tuple[str, ...] | None]]] = {
    "sm70-awq-linear": [
        (("kv", "spec", "c"), None),
        (("kv", "spec", "c", "q"), ("kernel", "prepared_layout", "fallbacks", "bytes", "prepare")),
    ],
}

# capability -> the sections (or `section.field` entries) its record hashes there for every
# engine, in its record's order (tests/test_dflash2_policy.py composes the hashed list).
ALWAYS_HASHED: dict[int, tuple[str, ...]] = {
    70: ("sm70_turbomind", "sm70_awq", "sm70_awq_moe.tune_small_shapes")
}

# Its engine case (tests/test_engine_api.py): (capability, the layer it loads, the typed
# kernel config), and whether the layer is a linear or a mixture-of-experts layer.
ENGINE_CASE: tuple[int, Any, Any] = (
    70,
    AwqLayer.of("model.layers.0.mlp.down_proj", 8704, 5120, 128),
    None,
)
ENGINE_LAYER: str = "linear"
