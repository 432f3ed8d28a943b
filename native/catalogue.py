"""The catalogue of every native ops module of this package (`native/ops_*.py`, found by
name): every op spec, every kernel's (and stage's) required ops and the ABI getters, merged by
`native.merge.build_catalogue`. Torch-free at import.

The project's own catalogue (`policies.PROJECT.catalogue`) merges the ops modules its family
records name (`Family.ops`), so a new family's module needs no entry here; this whole-package
catalogue serves tools and tests that want every op, and a test checks that the two agree
(every ops module is named by a family). The project's modules never import this one: it
imports by a computed name, which would make the replay cache key every category by every
source (routectl/review/closure.py).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import native
from native.merge import build_catalogue

OPS_PREFIX = "ops_"


def ops_modules() -> tuple[ModuleType, ...]:
    """Every `native.ops_*` module, by module name."""
    names = sorted(
        info.name
        for info in pkgutil.iter_modules(native.__path__)
        if info.name.startswith(OPS_PREFIX)
    )
    return tuple(importlib.import_module(f"native.{name}") for name in names)


CATALOGUE, KERNEL_NAMES = build_catalogue(ops_modules())

__all__ = ["CATALOGUE", "KERNEL_NAMES", "build_catalogue", "ops_modules"]
