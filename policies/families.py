"""Which policy sections each kernel family reads, and on which hardware the family is live.
The policy hash covers exactly the sections of the families a configuration can load, and a
family may further restrict when it is hashed (the DFlash2 verifier: only for DFlash engines
or an explicit field, so the feature does not move other engines' compile identity)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from routectl.policy.resolve import ResolvedPolicy
from routectl.workload import EngineConfig

DFLASH2_SECTION = "sm70_dflash2"
DFLASH_METHODS = ("dflash",)


def _always(engine: EngineConfig, policy: ResolvedPolicy) -> bool:
    return True


def dflash2_hashed(engine: EngineConfig, policy: ResolvedPolicy) -> bool:
    """docs/contracts/dflash2.md §2 (hash): a DFlash engine, or any field of the section
    explicit."""
    if engine.spec_method in DFLASH_METHODS:
        return True
    prefix = DFLASH2_SECTION + "."
    return any(source != "default" for key, source in policy.sources if key.startswith(prefix))


@dataclass(frozen=True)
class Family:
    name: str
    sections: tuple[str, ...]  # section names or `section.field` entries
    enabled_on: Callable[[int], bool]
    # Whether this engine and policy hash the family's sections (on enabled hardware).
    hashed_when: Callable[[EngineConfig, ResolvedPolicy], bool] = _always


FAMILIES: tuple[Family, ...] = (
    Family("sm70-nvfp4-linear", ("sm70_turbomind", "sm70_nvfp4"), lambda cc: cc == 70),
    Family(
        "sm70-awq-linear",
        ("sm70_turbomind", "sm70_awq", "sm70_awq_moe.tune_small_shapes"),
        lambda cc: cc == 70,
    ),
    Family("sm70-awq-moe", ("sm70_turbomind", "sm70_awq_moe"), lambda cc: 70 <= cc < 75),
    Family("sm70-fp8-linear", ("sm70_turbomind", "sm70_fp8"), lambda cc: 70 <= cc < 75),
    Family("sm75-linear", ("sm70_turbomind", "sm70_nvfp4", "sm70_fp8"), lambda cc: cc == 75),
    # The verifier's options are read whatever the GPU (its GDN guards check capability 70
    # themselves); upstream hashes them under the method/explicit rule alone.
    Family(
        "sm70-dflash2-verifier", (DFLASH2_SECTION,), lambda cc: True, hashed_when=dflash2_hashed
    ),
)


def sections_of(family: str) -> tuple[str, ...]:
    """The policy sections (or `section.field` entries) one family reads."""
    for f in FAMILIES:
        if f.name == family:
            return f.sections
    raise KeyError(f"no family {family!r}")


def active_sections(capability: int, engine: EngineConfig, policy: ResolvedPolicy) -> list[str]:
    """Sections of every family enabled at `capability` and hashed for this engine and
    policy, in declaration order, deduplicated."""
    out: dict[str, None] = {}
    for family in FAMILIES:
        if family.enabled_on(capability) and family.hashed_when(engine, policy):
            out.update(dict.fromkeys(family.sections))
    return list(out)
