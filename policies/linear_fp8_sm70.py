"""Volta block-FP8 W8A16 linears (docs/contracts/fp8.md §1.2, §2): the policy the kernels see
(`explicit_enables`, the options), whether the SM70 route exists (else `dequant_fallback` /
`other_backend`, kernel null), the block-FP8 priority list with its W8A16 rule and
`linear_backend` filter, the checkpoint admission, and the load function.

Verdicts: the two SM70 kernels are always evaluated and recorded (the one after the chosen
one marked not needed); the five engine kernels after them, which never consume the W8A16
layout, are evaluated and recorded only when neither SM70 kernel passes, where the load error
lists every reason.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from native.kernels import fp8_sm70 as fs
from native.layers import BlockFp8Layer
from policies.linear_common import KernelLoader, candidate, unselected
from policies.qualification import fp8_pp2_tp4_contract
from policies.variables import SHARED_FIELDS, field, use_turbomind
from routectl.errors import SelectionError
from routectl.namespaces.native_ns import NativeNamespace
from routectl.policy.loaded import PreparedLayer
from routectl.policy.resolve import ResolvedPolicy
from routectl.policy.selection import Evaluation, Selection, select
from routectl.reasons import OK, Check, Reason
from routectl.workload import EngineConfig, Hardware

SECTION = "sm70_fp8"
QPN8_BLOCK = fs.QPN8Fp8BlockScaledMMLinearKernel
TURBOMIND = fs.TurboMindFp8LinearKernel
# Upstream's CUDA block-FP8 priority list (docs/contracts/fp8.md §2.1): the two SM70 kernels, then
# five kernels that never consume the W8A16 layout (the engine's, not routectl's).
FOREIGN = (
    "FlashInferFp8DeepGEMMDynamicBlockScaledKernel",
    "DeepGemmFp8BlockScaledMMKernel",
    "CutlassFp8BlockScaledMMKernel",
    "MarlinFP8ScaledMMLinearKernel",
    "TritonFp8BlockScaledMMKernel",
)
SM70_KERNELS = (QPN8_BLOCK.name, TURBOMIND.name)
PRIORITY: tuple[str, ...] = (*SM70_KERNELS, *FOREIGN)
# `linear_backend` -> the kernels of the list that belong to it (others: none).
BACKEND_KERNELS: Mapping[str, tuple[str, ...]] = {
    "turbomind": (QPN8_BLOCK.name, TURBOMIND.name),
    "deep_gemm": ("DeepGemmFp8BlockScaledMMKernel",),
    "cutlass": ("CutlassFp8BlockScaledMMKernel",),
    "marlin": ("MarlinFP8ScaledMMLinearKernel",),
    "triton": ("TritonFp8BlockScaledMMKernel",),
}
SM70 = (70, 75)  # 70 <= capability < 75
REQUESTED_BY = {QPN8_BLOCK.name: "sm70_fp8.block_qpn8"}
LOADER = KernelLoader(fs.FP8_SM70_KERNELS, SECTION, REQUESTED_BY)
DEQUANT_CODE = "dequant_fallback"
OTHER_BACKEND_CODE = "other_backend"
NO_KERNEL_MESSAGE = "Failed to find a kernel that can implement the ScaledMM linear layer."

_SECTION_FIELDS = tuple(f for f in SHARED_FIELDS if f.section == SECTION)


def _variable(key: str) -> str:
    variable = field(key).variable
    assert variable is not None
    return variable


# --- the policy as the family reads it -------------------------------------------------------


def explicit_enables(policy: ResolvedPolicy) -> frozenset[str]:
    """The section's fields whose final value is true and that were typed or came from a
    present variable (docs/contracts/fp8.md §1.2); an inherited qpn8_pp2_tp4 keeps source
    default."""
    return frozenset(
        f.name
        for f in _SECTION_FIELDS
        if policy.value(f.key) is True and policy.source(f.key) != "default"
    )


def force_marlin(policy: ResolvedPolicy) -> bool:
    return policy.value("sm70_turbomind.quant_backend") == "marlin"


def block_qpn8_turbomind_copy(policy: ResolvedPolicy, engine: EngineConfig | None) -> bool:
    """The QPN8 block kernel's TurboMind copy on Volta (rule of 959a2305): as configured, or
    when unset, when max_num_seqs * (speculative tokens + 1) > 8 (no engine: keep)."""
    configured = policy.value("sm70_fp8.block_qpn8_volta_turbomind_prefill")
    if configured is not None:
        return bool(configured)
    if engine is None:
        return True
    return engine.max_num_seqs * (engine.spec_tokens + 1) > fs.BLOCK_QPN8_DECODE_MAX_M


@functools.lru_cache(maxsize=32)
def fp8_options(policy: ResolvedPolicy, engine: EngineConfig) -> fs.Fp8Sm70Options:
    """What the kernels see of the policy: one value per (policy, engine), both frozen (a
    model's layers load under one policy; memoised, the pure function runs once)."""
    s = policy.section(SECTION)
    return fs.Fp8Sm70Options(
        qpn8=bool(s.qpn8),
        qpn8_pp2_tp4=bool(s.qpn8_pp2_tp4),
        qpn8_shared_gate=bool(s.qpn8_shared_gate),
        prescaled_decode=bool(s.prescaled_decode),
        prescaled_shared_gate=bool(s.prescaled_shared_gate),
        prefill_prescaled=bool(s.prefill_prescaled),
        prefill_exact_dense=bool(s.prefill_exact_dense),
        prefill_visible_dense_mm=bool(s.prefill_visible_dense_mm),
        gated_silu=bool(s.gated_silu),
        prefill_fast_selector=bool(s.prefill_fast_selector),
        grouped_bmm_decode=bool(s.grouped_bmm_decode),
        block_qpn8=bool(s.block_qpn8),
        force_marlin=force_marlin(policy),
        explicit_enables=explicit_enables(policy),
        pp2_tp4_contract=fp8_pp2_tp4_contract(engine)[0],
        block_qpn8_turbomind_copy=block_qpn8_turbomind_copy(policy, engine),
        turbomind_variable=_variable("sm70_fp8.enabled"),
    )


def checkpoint_admission(environ: Mapping[str, str], capability: int) -> Check:
    """Whether an FP8 checkpoint is admitted on 70 <= capability < 75 (docs/contracts/fp8.md §2.1):
    minimum capability 70 only when the dense dequant-fallback variable is true, the legacy
    backend is marlin, or use_turbomind(the FP8 TurboMind variable). Reads the variables
    (with their defaults), never typed config."""
    if not SM70[0] <= capability < SM70[1]:
        return OK

    def read(key: str) -> Any:
        f = field(key)
        if f.variable in environ:
            assert f.parser is not None
            return f.parser(f.variable or "", environ[f.variable or ""])
        return f.default

    backend = read("sm70_turbomind.quant_backend")
    turbomind = read("sm70_fp8.enabled")
    if (
        read("sm70_fp8.dequant_fallback")
        or backend == "marlin"
        or use_turbomind(turbomind, {"sm70_turbomind.quant_backend": backend})
    ):
        return OK
    return (
        False,
        Reason(
            "fp8_checkpoint_refused",
            f"FP8 checkpoint needs capability 75 on SM{capability}: "
            f"{_variable('sm70_fp8.dequant_fallback')}=0, "
            f"{_variable('sm70_turbomind.quant_backend')}={backend} and "
            f"use_turbomind({_variable('sm70_fp8.enabled')}) is false",
        ),
    )


def route_outcome(
    layer: BlockFp8Layer, policy: ResolvedPolicy, hardware: Hardware
) -> tuple[str, str] | None:
    """None when the SM70 route exists; else the status of the layer (kernel null)."""
    cc = hardware.capability
    enabled = bool(policy.value("sm70_fp8.enabled"))
    on_sm70 = SM70[0] <= cc < SM70[1]
    block = layer.static_scales and tuple(layer.block_size) == fs.FP8_BLOCK
    if on_sm70 and block and enabled:
        return None
    if (
        on_sm70
        and policy.value("sm70_fp8.dequant_fallback")
        and not enabled
        and not force_marlin(policy)
    ):
        return (
            DEQUANT_CODE,
            "sm70_fp8.enabled is false and sm70_fp8.dequant_fallback is "
            "true: weights are dequantized to FP16 at load and run as a "
            "plain FP16 linear",
        )
    if not on_sm70:
        why = f"capability {cc} is outside 70..74"
    elif not block:
        why = f"block size {list(layer.block_size)} is not [128, 128]"
    elif force_marlin(policy):
        why = "the legacy backend is marlin"
    else:
        why = "sm70_fp8.enabled and sm70_fp8.dequant_fallback are false"
    return (
        OTHER_BACKEND_CODE,
        f"the SM70 TurboMind FP8 route does not apply ({why}); the "
        "engine's generic FP8 block-kernel selection serves the layer",
    )


# --- selection ---------------------------------------------------------------------------------


# The codes of the policy gates every candidate passes (`_w8a16_rule`, `_disabled`) and of
# QPN8's own (`block_qpn8_policy`), declared once for `routectl coverage`.
W8A16_RULE_CODES = ("not_w8a16_consumer",)
DISABLED_CODES = ("disabled_kernel",)
BLOCK_QPN8_POLICY_CODES = ("block_qpn8_disabled", "explicit_variant_retained", "marlin_selected")


def block_qpn8_policy(options: fs.Fp8Sm70Options) -> Check:
    """The policy gate of QPN8Fp8BlockScaledMMLinearKernel (docs/contracts/fp8.md §2.3):
    block_qpn8 on, no explicitly configured fused or prescaled variant to retain (named in
    the contract's order), no legacy Marlin force."""
    if not options.block_qpn8:
        return (
            False,
            Reason("block_qpn8_disabled", f"disabled by kernel_config.{SECTION}.block_qpn8"),
        )
    kept = [v for v in fs.EXPLICIT_VARIANTS if v in options.explicit_enables]
    if kept:
        return (
            False,
            Reason(
                "explicit_variant_retained",
                "retains the explicitly configured fused or prescaled variant "
                f"({', '.join(f'{SECTION}.{v}' for v in kept)})",
            ),
        )
    if options.force_marlin:
        return (
            False,
            Reason("marlin_selected", "Marlin selected by legacy backend compatibility policy"),
        )
    return OK


def _w8a16_rule(name: str) -> Check:
    """Only TurboMindFp8LinearKernel and its subclasses consume the W8A16 layout."""
    if name in (QPN8_BLOCK.name, TURBOMIND.name):
        return OK
    return (False, Reason("not_w8a16_consumer", "does not consume the SM70 W8A16 layout"))


def _disabled(name: str, policy: ResolvedPolicy) -> Check:
    if name in policy.disabled_kernels:
        return (
            False,
            Reason(
                "disabled_kernel",
                f"is disabled by environment variable ({_variable('disabled_kernels')})",
            ),
        )
    return OK


def select_fp8_sm70(
    layer: BlockFp8Layer,
    policy: ResolvedPolicy,
    options: fs.Fp8Sm70Options,
    hardware: Hardware,
    ns: NativeNamespace,
) -> Selection:
    """The block-FP8 priority list after the `linear_backend` filter
    (docs/contracts/fp8.md §2.1)."""
    backend = policy.linear_backend
    names = (
        PRIORITY
        if backend == "auto"
        else tuple(n for n in PRIORITY if n in BACKEND_KERNELS.get(backend, ()))
    )
    if not names:
        raise SelectionError(
            "backend_not_available",
            f"--linear-backend={backend} was requested but no '{backend}' "
            "kernel exists for this layer type.",
            (),
        )
    request = fs.W8A16Request(layer, options)
    cc = hardware.capability
    own = [n for n in names if n in SM70_KERNELS]
    if own:
        selection = select(_entries(own, request, policy, cc, ns))
        if selection.chosen is not None:
            # The list stops at the first kernel that passes; the foreign kernels after the
            # SM70 ones are only ever evaluated (and recorded) when neither passes.
            return selection
    return select(_entries(names, request, policy, cc, ns))


def _entries(
    names: Sequence[str],
    request: fs.W8A16Request,
    policy: ResolvedPolicy,
    cc: int,
    ns: NativeNamespace,
) -> list[tuple[str, Any]]:
    entries = []
    for name in names:
        pre = [
            ("policy", lambda n=name: _w8a16_rule(n)),
            ("disabled", lambda n=name: _disabled(n, policy)),
        ]
        if name == QPN8_BLOCK.name:
            entries.append(
                candidate(
                    QPN8_BLOCK,
                    cc,
                    request,
                    ns,
                    pre=[*pre, ("policy", lambda: block_qpn8_policy(request.options))],
                )
            )
        elif name == TURBOMIND.name:
            entries.append(candidate(TURBOMIND, cc, request, ns, pre=pre))
        else:
            entries.append((name, _foreign(pre)))
    return entries


def _foreign(pre: list[Any]) -> Any:
    def evaluate() -> Evaluation:
        for stage, gate in pre:
            ok, reason = gate()
            if not ok:
                return Evaluation.failed(reason, stage)
        raise AssertionError("a foreign kernel passed the W8A16 rule")

    return evaluate


def no_kernel_error(selection: Selection) -> SelectionError:
    reasons = " ".join(f"{v.name} {v.message}." for v in selection.verdicts if not v.ok)
    return SelectionError(
        "no_kernel", f"{NO_KERNEL_MESSAGE} Reasons: {reasons}", selection.verdicts
    )


# --- loading ---------------------------------------------------------------------------------


def load_fp8_sm70(
    layer: BlockFp8Layer,
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    ns: NativeNamespace,
    *,
    tensors: Mapping[str, Any] | None = None,
    workspace: int | None = None,
    workspaces: fs.Fp8Workspaces | None = None,
) -> PreparedLayer:
    """Select and (with `tensors`) prepare one block-FP8 layer. `workspace`: FP16 elements
    the engine can lend the shared workspaces (None = unbounded); `workspaces`: the
    device's workspace registry when several layers share it (one per layer otherwise)."""
    cc = hardware.capability
    outcome = route_outcome(layer, policy, hardware)
    if outcome is not None:
        return unselected(cc, *outcome)
    options = fp8_options(policy, engine)
    selection = select_fp8_sm70(layer, policy, options, hardware, ns)
    if selection.chosen is None:
        raise no_kernel_error(selection)
    registry = workspaces if workspaces is not None else fs.Fp8Workspaces(workspace)
    try:
        setup = fs.Fp8Setup(options, registry, cc)
        return LOADER.load(selection, layer, setup, ns, policy, cc, tensors)
    except SelectionError as exc:
        # The kernel fails closed with the contract's code and message; the row carries
        # every candidate's verdict beside it.
        raise SelectionError(exc.code, exc.message, selection.verdicts) from None
