"""Volta block-FP8 W8A16 linears (docs/contracts/fp8.md §2-§4): the capability classes
QPN8Fp8BlockScaledMMLinearKernel (first in priority) and TurboMindFp8LinearKernel, the layout
decisions inside TurboMind (generic QPN8, PP2/TP4 QPN8, gated SiLU, exact-dense prefill,
prescaled variants, grouped lanes) with their tuning tables, the shared workspaces, and
preparation and dispatch through the injected native namespace.

The policy reaches these classes only as `Fp8Sm70Options` inside a `W8A16Request`, built by
`policies/` (native/ never reads the policy). Decisions are torch-free; torch is imported
only by preparation and dispatch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from native import meta_tensors
from native.kernels.common import (
    FP16,
    KernelPlan,
    LinearKernel,
    Prepared,
    capability_check,
    empty_fp16,
    fp16_tokens,
    owned_fp16,
    require_fp16,
    restore_leading,
    silu_and_mul,
)
from native.kernels.turing import QPN8_DISPATCH_OP, QPN8_PREFILL_OP, QPN8_PREPARE_OP
from native.layers import FP8_BLOCK, BlockFp8Layer
from routectl.errors import SelectionError
from routectl.namespaces.native_ns import NativeNamespace, missing_ops
from routectl.policy.loaded import Fallback
from routectl.reasons import OK, Check, Reason, reject

# --- native entries ------------------------------------------------------------------------

FP8_PREPARE_OP = "fp8_sm70_prepare"
FP8_GEMM_OP = "fp8_gemm_sm70_out"
FP8_PREFILL_DISPATCH_OP = "fp8_gemm_sm70_prefill_dispatch_out"
FP8_PRESCALED_M1_OP = "fp8_gemm_sm70_prescaled_m1_out"
FP8_PREFILL_PRESCALED_OP = "fp8_gemm_sm70_prefill_prescaled_out"
FP8_DEQUANTIZE_OP = "fp8_sm70_dequantize_out"
SILU_AND_MUL_INTERLEAVED_OP = "silu_and_mul_interleaved"
QPN8_DEQUANTIZE_OP = "fp8_qpn8_dequantize_sm70_out"
QPN8_GEMM_OP = "fp8_qpn8_gemm_sm70_out"
QPN8_GATED_PAIR_OP = "fp8_qpn8_gated_pair_sm70_out"
GROUPED_DISPATCH_OP = "fp8_moe_gemm_sm70_per_expert_dispatch_out"
STRIDED_PTRS_OP = "awq_moe_build_strided_ptrs"
# A pseudo-op: the dense GEMM of the visible dense MM prefill, recorded like a native call.
TORCH_MM_OP = "torch.mm"

# The six ops a TurboMind QPN8 layout needs (docs/contracts/fp8.md §3.2), in the contract's order.
QPN8_LAYOUT_OPS = (
    QPN8_PREPARE_OP,
    QPN8_DEQUANTIZE_OP,
    QPN8_PREFILL_OP,
    QPN8_DISPATCH_OP,
    QPN8_GEMM_OP,
    QPN8_GATED_PAIR_OP,
)
BLOCK_QPN8_OPS = (QPN8_PREPARE_OP, QPN8_GEMM_OP, QPN8_PREFILL_OP)
GROUPED_DECODE_OPS = (GROUPED_DISPATCH_OP, STRIDED_PTRS_OP)

# --- facts: tables and thresholds ------------------------------------------------------------

BLOCK = 128
TURBOMIND_GROUP = 128
E4M3 = "float8_e4m3fn"
VOLTA = (70, 72)
VOLTA_OR_TURING = (70, 72, 75)

LAYOUT_TURBOMIND = "fp8_sm70"
LAYOUT_QPN8 = "fp8_qpn8"
LAYOUT_TURBOMIND_BMM = "fp8_sm70_bmm"
LAYOUT_QPN8_BMM = "fp8_qpn8_bmm"
LAYOUT_BLOCK_QPN8 = "fp8_qpn8_block"

# Roles of the generic QPN8 layout and of the exact-dense prefill (3.2, 3.5).
QPN8_ROLES = ("gate_up_proj", "down_proj", "out_proj", "o_proj", "in_proj_qkvz", "qkv_proj")
EXACT_DENSE_ROLES = QPN8_ROLES
# Exact-dense dispatcher thresholds follow the role only (3.5).
EXACT_8K_ROLES = ("in_proj_qkvz", "qkv_proj")
EXACT_8K_THRESHOLD = 8000
DENSE_THRESHOLD = 3920
# Largest exact-dense role shape (gate_up_proj 5120 x 8704): the shared workspace floor.
EXACT_DENSE_MIN_ELEMENTS = 5120 * 8704
PP2_TP4_WORKSPACE_ELEMENTS = 8_388_608
EXACT_DENSE_WORKSPACE = "exact_dense"
PP2_TP4_WORKSPACE = "pp2_tp4"

Tuning = tuple[int, int, bool]  # (split_k, chains, prefetch)

# Generic QPN8 tuning by (K, N, gated call) (3.2); anything else: qpn8_tuning's rule.
QPN8_TUNING: dict[tuple[int, int, bool], Tuning] = {
    (4352, 5120, False): (16, 1, False),
    (1536, 5120, False): (16, 1, False),
    (5120, 4096, False): (16, 2, False),
    (5120, 3584, False): (16, 2, False),
    (5120, 8704, False): (16, 1, True),
    (5120, 8704, True): (8, 2, True),
}
# PP2/TP4 layers: role -> (layer TP, K, N) (3.3); the shared-gate gate/up has its own contract.
PP2_TP4_ROLES: dict[str, tuple[int, int, int]] = {
    "fused_wqa_wkv": (1, 4096, 1536),
    "wq_b": (4, 1024, 8192),
    "wo_b": (4, 2048, 4096),
    "down_proj": (4, 512, 4096),
}
PP2_TP4_TUNING: dict[tuple[int, int], Tuning] = {
    (4096, 1536): (32, 2, False),
    (1024, 8192): (8, 2, False),
    (2048, 4096): (16, 2, False),
    (4096, 1024): (32, 2, False),
    (512, 4096): (16, 2, False),
}
SHARED_GATE_SUFFIX = ".shared_experts.gate_up_proj"
SHARED_GATE_SHAPE = (4, 4096, 1024, (512, 512))  # (TP, K, N, partitions)
# The grouped wo_a layer of the PP2/TP4 contract: (TP, groups, K, N).
GROUPED_WO_A = ("wo_a", 4, 2, 4096, 2048)
# The prescaled M = 1 decode layer: fused_wqa_wkv at layer TP 1, K 4096, N 1536.
PRESCALED_M1_LAYER = ("fused_wqa_wkv", 1, 4096, 1536)
PRESCALE = 256.0
PREFILL_PRESCALED_M = 8000
# The grouped decode lane: 2 groups of 1024 rows with K 4096, used at M = 1.
GROUPED_DECODE_SHAPE = (2, 1024, 4096)
GROUPED_DECODE_M = 1
PRESCALED_DECODE_M = 1
# QPN8Fp8BlockScaledMMLinearKernel runs its decode GEMM up to this M.
BLOCK_QPN8_DECODE_MAX_M = 8

EXPLICIT_VARIANTS = ("gated_silu", "prefill_prescaled", "prescaled_decode")


def qpn8_tuning(k: int, n: int, gated: bool) -> Tuning:
    """(split_k, chains, prefetch) of the generic QPN8 layout; K and N from the layer."""
    found = QPN8_TUNING.get((k, n, gated))
    if found is not None:
        return found
    return (8 if gated or k % 256 else 16, 2, False)


def exact_dense_threshold(role: str) -> int:
    return EXACT_8K_THRESHOLD if role in EXACT_8K_ROLES else DENSE_THRESHOLD


def exact_dense_workspace_elements(layer: BlockFp8Layer) -> int:
    """max(44,564,480, K*N) FP16 elements (a larger layer needs its own, larger buffer)."""
    return max(EXACT_DENSE_MIN_ELEMENTS, layer.input_size * layer.output_size)


# --- the policy as the kernels see it ------------------------------------------------------


@dataclass(frozen=True)
class Fp8Sm70Options:
    """The resolved `sm70_fp8` section and what policies derived from it and the engine."""

    qpn8: bool = False
    qpn8_pp2_tp4: bool = False
    qpn8_shared_gate: bool = False
    prescaled_decode: bool = True
    prescaled_shared_gate: bool = True
    prefill_prescaled: bool = True
    prefill_exact_dense: bool = True
    prefill_visible_dense_mm: bool = False
    gated_silu: bool = True
    prefill_fast_selector: bool = True
    grouped_bmm_decode: bool = True
    block_qpn8: bool = False
    force_marlin: bool = False
    # Fields whose true value was asked for (typed, or a present variable)
    # (docs/contracts/fp8.md §1.2).
    explicit_enables: frozenset[str] = frozenset()
    # The PP2/TP4 runtime contract holds for this engine (model qualification, 3.3).
    pp2_tp4_contract: bool = False
    # QPN8Fp8BlockScaledMMLinearKernel keeps a TurboMind copy for M > 8 (2.3, rule 959a2305).
    block_qpn8_turbomind_copy: bool = False
    # The variable of `enabled`, named by the preparation error (5.7).
    # (policies passes the variable; native names no policy key or variable itself)
    turbomind_variable: str = "enabled"


@dataclass(frozen=True)
class W8A16Request:
    """The W8A16 layer description offered to the block-FP8 priority list: the layer and
    the policy that travels with it."""

    layer: BlockFp8Layer
    options: Fp8Sm70Options = Fp8Sm70Options()


# --- capability classes ----------------------------------------------------------------------


def _block_scaled(layer: BlockFp8Layer) -> bool:
    return layer.static_scales and tuple(layer.block_size) == FP8_BLOCK


class TurboMindFp8LinearKernel(LinearKernel):
    """The SM70 W8A16 kernel: capability never reads policy; every variant is decided at
    preparation (`plan_turbomind`)."""

    required_ops: ClassVar[tuple[str, ...]] = (FP8_PREPARE_OP,)
    reason_codes: ClassVar[tuple[str, ...] | None] = (
        "requires_volta",
        "not_w8a16_layout",
        "not_block_scaled",
        "activation_not_fp16",
        "missing_native_ops",
    )

    @classmethod
    def is_supported(cls, capability: int) -> Check:
        return capability_check(
            capability, lambda cc: cc in VOLTA, "requires_volta", "requires Volta SM70 or SM72"
        )

    @classmethod
    def can_implement(cls, layer: Any, ns: NativeNamespace) -> Check:
        if not isinstance(layer, W8A16Request):
            return reject("not_w8a16_layout", "requires the serialized SM70 weight-only FP8 layout")
        spec = layer.layer
        if not _block_scaled(spec):
            return reject(
                "not_block_scaled",
                f"requires 128 x 128 block weight scales (block "
                f"{list(spec.block_size)}, static {spec.static_scales})",
            )
        if spec.act_dtype != FP16:
            return reject(
                "activation_not_fp16",
                f"requires float16 activations (activations {spec.act_dtype})",
            )
        if not ns.has_op(FP8_PREPARE_OP):
            return (
                False,
                Reason("missing_native_ops", f"native {FP8_PREPARE_OP} operator is unavailable"),
            )
        return OK

    @classmethod
    def plan(cls, layer: BlockFp8Layer, setup: Fp8Setup, ns: NativeNamespace) -> KernelPlan:
        """Every variant at once (`plan_turbomind`); raises SelectionError (5)."""
        layout = plan_turbomind(layer, setup.options, ns, setup.workspaces)
        explicit_prescaled = "prescaled_decode" in setup.options.explicit_enables
        return KernelPlan(
            layout.name,
            layout.flags(),
            prepare=lambda tensors: prepare_turbomind(
                layer, tensors, ns, layout, setup.workspaces, explicit_prescaled
            ),
            fallbacks=layout.fallbacks,
            state={"layout": layout, "notes": layout.notes},
        )


class QPN8Fp8BlockScaledMMLinearKernel(TurboMindFp8LinearKernel):
    """QPN8 block-scaled MM (2.3): its own QPN8 codes for every aligned rank-two layer, on
    Volta plus a TurboMind copy for larger M when kept. Its fused gate/up entry is the
    inherited one, which declines."""

    required_ops = BLOCK_QPN8_OPS
    reason_codes = (
        "requires_volta_or_turing",
        "not_w8a16_layout",
        "grouped_bmm",
        "input_output_not_fp16",
        "not_static_e4m3_block",
        "weight_rank",
        "n_k_not_multiple_of_128",
        "missing_native_ops",
    )

    @classmethod
    def is_supported(cls, capability: int) -> Check:
        return capability_check(
            capability,
            lambda cc: cc in VOLTA_OR_TURING,
            "requires_volta_or_turing",
            "requires a Volta or Turing CUDA device",
        )

    @classmethod
    def can_implement(cls, layer: Any, ns: NativeNamespace) -> Check:
        """The layer's shape, dtypes and the build's ops; the policy (block_qpn8 on, no
        explicit variant retained, no Marlin force) is the selector's gate before it."""
        if not isinstance(layer, W8A16Request):
            return reject("not_w8a16_layout", "requires the serialized SM70 weight-only FP8 layout")
        spec = layer.layer
        if spec.grouped:
            return reject("grouped_bmm", "grouped BMM retains its existing grouped implementation")
        if spec.act_dtype != FP16 or spec.out_dtype != FP16:
            return reject(
                "input_output_not_fp16",
                f"requires FP16 activations and output (input {spec.act_dtype}, "
                f"output {spec.out_dtype})",
            )
        if spec.weight_dtype != E4M3 or not _block_scaled(spec):
            return reject(
                "not_static_e4m3_block",
                "requires static E4M3 weights with 128 x 128 block scales (weight "
                f"{spec.weight_dtype}, block {list(spec.block_size)})",
            )
        if len(spec.weight_shape) != 2:
            return reject(
                "weight_rank",
                f"requires a rank-two weight matrix (shape {tuple(spec.weight_shape)})",
            )
        n, k = spec.weight_shape
        if n <= 0 or k <= 0 or n % BLOCK or k % BLOCK:
            return reject(
                "n_k_not_multiple_of_128", f"requires positive N,K divisible by 128, got ({n},{k})"
            )
        missing = missing_ops(ns, cls.required_ops)
        if missing:
            return (
                False,
                Reason("missing_native_ops", f"missing native operators: [{', '.join(missing)}]"),
            )
        return OK

    @classmethod
    def plan(cls, layer: BlockFp8Layer, setup: Fp8Setup, ns: NativeNamespace) -> KernelPlan:
        copy = setup.options.block_qpn8_turbomind_copy and setup.capability in VOLTA
        return KernelPlan(
            LAYOUT_BLOCK_QPN8,
            {"qpn8": True, "gated": False, "turbomind_copy": copy},
            prepare=lambda tensors: prepare_block_qpn8(
                layer, tensors, ns, capability=setup.capability, turbomind_copy=copy
            ),
        )


FP8_SM70_KERNELS = (QPN8Fp8BlockScaledMMLinearKernel, TurboMindFp8LinearKernel)


# --- workspaces --------------------------------------------------------------------------------


class Fp8Workspaces:
    """The SM70 FP8 workspaces of one device (4.2): one FP16 buffer per kind, shared by every
    layer bound to it by prefix, as large as the largest binding needs. `available` FP16
    elements bound what the engine can lend (None = unbounded; 0 = none)."""

    KINDS = (EXACT_DENSE_WORKSPACE, PP2_TP4_WORKSPACE)

    def __init__(self, available: int | None = None) -> None:
        self.available = available
        self._elements: dict[str, int] = {}
        self._bound: dict[str, str] = {}
        self._buffers: dict[str, Any] = {}

    def fits(self, elements: int) -> bool:
        return self.available is None or elements <= self.available

    def bind(self, prefix: str, kind: str, elements: int) -> int:
        """Bind `prefix` to the `kind` workspace; the handle is what the native dispatchers
        receive as the workspace address."""
        if not prefix:
            raise SelectionError("workspace_prefix", "SM70 workspaces are bound by layer prefix")
        bound = self._bound.get(prefix)
        if bound is not None and bound != kind:
            raise SelectionError(
                "workspace_rebound", f"{prefix} is already bound to another SM70 workspace"
            )
        self._bound[prefix] = kind
        self._elements[kind] = max(self._elements.get(kind, 0), elements)
        return self.KINDS.index(kind) + 1

    def tensor(self, kind: str, like: Any) -> Any:
        """The buffer itself (allocated once, at the size the bindings need)."""
        buffer = self._buffers.get(kind)
        if buffer is None or buffer.numel() < self._elements[kind]:
            buffer = owned_fp16((self._elements[kind],), like)
            self._buffers[kind] = buffer
        return buffer

    def view(self, kind: str, shape: tuple[int, ...], like: Any) -> Any:
        return self.tensor(kind, like)[: math.prod(shape)].view(shape)

    def bytes_json(self) -> dict[str, int]:
        return {kind: self._elements[kind] * 2 for kind in sorted(self._elements)}


@dataclass(frozen=True)
class Fp8Setup:
    """What an SM70 FP8 kernel is given to plan one layer: the policy's options, the
    device's workspace registry and the device's capability."""

    options: Fp8Sm70Options
    workspaces: Fp8Workspaces
    capability: int


# --- TurboMind layout decisions (torch-free) -------------------------------------------------


@dataclass(frozen=True)
class Fp8Layout:
    """What preparation of a TurboMindFp8LinearKernel layer decided (4.1)."""

    qpn8: bool = False
    pp2_tp4: bool = False
    tuning: Tuning | None = None
    gated_tuning: Tuning | None = None  # the fused call's tuning (QPN8 gated layout)
    gated: bool = False  # interleaved gate/up layout (TurboMind) or gated QPN8 call
    exact_dense: bool = False
    threshold: int = 0  # the exact-dense dispatcher's prefill_min_m (0: not bound)
    visible_dense_mm: bool = False
    prescaled_decode: bool = False
    prefill_prescaled: bool = False
    grouped_decode: bool = False
    groups: int = 0
    workspace: str | None = None  # the workspace kind the layer binds
    workspace_elements: int = 0
    fallbacks: tuple[Fallback, ...] = ()
    notes: tuple[str, ...] = ()  # warnings and info the engine logs

    def flags(self) -> dict[str, Any]:
        split_k, chains, prefetch = self.tuning or (0, 0, False)
        return {
            "qpn8": self.qpn8,
            "gated": self.gated,
            "pp2_tp4": self.pp2_tp4,
            "bmm_groups": self.groups,
            "qpn8_split_k": split_k,
            "qpn8_chains": chains,
            "qpn8_prefetch": prefetch,
            "prefill_exact_dense": self.exact_dense,
            "prefill_min_m": self.threshold,
            "prefill_prescaled": self.prefill_prescaled,
            "prescaled_decode": self.prescaled_decode,
            "visible_dense_mm": self.visible_dense_mm,
            "grouped_decode": self.grouped_decode,
        }

    @property
    def name(self) -> str:
        if self.groups:
            return LAYOUT_QPN8_BMM if self.qpn8 else LAYOUT_TURBOMIND_BMM
        return LAYOUT_QPN8 if self.qpn8 else LAYOUT_TURBOMIND


def _dims(layer: BlockFp8Layer) -> tuple[int, int]:
    return layer.input_size, layer.output_size


def _rank2_weight(layer: BlockFp8Layer) -> bool:
    k, n = _dims(layer)
    return len(layer.weight_shape) == 2 and tuple(layer.weight_shape) == (n, k)


def _aligned(value: int) -> bool:
    return value > 0 and value % BLOCK == 0


def shared_gate_layer(layer: BlockFp8Layer) -> bool:
    """The PP2/TP4 shared-expert gate/up contract (3.3), policy aside."""
    tp, k, n, parts = SHARED_GATE_SHAPE
    return (
        layer.prefix.endswith(SHARED_GATE_SUFFIX)
        and layer.tp == tp
        and _block_scaled(layer)
        and _dims(layer) == (k, n)
        and tuple(layer.partitions) == parts
        and tuple(layer.weight_shape) == (n, k)
    )


def _generic_qpn8_candidate(layer: BlockFp8Layer, options: Fp8Sm70Options) -> bool:
    k, n = _dims(layer)
    return (
        options.qpn8
        and not layer.grouped
        and _block_scaled(layer)
        and _rank2_weight(layer)
        and layer.role in QPN8_ROLES
        and _aligned(k)
        and _aligned(n)
        and (not layer.gated_candidate or n % 64 == 0)
    )


def _pp2_tp4_candidate(layer: BlockFp8Layer, options: Fp8Sm70Options) -> bool:
    if not options.qpn8_pp2_tp4 or layer.grouped or not _block_scaled(layer):
        return False
    if layer.role == "gate_up_proj":
        # Only through the shared-gate contract; it is never asked for a fused epilogue
        # because its layout is never gated (3.3).
        return options.qpn8_shared_gate and shared_gate_layer(layer)
    k, n = _dims(layer)
    return PP2_TP4_ROLES.get(layer.role) == (layer.tp, k, n) and tuple(layer.weight_shape) == (n, k)


def _grouped_wo_a_candidate(layer: BlockFp8Layer, options: Fp8Sm70Options) -> bool:
    role, tp, groups, k, n = GROUPED_WO_A
    return (
        options.qpn8_pp2_tp4
        and layer.role == role
        and _block_scaled(layer)
        and layer.tp == tp
        and layer.groups == groups
        and _dims(layer) == (k, n)
        and tuple(layer.weight_shape) == (n, k)
    )


def _prescaled_m1_layer(layer: BlockFp8Layer, options: Fp8Sm70Options) -> tuple[bool, bool]:
    """(a prescaled-decode layer, its request is explicit) (3.6, 5.4)."""
    role, tp, k, n = PRESCALED_M1_LAYER
    explicit = "prescaled_decode" in options.explicit_enables
    if (
        layer.role == role
        and layer.tp == tp
        and _dims(layer) == (k, n)
        and tuple(layer.weight_shape) == (n, k)
    ):
        return True, explicit
    if options.prescaled_shared_gate and shared_gate_layer(layer):
        return True, explicit or "prescaled_shared_gate" in options.explicit_enables
    return False, False


def _missing_qpn8_error(route: str, missing: list[str]) -> SelectionError:
    return SelectionError(
        "missing_native_ops",
        f"The explicitly enabled {route} requires source-built operators; missing: {missing!r}.",
    )


PRESCALED_CONTRACT_MESSAGE = (
    "Explicit SM70 FP8 prescaled decode requires UE8M0 128x128 scales and the PP2 x TP4 "
    "no-spec single-request contract."
)
PRESCALED_OP_MESSAGE = (
    "Explicit SM70 FP8 prescaled decode requires the source-built operator and finite, "
    "reversible FP16 scales after the 256x exponent shift."
)
QPN8_WORKSPACE_MESSAGE = (
    "Insufficient memory for the SM70 FP8 QPN8 prefill workspace; retaining the TurboMind layout."
)


def check_preparable(layer: BlockFp8Layer, options: Fp8Sm70Options, ns: NativeNamespace) -> None:
    """The preparation preconditions (5.6, 5.7)."""
    if layer.orig_dtype != FP16:
        raise SelectionError(
            "original_dtype_not_fp16",
            "SM70 TurboMind FP8 dense path currently requires fp16 original "
            f"weights, got {layer.orig_dtype}.",
        )
    if not ns.has_op(FP8_PREPARE_OP):
        raise SelectionError(
            "missing_native_ops",
            f"{options.turbomind_variable}=1 requires a build with CUDA arch "
            "7.0 and the SM70 TurboMind extension.",
        )


def check_grouped(layer: BlockFp8Layer) -> None:
    """Grouped invariants (5.8)."""
    n = layer.output_size
    groups = layer.groups
    if groups <= 0 or n % groups:
        raise SelectionError(
            "grouped_invariant",
            f"SM70 FP8 grouped layer {layer.prefix}: group count {groups} must "
            f"be positive and divide the {n} rows",
        )
    rows = n // groups
    if rows % BLOCK:
        raise SelectionError(
            "grouped_invariant",
            f"SM70 FP8 grouped layer {layer.prefix}: {rows} rows per group is "
            "not a multiple of 128",
        )
    if layer.scale_shape[0] != groups * (rows // BLOCK):
        raise SelectionError(
            "grouped_invariant",
            f"SM70 FP8 grouped layer {layer.prefix}: {layer.scale_shape[0]} "
            f"scale rows, expected {groups * (rows // BLOCK)}",
        )


def _qpn8_decision(
    layer: BlockFp8Layer, options: Fp8Sm70Options, ns: NativeNamespace, workspaces: Fp8Workspaces
) -> tuple[Fp8Layout | None, list[Fallback], list[str]]:
    """Step 1 of 4.1: the QPN8 layout when a candidate's ops and workspace are there."""
    fallbacks: list[Fallback] = []
    notes: list[str] = []
    k, n = _dims(layer)
    ee = options.explicit_enables
    if _grouped_wo_a_candidate(layer, options):
        kind, field_key, explicit = (
            "grouped",
            "qpn8_pp2_tp4",
            bool({"qpn8", "qpn8_pp2_tp4"} & ee),
        )
    elif _generic_qpn8_candidate(layer, options):
        kind, field_key, explicit = "generic", "qpn8", "qpn8" in ee
    elif _pp2_tp4_candidate(layer, options):
        kind, field_key = "pp2_tp4", "qpn8_pp2_tp4"
        explicit = bool({"qpn8", "qpn8_pp2_tp4", "qpn8_shared_gate"} & ee)
    else:
        return None, fallbacks, notes
    if kind != "generic" and not options.pp2_tp4_contract:
        notes.append(
            f"{layer.prefix}: outside the SM70 PP2 x TP4 runtime contract; "
            "retaining the TurboMind layout"
        )
        return None, fallbacks, notes
    missing = missing_ops(ns, QPN8_LAYOUT_OPS)
    if missing:
        if explicit:
            route = "SM70 QPN8 route" if kind == "generic" else "SM70 PP2 x TP4 QPN8 route"
            raise _missing_qpn8_error(route, missing)
        reason = (
            f"missing native QPN8 operators: [{', '.join(missing)}]; retaining the TurboMind layout"
        )
        notes.append(reason)
        fallbacks.append(Fallback(field_key, True, False, reason))
        return None, fallbacks, notes
    if kind == "generic":
        workspace, elements = EXACT_DENSE_WORKSPACE, exact_dense_workspace_elements(layer)
    else:
        workspace, elements = PP2_TP4_WORKSPACE, PP2_TP4_WORKSPACE_ELEMENTS
    if not workspaces.fits(elements):
        notes.append(QPN8_WORKSPACE_MESSAGE)
        fallbacks.append(Fallback(field_key, True, False, QPN8_WORKSPACE_MESSAGE))
        return None, fallbacks, notes
    if kind == "generic":
        tuning = qpn8_tuning(k, n, False)
        gated = layer.gated_candidate and options.gated_silu and not shared_gate_layer(layer)
        layout = Fp8Layout(
            qpn8=True,
            tuning=tuning,
            gated_tuning=qpn8_tuning(k, n, True) if gated else None,
            gated=gated,
            workspace=workspace,
            workspace_elements=elements,
        )
    else:
        groups = layer.groups if kind == "grouped" else 0
        # Every PP2/TP4 candidate shape (per group for wo_a) is a key of the table.
        tuning = PP2_TP4_TUNING[(k, n // groups) if groups else (k, n)]
        layout = Fp8Layout(
            qpn8=True,
            pp2_tp4=True,
            tuning=tuning,
            groups=groups,
            workspace=workspace,
            workspace_elements=elements,
        )
    return layout, fallbacks, notes


def plan_turbomind(
    layer: BlockFp8Layer, options: Fp8Sm70Options, ns: NativeNamespace, workspaces: Fp8Workspaces
) -> Fp8Layout:
    """Every variant of a TurboMindFp8LinearKernel layer, in the order of 4.1; raises
    SelectionError where the layer fails to load (5)."""
    check_preparable(layer, options, ns)
    if layer.grouped:
        check_grouped(layer)
    qpn8, fallbacks, notes = _qpn8_decision(layer, options, ns, workspaces)
    if qpn8 is not None:
        return _with(qpn8, fallbacks, notes)
    if layer.grouped:
        groups = layer.groups
        decode = (
            options.grouped_bmm_decode
            and (groups, layer.output_size // groups, layer.input_size) == GROUPED_DECODE_SHAPE
            and not missing_ops(ns, GROUPED_DECODE_OPS)
        )
        return _with(Fp8Layout(groups=groups, grouped_decode=decode), fallbacks, notes)
    k, n = _dims(layer)
    # Step 2: prescaled decode (5.4, 5.5); reversibility is checked on the real scales.
    prescaled_decode = False
    is_m1_layer, explicit = _prescaled_m1_layer(layer, options)
    if options.prescaled_decode and is_m1_layer:
        if not (layer.is_scale_e8m0 and options.pp2_tp4_contract):
            if explicit:
                raise SelectionError("prescaled_decode_contract", PRESCALED_CONTRACT_MESSAGE)
        elif not ns.has_op(FP8_PRESCALED_M1_OP):
            if explicit:
                raise SelectionError("prescaled_decode_operator", PRESCALED_OP_MESSAGE)
        else:
            prescaled_decode = True
    # Step 3: the gated SiLU layout (3.4); the shared-gate layer is never gated.
    gated = layer.gated_candidate and options.gated_silu and not shared_gate_layer(layer)
    # Step 4: the prefill prescaled buffer (3.6).
    prefill_prescaled = (
        options.prefill_prescaled
        and options.prefill_fast_selector
        and layer.role in EXACT_8K_ROLES
        and ns.has_op(FP8_PREFILL_PRESCALED_OP)
    )
    # Step 5: exact-dense prefill binding (3.5).
    exact_dense = False
    elements = 0
    shape_ok = (
        _block_scaled(layer)
        and _rank2_weight(layer)
        and layer.role in EXACT_DENSE_ROLES
        and _aligned(k)
        and _aligned(n)
    )
    if options.prefill_exact_dense and shape_ok:
        elements = exact_dense_workspace_elements(layer)
        refused = None
        if not ns.has_op(FP8_PREFILL_DISPATCH_OP):
            refused = (
                f"missing native exact-dense operator: [{FP8_PREFILL_DISPATCH_OP}]; "
                "plain TurboMind GEMM"
            )
        elif not workspaces.fits(elements):
            refused = (
                f"insufficient exact-dense workspace (need {elements} FP16 elements, "
                f"have {workspaces.available}); plain TurboMind GEMM"
            )
        if refused is None:
            exact_dense = True
        else:
            notes.append(refused)
            fallbacks.append(Fallback("prefill_exact_dense", True, False, refused))
    visible = (
        exact_dense
        and options.prefill_visible_dense_mm
        and ns.has_op(FP8_DEQUANTIZE_OP)
        and (not gated or ns.has_op(SILU_AND_MUL_INTERLEAVED_OP))
    )
    return _with(
        Fp8Layout(
            gated=gated,
            exact_dense=exact_dense,
            threshold=exact_dense_threshold(layer.role) if exact_dense else 0,
            visible_dense_mm=visible,
            prescaled_decode=prescaled_decode,
            prefill_prescaled=prefill_prescaled,
            workspace=EXACT_DENSE_WORKSPACE if exact_dense else None,
            workspace_elements=elements if exact_dense else 0,
        ),
        fallbacks,
        notes,
    )


def _with(layout: Fp8Layout, fallbacks: list[Fallback], notes: list[str]) -> Fp8Layout:
    return Fp8Layout(**{**layout.__dict__, "fallbacks": tuple(fallbacks), "notes": tuple(notes)})


# --- preparation and dispatch -----------------------------------------------------------------


def _scales_fp32(scales: Any) -> Any:
    import torch

    return scales if scales.dtype == torch.float32 else scales.to(torch.float32)


def prescaled(scales: Any) -> Any:
    """The scales x256 (the 256x exponent shift). A meta tensor has no values, only shape
    and dtype, which the shift keeps: its copy is made directly, without torch's Python meta
    kernels (`*` and `empty_like` on meta import sympy on first use: seconds)."""

    if scales.device.type == "meta":
        return meta_tensors.empty(tuple(scales.shape), scales.dtype, scales.device)
    return scales * PRESCALE


def prescaled_copy(scales: Any) -> Any | None:
    """The scales x256 when every one is >= 0, finite after the shift and exactly recovered
    by x1/256; None otherwise. Values of meta tensors cannot be read: replay takes the route
    reversible scales take."""
    shifted = prescaled(scales)
    if scales.device.type == "meta":
        return shifted
    import torch

    ok = (
        bool((scales >= 0).all())
        and bool(torch.isfinite(shifted.to(torch.float16)).all())
        and bool(torch.equal(shifted.to(torch.float16).to(torch.float32) / PRESCALE, scales))
    )
    return shifted if ok else None


def prepare_turbomind(
    layer: BlockFp8Layer,
    tensors: dict[str, Any],
    ns: NativeNamespace,
    layout: Fp8Layout,
    workspaces: Fp8Workspaces,
    explicit_prescaled: bool = False,
) -> Prepared:
    """Prepare a TurboMindFp8LinearKernel layer as `layout` decided and return its calls
    (4.3, 4.4)."""
    weight = tensors["weight"]
    scales = _scales_fp32(tensors["weight_scale_inv"])
    if layout.groups:
        return _prepare_grouped(layer, weight, scales, ns, layout, workspaces)
    k, n = _dims(layer)
    handle = (
        workspaces.bind(layer.prefix, layout.workspace, layout.workspace_elements)
        if layout.workspace
        else 0
    )
    if layout.qpn8:
        return _prepare_qpn8(layer, weight, scales, ns, layout, handle)
    codes, tm_scales, _meta = ns.call(
        FP8_PREPARE_OP,
        weight=weight,
        weight_scale=scales,
        group_size=TURBOMIND_GROUP,
        interleave_gated=layout.gated,
    )
    resident: dict[str, Any] = {"fp8_codes": codes, "fp8_scales": tm_scales}
    k_ld, q_ld = k, n  # the prepare's leading dimensions
    prescaled_m1 = None
    if layout.prescaled_decode:
        prescaled_m1 = prescaled_copy(tm_scales)
        if prescaled_m1 is None and explicit_prescaled:
            raise SelectionError("prescaled_decode_operator", PRESCALED_OP_MESSAGE)
        if prescaled_m1 is not None:
            resident["prescaled_decode_scales"] = prescaled_m1
    prescaled_prefill = None
    if layout.prefill_prescaled:
        prescaled_prefill = prescaled(tm_scales)
        resident["prefill_prescaled_scales"] = prescaled_prefill
    common = {"group_size": TURBOMIND_GROUP, "k_ld": k_ld, "q_ld": q_ld}

    def gemm(x2: Any, gated: bool) -> Any:
        out = empty_fp16((x2.shape[0], n // 2 if gated else n), x2)
        m = x2.shape[0]
        if layout.visible_dense_mm and m >= layout.threshold:
            dense = workspaces.view(EXACT_DENSE_WORKSPACE, (k, n), x2)
            ns.call(FP8_DEQUANTIZE_OP, out=dense, weight=codes, weight_scale=tm_scales, **common)
            y = ns.call(TORCH_MM_OP, input=x2, mat2=dense)
            if not gated:
                return y
            ns.call(SILU_AND_MUL_INTERLEAVED_OP, result=out, input=y)
            return out
        if layout.exact_dense:
            ns.call(
                FP8_PREFILL_DISPATCH_OP,
                out=out,
                workspace=handle,
                x=x2,
                weight=codes,
                weight_scale=tm_scales,
                gated=gated,
                prefill_min_m=layout.threshold,
                **common,
            )
        else:
            ns.call(
                FP8_GEMM_OP,
                out=out,
                x=x2,
                weight=codes,
                weight_scale=tm_scales,
                gated=gated,
                **common,
            )
        return out

    def apply(x: Any) -> Any:
        x2, m = fp16_tokens(x, k, "SM70 TurboMind FP8")
        if m == 0:
            return restore_leading(empty_fp16((0, n), x2), x)
        if prescaled_m1 is not None and m == PRESCALED_DECODE_M:
            out = empty_fp16((m, n), x2)
            ns.call(
                FP8_PRESCALED_M1_OP,
                out=out,
                x=x2,
                weight=codes,
                weight_scale=prescaled_m1,
                **common,
            )
            return restore_leading(out, x)
        if not layout.exact_dense and prescaled_prefill is not None and m == PREFILL_PRESCALED_M:
            out = empty_fp16((m, n), x2)
            ns.call(
                FP8_PREFILL_PRESCALED_OP,
                out=out,
                x=x2,
                weight=codes,
                weight_scale=prescaled_prefill,
                **common,
            )
            return restore_leading(out, x)
        return restore_leading(gemm(x2, False), x)

    def apply_gated(x: Any) -> Any:
        """SiLU(gate) * up: fused on the interleaved layout, else the plain call and the
        engine's SiLU (the fused entry declines)."""
        x2, m = fp16_tokens(x, k, "SM70 TurboMind FP8")
        if m == 0:
            return restore_leading(empty_fp16((0, n // 2), x2), x)
        if layout.gated:
            return restore_leading(gemm(x2, True), x)
        return silu_and_mul(ns, apply(x))

    return Prepared(
        resident=resident, apply=apply, apply_gated=apply_gated if layer.gated_candidate else None
    )


def _prepare_qpn8(
    layer: BlockFp8Layer,
    weight: Any,
    scales: Any,
    ns: NativeNamespace,
    layout: Fp8Layout,
    handle: int,
) -> Prepared:
    """A `fp8_qpn8` layer holds the QPN8 codes only; M > 8 runs through the bound
    workspace inside the native dispatcher."""
    k, n = _dims(layer)
    codes = ns.call(QPN8_PREPARE_OP, weight=weight, weight_scale=scales)
    resident = {"qpn8_codes": codes, "weight_scale_inv": scales}

    def dispatch(x: Any, gated: bool) -> Any:
        what = "SM70 FP8 QPN8 gated-SiLU" if gated else "SM70 FP8 QPN8"
        x2, m = fp16_tokens(x, k, what, end=".")
        out = empty_fp16((m, n // 2 if gated else n), x2)
        if m > 0:
            split_k, chains, prefetch = (layout.gated_tuning if gated else layout.tuning) or (
                0,
                0,
                False,
            )
            ns.call(
                QPN8_DISPATCH_OP,
                out=out,
                x=x2,
                weight=codes,
                weight_scale=scales,
                workspace=handle,
                split_k=split_k,
                chains=chains,
                prefetch=prefetch,
                gated=gated,
            )
        return restore_leading(out, x)

    def apply_gated(x: Any) -> Any:
        if layout.gated:
            return dispatch(x, True)
        return silu_and_mul(ns, dispatch(x, False))

    return Prepared(
        resident=resident,
        apply=lambda x: dispatch(x, False),
        apply_gated=apply_gated if layer.gated_candidate else None,
    )


def _prepare_grouped(
    layer: BlockFp8Layer,
    weight: Any,
    scales: Any,
    ns: NativeNamespace,
    layout: Fp8Layout,
    workspaces: Fp8Workspaces,
) -> Prepared:
    """Each group prepared separately and dispatched per group (3.3, 3.6); activations end
    in [groups, K]."""
    k, n = _dims(layer)
    groups = layout.groups
    rows = n // groups
    handle = (
        workspaces.bind(layer.prefix, layout.workspace, layout.workspace_elements)
        if layout.workspace
        else 0
    )
    resident: dict[str, Any] = {}
    parts: list[tuple[Any, Any]] = []
    for g in range(groups):
        w = weight[g * rows : (g + 1) * rows]
        s = scales[g * rows // BLOCK : (g + 1) * rows // BLOCK]
        if layout.qpn8:
            codes = ns.call(QPN8_PREPARE_OP, weight=w, weight_scale=s)
            resident[f"group{g}_qpn8_codes"] = codes
            resident[f"group{g}_weight_scale_inv"] = s
            parts.append((codes, s))
        else:
            codes, tm_scales, _meta = ns.call(
                FP8_PREPARE_OP,
                weight=w,
                weight_scale=s,
                group_size=TURBOMIND_GROUP,
                interleave_gated=False,
            )
            resident[f"group{g}_fp8_codes"] = codes
            resident[f"group{g}_fp8_scales"] = tm_scales
            parts.append((codes, tm_scales))
    ptrs = None
    if layout.grouped_decode:
        ptrs = ns.call(STRIDED_PTRS_OP, tensors=[c for c, _ in parts] + [s for _, s in parts])
        resident["strided_ptrs"] = ptrs

    def apply(x: Any) -> Any:
        if layout.qpn8:
            require_fp16(x, "SM70 FP8 QPN8", end=".")
        require_fp16(x, "SM70 TurboMind FP8")
        if tuple(x.shape[-2:]) != (groups, k):
            raise ValueError(
                f"grouped activations must end in [{groups}, {k}], got {list(x.shape)}"
            )
        x3 = x.reshape(-1, groups, k)
        m = x3.shape[0]
        out = empty_fp16((m, groups, rows), x3)
        if m == 0:
            return out.reshape(*x.shape[:-1], rows)
        if ptrs is not None and m == GROUPED_DECODE_M:
            ns.call(
                GROUPED_DISPATCH_OP,
                out=out,
                x=x3.contiguous(),
                ptrs=ptrs,
                group_size=TURBOMIND_GROUP,
                k_ld=k,
                q_ld=rows,
            )
            return out.reshape(*x.shape[:-1], rows)
        for g, (codes, s) in enumerate(parts):
            xg = x3[:, g, :].contiguous()
            yg = empty_fp16((m, rows), x3)
            if layout.qpn8:
                split_k, chains, prefetch = layout.tuning or (0, 0, False)
                ns.call(
                    QPN8_DISPATCH_OP,
                    out=yg,
                    x=xg,
                    weight=codes,
                    weight_scale=s,
                    workspace=handle,
                    split_k=split_k,
                    chains=chains,
                    prefetch=prefetch,
                    gated=False,
                )
            else:
                ns.call(
                    FP8_GEMM_OP,
                    out=yg,
                    x=xg,
                    weight=codes,
                    weight_scale=s,
                    group_size=TURBOMIND_GROUP,
                    k_ld=k,
                    q_ld=rows,
                    gated=False,
                )
            out[:, g, :] = yg
        return out.reshape(*x.shape[:-1], rows)

    return Prepared(resident=resident, apply=apply)


def prepare_block_qpn8(
    layer: BlockFp8Layer,
    tensors: dict[str, Any],
    ns: NativeNamespace,
    *,
    capability: int,
    turbomind_copy: bool,
) -> Prepared:
    """QPN8Fp8BlockScaledMMLinearKernel (2.3): QPN8 codes, and on Volta the TurboMind copy
    when kept; the checkpoint weight is released."""
    k, n = _dims(layer)
    weight = tensors["weight"]
    scales = _scales_fp32(tensors["weight_scale_inv"])
    raster = (n // BLOCK, k // BLOCK)
    if tuple(scales.shape) != raster:
        raise SelectionError(
            "scale_raster",
            f"QPN8: scale raster {tuple(scales.shape)} does not match weights "
            f"{n}x{k} at block [128,128]",
        )
    codes = ns.call(QPN8_PREPARE_OP, weight=weight, weight_scale=scales)
    resident: dict[str, Any] = {"qpn8_codes": codes, "weight_scale_inv": scales}
    split_k, chains, prefetch = qpn8_tuning(k, n, False)
    copy = None
    if capability in VOLTA and turbomind_copy:
        copy = ns.call(
            FP8_PREPARE_OP,
            weight=weight,
            weight_scale=scales,
            group_size=TURBOMIND_GROUP,
            interleave_gated=False,
        )
        resident["turbomind_codes"], resident["turbomind_scales"] = copy[0], copy[1]

    def apply(x: Any) -> Any:
        x2, m = fp16_tokens(x, k, "SM70 FP8 QPN8", end=".")
        out = empty_fp16((m, n), x2)
        if m == 0:
            return restore_leading(out, x)
        if m <= BLOCK_QPN8_DECODE_MAX_M:
            ns.call(
                QPN8_GEMM_OP,
                out=out,
                x=x2,
                codes=codes,
                scales=scales,
                split_k=split_k,
                chains=chains,
                flag=True,
                prefetch=prefetch,
            )
        elif copy is not None:
            ns.call(
                FP8_GEMM_OP,
                out=out,
                x=x2,
                weight=copy[0],
                weight_scale=copy[1],
                group_size=TURBOMIND_GROUP,
                k_ld=k,
                q_ld=n,
                gated=False,
            )
        else:
            scratch = owned_fp16((k, n), x2)
            ns.call(
                QPN8_PREFILL_OP, out=out, x=x2, weight=codes, weight_scale=scales, scratch=scratch
            )
        return restore_leading(out, x)

    def apply_gated(x: Any) -> Any:
        return silu_and_mul(ns, apply(x))  # the inherited fused entry declines

    return Prepared(
        resident=resident,
        apply=apply,
        apply_gated=apply_gated if layer.gated_candidate else None,
        scratch={} if copy is not None else {"dense_scratch": k * n * 2},
    )
