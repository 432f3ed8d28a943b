"""Plain descriptions of the linear layers the kernels serve: shapes and dtype names only.

Torch-free: capability checks and selection read these values. `checkpoint_tensors(device)`
builds the matching checkpoint tensors (meta in replay) and is the only place that imports
torch, lazily.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from native import meta_tensors

NVFP4_GROUP = 16  # one E4M3 block scale per 16 FP4 values
AWQ_PACK = 8  # uint4 values per int32 word


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def role_of(prefix: str) -> str:
    """The projection role: the last dotted component of the layer prefix."""
    return prefix.rsplit(".", 1)[-1]


class _Prefixed:
    """A layer named by its prefix; its projection role is the prefix's last component."""

    prefix: str

    @property
    def role(self) -> str:
        return role_of(self.prefix)


@dataclass(frozen=True)
class Nvfp4Layer(_Prefixed):
    """A weight-only NVFP4 linear (compressed-tensors on SM70, checkpoint-native on SM75)."""

    prefix: str
    input_size: int  # K, local
    output_size: int  # N, local
    weight_shape: tuple[int, ...]  # packed codes (N, K/2)
    scale_shape: tuple[int, ...]  # block scales (N, ceil(K/16))
    weight_dtype: str = "uint8"
    scale_dtype: str = "float8_e4m3fn"
    act_dtype: str = "float16"
    gated: bool = False  # fused gate/up projection
    logical_widths: tuple[int, ...] = ()

    @classmethod
    def of(
        cls, prefix: str, k: int, n: int, *, gated: bool | None = None, act_dtype: str = "float16"
    ) -> Nvfp4Layer:
        """The layer a checkpoint of local size (K, N) describes; gate_up_proj is gated."""
        is_gated = role_of(prefix) == "gate_up_proj" if gated is None else gated
        widths = (n // 2, n // 2) if is_gated else (n,)
        return cls(
            prefix=prefix,
            input_size=k,
            output_size=n,
            weight_shape=(n, k // 2),
            scale_shape=(n, _ceil_div(k, NVFP4_GROUP)),
            act_dtype=act_dtype,
            gated=is_gated,
            logical_widths=widths,
        )

    def checkpoint_tensors(self, device: Any = "meta") -> dict[str, Any]:
        """weight_packed, weight_scale and the per-tensor weight_global_scale (float32)."""
        return {
            "weight_packed": meta_tensors.empty(self.weight_shape, self.weight_dtype, device),
            "weight_scale": meta_tensors.empty(self.scale_shape, self.scale_dtype, device),
            "weight_global_scale": meta_tensors.empty((1,), "float32", device),
        }


@dataclass(frozen=True)
class Fp8Layer(_Prefixed):
    """A Turing QPN8 FP8 linear: E4M3 weight (N, K) with a static per-tensor scale."""

    prefix: str
    input_size: int  # K
    output_size: int  # N
    weight_shape: tuple[int, ...]  # (N, K)
    weight_dtype: str = "float8_e4m3fn"
    # How the weight is scaled: "static_per_tensor", "static_per_channel", "static_128_block".
    weight_scheme: str = "static_per_tensor"
    scale_shape: tuple[int, ...] = (1,)
    act_dtype: str = "float16"
    out_dtype: str = "float16"
    gated: bool = False

    @classmethod
    def of(
        cls, prefix: str, k: int, n: int, *, act_dtype: str = "float16", out_dtype: str = "float16"
    ) -> Fp8Layer:
        return cls(
            prefix=prefix,
            input_size=k,
            output_size=n,
            weight_shape=(n, k),
            act_dtype=act_dtype,
            out_dtype=out_dtype,
            gated=role_of(prefix) == "gate_up_proj",
        )

    def checkpoint_tensors(self, device: Any = "meta") -> dict[str, Any]:
        return {
            "weight": meta_tensors.empty(self.weight_shape, self.weight_dtype, device),
            "weight_scale": meta_tensors.empty(self.scale_shape, "float32", device),
        }


@dataclass(frozen=True)
class AwqLayer(_Prefixed):
    """An AWQ GEMM-packed linear: qweight (K, N/8) int32, qzeros (K/g, N/8) int32,
    scales (K/g, N) fp16; uint4 with zero points."""

    prefix: str
    input_size: int  # K
    output_size: int  # N
    group_size: int
    qweight_shape: tuple[int, ...]
    qzeros_shape: tuple[int, ...]
    scales_shape: tuple[int, ...]
    qweight_dtype: str = "int32"
    qzeros_dtype: str = "int32"
    scales_dtype: str = "float16"
    weight_type: str = "uint4"
    has_zero_points: bool = True
    has_g_idx: bool = False
    act_dtype: str = "float16"
    gated: bool = False  # fused gate/up projection

    @classmethod
    def of(
        cls,
        prefix: str,
        k: int,
        n: int,
        group_size: int,
        *,
        act_dtype: str = "float16",
        has_g_idx: bool = False,
    ) -> AwqLayer:
        groups = _ceil_div(k, group_size) if group_size > 0 else 0
        return cls(
            prefix=prefix,
            input_size=k,
            output_size=n,
            group_size=group_size,
            qweight_shape=(k, n // AWQ_PACK),
            qzeros_shape=(groups, n // AWQ_PACK),
            scales_shape=(groups, n),
            act_dtype=act_dtype,
            has_g_idx=has_g_idx,
            gated=role_of(prefix) == "gate_up_proj",
        )

    def checkpoint_tensors(self, device: Any = "meta") -> dict[str, Any]:
        return {
            "qweight": meta_tensors.empty(self.qweight_shape, self.qweight_dtype, device),
            "qzeros": meta_tensors.empty(self.qzeros_shape, self.qzeros_dtype, device),
            "scales": meta_tensors.empty(self.scales_shape, self.scales_dtype, device),
        }


FP8_BLOCK = (128, 128)  # one FP32 scale per 128 x 128 weight block


@dataclass(frozen=True)
class BlockFp8Layer(_Prefixed):
    """A serialized block-FP8 linear served weight-only (W8A16) on Volta
    (docs/contracts/fp8.md §3.1): E4M3 weight (N, K), one FP32 scale per 128 x 128 block
    ("weight_scale_inv").

    `groups` > 0 marks a grouped (bmm) layer whose N rows hold `groups` equal groups; its
    activations end in [groups, K] and each group is an (M, K) x (K, N/groups) product.
    """

    prefix: str
    input_size: int  # K, local
    output_size: int  # N, local
    weight_shape: tuple[int, ...]  # (N, K)
    scale_shape: tuple[int, ...]  # (ceil(N/128), K/128)
    tp: int = 1  # the layer's tensor-parallel size
    partitions: tuple[int, ...] = ()  # output partitions: [N/2, N/2] for gate_up_proj
    weight_dtype: str = "float8_e4m3fn"
    block_size: tuple[int, ...] = FP8_BLOCK
    static_scales: bool = True  # static (serialized) weight scales
    is_scale_e8m0: bool = False  # UE8M0 (power-of-two) scales
    orig_dtype: str = "float16"  # the checkpoint's original weight dtype
    act_dtype: str = "float16"
    out_dtype: str = "float16"
    groups: int = 0

    @classmethod
    def of(
        cls,
        prefix: str,
        k: int,
        n: int,
        *,
        tp: int = 1,
        groups: int = 0,
        is_scale_e8m0: bool = False,
    ) -> BlockFp8Layer:
        """The layer a checkpoint of local size (K, N) describes; gate_up_proj has two equal
        output partitions."""
        parts = (n // 2, n // 2) if role_of(prefix) == "gate_up_proj" else (n,)
        block_n, block_k = FP8_BLOCK
        return cls(
            prefix=prefix,
            input_size=k,
            output_size=n,
            weight_shape=(n, k),
            scale_shape=(_ceil_div(n, block_n), _ceil_div(k, block_k)),
            tp=tp,
            partitions=parts,
            groups=groups,
            is_scale_e8m0=is_scale_e8m0,
        )

    @property
    def gated_candidate(self) -> bool:
        """A fused gate/up projection: role gate_up_proj with two equal partitions."""
        return (
            self.role == "gate_up_proj"
            and len(self.partitions) == 2
            and self.partitions[0] == self.partitions[1]
        )

    @property
    def grouped(self) -> bool:
        return self.groups > 0

    def checkpoint_tensors(self, device: Any = "meta") -> dict[str, Any]:
        return {
            "weight": meta_tensors.empty(self.weight_shape, self.weight_dtype, device),
            "weight_scale_inv": meta_tensors.empty(self.scale_shape, "float32", device),
        }
