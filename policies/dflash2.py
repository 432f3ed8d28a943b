"""The DFlash2 speculative verifier (docs/contracts/dflash2.md): the `sm70_dflash2` section's fields
and the four GDN layer admissions a layer computes once, at construction, from the resolved
policy, the hardware, the engine and its GDN layout.

An admission is the policy field, then capability exactly 70, then a DFlash selector engine,
then (combined split only) the kernel's local-layout predicate. Upstream merges the first
three failures of the combined guard into `policy_hardware_or_speculation`; routectl keeps
them apart and names the merged code in the message.
"""

from __future__ import annotations

from collections.abc import Callable

from native.kernels.gdn_sm70 import (
    COMBINED_SPLIT_DTYPE,
    COMBINED_SPLIT_QUERY_ROWS,
    GdnLayout,
    can_implement_combined_split,
)
from policies.variables import SHARED_FIELDS
from routectl.policy.resolve import ResolvedPolicy
from routectl.reasons import OK, Check, reject
from routectl.workload import EngineConfig, Hardware

SECTION = "sm70_dflash2"
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in SHARED_FIELDS if f.section == SECTION)
GDN_CAPABILITY = 70
SELECTOR_METHOD = "dflash"
MERGED_CODE = "policy_hardware_or_speculation"

COMBINED_SPLIT_GUARD = "enable_sm70_dflash2_fused_gdn_combined_split"
# (guard attribute, policy field) in the contract's order.
GDN_GUARDS: tuple[tuple[str, str], ...] = (
    ("enable_sm70_dflash2_fused_gdn_verify", "fused_gdn_verify"),
    ("enable_sm70_dflash2_fused_gdn_norm", "fused_gdn_norm"),
    ("enable_sm70_dflash2_fused_gdn_split", "fused_gdn_split"),
    (COMBINED_SPLIT_GUARD, "fused_gdn_combined_split"),
)

# The combined split's layout rule: (engine, layout) -> Check. The shipped rule is the
# kernel's local-layout predicate as the layer constructor calls it (8 rows, float16).
CombinedSplitRule = Callable[[EngineConfig, GdnLayout], Check]


DFLASH_METHODS = ("dflash",)


def dflash2_hashed(engine: EngineConfig, policy: ResolvedPolicy) -> bool:
    """The family's hashing rule (docs/contracts/dflash2.md §2, hash): a DFlash engine, or
    any field of the section explicit."""
    if engine.spec_method in DFLASH_METHODS:
        return True
    prefix = SECTION + "."
    return any(source != "default" for key, source in policy.sources if key.startswith(prefix))


def local_layout_rule(engine: EngineConfig, layout: GdnLayout) -> Check:
    return can_implement_combined_split(
        COMBINED_SPLIT_QUERY_ROWS, COMBINED_SPLIT_DTYPE, *layout.local_widths(engine.tp)
    )


def selector_engine(engine: EngineConfig) -> bool:
    """Speculative method dflash with a draft selector (top-k > 0)."""
    return engine.spec_method == SELECTOR_METHOD and engine.selector_top_k > 0


# The codes `guard_prerequisites` can return (declared for `routectl coverage`).
GUARD_CODES = ("policy_disabled", "capability_not_70", "not_dflash_selector")


def guard_prerequisites(
    field: str, policy: ResolvedPolicy, hardware: Hardware, engine: EngineConfig
) -> Check:
    """The three conditions every GDN guard shares, in order."""
    key = f"{SECTION}.{field}"
    if not policy.value(key):
        return reject("policy_disabled", f"kernel_config.{key} is false ({policy.source(key)})")
    if hardware.capability != GDN_CAPABILITY:
        return reject(
            "capability_not_70", f"capability {hardware.capability} is not exactly {GDN_CAPABILITY}"
        )
    if not selector_engine(engine):
        return reject(
            "not_dflash_selector",
            f"not a DFlash selector engine (speculative "
            f"method {engine.spec_method}, selector_top_k {engine.selector_top_k})",
        )
    return OK


def gdn_admissions(
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    layout: GdnLayout,
    *,
    combined_rule: CombinedSplitRule = local_layout_rule,
) -> list[tuple[str, Check]]:
    """The four GDN guards, (attribute, check), in the contract's order."""
    out: list[tuple[str, Check]] = []
    for guard, field in GDN_GUARDS:
        check = guard_prerequisites(field, policy, hardware, engine)
        if guard == COMBINED_SPLIT_GUARD:
            ok, reason = check
            if not ok and reason is not None:
                check = reject(reason.code, f"{reason.message} [upstream: {MERGED_CODE}]")
            else:
                check = combined_rule(engine, layout)
        out.append((guard, check))
    return out
