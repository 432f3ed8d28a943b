"""The Turing FP8 linear family's literal test expectations (`sm75-fp8-linear`), written from
docs/contracts/core.md §2.2; the shared tests merge them with every other family's
(tests/families/__init__.py)."""

from __future__ import annotations

from typing import Any

from native.layers import Fp8Layer

FAMILY = "sm75-fp8-linear"

# Its category `sm75-linear` is stated by tests/families/sm75_nvfp4_linear.py.

# The policy sections its contract names.
SECTIONS: frozenset[str] = frozenset({"sm70_turbomind", "sm70_fp8"})

# capability -> the sections (or `section.field` entries) its record hashes there for every
# engine, in its record's order (tests/test_dflash2_policy.py composes the hashed list).
ALWAYS_HASHED: dict[int, tuple[str, ...]] = {75: ("sm70_turbomind", "sm70_fp8")}

# Its engine case (tests/test_engine_api.py): (capability, the layer it loads, the typed
# kernel config), and whether the layer is a linear or a mixture-of-experts layer.
ENGINE_CASE: tuple[int, Any, Any] = (
    75,
    Fp8Layer.of("model.layers.0.mlp.down_proj", 8704, 5120),
    None,
)
ENGINE_LAYER: str = "linear"
