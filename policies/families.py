"""Which policy sections each kernel family reads, and on which hardware the family is live.
The policy hash covers exactly the sections of the families a configuration can load."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    name: str
    sections: tuple[str, ...]  # section names or `section.field` entries
    enabled_on: Callable[[int], bool]


FAMILIES: tuple[Family, ...] = (
    Family("sm70-nvfp4-linear", ("sm70_turbomind", "sm70_nvfp4"), lambda cc: cc == 70),
    Family("sm70-awq-linear", ("sm70_turbomind", "sm70_awq", "sm70_awq_moe.tune_small_shapes"),
           lambda cc: cc == 70),
    Family("sm70-awq-moe", ("sm70_turbomind", "sm70_awq_moe"), lambda cc: 70 <= cc < 75),
    Family("sm75-linear", ("sm70_turbomind", "sm70_nvfp4", "sm70_fp8"), lambda cc: cc == 75),
)


def sections_of(family: str) -> tuple[str, ...]:
    """The policy sections (or `section.field` entries) one family reads."""
    for f in FAMILIES:
        if f.name == family:
            return f.sections
    raise KeyError(f"no family {family!r}")


def active_sections(capability: int) -> list[str]:
    """Sections of every family enabled at `capability`, in declaration order, deduplicated."""
    out: dict[str, None] = {}
    for family in FAMILIES:
        if family.enabled_on(capability):
            out.update(dict.fromkeys(family.sections))
    return list(out)
