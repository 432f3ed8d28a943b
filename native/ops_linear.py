"""Catalogue entries of every native op the linear kernels require or call: our declared
calling convention (schema, unpinned unless docs/contracts/core.md §6 pins it), the plan keys a
recorded call keeps, and a fake for ops that return tensors (meta outputs in replay).

Torch-free at import: fakes and validators import torch when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from native.awq_layout import fake_prepare_outputs
from native.awq_schemas import (
    PREPARE_COMPACT_OP,
    PREPARE_COMPACT_SCHEMA,
    PREPARE_OP,
    PREPARE_SCHEMA,
)
from native.kernels import LINEAR_KERNELS
from native.kernels import awq_dense as awq
from native.kernels import nvfp4_sm70 as nv
from native.kernels import turing as tu
from native.kernels.common import SILU_AND_MUL_OP
from native.meta_tensors import empty_beside
from routectl.namespaces.ops import OpSpec, PlanKey


def _rows_match(out: Any = None, x: Any = None, input: Any = None, **_: Any) -> None:
    """An `out` variant writes one row per activation row."""
    source = x if x is not None else input
    if out is not None and source is not None and out.shape[0] != source.shape[0]:
        raise ValueError(f"out has {out.shape[0]} rows for {source.shape[0]} activation rows")


# --- fakes -------------------------------------------------------------------------------


def _fake_tm_prepare(
    weight: Any,
    weight_scale: Any,
    weight_global_scale: Any,
    padded_n: int,
    interleave_gated_silu: bool,
    prescale_for_batch: bool,
    compact_scales: bool,
) -> list[Any]:
    groups = weight_scale.shape[1]
    codes = empty_beside((padded_n, weight.shape[1]), "uint8", weight)
    # Compact scales keep the E4M3 codes (1 byte); otherwise TurboMind holds FP16 scales.
    scales = (
        empty_beside((padded_n, groups), "uint8", weight)
        if compact_scales
        else empty_beside((groups, padded_n), "float16", weight)
    )
    return [codes, scales]


def _fake_qpn2_prepare(weight: Any, weight_scale: Any, padded_n: int) -> list[Any]:
    return [
        empty_beside((padded_n, weight.shape[1]), "uint8", weight),
        empty_beside((padded_n, weight_scale.shape[1]), "float8_e4m3fn", weight),
    ]


def _fake_qpn2_prepare_scales(weight_scale: Any, padded_n: int) -> Any:
    return empty_beside((padded_n, weight_scale.shape[1]), "float8_e4m3fn", weight_scale)


def _fake_qpn4_prepare(
    weight: Any, weight_scale: Any, weight_global_scale: Any, interleave_gated_silu: bool
) -> list[Any]:
    n, groups = weight_scale.shape
    return [
        empty_beside((n, weight.shape[1]), "uint8", weight),
        empty_beside((groups, n), "float16", weight),
    ]


def _fake_qpn4_scale_code(
    weight_scale: Any, weight_global_scale: Any, interleave_gated_silu: bool
) -> Any:
    return empty_beside(tuple(weight_scale.shape), "uint8", weight_scale)


def _fake_qpn8_prepare(weight: Any, weight_scale: Any) -> Any:
    # QPN8 codes are (K, N) uint8: the checkpoint's (N, K) weight transposed.
    n, k = weight.shape
    return empty_beside((k, n), "uint8", weight)


def _fake_mm(input: Any, mat2: Any) -> Any:
    return empty_beside(
        (input.shape[0], mat2.shape[1]), str(input.dtype).removeprefix("torch."), input
    )


def _awq_prepare_fake(compact: bool) -> Any:
    def fake(
        kernel: Any, scaling_factors: Any, zeros: Any, group_size: int, interleave_gated_silu: bool
    ) -> list[Any]:
        return fake_prepare_outputs(kernel, group_size, compact)

    return fake


def _awq_prepare_validate(op: str) -> Any:
    def validate(
        kernel: Any, scaling_factors: Any, zeros: Any, group_size: int, interleave_gated_silu: bool
    ) -> None:
        # The reference validator is the pinned ops' one shape and dtype authority.
        from native.awq_validate import check_prepare

        check_prepare(op, kernel, scaling_factors, zeros, group_size)

    return validate


# --- plan keys ---------------------------------------------------------------------------

M = PlanKey("m", "dim:x:0")
QPN2_DISPATCH_PLAN = (
    M,
    PlanKey("split_k", "arg:split_k"),
    PlanKey("nacc", "arg:nacc"),
    PlanKey("gated", "arg:gated"),
    PlanKey("prefill_min_m", "arg:prefill_min_m"),
)
# `scratch: true` exactly when a dense FP16 scratch is passed (absent otherwise).
SCRATCH = PlanKey("scratch", "dtype:scratch", optional=True, labels={"float16": True})
PADDED_N = PlanKey("n", "arg:padded_n")
# Keys of the Volta calling convention of the shared QPN8 dispatcher (docs/contracts/fp8.md §7): a
# Turing call passes no tuning and records none of them.
QPN8_VOLTA_PLAN = (
    PlanKey("k", "dim:x:1", when="split_k"),
    PlanKey("split_k", "arg:split_k", optional=True),
    PlanKey("chains", "arg:chains", optional=True),
    PlanKey("prefetch", "arg:prefetch", optional=True),
    PlanKey("gated", "arg:gated", optional=True),
)
AWQ_PREPARE_PLAN = (
    PlanKey("group", "arg:group_size"),
    PlanKey("gated", "arg:interleave_gated_silu"),
    PlanKey("k", "dim:kernel:0"),
    PlanKey("n", "dim:scaling_factors:1"),
)

_QPN2_DISPATCH_ARGS = (
    "Tensor(a!) out, Tensor x, Tensor codes, Tensor scales, Tensor tm_codes, "
    "Tensor tm_scales, Tensor global_scale, int split_k, int nacc, "
    "bool gated, int prefill_min_m"
)

OPS: dict[str, OpSpec] = {
    nv.TM_PREPARE_OP: OpSpec(
        f"{nv.TM_PREPARE_OP}(Tensor weight, Tensor weight_scale, Tensor weight_global_scale, "
        "int padded_n, bool interleave_gated_silu, bool prescale_for_batch, "
        "bool compact_scales) -> Tensor[]",
        plan=(
            PADDED_N,
            PlanKey("gated", "arg:interleave_gated_silu"),
            PlanKey("batch_prescale", "arg:prescale_for_batch"),
            PlanKey("compact_scales", "arg:compact_scales"),
        ),
        fake=_fake_tm_prepare,
        doc="TurboMind NVFP4 preparation: [codes (Np, K/2) uint8, scales (K/16, Np) fp16 or "
        "compact (Np, K/16) uint8]",
    ),
    nv.QPN2_PREPARE_OP: OpSpec(
        f"{nv.QPN2_PREPARE_OP}(Tensor weight, Tensor weight_scale, int padded_n) -> Tensor[]",
        plan=(PADDED_N,),
        fake=_fake_qpn2_prepare,
        doc="separate QPN2 codes and E4M3 scales, N zero-padded to padded_n",
    ),
    nv.QPN2_PREPARE_SCALES_OP: OpSpec(
        f"{nv.QPN2_PREPARE_SCALES_OP}(Tensor weight_scale, int padded_n) -> Tensor",
        plan=(PADDED_N,),
        fake=_fake_qpn2_prepare_scales,
        doc="QPN2 scales for codes shared with TurboMind",
    ),
    nv.QPN2_GEMM_OP: OpSpec(
        f"{nv.QPN2_GEMM_OP}(Tensor(a!) out, Tensor x, Tensor codes, Tensor scales, "
        "Tensor global_scale, int split_k, int nacc, bool gated, "
        "Tensor(b!)? scratch=None) -> ()",
        plan=(
            M,
            PlanKey("split_k", "arg:split_k"),
            PlanKey("nacc", "arg:nacc"),
            PlanKey("gated", "arg:gated"),
            SCRATCH,
        ),
        validate=_rows_match,
        doc="QPN2 GEMM; Turing passes invocation-owned (K, Np) FP16 scratch for M > 32",
    ),
    nv.QPN2_GATED_OP: OpSpec(
        f"{nv.QPN2_GATED_OP}(Tensor(a!) out, Tensor x, Tensor codes, Tensor scales, "
        "Tensor global_scale, int split_k, int nacc) -> ()",
        plan=(M, PlanKey("split_k", "arg:split_k"), PlanKey("nacc", "arg:nacc")),
        validate=_rows_match,
        doc="fused gate/up QPN2 GEMM (called inside the dispatchers)",
    ),
    nv.QPN2_DISPATCH_OP: OpSpec(
        f"{nv.QPN2_DISPATCH_OP}({_QPN2_DISPATCH_ARGS}) -> ()",
        plan=QPN2_DISPATCH_PLAN,
        validate=_rows_match,
        doc="plain QPN2 dispatcher (separate codes, prefill off); prefill_min_m is 0",
    ),
    nv.QPN2_PREFILL_DISPATCH_OP: OpSpec(
        f"{nv.QPN2_PREFILL_DISPATCH_OP}({_QPN2_DISPATCH_ARGS}) -> ()",
        plan=QPN2_DISPATCH_PLAN,
        validate=_rows_match,
        doc="bounded QPN2 prefill dispatcher (separate codes)",
    ),
    nv.QPN2_TM_DISPATCH_OP: OpSpec(
        f"{nv.QPN2_TM_DISPATCH_OP}(Tensor(a!) out, Tensor x, Tensor tm_codes, "
        "Tensor tm_scales, Tensor scales, Tensor global_scale, int split_k, int nacc, "
        "bool gated, int prefill_min_m, bool prescaled, bool compact_scales) -> ()",
        plan=QPN2_DISPATCH_PLAN,
        validate=_rows_match,
        doc="shared-weight dispatcher: TurboMind codes serve QPN2; prefill_min_m 0 = off",
    ),
    nv.QPN2_COMPACT_GEMM_OP: OpSpec(
        f"{nv.QPN2_COMPACT_GEMM_OP}(Tensor(a!) out, Tensor x, Tensor tm_codes, "
        "Tensor tm_scale_codes, Tensor global_scale, Tensor(b!) scratch) -> ()",
        plan=(M,),
        validate=_rows_match,
        doc="TurboMind GEMM on compact E4M3 scales (called inside the shared dispatcher)",
    ),
    nv.QPN2_COMPACT_VERSION_GETTER: OpSpec(
        f"{nv.QPN2_COMPACT_VERSION_GETTER}() -> int",
        getter=True,
        doc="compact-scale native scratch ABI revision",
    ),
    nv.QPN4_PREPARE_OP: OpSpec(
        f"{nv.QPN4_PREPARE_OP}(Tensor weight, Tensor weight_scale, Tensor weight_global_scale, "
        "bool interleave_gated_silu) -> Tensor[]",
        plan=(PlanKey("gated", "arg:interleave_gated_silu"),),
        fake=_fake_qpn4_prepare,
        doc="QPN4 codes (N, K/2) uint8 and FP16 scales (K/16, N)",
    ),
    nv.QPN4_PREPARE_SCALE_CODE_OP: OpSpec(
        f"{nv.QPN4_PREPARE_SCALE_CODE_OP}(Tensor weight_scale, Tensor weight_global_scale, "
        "bool interleave_gated_silu) -> Tensor",
        plan=(PlanKey("gated", "arg:interleave_gated_silu"),),
        fake=_fake_qpn4_scale_code,
        doc="QPN4 scale codes (N, K/16) uint8",
    ),
    nv.QPN4_DEQUANTIZE_OP: OpSpec(
        f"{nv.QPN4_DEQUANTIZE_OP}(Tensor(a!) out, Tensor codes, Tensor scale_codes, "
        "Tensor global_scale) -> ()",
        doc="QPN4 dequantization into the dense workspace (called inside the dispatcher)",
    ),
    nv.QPN4_PREFILL_OP: OpSpec(
        f"{nv.QPN4_PREFILL_OP}(Tensor(a!) out, Tensor x, Tensor(b!) workspace, Tensor codes, "
        "Tensor scale_codes, Tensor global_scale, bool gated) -> ()",
        plan=(M, PlanKey("gated", "arg:gated")),
        validate=_rows_match,
        doc="QPN4 bounded prefill (called inside the dispatcher)",
    ),
    nv.QPN4_DISPATCH_OP: OpSpec(
        f"{nv.QPN4_DISPATCH_OP}(Tensor(a!) out, Tensor x, Tensor codes, Tensor scales, "
        "Tensor scale_codes, Tensor global_scale, Tensor(b!) workspace, bool gated) -> ()",
        plan=(M, PlanKey("gated", "arg:gated")),
        validate=_rows_match,
        doc="QPN4 dispatcher with the dense (K*N) FP16 workspace",
    ),
    tu.QPN8_PREPARE_OP: OpSpec(
        f"{tu.QPN8_PREPARE_OP}(Tensor weight, Tensor weight_scale) -> Tensor",
        plan=(PlanKey("n", "dim:weight:0"), PlanKey("k", "dim:weight:1")),
        fake=_fake_qpn8_prepare,
        doc="native QPN8 codes (K, N) uint8 of the (N, K) E4M3 weight (Turing per-tensor and "
        "Volta block scales alike)",
    ),
    tu.QPN8_DISPATCH_OP: OpSpec(
        f"{tu.QPN8_DISPATCH_OP}(Tensor(a!) out, Tensor x, Tensor weight, Tensor weight_scale, "
        "Tensor(b!)? scratch=None, int? workspace=None, int? split_k=None, int? chains=None, "
        "bool? prefetch=None, bool? gated=None) -> ()",
        plan=(M, SCRATCH, *QPN8_VOLTA_PLAN),
        validate=_rows_match,
        doc="QPN8 dispatcher. Turing: M > 8 passes invocation-owned (K, N) FP16 scratch. "
        "Volta: the bound workspace's address and the (split_k, chains, prefetch) tuning; "
        "gated = the fused gate/up call",
    ),
    tu.QPN8_PREFILL_OP: OpSpec(
        f"{tu.QPN8_PREFILL_OP}(Tensor(a!) out, Tensor x, Tensor weight, Tensor weight_scale, "
        "Tensor(b!) scratch) -> ()",
        plan=(M,),
        validate=_rows_match,
        doc="QPN8 dense prefill (called inside the dispatcher)",
    ),
    PREPARE_OP: OpSpec(
        PREPARE_SCHEMA,
        plan=AWQ_PREPARE_PLAN,
        pinned=True,
        fake=_awq_prepare_fake(False),
        per_expert=True,
        validate=_awq_prepare_validate(PREPARE_OP),
        doc="one expert's AWQ checkpoint -> [words int32 (K, N/8), metadata int32 (K/g, N)]",
    ),
    PREPARE_COMPACT_OP: OpSpec(
        PREPARE_COMPACT_SCHEMA,
        plan=AWQ_PREPARE_PLAN,
        pinned=True,
        fake=_awq_prepare_fake(True),
        per_expert=True,
        validate=_awq_prepare_validate(PREPARE_COMPACT_OP),
        doc="as awq_sm70_prepare with 3-byte metadata records (K/g, N, 3) uint8",
    ),
    awq.AWQ_GEMM_OP: OpSpec(
        f"{awq.AWQ_GEMM_OP}(Tensor(a!) out, Tensor x, Tensor weight, Tensor metadata, "
        "int group_size, int k_ld, int q_ld, bool gated) -> ()",
        plan=(
            M,
            PlanKey("group", "arg:group_size"),
            PlanKey("k_ld", "arg:k_ld"),
            PlanKey("q_ld", "arg:q_ld"),
            PlanKey("gated", "arg:gated"),
        ),
        validate=_rows_match,
        doc="TurboMind AWQ GEMM; gated = fused SiLU epilogue",
    ),
    awq.AWQ_DEQUANTIZE_OP: OpSpec(
        f"{awq.AWQ_DEQUANTIZE_OP}(Tensor(a!) out, Tensor weight, Tensor metadata, "
        "int group_size) -> ()",
        plan=(PlanKey("group", "arg:group_size"),),
        doc="exact-dense prefill: prepared AWQ weight -> dense (K, N) FP16",
    ),
    awq.TORCH_MM_OP: OpSpec(
        f"{awq.TORCH_MM_OP}(Tensor input, Tensor mat2) -> Tensor",
        plan=(PlanKey("m", "dim:input:0"),),
        fake=_fake_mm,
        doc="pseudo-op: torch.mm, recorded as the exact-dense prefill's dense GEMM",
    ),
    SILU_AND_MUL_OP: OpSpec(
        f"{SILU_AND_MUL_OP}(Tensor(a!) result, Tensor input) -> ()",
        plan=(PlanKey("m", "dim:input:0"),),
        doc="the engine's unfused SiLU(gate) * up epilogue over a [gate | up] GEMM result",
    ),
}

KERNELS: Mapping[str, tuple[str, ...]] = {k.name: k.required_ops for k in LINEAR_KERNELS}

# Kernels whose compact-scale ABI revision the probe reports.
ABI_GETTERS: Mapping[str, str] = {
    nv.Qpn2NvFp4LinearKernel.name: nv.QPN2_COMPACT_VERSION_GETTER,
}
