"""What is decided: the KernelConfig, its variables, qualification, selectors and categories.

`PROJECT` is the object routectl receives (named in pyproject's `[tool.routectl]`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from native.catalogue import CATALOGUE
from policies.categories.matrix import MODEL_FACTS
from policies.families import FAMILIES
from policies.qualification import (
    dflash2_verifier_qualified,
    nvfp4_workload_qualified,
    qualification_verdicts,
)
from policies.variables import FIELDS, RETIRED, UNKNOWN_PREFIX, VARIABLE_PREFIX
from routectl.project import Project
from routectl.workload import EngineConfig, Hardware


def _kernel_config() -> Any:
    # Built on first use (pydantic and the model: about 0.13 s), not at import: most checks
    # resolve few typed configs, and the engine none unless given one.
    from policies.config import KernelConfig

    return KernelConfig


def __getattr__(name: str) -> Any:
    if name == "KernelConfig":
        return _kernel_config()
    raise AttributeError(f"module 'policies' has no attribute {name!r}")


def _context(hardware: Hardware, engine: EngineConfig) -> Mapping[str, Any]:
    return {
        "qualified": nvfp4_workload_qualified(engine)[0],
        "dflash2_qualified": dflash2_verifier_qualified(hardware, engine)[0],
        "model_quantization": engine.model.quantization if engine.model else None,
        "capability": hardware.capability,
    }


PROJECT = Project(
    name="routectl-sm70",
    config_model=_kernel_config,
    fields=FIELDS,
    catalogue=CATALOGUE,
    # Selectors, engine loaders, categories and hashed sections: from the family records.
    families=FAMILIES,
    qualification=qualification_verdicts,
    context=_context,
    unknown_prefix=UNKNOWN_PREFIX,
    retired=RETIRED,
    models=MODEL_FACTS,
    variable_prefix=VARIABLE_PREFIX,
)

__all__ = ["PROJECT", "KernelConfig"]
