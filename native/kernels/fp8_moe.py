"""The Volta block-FP8 mixture-of-experts kernel (docs/contracts/fp8moe.md §2.2, §3, §4): the
layer description of one rank, the `TurboMindFp8MoE` capability class with its construction
and native prepare checks, and the resident bytes of the prepared banks, pointer tables and
persistent workspace.

Torch-free: every figure is computed from the layer's geometry. Never reads the policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from math import ceil
from typing import Any, ClassVar

from native.kernels.common import SILU_AND_MUL_OP, LinearKernel
from native.kernels.fp8_sm70 import FP8_PREPARE_OP, STRIDED_PTRS_OP
from routectl.namespaces.native_ns import NativeNamespace
from routectl.reasons import OK, Check, Reason, reject

METHOD_NAME = "TurboMindFp8MoE"
BLOCK = 128
FP8_BLOCK = (BLOCK, BLOCK)
SM70 = (70, 75)
# docs/contracts/fp8moe.md §4.4: the persistent workspace serves up to P tokens.
PERSISTENT_TOKENS = 32
POINTER_BYTES = 16
# The native op's missing-op message core (docs/contracts/fp8moe.md §6, item 5).
MISSING_OP = "SM70 TurboMind op _C::{op} is not available"

# Op names (docs/contracts/fp8moe.md §5.2).
LEGACY_OP = "fp8_moe_single_token_sm70_out"
ST_DENSE_W13_OP = "fp8_moe_single_token_dense_w13_sm70_out"
ST_INDEXED_W13_OP = "fp8_moe_single_token_indexed_dense_w13_sm70_out"
ST_COMPACT_W13_OP = "fp8_moe_single_token_compact_dense_w13_sm70_out"
ST_DENSE_STAGE_OP = "fp8_moe_single_token_dense_stage_sm70_out"
ST_INDEXED_STAGE_OP = "fp8_moe_single_token_indexed_dense_stage_sm70_out"
GEMM_OP = "fp8_moe_gemm_sm70_out"
PER_EXPERT_OP = "fp8_moe_gemm_sm70_per_expert_dispatch_out"
DENSE_STAGE_OP = "fp8_moe_dense_stage_sm70_out"
PERMUTE_OP = "moe_permute"
PERMUTE_SCRATCH_OP = "moe_permute_with_scratch"
UNPERMUTE_OP = "moe_unpermute"
EXACT_LAYOUT_OP = "awq_moe_single_token_exact_layout_prepare"
WEIGHTED_REDUCE_OP = "awq_moe_single_token_weighted_reduce_out"

LOAD_OPS = (FP8_PREPARE_OP, STRIDED_PTRS_OP)


@dataclass(frozen=True)
class Fp8MoeLayer:
    """One rank's routed-expert layer: E local experts, hidden H, local intermediate I."""

    prefix: str
    layer_id: int
    experts: int
    top_k: int
    hidden: int
    intermediate: int
    block: tuple[int, ...] | None = FP8_BLOCK  # None: per-tensor FP8 (no block quantization)
    bias: bool = False
    activation: str = "silu"

    @classmethod
    def for_rank(cls, desc: Mapping[str, Any], tp: int) -> Fp8MoeLayer:
        """The rank's layer from a model-level description (`intermediate` is the total;
        `local_intermediate`, where given, is already one rank's, as in the reference's
        generic layer)."""
        local = desc.get("local_intermediate")
        block = desc.get("block", FP8_BLOCK)
        return cls(
            prefix=str(desc["prefix"]),
            layer_id=int(desc["layer_id"]),
            experts=int(desc["experts"]),
            top_k=int(desc["top_k"]),
            hidden=int(desc["hidden"]),
            intermediate=int(local) if local is not None else int(desc["intermediate"]) // tp,
            block=tuple(block) if block is not None else None,
            bias=bool(desc.get("bias", False)),
            activation=str(desc.get("activation", "silu")),
        )

    # --- banks (docs/contracts/fp8moe.md §3.1, §4.2) ---------------------------------------

    def w13_kn(self) -> tuple[int, int]:
        return self.hidden, 2 * self.intermediate

    def w2_kn(self) -> tuple[int, int]:
        return self.intermediate, self.hidden

    def checkpoint_scale_rows(self) -> tuple[int, int]:
        """(W13, W2) checkpoint scale rows: gate and up round up separately."""
        return 2 * ceil(self.intermediate / BLOCK), ceil(self.hidden / BLOCK)

    @property
    def partial_n_block(self) -> bool:
        return self.w13_kn()[1] % BLOCK != 0

    @property
    def partial_k_block(self) -> bool:
        return self.w2_kn()[0] % BLOCK != 0

    def bank_bytes(self) -> dict[str, int]:
        """Resident bytes per tensor: codes (K, N) uint8 and scales (ceil(K/128), N) FP16 per
        expert, four pointer tables of one 16-byte pointer per expert."""
        e = self.experts
        out: dict[str, int] = {}
        for bank, (k, n) in (("w13", self.w13_kn()), ("w2", self.w2_kn())):
            out[f"{bank}_codes"] = e * k * n
            out[f"{bank}_scales"] = e * ceil(k / BLOCK) * n * 2
            out[f"{bank}_weight_ptrs"] = e * POINTER_BYTES
            out[f"{bank}_scale_ptrs"] = e * POINTER_BYTES
        return out

    def dequant_bytes(self) -> dict[str, int]:
        """The dequant fallback's FP16 banks: twice the FP8 code bytes."""
        e = self.experts
        return {
            "w13_fp16": 2 * e * self.w13_kn()[0] * self.w13_kn()[1],
            "w2_fp16": 2 * e * self.w2_kn()[0] * self.w2_kn()[1],
        }

    def workspace_bytes(self) -> dict[str, int]:
        """The persistent workspace by element type (docs/contracts/fp8moe.md §4.4), the
        native sort workspace excluded (its size is the native op's, unknown here)."""
        p, k, e, h, i = PERSISTENT_TOKENS, self.top_k, self.experts, self.hidden, self.intermediate
        s = PERSISTENT_TOKENS * k
        fp16 = p * h + 2 * s * h + s * i + s * 2 * i
        int32 = (e + 1) + 2 * p * k + 6 * s + (s + 1) + k + e
        return {
            "fp16": 2 * fp16,
            "int32": 4 * int32,
            "int64": 8 * (e + 1),
            "fp32": 4 * k,
            "pointer_scratch": 6 * k * POINTER_BYTES,
        }


def missing_op(op: str) -> Reason:
    return Reason("missing_native_ops", MISSING_OP.format(op=op))


class TurboMindFp8MoE(LinearKernel):
    """`Fp8SM70MoEMethod` upstream: block-FP8 experts prepared for the TurboMind W8A16 MoE
    GEMMs. Capability is the SM70 class; the construction checks and the native prepare
    checks stop the load (none has a fallback)."""

    name: ClassVar[str] = METHOD_NAME
    required_ops: ClassVar[tuple[str, ...]] = LOAD_OPS
    ops_label: ClassVar[str] = "FP8 MoE"

    @classmethod
    def is_supported(cls, capability: int) -> Check:
        if SM70[0] <= capability < SM70[1]:
            return OK
        return reject("capability", f"capability {capability} is outside 70..74")

    @classmethod
    def construction_check(cls, layer: Fp8MoeLayer) -> Check:
        """docs/contracts/fp8moe.md §2.2 in order, then the activation (routectl refuses
        a non-SiLU layer the upstream method would compute as SiLU)."""
        if layer.block is None:
            return reject("block_quant_required", "requires block-wise FP8 weights")
        if tuple(layer.block) != FP8_BLOCK:
            return reject(
                "fp8_block_size",
                f"only supports FP8 block size [128, 128], got {list(layer.block)}",
            )
        if layer.bias:
            return reject("expert_bias", "SM70 FP8 MoE does not support bias yet")
        if layer.activation != "silu":
            return reject(
                "activation_not_silu",
                f"activation {layer.activation!r} is not SiLU: the SM70 FP8 MoE method "
                "always computes SiLU(gate) * up",
            )
        return OK

    @classmethod
    def prepare_check(cls, layer: Fp8MoeLayer) -> Check:
        """The native prepare checks of docs/contracts/fp8moe.md §3.2, per bank."""
        w13_rows, w2_rows = layer.checkpoint_scale_rows()
        for bank, (k, n), rows in (
            ("W13", layer.w13_kn(), w13_rows),
            ("W2", layer.w2_kn(), w2_rows),
        ):
            if k % 8 or n % 8:
                return reject(
                    "fp8_prepare_shape",
                    f"fp8_sm70_prepare: K and N must be multiples of 8 ({bank} K {k}, N {n})",
                )
            if rows != ceil(n / BLOCK):
                return reject(
                    "fp8_prepare_scales",
                    f"fp8_sm70_prepare: output scale block mismatch ({bank}: {rows} scale "
                    f"rows for N {n}, expected {ceil(n / BLOCK)})",
                )
        return OK

    @classmethod
    def can_implement(cls, layer: Fp8MoeLayer, ns: NativeNamespace) -> Check:
        ok, reason = cls.construction_check(layer)
        if not ok:
            return ok, reason
        missing = [op for op in cls.required_ops if not ns.has_op(op)]
        if missing:
            return False, missing_op(missing[0])
        return cls.prepare_check(layer)


__all__ = [
    "METHOD_NAME",
    "SILU_AND_MUL_OP",
    "Fp8MoeLayer",
    "TurboMindFp8MoE",
    "missing_op",
]
