"""Shapes, dtypes and bit layouts of AWQ checkpoint tensors and SM70 prepared banks.

The one source of shapes: the reference ops' fakes, the validator and the replay catalogue
all take their shapes from here. Everything is torch-free except `fake_prepare_outputs`,
which imports torch lazily. Shape arithmetic uses only `*`, `//` and `%`, so it also works on
torch SymInts while tracing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from native import meta_tensors
from native.awq_schemas import (
    GROUP_SIZE,
    HIDDEN,
    NUM_EXPERTS,
    TOKENS,
    TOP_K,
    W2_K,
    W2_N,
    W13_K,
    W13_N,
)

if TYPE_CHECKING:
    import torch

CODE_BITS = 4
CODES_PER_WORD = 8
CODE_MASK = (1 << CODE_BITS) - 1
TILE_N = 32  # prepared words: 32-column N tiles
TILE_K = CODES_PER_WORD  # one prepared word holds 8 consecutive K values of one column
COMPACT_RECORD_BYTES = 3

# AutoAWQ GEMM: nibble i of checkpoint word j holds column 8j + CHECKPOINT_NIBBLE_COLUMNS[i].
CHECKPOINT_NIBBLE_COLUMNS: tuple[int, ...] = (0, 2, 4, 6, 1, 3, 5, 7)
# Prepared: logical k offset i (k = 8*k8 + i) sits in nibble PREPARED_K_NIBBLES[i].
PREPARED_K_NIBBLES: tuple[int, ...] = (0, 4, 1, 5, 2, 6, 3, 7)

FOUR_BYTE = "4-byte"
THREE_BYTE = "3-byte"
WORDS_DTYPE = "int32"
CHECKPOINT_SCALES_DTYPE = "float16"
_METADATA_DTYPES = {FOUR_BYTE: "int32", THREE_BYTE: "uint8"}


def metadata_layout(compact: bool) -> str:
    return THREE_BYTE if compact else FOUR_BYTE


def metadata_dtype(compact: bool) -> str:
    return _METADATA_DTYPES[metadata_layout(compact)]


def layout_of_metadata_dtype(dtype_name: str) -> str | None:
    """ "4-byte" for int32, "3-byte" for uint8, None for any other element type."""
    for layout, name in _METADATA_DTYPES.items():
        if name == dtype_name:
            return layout
    return None


def _require_divisible(value: Any, divisor: int, what: str) -> None:
    if divisor <= 0 or value % divisor != 0:
        raise ValueError(f"{what} ({value}) must be a positive multiple of {divisor}")


def checkpoint_shapes(k: Any, n: Any, group: Any) -> tuple[tuple[Any, ...], ...]:
    """(qweight (K, N/8) int32, qzeros (K/g, N/8) int32, scales (K/g, N) fp16) of one expert."""
    _require_divisible(n, CODES_PER_WORD, "N")
    _require_divisible(k, group, "K")
    return (k, n // CODES_PER_WORD), (k // group, n // CODES_PER_WORD), (k // group, n)


def prepared_shapes(
    k: Any, n: Any, group: Any, compact: bool
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """(words shape (K, N/8), metadata shape (K/g, N) or (K/g, N, 3)) of one prepared expert."""
    _require_divisible(k, TILE_K, "K")
    _require_divisible(n, TILE_N, "N")
    _require_divisible(k, group, "K")
    words = (k, n // CODES_PER_WORD)
    groups = k // group
    meta = (groups, n, COMPACT_RECORD_BYTES) if compact else (groups, n)
    return words, meta


def prepared_word_index(k: Any, n: Any, k_total: Any) -> Any:
    """Flat word index, inside one expert, of the prepared word holding (k, n).

    (tile * K/8 + k8) * 32 + c for n = 32*tile + c and k = 8*k8 + i, whatever the tensor's
    nominal (K, N/8) shape. Works elementwise on integer tensors too.
    """
    return ((n // TILE_N) * (k_total // TILE_K) + k // TILE_K) * TILE_N + n % TILE_N


def prepared_nibble(k: int) -> int:
    """The nibble (p = bits 4p..4p+3) of its prepared word that holds row k."""
    return PREPARED_K_NIBBLES[k % TILE_K]


def checkpoint_nibble(n: int) -> int:
    """The nibble of checkpoint word n // 8 that holds column n."""
    return CHECKPOINT_NIBBLE_COLUMNS.index(n % CODES_PER_WORD)


def metadata_index(group: Any, n: Any, n_total: Any) -> Any:
    """Flat metadata record index (no tiling)."""
    return group * n_total + n


def interleaved_source_column(p: int, n_total: int) -> int:
    """Checkpoint column of prepared column p when W13 gate/up columns are interleaved."""
    return p // 2 + (n_total // 2) * (p % 2)


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str
    alignment: int  # bytes


def qpn_m1_arguments(compact: bool) -> dict[str, TensorSpec]:
    """Exact shape, dtype and alignment of each QPN M1 tensor argument, in schema order."""
    meta = metadata_dtype(compact)
    extra = (COMPACT_RECORD_BYTES,) if compact else ()
    return {
        "out": TensorSpec((TOKENS, HIDDEN), "float16", 16),
        "intermediate": TensorSpec((TOP_K, W2_K), "float16", 16),
        "input": TensorSpec((TOKENS, HIDDEN), "float16", 16),
        "w13": TensorSpec((NUM_EXPERTS, W13_K, W13_N // CODES_PER_WORD), WORDS_DTYPE, 16),
        "s13": TensorSpec((NUM_EXPERTS, W13_K // GROUP_SIZE, W13_N, *extra), meta, 16),
        "w2": TensorSpec((NUM_EXPERTS, W2_K, W2_N // CODES_PER_WORD), WORDS_DTYPE, 16),
        "s2": TensorSpec((NUM_EXPERTS, W2_K // GROUP_SIZE, W2_N, *extra), meta, 16),
        "ids": TensorSpec((TOKENS, TOP_K), "int32", 4),
        "topk": TensorSpec((TOKENS, TOP_K), "float32", 4),
    }


def fake_prepare_outputs(
    kernel: torch.Tensor, group_size: Any, compact: bool
) -> list[torch.Tensor]:
    """Uninitialised [words, metadata] shaped like a prepare op's result for `kernel`.

    `kernel` is the checkpoint qweight (K, N/8); on meta or fake tensors nothing is allocated.
    Shared by the reference ops' fakes and replay's catalogue.
    """

    k, n = kernel.shape[0], kernel.shape[1] * CODES_PER_WORD
    words, meta = prepared_shapes(k, n, group_size, compact)
    return [
        meta_tensors.empty(words, WORDS_DTYPE, kernel.device),
        meta_tensors.empty(meta, metadata_dtype(compact), kernel.device),
    ]
