"""What is decided: the KernelConfig, its variables, qualification, selectors and categories.

`PROJECT` is the object routectl receives (named in pyproject's `[tool.routectl]`), built by
`project_of` from the family list: the variable table is the shared fields followed by each
family's own, the native catalogue merges the ops modules the records name, and routectl
derives the selectors, loaders, categories and hashed sections from the same records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from native.merge import build_catalogue
from policies.categories.matrix import MODEL_FACTS
from policies.families import FAMILIES
from policies.qualification import (
    dflash2_verifier_qualified,
    nvfp4_workload_qualified,
    qualification_verdicts,
)
from policies.variables import RETIRED, SHARED_FIELDS, UNKNOWN_PREFIX, VARIABLE_PREFIX
from routectl.family import Family, field_table, ops_modules
from routectl.policy.fields import Field
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


def _config_model(fields: tuple[Field, ...]) -> Callable[[], Any]:
    """A builder of the KernelConfig of another family list's table (built on first use)."""

    def build() -> Any:
        from routectl.policy.configmodel import build_config_model

        return build_config_model(fields, "KernelConfig")

    return build


def project_of(families: Sequence[Family]) -> Project:
    """The project of a family list: its variable table, KernelConfig and native catalogue
    assembled from the records (a test builds one without a family)."""
    fields = field_table(SHARED_FIELDS, families)
    catalogue, _ = build_catalogue(ops_modules(families))
    return Project(
        name="routectl-sm70",
        # The project's own list: the public `policies.KernelConfig` class.
        config_model=_kernel_config if families is FAMILIES else _config_model(fields),
        fields=fields,
        catalogue=catalogue,
        # Selectors, engine loaders, categories and hashed sections: from the family records.
        families=families,
        qualification=qualification_verdicts,
        context=_context,
        unknown_prefix=UNKNOWN_PREFIX,
        retired=RETIRED,
        models=MODEL_FACTS,
        variable_prefix=VARIABLE_PREFIX,
    )


PROJECT = project_of(FAMILIES)

__all__ = ["PROJECT", "KernelConfig", "project_of"]
