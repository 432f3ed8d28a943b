"""The native catalogue: every op spec, every kernel's (and stage's) required ops and the ABI
getters, merged from one module per family. Torch-free at import.

A family module exports `OPS` (op name -> OpSpec), `KERNELS` (kernel class name -> required
ops) and optionally `STAGES` (non-kernel stage name -> required ops: not accepted in
`disabled_kernels`) and `ABI_GETTERS` (kernel or stage -> getter op). Add a module to
`_FAMILIES` to extend the catalogue (e.g. `native.ops_moe`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

from native import (
    ops_flash_next,
    ops_fp8,
    ops_fp8_moe,
    ops_linear,
    ops_moe,
    ops_v100_attention,
)
from routectl.namespaces.ops import OpSpec
from routectl.project import Catalogue

_FAMILIES: tuple[ModuleType, ...] = (
    ops_linear,
    ops_fp8,
    ops_moe,
    ops_flash_next,
    ops_fp8_moe,
    ops_v100_attention,
)


def _merge(modules: tuple[ModuleType, ...], attribute: str) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for module in modules:
        entries: Mapping[str, Any] = getattr(module, attribute, {})
        for name, value in entries.items():
            if name in merged and merged[name] != value:
                raise ValueError(f"{module.__name__}.{attribute} redefines {name!r} differently")
            merged[name] = value
    return merged


def build_catalogue(modules: tuple[ModuleType, ...]) -> tuple[Catalogue, tuple[str, ...]]:
    """The merged catalogue and the kernel names (stages excluded), in module order."""
    ops: dict[str, OpSpec] = _merge(modules, "OPS")
    kernels = _merge(modules, "KERNELS")
    stages = _merge(modules, "STAGES")
    clash = sorted(set(kernels) & set(stages))
    if clash:
        raise ValueError(f"names declared both as kernels and as stages: {clash}")
    required = {**kernels, **stages}
    unknown = sorted({op for ops_ in required.values() for op in ops_} - set(ops))
    if unknown:
        raise ValueError(f"required ops missing from the catalogue: {unknown}")
    getters = _merge(modules, "ABI_GETTERS")
    for getter in getters.values():
        if getter not in ops or not ops[getter].getter:
            raise ValueError(f"ABI getter {getter!r} is not a getter op of the catalogue")
    catalogue = Catalogue(ops=ops, kernels=required, abi_getters=getters)
    return catalogue, tuple(kernels)


CATALOGUE, KERNEL_NAMES = build_catalogue(_FAMILIES)

__all__ = ["CATALOGUE", "KERNEL_NAMES", "build_catalogue"]
