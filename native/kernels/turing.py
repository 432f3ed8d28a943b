"""Turing (SM75) QPN linears (docs/contracts/core.md §2.2): TuringQpn2NvFp4LinearKernel and
TuringQpn8Fp8LinearKernel, with the lifecycle of every other class: `policy_check` judges the
options the policy derives (native/ never reads the policy itself; the selector runs it once,
as the gate before capability), `is_supported` / `can_implement` the hardware and the layer,
`plan` the layout and how to prepare it (the family's KernelLoader calls it).

Scratch convention (both kernels): the dispatch op takes an optional `scratch` tensor, a
dense (K, N) FP16 buffer owned by the invocation, passed exactly when M exceeds the native
decode rows (QPN8: M > 8; QPN2: M > 32) and recorded as `scratch: true` in the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from native.kernels.common import (
    FP16,
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
from native.kernels.nvfp4_sm70 import (
    QPN2_GEMM_OP,
    QPN2_PREPARE_OP,
    QPN2_TILE_N,
    packed_dims,
    qpn2_tuning,
)
from native.layers import NVFP4_GROUP, Fp8Layer, Nvfp4Layer
from routectl.namespaces.native_ns import NativeNamespace
from routectl.reasons import OK, Check, reject

QPN8_PREPARE_OP = "fp8_qpn8_prepare_sm70"
QPN8_DISPATCH_OP = "fp8_qpn8_dispatch_sm70_out"
QPN8_PREFILL_OP = "fp8_qpn8_prefill_sm70_out"

TURING_QPN2_REQUIRED_OPS = (QPN2_PREPARE_OP, QPN2_GEMM_OP)
QPN8_REQUIRED_OPS = (QPN8_PREPARE_OP, QPN8_DISPATCH_OP, QPN8_PREFILL_OP)

# Rows up to these use native decode; above, the call gets invocation-owned dense scratch.
TURING_QPN2_DECODE_MAX_M = 32
QPN8_DECODE_MAX_M = 8

LAYOUT_TURING_QPN2 = "nvfp4_qpn2_dense"
LAYOUT_QPN8 = "fp8_qpn8"

_SM75_CORE = "requires Turing SM75; Volta retains its existing kernel"


def _turing_supported(capability: int) -> Check:
    return capability_check(capability, lambda cc: cc == 75, "requires_sm75", _SM75_CORE)


@dataclass(frozen=True)
class TuringQpn2Options:
    dense_qpn2: bool = True  # sm70_nvfp4.dense_qpn2
    backend_enabled: bool = True  # use_turbomind(sm70_turbomind.nvfp4)


@dataclass(frozen=True)
class TuringQpn8Options:
    enabled: bool = True  # sm70_fp8.enabled (effective)
    force_marlin: bool = False  # sm70_turbomind.quant_backend == marlin


class TuringQpn2NvFp4LinearKernel(LinearKernel):
    required_ops = TURING_QPN2_REQUIRED_OPS
    reason_codes = (
        "requires_sm75",
        "not_turing_nvfp4_layer",
        "activation_not_fp16",
        "packed_weight_rank",
        "n_not_positive",
        "k_not_positive",
        "k_not_multiple_of_128",
        "nvfp4_dtypes",
        "scale_shape",
        "missing_native_ops",
    )
    # The codes `policy_check` can return.
    policy_codes = ("dense_qpn2_disabled", "legacy_backend_override")

    @classmethod
    def is_supported(cls, capability: int) -> Check:
        return _turing_supported(capability)

    @classmethod
    def policy_check(cls, options: TuringQpn2Options) -> Check:
        """The policy gate: dense QPN2 on and the backend not overridden."""
        if not options.dense_qpn2:
            return reject("dense_qpn2_disabled", "dense QPN2 disabled by KernelConfig")
        if not options.backend_enabled:
            return reject(
                "legacy_backend_override", "disabled by the legacy quantization backend override"
            )
        return OK

    @classmethod
    def can_implement(cls, layer: Any, ns: NativeNamespace) -> Check:
        if not isinstance(layer, Nvfp4Layer):
            return reject("not_turing_nvfp4_layer", "requires checkpoint-native NVFP4 metadata")
        spec = layer
        if spec.act_dtype != FP16:
            return reject(
                "activation_not_fp16", f"requires FP16 activations (activations {spec.act_dtype})"
            )
        shape = tuple(spec.weight_shape)
        if len(shape) != 2:
            return reject("packed_weight_rank", f"requires rank-two packed weights (shape {shape})")
        k, n = packed_dims(spec)
        core = "requires N > 0 and positive K divisible by 128"
        if n <= 0:
            return reject("n_not_positive", f"{core}: N <= 0 (N={n})")
        if k <= 0:
            return reject("k_not_positive", f"{core}: K <= 0 (K={k})")
        if k % 128:
            return reject("k_not_multiple_of_128", f"{core}: K % 128 != 0 (K={k})")
        if spec.weight_dtype != "uint8" or spec.scale_dtype != "float8_e4m3fn":
            return reject(
                "nvfp4_dtypes",
                "requires NVFP4 bytes and E4M3 block scales (weight "
                f"{spec.weight_dtype}, scales {spec.scale_dtype})",
            )
        expected = (n, k // NVFP4_GROUP)
        if tuple(spec.scale_shape) != expected:
            return reject(
                "scale_shape",
                "requires one E4M3 scale per 16 weight values (scales "
                f"{tuple(spec.scale_shape)}, expected {expected})",
            )
        return cls.check_ops(ns)

    @classmethod
    def plan(cls, layer: Nvfp4Layer, setup: Any, ns: NativeNamespace) -> KernelPlan:
        """Layout nvfp4_qpn2_dense; its scratch is owned by each invocation, so no engine
        workspace bounds it (`setup` is unused: the options were the policy gate's)."""
        _, n = packed_dims(layer)
        return KernelPlan(
            LAYOUT_TURING_QPN2,
            {"padded_n": padded(n, QPN2_TILE_N), "scratch_above_m": TURING_QPN2_DECODE_MAX_M},
            prepare=lambda tensors: prepare_turing_qpn2(layer, tensors, ns),
        )


class TuringQpn8Fp8LinearKernel(LinearKernel):
    required_ops = QPN8_REQUIRED_OPS
    reason_codes = (
        "requires_sm75",
        "not_turing_fp8_layer",
        "input_output_not_fp16",
        "not_static_per_tensor_e4m3",
        "weight_rank",
        "n_not_positive",
        "k_not_positive",
        "n_not_multiple_of_32",
        "k_not_multiple_of_128",
        "missing_native_ops",
    )
    # The codes `policy_check` can return.
    policy_codes = ("qpn8_disabled",)

    @classmethod
    def is_supported(cls, capability: int) -> Check:
        return _turing_supported(capability)

    @classmethod
    def policy_check(cls, options: TuringQpn8Options) -> Check:
        """The policy gate: FP8 TurboMind on and Marlin not forced."""
        if not options.enabled or options.force_marlin:
            return reject(
                "qpn8_disabled", "QPN8 disabled by KernelConfig or legacy backend override"
            )
        return OK

    @classmethod
    def can_implement(cls, layer: Any, ns: NativeNamespace) -> Check:
        if not isinstance(layer, Fp8Layer):
            return reject("not_turing_fp8_layer", "requires a per-tensor FP8 layer")
        spec = layer
        if spec.act_dtype != FP16 or spec.out_dtype != FP16:
            return reject(
                "input_output_not_fp16",
                f"requires FP16 input and output (input {spec.act_dtype}, output {spec.out_dtype})",
            )
        if spec.weight_dtype != "float8_e4m3fn" or spec.weight_scheme != "static_per_tensor":
            return reject(
                "not_static_per_tensor_e4m3",
                "requires static per-tensor E4M3 weights (weight "
                f"{spec.weight_dtype}, {spec.weight_scheme})",
            )
        shape = tuple(spec.weight_shape)
        if len(shape) != 2:
            return reject("weight_rank", f"requires rank-two weights (shape {shape})")
        n, k = shape
        core = "requires positive N divisible by 32 and K divisible by 128"
        if n <= 0:
            return reject("n_not_positive", f"{core}: N <= 0 (N={n})")
        if k <= 0:
            return reject("k_not_positive", f"{core}: K <= 0 (K={k})")
        if n % 32:
            return reject("n_not_multiple_of_32", f"{core}: N % 32 != 0 (N={n})")
        if k % 128:
            return reject("k_not_multiple_of_128", f"{core}: K % 128 != 0 (K={k})")
        return cls.check_ops(ns)

    @classmethod
    def plan(cls, layer: Fp8Layer, setup: Any, ns: NativeNamespace) -> KernelPlan:
        """Layout fp8_qpn8, per-invocation scratch for M > 8."""
        return KernelPlan(
            LAYOUT_QPN8,
            {"scratch_above_m": QPN8_DECODE_MAX_M},
            prepare=lambda tensors: prepare_turing_qpn8(layer, tensors, ns),
        )


TURING_KERNELS = (TuringQpn2NvFp4LinearKernel, TuringQpn8Fp8LinearKernel)


def prepare_turing_qpn2(
    layer: Nvfp4Layer, tensors: dict[str, Any], ns: NativeNamespace
) -> Prepared:
    """Layout nvfp4_qpn2_dense: QPN2 codes and scales, N zero-padded to 32."""
    k, n = packed_dims(layer)
    n_padded = padded(n, QPN2_TILE_N)
    codes, scales = ns.call(
        QPN2_PREPARE_OP,
        weight=tensors["weight_packed"],
        weight_scale=tensors["weight_scale"],
        padded_n=n_padded,
    )
    resident = {
        "qpn2_codes": codes,
        "qpn2_scales": scales,
        "weight_global_scale": tensors["weight_global_scale"],
    }
    split_k, nacc = qpn2_tuning(k, n_padded, False)

    def apply(x: Any) -> Any:
        x2, m = fp16_tokens(x, k, "Turing NVFP4 QPN2")
        out = empty_fp16((m, n_padded), x2)
        if m > 0:
            scratch = owned_fp16((k, n_padded), x2) if m > TURING_QPN2_DECODE_MAX_M else None
            ns.call(
                QPN2_GEMM_OP,
                out=out,
                x=x2,
                codes=codes,
                scales=scales,
                global_scale=resident["weight_global_scale"],
                split_k=split_k,
                nacc=nacc,
                gated=False,
                scratch=scratch,
            )
        return restore_leading(out[:, :n], x)

    return Prepared(resident=resident, apply=apply, scratch={"dense_scratch": k * n_padded * 2})


def prepare_turing_qpn8(layer: Fp8Layer, tensors: dict[str, Any], ns: NativeNamespace) -> Prepared:
    """Native QPN8 layout of the checkpoint (N, K) E4M3 weight; per-tensor scale kept."""
    n, k = layer.weight_shape
    weight = ns.call(
        QPN8_PREPARE_OP, weight=tensors["weight"], weight_scale=tensors["weight_scale"]
    )
    resident = {"qpn8_weight": weight, "weight_scale": tensors["weight_scale"]}

    def apply(x: Any) -> Any:
        x2, m = fp16_tokens(x, k, "Turing FP8 QPN8")
        out = empty_fp16((m, n), x2)
        if m > 0:
            scratch = owned_fp16((k, n), x2) if m > QPN8_DECODE_MAX_M else None
            ns.call(
                QPN8_DISPATCH_OP,
                out=out,
                x=x2,
                weight=weight,
                weight_scale=resident["weight_scale"],
                scratch=scratch,
            )
        return restore_leading(out, x)

    return Prepared(resident=resident, apply=apply, scratch={"dense_scratch": k * n * 2})
