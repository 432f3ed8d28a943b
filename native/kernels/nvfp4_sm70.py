"""NVFP4 weight-only linears on Volta (docs/contracts/core.md §2.1): capability classes in priority
order Qpn4NvFp4LinearKernel, Qpn2NvFp4LinearKernel, TurboMindNvFp4LinearKernel, plus their layout
decisions (torch-free), preparation and dispatch through the injected native namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from native.kernels.common import (
    KernelPlan,
    LinearKernel,
    Prepared,
    capability_check,
    empty_fp16,
    fp16_tokens,
    owned_fp16,
    padded,
    restore_leading,
)
from native.layers import Nvfp4Layer
from routectl.namespaces.native_ns import NativeNamespace, missing_ops
from routectl.reasons import OK, Check, Reason, missing_ops_reason, reject

# TurboMind's own preparation (repack + FP16 or compact E4M3 scales). Not a capability
# requirement (docs/contracts/core.md lists none for TurboMind); the provider always ships it.
TM_PREPARE_OP = "nvfp4_sm70_prepare"

QPN2_PREPARE_OP = "nvfp4_qpn2_prepare_sm70"
QPN2_GEMM_OP = "nvfp4_qpn2_gemm_sm70_out"
QPN2_GATED_OP = "nvfp4_qpn2_gated_sm70_out"
QPN2_DISPATCH_OP = "nvfp4_qpn2_dispatch_sm70_out"
QPN2_PREPARE_SCALES_OP = "nvfp4_qpn2_prepare_scales_sm70"
QPN2_TM_DISPATCH_OP = "nvfp4_qpn2_tm_dispatch_sm70_out"
QPN2_PREFILL_DISPATCH_OP = "nvfp4_qpn2_prefill_dispatch_sm70_out"
QPN2_COMPACT_GEMM_OP = "nvfp4_qpn2_compact_tm_gemm_sm70_out"
QPN2_COMPACT_VERSION_GETTER = "nvfp4_qpn2_compact_scales_version_sm70"

QPN2_REQUIRED_OPS = (QPN2_PREPARE_OP, QPN2_GEMM_OP, QPN2_GATED_OP, QPN2_DISPATCH_OP)
QPN2_SHARED_OPS = (QPN2_PREPARE_SCALES_OP, QPN2_TM_DISPATCH_OP)

QPN4_PREPARE_OP = "nvfp4_qpn4_prepare_sm70"
QPN4_PREPARE_SCALE_CODE_OP = "nvfp4_qpn4_prepare_scale_code_sm70"
QPN4_DEQUANTIZE_OP = "nvfp4_qpn4_dequantize_sm70_out"
QPN4_PREFILL_OP = "nvfp4_qpn4_prefill_sm70_out"
QPN4_DISPATCH_OP = "nvfp4_qpn4_dispatch_sm70_out"
QPN4_REQUIRED_OPS = (
    QPN4_PREPARE_OP,
    QPN4_PREPARE_SCALE_CODE_OP,
    QPN4_DEQUANTIZE_OP,
    QPN4_PREFILL_OP,
    QPN4_DISPATCH_OP,
)

# QPN2's 32-column contract: N is zero-padded to a multiple of 32 and cropped back.
QPN2_TILE_N = 32
QPN2_K_ALIGN = 128
QPN2_GATED_N_ALIGN = 64
# The compact-scale layout needs this native scratch ABI revision or newer.
COMPACT_SCALES_MIN_REVISION = 1
# Inside the native dispatcher (not recorded): M <= 32 QPN2 decode, then TurboMind GEMM,
# then dequantize into invocation-owned FP16 scratch from prefill_min_m on.
QPN2_DECODE_MAX_M = 32

LAYOUT_TURBOMIND = "nvfp4"
LAYOUT_QPN2 = "nvfp4_qpn2"
LAYOUT_QPN4 = "nvfp4_qpn4"

# (K, N padded to 32, gated call) -> (split_k, nacc): measured, moved verbatim.
QPN2_TUNING: dict[tuple[int, int, bool], tuple[int, int]] = {
    (1536, 5120, False): (8, 2),
    (5120, 3584, False): (16, 2),
    (5120, 4128, False): (16, 2),  # in_proj_qkvz logical N 4120 on TP4
    (5120, 8704, False): (8, 2),
    (5120, 8704, True): (8, 2),
    (4352, 5120, False): (16, 2),
}


def qpn2_tuning(k: int, n_padded: int, gated: bool) -> tuple[int, int]:
    """(split_k, nacc) of one QPN2 call; untabled shapes: split_k 8 if gated or K % 256."""
    tuned = QPN2_TUNING.get((k, n_padded, gated))
    if tuned is not None:
        return tuned
    return (8 if gated or k % 256 else 16, 2)


def packed_dims(layer: Nvfp4Layer) -> tuple[int, int]:
    """(K, N) from the packed weight (N, K/2)."""
    return layer.weight_shape[1] * 2, layer.weight_shape[0]


# --- capability -------------------------------------------------------------------------


class TurboMindNvFp4LinearKernel(LinearKernel):
    required_ops: ClassVar[tuple[str, ...]] = ()
    reason_codes: ClassVar[tuple[str, ...] | None] = (
        "requires_sm70_or_sm72",
        "not_ct_nvfp4_layout",
    )

    @classmethod
    def is_supported(cls, capability: int) -> Check:
        return capability_check(
            capability,
            lambda cc: cc in (70, 72),
            "requires_sm70_or_sm72",
            "requires SM70 or SM72 (Volta)",
        )

    @classmethod
    def can_implement(cls, layer: Any, ns: NativeNamespace) -> Check:
        if not isinstance(layer, Nvfp4Layer):
            return reject(
                "not_ct_nvfp4_layout", "requires weight-only compressed-tensors NVFP4 layout"
            )
        return OK

    @classmethod
    def plan(cls, layer: Nvfp4Layer, setup: Nvfp4Setup, ns: NativeNamespace) -> KernelPlan:
        return KernelPlan(
            LAYOUT_TURBOMIND,
            layout_flags(),
            prepare=lambda tensors: prepare_turbomind(layer, tensors, ns),
        )


class Qpn2NvFp4LinearKernel(TurboMindNvFp4LinearKernel):
    required_ops = QPN2_REQUIRED_OPS
    ops_label = "QPN2"
    reason_codes = (
        "requires_sm70_or_sm72",
        "not_ct_nvfp4_layout",
        "packed_weight_rank",
        "k_not_positive",
        "k_not_multiple_of_128",
        "n_not_positive",
        "local_dims_mismatch",
        "gated_n_not_multiple_of_64",
        "missing_native_ops",
    )

    @classmethod
    def can_implement(cls, layer: Any, ns: NativeNamespace) -> Check:
        ok, reason = super().can_implement(layer, ns)
        if not ok:
            return (ok, reason)
        shape = tuple(layer.weight_shape)
        if len(shape) != 2:
            return reject("packed_weight_rank", f"packed weight must be rank two (shape {shape})")
        k, n = packed_dims(layer)
        if k <= 0:
            return reject("k_not_positive", f"requires K > 0 (K={k})")
        if k % QPN2_K_ALIGN:
            return reject("k_not_multiple_of_128", f"K % 128 != 0 (K={k})")
        if n <= 0:
            return reject("n_not_positive", f"requires N > 0 (N={n})")
        if (layer.input_size, layer.output_size) != (k, n):
            return reject(
                "local_dims_mismatch",
                "local input/output dimensions disagree with packed weight (input_size="
                f"{layer.input_size}, output_size={layer.output_size}; packed weight K={k}, "
                f"N={n})",
            )
        if layer.gated and n % QPN2_GATED_N_ALIGN:
            return reject(
                "gated_n_not_multiple_of_64", f"fused gate/up requires N % 64 == 0 (N={n})"
            )
        return cls.check_ops(ns)

    @classmethod
    def plan(cls, layer: Nvfp4Layer, setup: Nvfp4Setup, ns: NativeNamespace) -> KernelPlan:
        plan = plan_qpn2(layer, setup.qpn2, ns)
        return KernelPlan(
            LAYOUT_QPN2,
            layout_flags(
                shared_weight=plan.shared_weight,
                prefill_enabled=plan.prefill_enabled,
                compact_scales=plan.compact_scales,
                batch_prescale=plan.batch_prescale,
            ),
            prepare=lambda tensors: prepare_qpn2(layer, tensors, ns, plan),
            refused=plan.refusals,
            state={"plan": plan},
        )


class Qpn4NvFp4LinearKernel(TurboMindNvFp4LinearKernel):
    required_ops = QPN4_REQUIRED_OPS
    ops_label = "QPN4"
    reason_codes = ("requires_sm70_or_sm72", "not_ct_nvfp4_layout", "missing_native_ops")

    @classmethod
    def can_implement(cls, layer: Any, ns: NativeNamespace) -> Check:
        ok, reason = super().can_implement(layer, ns)
        if not ok:
            return (ok, reason)
        return cls.check_ops(ns)

    @classmethod
    def plan(cls, layer: Nvfp4Layer, setup: Nvfp4Setup, ns: NativeNamespace) -> KernelPlan:
        options = setup.qpn4
        return KernelPlan(
            LAYOUT_QPN4,
            layout_flags(gated=options.gated),
            prepare=lambda tensors: prepare_qpn4(layer, tensors, ns, options),
        )


NVFP4_SM70_KERNELS = (Qpn4NvFp4LinearKernel, Qpn2NvFp4LinearKernel, TurboMindNvFp4LinearKernel)


# --- QPN2 layout decisions (torch-free) -------------------------------------------------


@dataclass(frozen=True)
class Qpn2Options:
    """What the policy decided for one QPN2 layer (built by policies/)."""

    shared_weight: bool = True
    shared_scales: bool = True
    prefill: bool = True
    prefill_min_m: int = 1024
    batch_layouts: bool = False  # effective value: only exactly SM70 has batch layouts
    qualified: bool = True  # the NVFP4 workload qualification (docs/contracts/core.md §4.1)


@dataclass(frozen=True)
class Qpn2Layout:
    """The prepared QPN2 layout of one layer and why options ended as they did."""

    k: int
    n: int
    padded_n: int
    shared_weight: bool
    compact_scales: bool
    batch_prescale: bool
    prefill_enabled: bool
    prefill_min_m: int  # the policy's threshold
    split_k: int
    nacc: int
    gated_split_k: int
    gated_nacc: int
    # Why compact scales are off (None when on), whatever the cause.
    compact_reason: Reason | None = None
    # Requested options the build refused (missing ops, old ABI): (option, reason).
    refusals: tuple[tuple[str, Reason], ...] = ()

    @property
    def entry(self) -> str:
        if self.shared_weight:
            return QPN2_TM_DISPATCH_OP
        if self.prefill_enabled:
            return QPN2_PREFILL_DISPATCH_OP
        return QPN2_DISPATCH_OP

    @property
    def dispatch_prefill_min_m(self) -> int:
        """prefill_min_m passed to the entry: the policy value where prefill is live, else 0."""
        if self.entry == QPN2_DISPATCH_OP or not self.prefill_enabled:
            return 0
        return self.prefill_min_m

    def tuning(self, gated: bool) -> tuple[int, int]:
        return (self.gated_split_k, self.gated_nacc) if gated else (self.split_k, self.nacc)


def _compact_scales(
    shared: bool, options: Qpn2Options, ns: NativeNamespace
) -> tuple[bool, Reason | None, bool]:
    """(compact, reason when off, whether the build refused it)."""
    if not shared:
        return (
            False,
            Reason("compact_needs_shared_weight", "compact scales need the shared packed weight"),
            False,
        )
    if options.batch_layouts:
        return (
            False,
            Reason(
                "batch_layouts_supersede_compact", "batch GEMM layouts supersede compact scales"
            ),
            False,
        )
    if not options.shared_scales:
        return False, Reason("shared_scales_off", "shared_scales is off"), False
    if not ns.has_op(QPN2_COMPACT_GEMM_OP):
        return False, missing_ops_reason("compact-scale", [QPN2_COMPACT_GEMM_OP]), True
    revision = ns.abi_revision(QPN2_COMPACT_VERSION_GETTER)
    if revision is None:
        return False, missing_ops_reason("compact-scale", [QPN2_COMPACT_VERSION_GETTER]), True
    if revision < COMPACT_SCALES_MIN_REVISION:
        return (
            False,
            Reason(
                "compact_abi_revision",
                f"compact-scale ABI revision {revision} < {COMPACT_SCALES_MIN_REVISION}",
            ),
            True,
        )
    if not options.qualified:
        return (
            False,
            Reason("workload_unqualified", "compact scales need the qualified workload"),
            False,
        )
    return True, None, False


def plan_qpn2(layer: Nvfp4Layer, options: Qpn2Options, ns: NativeNamespace) -> Qpn2Layout:
    """Shared weight, compact scales, batch prescale and prefill of a layer that selected
    QPN2 (docs/contracts/core.md §2.1). Pure in its arguments; the namespace is only asked
    questions."""
    k, n = packed_dims(layer)
    n_padded = padded(n, QPN2_TILE_N)
    refusals: list[tuple[str, Reason]] = []

    shared = options.shared_weight
    if shared:
        missing = missing_ops(ns, QPN2_SHARED_OPS)
        if missing:
            shared = False
            refusals.append(("shared_weight", missing_ops_reason("shared QPN2", missing)))

    compact, compact_reason, refused = _compact_scales(shared, options, ns)
    if refused and compact_reason is not None:
        refusals.append(("shared_scales", compact_reason))

    prefill = options.prefill and (shared or ns.has_op(QPN2_PREFILL_DISPATCH_OP))
    if options.prefill and not prefill:
        refusals.append(("prefill", missing_ops_reason("QPN2 prefill", [QPN2_PREFILL_DISPATCH_OP])))

    split_k, nacc = qpn2_tuning(k, n_padded, False)
    gated_split_k, gated_nacc = qpn2_tuning(k, n_padded, True)
    return Qpn2Layout(
        k=k,
        n=n,
        padded_n=n_padded,
        shared_weight=shared,
        compact_scales=compact,
        batch_prescale=shared and options.batch_layouts and not compact,
        prefill_enabled=prefill,
        prefill_min_m=options.prefill_min_m,
        split_k=split_k,
        nacc=nacc,
        gated_split_k=gated_split_k,
        gated_nacc=gated_nacc,
        compact_reason=compact_reason,
        refusals=tuple(refusals),
    )


def qpn4_workspace_elements(layer: Nvfp4Layer) -> int:
    """FP16 elements of the dense workspace QPN4 preparation needs: K * N."""
    k, n = packed_dims(layer)
    return k * n


# --- preparation and dispatch -----------------------------------------------------------


def _prepare_turbomind(
    layer: Nvfp4Layer,
    tensors: dict[str, Any],
    ns: NativeNamespace,
    *,
    padded_n: int,
    gated: bool,
    batch_prescale: bool,
    compact_scales: bool,
) -> dict[str, Any]:
    codes, scales = ns.call(
        TM_PREPARE_OP,
        weight=tensors["weight_packed"],
        weight_scale=tensors["weight_scale"],
        weight_global_scale=tensors["weight_global_scale"],
        padded_n=padded_n,
        interleave_gated_silu=gated,
        prescale_for_batch=batch_prescale,
        compact_scales=compact_scales,
    )
    return {
        "tm_codes": codes,
        "tm_scales": scales,
        "weight_global_scale": tensors["weight_global_scale"],
    }


def prepare_turbomind(layer: Nvfp4Layer, tensors: dict[str, Any], ns: NativeNamespace) -> Prepared:
    """TurboMind only. Its execution is the engine's TurboMind provider, which routectl does
    not replay (TurboMind rows record no dispatch), so there is no apply here."""
    _, n = packed_dims(layer)
    resident = _prepare_turbomind(
        layer,
        tensors,
        ns,
        padded_n=padded(n, QPN2_TILE_N),
        gated=False,
        batch_prescale=False,
        compact_scales=False,
    )
    return Prepared(resident=resident)


def prepare_qpn2(
    layer: Nvfp4Layer, tensors: dict[str, Any], ns: NativeNamespace, plan: Qpn2Layout
) -> Prepared:
    """TurboMind state plus QPN2 scales (shared codes) or QPN2 codes and scales (separate)."""
    resident = _prepare_turbomind(
        layer,
        tensors,
        ns,
        padded_n=plan.padded_n,
        gated=False,
        batch_prescale=plan.batch_prescale,
        compact_scales=plan.compact_scales,
    )
    if plan.shared_weight:
        resident["qpn2_scales"] = ns.call(
            QPN2_PREPARE_SCALES_OP, weight_scale=tensors["weight_scale"], padded_n=plan.padded_n
        )
    else:
        codes, scales = ns.call(
            QPN2_PREPARE_OP,
            weight=tensors["weight_packed"],
            weight_scale=tensors["weight_scale"],
            padded_n=plan.padded_n,
        )
        resident["qpn2_codes"] = codes
        resident["qpn2_scales"] = scales

    def dispatch(x: Any, gated: bool) -> Any:
        x2, m = fp16_tokens(x, plan.k, "SM70 NVFP4 QPN2")
        width = plan.padded_n // 2 if gated else plan.padded_n
        out = empty_fp16((m, width), x2)
        logical = plan.n // 2 if gated else plan.n
        if m == 0:
            return restore_leading(out[:, :logical], x)
        split_k, nacc = plan.tuning(gated)
        common = dict(
            out=out,
            x=x2,
            tm_codes=resident["tm_codes"],
            tm_scales=resident["tm_scales"],
            scales=resident["qpn2_scales"],
            global_scale=resident["weight_global_scale"],
            split_k=split_k,
            nacc=nacc,
            gated=gated,
            prefill_min_m=plan.dispatch_prefill_min_m,
        )
        if plan.shared_weight:
            ns.call(
                QPN2_TM_DISPATCH_OP,
                **common,
                prescaled=plan.batch_prescale,
                compact_scales=plan.compact_scales,
            )
        else:
            ns.call(plan.entry, **common, codes=resident["qpn2_codes"])
        return restore_leading(out[:, :logical], x)

    scratch = {"qpn2_prefill_dequant": plan.k * plan.padded_n * 2} if plan.prefill_enabled else {}
    return Prepared(
        resident=resident,
        apply=lambda x: dispatch(x, False),
        apply_gated=(lambda x: dispatch(x, True)) if layer.gated else None,
        scratch=scratch,
    )


@dataclass(frozen=True)
class Qpn4Options:
    gated: bool = False  # fused gate/up with SiLU (dense_gated_silu on a qualified gate_up)


@dataclass(frozen=True)
class Nvfp4Setup:
    """What the policy decided for one layer, for whichever kernel the selector chose."""

    qpn2: Qpn2Options = Qpn2Options()
    qpn4: Qpn4Options = Qpn4Options()


def layout_flags(
    *,
    shared_weight: bool = False,
    prefill_enabled: bool = False,
    compact_scales: bool = False,
    batch_prescale: bool = False,
    gated: bool = False,
) -> Mapping[str, Any]:
    """The decision's flags: every NVFP4 layout reports the same five."""
    return {
        "shared_weight": shared_weight,
        "prefill_enabled": prefill_enabled,
        "compact_scales": compact_scales,
        "batch_prescale": batch_prescale,
        "gated": gated,
    }


def prepare_qpn4(
    layer: Nvfp4Layer, tensors: dict[str, Any], ns: NativeNamespace, options: Qpn4Options
) -> Prepared:
    """QPN4 codes, FP16 scales and scale codes. Dispatch passes a dense (K*N) FP16 workspace
    owned by the invocation, which the dispatcher uses for prefill."""
    k, n = packed_dims(layer)
    codes, scales = ns.call(
        QPN4_PREPARE_OP,
        weight=tensors["weight_packed"],
        weight_scale=tensors["weight_scale"],
        weight_global_scale=tensors["weight_global_scale"],
        interleave_gated_silu=options.gated,
    )
    scale_codes = ns.call(
        QPN4_PREPARE_SCALE_CODE_OP,
        weight_scale=tensors["weight_scale"],
        weight_global_scale=tensors["weight_global_scale"],
        interleave_gated_silu=options.gated,
    )
    resident = {
        "qpn4_codes": codes,
        "qpn4_scales": scales,
        "qpn4_scale_codes": scale_codes,
        "weight_global_scale": tensors["weight_global_scale"],
    }

    def dispatch(x: Any, gated: bool) -> Any:
        x2, m = fp16_tokens(x, k, "SM70 NVFP4 QPN4")
        out = empty_fp16((m, n // 2 if gated else n), x2)
        if m == 0:
            return restore_leading(out, x)
        ns.call(
            QPN4_DISPATCH_OP,
            out=out,
            x=x2,
            codes=codes,
            scales=scales,
            scale_codes=scale_codes,
            global_scale=resident["weight_global_scale"],
            workspace=owned_fp16((k * n,), x2),
            gated=gated,
        )
        return restore_leading(out, x)

    return Prepared(
        resident=resident,
        apply=lambda x: dispatch(x, False),
        apply_gated=(lambda x: dispatch(x, True)) if options.gated else None,
        scratch={"qpn4_dense_workspace": k * n * 2},
    )
