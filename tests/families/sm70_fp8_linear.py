"""The SM70 FP8 linear family's literal test expectations (`sm70-fp8-linear`), written from
docs/contracts/fp8.md; the shared tests merge them with every other family's
(tests/families/__init__.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from native.layers import BlockFp8Layer

FAMILY = "sm70-fp8-linear"

# The policy sections its contract names.
SECTIONS: frozenset[str] = frozenset({"sm70_turbomind", "sm70_fp8"})

# The invariances its category's rows declare, written from the policy code as
# (dimensions, fields under `route`; None: the whole route) (tests/test_invariances.py).
INVARIANCES: dict[str, Sequence[tuple[tuple[str, ...], tuple[str, ...] | None]]] = {
    "sm70-fp8-linear": [
        (("kv", "c"), None),
        (
            ("kv", "c", "q"),
            (
                "layers.*.kernel",
                "layers.*.prepared_layout",
                "layers.*.fallbacks",
                "layers.*.bytes",
                "workspaces",
            ),
        ),
    ],
}

# Its category's own route shape: (the route schema definition, a key only that shape has)
# (tests/test_route_schemas.py).
ROUTE_SHAPES: dict[str, tuple[str, str]] = {"sm70-fp8-linear": ("layers_route", "layers")}

# capability -> the sections (or `section.field` entries) its record hashes there for every
# engine, in its record's order (tests/test_dflash2_policy.py composes the hashed list).
ALWAYS_HASHED: dict[int, tuple[str, ...]] = {70: ("sm70_turbomind", "sm70_fp8")}

# Its engine case (tests/test_engine_api.py): (capability, the layer it loads, the typed
# kernel config), and whether the layer is a linear or a mixture-of-experts layer.
ENGINE_CASE: tuple[int, Any, Any] = (
    70,
    BlockFp8Layer.of("model.layers.0.mlp.down_proj", 4352, 5120, tp=4),
    None,
)
ENGINE_LAYER: str = "linear"

# Its test files whose names do not start with a module stem of its own (tests/test_doorway.py).
OWN_FILES: tuple[str, ...] = ("tests/test_mut_kernels_fp8_grouped.py",)
