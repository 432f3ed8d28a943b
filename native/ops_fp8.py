"""Catalogue entries of the native ops only the Volta block-FP8 linears call or require
(docs/contracts/fp8.md §4.5): our declared calling convention (unpinned: the C++ schemas were not
read), the plan keys a recorded call keeps (docs/contracts/fp8.md §7) and fakes for ops that return
tensors. The QPN8 prepare, dispatch and prefill ops are shared with Turing and live in
`native.ops_linear`.

Torch-free at import: fakes import torch when called.
"""

from __future__ import annotations

from typing import Any

from native.kernels import fp8_sm70 as fp
from native.meta_tensors import empty_beside
from routectl.namespaces.ops import OpSpec, PlanKey


def _rows_match(out: Any = None, x: Any = None, input: Any = None, **_: Any) -> None:
    source = x if x is not None else input
    if out is not None and source is not None and out.shape[0] != source.shape[0]:
        raise ValueError(f"out has {out.shape[0]} rows for {source.shape[0]} activation rows")


def _fake_fp8_prepare(
    weight: Any, weight_scale: Any, group_size: int, interleave_gated: bool
) -> list[Any]:
    # Packed codes hold one byte per FP8 value (native padding, if any, is not visible);
    # the scales keep their FP32 block raster; meta carries (k_ld, q_ld).
    n, k = weight.shape
    return [
        empty_beside((k, n), "uint8", weight),
        empty_beside(tuple(weight_scale.shape), "float32", weight),
        empty_beside((2,), "int64", weight),
    ]


def _fake_strided_ptrs(tensors: list[Any]) -> Any:
    return empty_beside((len(tensors),), "int64", tensors[0])


M = PlanKey("m", "dim:x:0")
K = PlanKey("k", "dim:x:1")
GROUP = PlanKey("group", "arg:group_size")
LEADING = (PlanKey("k_ld", "arg:k_ld"), PlanKey("q_ld", "arg:q_ld"))
GATED = PlanKey("gated", "arg:gated")
TUNING = (
    PlanKey("split_k", "arg:split_k"),
    PlanKey("chains", "arg:chains"),
    PlanKey("prefetch", "arg:prefetch"),
)

_TM_ARGS = "Tensor weight, Tensor weight_scale, int group_size, int k_ld, int q_ld"

OPS: dict[str, OpSpec] = {
    fp.FP8_PREPARE_OP: OpSpec(
        f"{fp.FP8_PREPARE_OP}(Tensor weight, Tensor weight_scale, int group_size, "
        "bool interleave_gated) -> Tensor[]",
        plan=(
            PlanKey("n", "dim:weight:0"),
            PlanKey("k", "dim:weight:1"),
            GROUP,
            PlanKey("gated", "arg:interleave_gated"),
        ),
        fake=_fake_fp8_prepare,
        doc="TurboMind FP8 preparation of the (N, K) E4M3 weight: [packed codes, scales, "
        "meta (k_ld, q_ld)]; gated = one interleaved gate/up layout",
    ),
    fp.FP8_GEMM_OP: OpSpec(
        f"{fp.FP8_GEMM_OP}(Tensor(a!) out, Tensor x, {_TM_ARGS}, bool gated) -> ()",
        plan=(M, K, GROUP, *LEADING, GATED),
        validate=_rows_match,
        doc="TurboMind W8A16 GEMM; gated = the fused SiLU(gate) * up epilogue",
    ),
    fp.FP8_PREFILL_DISPATCH_OP: OpSpec(
        f"{fp.FP8_PREFILL_DISPATCH_OP}(Tensor(a!) out, int workspace, Tensor x, {_TM_ARGS}, "
        "bool gated, int prefill_min_m) -> ()",
        plan=(M, K, GROUP, *LEADING, GATED, PlanKey("prefill_min_m", "arg:prefill_min_m")),
        validate=_rows_match,
        doc="exact-dense prefill dispatcher: TurboMind GEMM below prefill_min_m, dequantize "
        "into the bound workspace plus a dense GEMM from it",
    ),
    fp.FP8_PRESCALED_M1_OP: OpSpec(
        f"{fp.FP8_PRESCALED_M1_OP}(Tensor(a!) out, Tensor x, {_TM_ARGS}) -> ()",
        plan=(M, K, GROUP, *LEADING),
        validate=_rows_match,
        doc="M = 1 decode on UE8M0 scales prescaled x256",
    ),
    fp.FP8_PREFILL_PRESCALED_OP: OpSpec(
        f"{fp.FP8_PREFILL_PRESCALED_OP}(Tensor(a!) out, Tensor x, {_TM_ARGS}) -> ()",
        plan=(M, K, GROUP, *LEADING),
        validate=_rows_match,
        doc="prefill at exactly M = 8000 on scales prescaled x256 (no exact-dense workspace)",
    ),
    fp.FP8_DEQUANTIZE_OP: OpSpec(
        f"{fp.FP8_DEQUANTIZE_OP}(Tensor(a!) out, {_TM_ARGS}) -> ()",
        plan=(GROUP,),
        doc="visible dense MM: TurboMind codes -> dense (K, N) FP16 in the bound workspace",
    ),
    fp.SILU_AND_MUL_INTERLEAVED_OP: OpSpec(
        f"{fp.SILU_AND_MUL_INTERLEAVED_OP}(Tensor(a!) result, Tensor input) -> ()",
        plan=(PlanKey("m", "dim:input:0"),),
        doc="SiLU(gate) * up over an interleaved gate/up GEMM result",
    ),
    fp.QPN8_DEQUANTIZE_OP: OpSpec(
        f"{fp.QPN8_DEQUANTIZE_OP}(Tensor(a!) out, Tensor codes, Tensor scales) -> ()",
        doc="QPN8 codes -> dense FP16 (called inside the QPN8 dispatcher)",
    ),
    fp.QPN8_GEMM_OP: OpSpec(
        f"{fp.QPN8_GEMM_OP}(Tensor(a!) out, Tensor x, Tensor codes, Tensor scales, "
        "int split_k, int chains, bool flag, bool prefetch) -> ()",
        plan=(M, K, *TUNING),
        validate=_rows_match,
        doc="QPN8 decode GEMM; `flag` is a literal true at the only call site read (its "
        "meaning is not pinned)",
    ),
    fp.QPN8_GATED_PAIR_OP: OpSpec(
        f"{fp.QPN8_GATED_PAIR_OP}(Tensor(a!) out, Tensor x, Tensor codes, Tensor scales, "
        "int split_k, int chains, bool prefetch) -> ()",
        plan=(M, K, *TUNING),
        validate=_rows_match,
        doc="QPN8 gated gate/up pair (called inside the QPN8 dispatcher)",
    ),
    fp.GROUPED_DISPATCH_OP: OpSpec(
        f"{fp.GROUPED_DISPATCH_OP}(Tensor(a!) out, Tensor x, Tensor ptrs, int group_size, "
        "int k_ld, int q_ld) -> ()",
        plan=(M, PlanKey("groups", "dim:x:1"), PlanKey("k", "dim:x:2"), GROUP, *LEADING),
        validate=_rows_match,
        doc="grouped decode lane: every group of a bmm layer in one per-expert dispatch",
    ),
    fp.STRIDED_PTRS_OP: OpSpec(
        f"{fp.STRIDED_PTRS_OP}(Tensor[] tensors) -> Tensor",
        plan=(),
        fake=_fake_strided_ptrs,
        doc="device pointer table of the per-group codes and scales",
    ),
}
