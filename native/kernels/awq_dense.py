"""AWQ dense linears on SM70 (docs/contracts/core.md §2.3): TurboMindAwqLinearKernel and its Triton
fallback TritonAwqLinearKernel, the exact-dense prefill and fused-SiLU layout decisions
(torch-free), TurboMind preparation and dispatch through the injected namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from native.awq_schemas import PREPARE_OP
from native.kernels.common import (
    FP16,
    KernelPlan,
    LinearKernel,
    Prepared,
    capability_check,
    empty_fp16,
    fp16_tokens,
    owned_fp16,
    restore_leading,
    silu_and_mul,
)
from native.layers import AWQ_PACK, AwqLayer
from routectl.namespaces.native_ns import NativeNamespace
from routectl.reasons import OK, Check, Reason, missing_ops_reason, reject

AWQ_GEMM_OP = "awq_gemm_sm70_out"
AWQ_DEQUANTIZE_OP = "awq_sm70_dequantize_out"
# A pseudo-op: the dense GEMM of the exact-dense prefill, recorded like a native call.
TORCH_MM_OP = "torch.mm"

AWQ_GROUPS = (32, 64, 128)
EXACT_DENSE_M = 4096  # the exact-dense prefill serves exactly this token count
EXACT_DENSE_GROUP = 128
EXACT_DENSE_ALIGN = 128
# Largest qualified role shape (gate_up_proj 5120 x 8704): the workspace floor, in FP16s.
EXACT_DENSE_MIN_WORKSPACE = 5120 * 8704
# The fused SiLU epilogue is experimental: only at TP 2 and M = 1.
FUSED_SILU_TP = 2
FUSED_SILU_M = 1

LAYOUT_TURBOMIND = "awq_sm70"
LAYOUT_TRITON = "awq_gemm"


# The codes of the shared checks below, declared once for the classes' `reason_codes`.
PACKING_CODES = ("not_awq_gemm_packing",)
GROUP_AND_DIMS_CODES = (
    "unsupported_group_size",
    "k_not_positive",
    "n_not_positive",
    "k_not_multiple_of_group",
    "n_not_multiple_of_8",
    "packing_mismatch",
    "g_idx_unsupported",
)
SM70_OR_NEWER_CODES = ("requires_sm70_or_newer",)


def _packing_check(layer: Any) -> Check:
    if not isinstance(layer, AwqLayer):
        return reject("not_awq_gemm_packing", "requires AWQ GEMM checkpoint packing")
    dtypes = (layer.qweight_dtype, layer.qzeros_dtype, layer.scales_dtype)
    shapes = (tuple(layer.qweight_shape), tuple(layer.qzeros_shape), tuple(layer.scales_shape))
    wrong = (
        dtypes != ("int32", "int32", FP16)
        or any(len(s) != 2 for s in shapes)
        or shapes[0][0] != layer.input_size
        or shapes[2][1] != layer.output_size
        or shapes[1][1] != shapes[0][1]
        or shapes[1][0] != shapes[2][0]
    )
    if wrong:
        return reject(
            "not_awq_gemm_packing",
            "requires AWQ GEMM checkpoint packing: qweight int32 (K, N/8), qzeros "
            "int32 (K/g, N/8), scales float16 (K/g, N) (got qweight "
            f"{dtypes[0]} {shapes[0]}, qzeros {dtypes[1]} {shapes[1]}, scales "
            f"{dtypes[2]} {shapes[2]}; K={layer.input_size}, N={layer.output_size})",
        )
    return OK


def _group_and_dims_check(layer: AwqLayer) -> Check:
    g = layer.group_size
    if g not in AWQ_GROUPS:
        return reject("unsupported_group_size", f"requires group_size 32/64/128 (group_size={g})")
    k, n = layer.input_size, layer.output_size
    core = "requires positive K/N, complete groups and uint4 packing"
    if k <= 0:
        return reject("k_not_positive", f"{core}: K <= 0 (K={k})")
    if n <= 0:
        return reject("n_not_positive", f"{core}: N <= 0 (N={n})")
    if k % g:
        return reject("k_not_multiple_of_group", f"{core}: K % group != 0 (K={k}, group={g})")
    if n % AWQ_PACK:
        return reject("n_not_multiple_of_8", f"{core}: N % 8 != 0 (N={n})")
    if layer.qweight_shape[1] * AWQ_PACK != n or layer.scales_shape[0] != k // g:
        return reject(
            "packing_mismatch",
            f"{core}: qweight {tuple(layer.qweight_shape)} and scales "
            f"{tuple(layer.scales_shape)} do not pack K={k}, N={n} in groups of {g}",
        )
    if layer.has_g_idx:
        return reject("g_idx_unsupported", "does not support activation-order group indices")
    return OK


def _sm70_or_newer(capability: int) -> Check:
    return capability_check(
        capability,
        lambda cc: cc >= 70,
        "requires_sm70_or_newer",
        "requires compute capability >= 70",
    )


class TurboMindAwqLinearKernel(LinearKernel):
    required_ops = (PREPARE_OP,)
    ops_label = "AWQ"
    reason_codes = (
        *SM70_OR_NEWER_CODES,
        *PACKING_CODES,
        "not_asymmetric_uint4",
        "activation_not_fp16",
        *GROUP_AND_DIMS_CODES,
        "missing_native_ops",
    )

    @classmethod
    def is_supported(cls, capability: int) -> Check:
        return _sm70_or_newer(capability)

    @classmethod
    def can_implement(cls, layer: Any, ns: NativeNamespace) -> Check:
        """Capability ignores policy: a disabled route still answers what it could do."""
        ok, reason = _packing_check(layer)
        if not ok:
            return (ok, reason)
        if layer.weight_type != "uint4" or not layer.has_zero_points:
            return reject(
                "not_asymmetric_uint4",
                f"requires asymmetric uint4 AWQ weights (weight type "
                f"{layer.weight_type}, zero points {layer.has_zero_points})",
            )
        if layer.act_dtype != FP16:
            return reject(
                "activation_not_fp16",
                f"requires float16 activations (activations {layer.act_dtype})",
            )
        ok, reason = _group_and_dims_check(layer)
        if not ok:
            return (ok, reason)
        return cls.check_ops(ns)

    @classmethod
    def plan(cls, layer: AwqLayer, setup: AwqSetup, ns: NativeNamespace) -> KernelPlan:
        layout = plan_awq(layer, setup.options, ns, setup.workspace)
        refused = (
            (("prefill_exact_dense", layout.exact_dense_reason),)
            if layout.exact_dense_refused and layout.exact_dense_reason is not None
            else ()
        )
        return KernelPlan(
            LAYOUT_TURBOMIND,
            {
                "gated": layout.gated,
                "exact_dense": layout.exact_dense,
                "fused_gated_call": layout.fused_gated_call,
            },
            prepare=lambda tensors: prepare_awq_turbomind(layer, tensors, ns, layout),
            refused=refused,
            state={"plan": layout},
        )


class TritonAwqLinearKernel(LinearKernel):
    required_ops = ()
    reason_codes = (*SM70_OR_NEWER_CODES, *PACKING_CODES, *GROUP_AND_DIMS_CODES)

    @classmethod
    def is_supported(cls, capability: int) -> Check:
        return _sm70_or_newer(capability)

    @classmethod
    def can_implement(cls, layer: Any, ns: NativeNamespace) -> Check:
        ok, reason = _packing_check(layer)
        if not ok:
            return (ok, reason)
        return _group_and_dims_check(layer)

    @classmethod
    def plan(cls, layer: AwqLayer, setup: AwqSetup, ns: NativeNamespace) -> KernelPlan:
        return KernelPlan(
            LAYOUT_TRITON,
            {"gated": False, "exact_dense": False, "fused_gated_call": False},
            prepare=lambda tensors: prepare_awq_triton(layer, tensors),
        )


AWQ_DENSE_KERNELS = (TurboMindAwqLinearKernel, TritonAwqLinearKernel)


# --- layout decisions (torch-free) -------------------------------------------------------


@dataclass(frozen=True)
class AwqOptions:
    """What the policy decided for one AWQ TurboMind layer (built by policies/)."""

    prefill_exact_dense: bool = True
    exact_dense_role: bool = True  # the role is exact-dense qualified (docs/contracts/core.md §4)
    fused_silu: bool = False
    tp: int = 1


@dataclass(frozen=True)
class AwqSetup:
    """What a dense AWQ kernel is given to plan one layer: the policy's options and the FP16
    elements the engine can give the exact-dense prefill (None = unlimited)."""

    options: AwqOptions = AwqOptions()
    workspace: int | None = None


def exact_dense_workspace_elements(layer: AwqLayer) -> int:
    """max(44,564,480, K*N) FP16 elements: the exact-dense prefill's dense workspace."""
    return max(EXACT_DENSE_MIN_WORKSPACE, layer.input_size * layer.output_size)


@dataclass(frozen=True)
class AwqLayout:
    gated: bool  # prepared interleaved for the fused SiLU epilogue
    exact_dense: bool
    exact_dense_reason: Reason | None  # why exact dense is off (None when on)
    exact_dense_refused: bool  # the build or the engine refused it (missing op, workspace)
    workspace_elements: int
    fused_gated_call: bool  # apply_gated issues the gated GEMM (TP 2, M = 1 only)


def _exact_dense(
    layer: AwqLayer, options: AwqOptions, gated: bool, ns: NativeNamespace, workspace: int | None
) -> tuple[Reason | None, bool]:
    """(reason exact dense is off, refused by build/engine), in docs/contracts/core.md §2.3
    order."""
    k, n = layer.input_size, layer.output_size
    if not options.prefill_exact_dense:
        return Reason(
            "exact_dense_disabled", "exact-dense prefill disabled by configuration"
        ), False
    if layer.group_size != EXACT_DENSE_GROUP:
        return Reason(
            "exact_dense_group", f"exact-dense prefill needs group 128 (group={layer.group_size})"
        ), False
    if not options.exact_dense_role:
        return Reason(
            "exact_dense_role", f"role {layer.role} is not qualified for exact-dense prefill"
        ), False
    if len(layer.qweight_shape) != 2:
        return Reason("exact_dense_rank", "exact-dense prefill needs a rank-two qweight"), False
    if k % EXACT_DENSE_ALIGN:
        return Reason("exact_dense_k", f"exact-dense prefill needs K % 128 == 0 (K={k})"), False
    if n % EXACT_DENSE_ALIGN:
        return Reason("exact_dense_n", f"exact-dense prefill needs N % 128 == 0 (N={n})"), False
    if gated:
        return Reason(
            "exact_dense_gated", "weights prepared gated for the fused SiLU epilogue"
        ), False
    if not ns.has_op(AWQ_DEQUANTIZE_OP):
        return missing_ops_reason("exact-dense", [AWQ_DEQUANTIZE_OP]), True
    needed = exact_dense_workspace_elements(layer)
    if workspace is not None and workspace < needed:
        return Reason(
            "insufficient_workspace",
            f"insufficient exact-dense workspace (need {needed} FP16 elements, have {workspace})",
        ), True
    return None, False


def plan_awq(
    layer: AwqLayer, options: AwqOptions, ns: NativeNamespace, workspace: int | None = None
) -> AwqLayout:
    """Gated preparation, exact-dense prefill and the fused call of a TurboMind AWQ layer."""
    gated = options.fused_silu and layer.gated
    reason, refused = _exact_dense(layer, options, gated, ns, workspace)
    return AwqLayout(
        gated=gated,
        exact_dense=reason is None,
        exact_dense_reason=reason,
        exact_dense_refused=refused,
        workspace_elements=exact_dense_workspace_elements(layer),
        fused_gated_call=gated and options.tp == FUSED_SILU_TP,
    )


# --- preparation and dispatch -----------------------------------------------------------


def prepare_awq_turbomind(
    layer: AwqLayer, tensors: dict[str, Any], ns: NativeNamespace, layout: AwqLayout
) -> Prepared:
    k, n, g = layer.input_size, layer.output_size, layer.group_size
    words, metadata = ns.call(
        PREPARE_OP,
        kernel=tensors["qweight"],
        scaling_factors=tensors["scales"],
        zeros=tensors["qzeros"],
        group_size=g,
        interleave_gated_silu=layout.gated,
    )
    resident = {"awq_words": words, "awq_metadata": metadata}

    def gemm(x2: Any, gated: bool) -> Any:
        out = empty_fp16((x2.shape[0], n // 2 if gated else n), x2)
        ns.call(
            AWQ_GEMM_OP,
            out=out,
            x=x2,
            weight=words,
            metadata=metadata,
            group_size=g,
            k_ld=k,
            q_ld=k,
            gated=gated,
        )
        return out

    def apply(x: Any) -> Any:
        x2, m = fp16_tokens(x, k, "SM70 TurboMind AWQ")
        if m == 0:
            return restore_leading(empty_fp16((0, n), x2), x)
        if layout.exact_dense and m == EXACT_DENSE_M:
            dense = owned_fp16((k, n), x2)
            ns.call(AWQ_DEQUANTIZE_OP, out=dense, weight=words, metadata=metadata, group_size=g)
            return restore_leading(ns.call(TORCH_MM_OP, input=x2, mat2=dense), x)
        return restore_leading(gemm(x2, False), x)

    def apply_gated(x: Any) -> Any:
        """SiLU(gate) * up: fused in the GEMM epilogue at TP 2 and M = 1, else unfused."""
        x2, m = fp16_tokens(x, k, "SM70 TurboMind AWQ")
        if m == 0:
            return restore_leading(empty_fp16((0, n // 2), x2), x)
        if layout.fused_gated_call and m == FUSED_SILU_M:
            return restore_leading(gemm(x2, True), x)
        return restore_leading(silu_and_mul(ns, gemm(x2, False)), x)

    scratch = {"exact_dense_workspace": layout.workspace_elements * 2} if layout.exact_dense else {}
    return Prepared(
        resident=resident,
        apply=apply,
        apply_gated=apply_gated if layout.gated else None,
        scratch=scratch,
    )


def prepare_awq_triton(layer: AwqLayer, tensors: dict[str, Any]) -> Prepared:
    """The Triton route keeps the checkpoint tensors; its GEMM is the engine's Triton
    kernel, not a native op of this catalogue, so nothing is dispatched here."""
    return Prepared(resident={name: tensors[name] for name in ("qweight", "qzeros", "scales")})
