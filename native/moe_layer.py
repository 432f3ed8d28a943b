"""One AWQ mixture-of-experts layer as one tensor-parallel rank sees it: geometry, the
checkpoint partition rules and the per-expert checkpoint tensors (meta in replay).

Torch-free except `meta_checkpoint` / `ExpertBank.from_stacked`, which import torch lazily.
Shapes come from `native.awq_layout` (the one source of shapes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from native import meta_tensors
from native.awq_layout import CODES_PER_WORD, checkpoint_shapes, metadata_dtype, prepared_shapes
from routectl.reasons import OK, Check, reject

W13 = "w13"
W2 = "w2"
BANKS = (W13, W2)
AWQ_BITS = 4


@dataclass(frozen=True)
class AwqMoeLayer:
    """A rank's local view. W13 = gate and up stacked: K = hidden, N = 2 * intermediate
    (gate columns first in the checkpoint); W2: K = intermediate, N = hidden."""

    prefix: str
    layer_id: int
    num_experts: int
    top_k: int
    hidden: int
    intermediate_total: int
    tp: int
    checkpoint_group: int
    prepared_group: int
    bits: int = AWQ_BITS
    zero_points: bool = True
    bias: bool = False
    act_dtype: str = "float16"

    @classmethod
    def for_rank(cls, spec: Mapping[str, Any], tp: int) -> AwqMoeLayer:
        """The layer a row's model-level description gives at tensor-parallel size `tp`."""
        group = int(spec["group"])
        return cls(
            prefix=str(spec.get("prefix", "model.layers.0.mlp.experts")),
            layer_id=int(spec.get("layer_id", 0)),
            num_experts=int(spec["experts"]),
            top_k=int(spec["top_k"]),
            hidden=int(spec["hidden"]),
            intermediate_total=int(spec["intermediate"]),
            tp=int(tp),
            checkpoint_group=group,
            prepared_group=int(spec.get("prepared_group", group)),
            bits=int(spec.get("bits", AWQ_BITS)),
            zero_points=bool(spec.get("zero_points", True)),
            bias=bool(spec.get("bias", False)),
            act_dtype=str(spec.get("act_dtype", "float16")),
        )

    @property
    def intermediate(self) -> int:
        """Local intermediate size (the rank's slice of the expert MLP)."""
        return self.intermediate_total // self.tp

    def dims(self, bank: str) -> tuple[int, int]:
        """(K, N) of one expert of `bank`."""
        if bank == W13:
            return (self.hidden, 2 * self.intermediate)
        return (self.intermediate, self.hidden)

    @property
    def w13_k(self) -> int:
        return self.dims(W13)[0]

    @property
    def w13_n(self) -> int:
        return self.dims(W13)[1]

    @property
    def w2_k(self) -> int:
        return self.dims(W2)[0]

    @property
    def w2_n(self) -> int:
        return self.dims(W2)[1]

    def partition_check(self) -> Check:
        """The checkpoint can be split to this rank: every local K is whole groups."""
        if self.tp <= 0 or self.intermediate_total % self.tp:
            return reject(
                "misaligned_partition",
                f"intermediate {self.intermediate_total} does not split over TP {self.tp}",
            )
        g = self.checkpoint_group
        if g <= 0:
            return reject("group_size", f"checkpoint group {g} must be positive")
        if self.hidden % g:
            return reject(
                "misaligned_partition", f"local W13 K {self.hidden} is not a multiple of group {g}"
            )
        if self.intermediate % g:
            return reject(
                "misaligned_partition",
                f"local W2 K {self.intermediate} is not a multiple of group {g}",
            )
        return OK

    def checkpoint_shapes(self, bank: str) -> tuple[tuple[int, ...], ...]:
        """(qweight, qzeros, scales) shapes of one expert of `bank`."""
        k, n = self.dims(bank)
        return checkpoint_shapes(k, n, self.checkpoint_group)

    def qweight_shape(self, bank: str) -> tuple[int, ...]:
        """The stacked checkpoint qweight (E, K, N/8) of `bank`."""
        k, n = self.dims(bank)
        return (self.num_experts, k, n // CODES_PER_WORD)

    def bank_shapes(self, bank: str, compact: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(prepared words (E, K, N/8), metadata (E, K/g, N) or (E, K/g, N, 3))."""
        k, n = self.dims(bank)
        words, meta = prepared_shapes(k, n, self.prepared_group, compact)
        return (self.num_experts, *words), (self.num_experts, *meta)

    def bank_bytes(self, compact: bool) -> dict[str, dict[str, int]]:
        """Resident bytes per bank, from shapes alone: {bank: {weights, metadata, total}}."""
        meta_item = 1 if metadata_dtype(compact) == "uint8" else 4
        out: dict[str, dict[str, int]] = {}
        for bank in BANKS:
            words, meta = self.bank_shapes(bank, compact)
            weights = _numel(words) * 4
            metadata = _numel(meta) * meta_item
            out[bank] = {"weights": weights, "metadata": metadata, "total": weights + metadata}
        return out


def _numel(shape: Sequence[int]) -> int:
    total = 1
    for dim in shape:
        total *= int(dim)
    return total


@dataclass(frozen=True)
class ExpertBank:
    """One bank's checkpoint tensors, one entry per expert (qweight, qzeros, scales).
    `one_set`: every expert holds the very same tensors (`repeated`)."""

    qweight: Sequence[Any]
    qzeros: Sequence[Any]
    scales: Sequence[Any]
    one_set: bool = False

    @classmethod
    def from_stacked(cls, qweight: Any, qzeros: Any, scales: Any) -> ExpertBank:
        """From the engine's stacked (E, ...) parameters: per-expert views, no copy."""
        return cls(tuple(qweight.unbind(0)), tuple(qzeros.unbind(0)), tuple(scales.unbind(0)))

    @classmethod
    def repeated(cls, qweight: Any, qzeros: Any, scales: Any, experts: int) -> ExpertBank:
        """One set of tensors standing for each of `experts` experts."""
        if experts < 1:
            raise ValueError(f"a bank holds at least one expert, got {experts}")
        return cls((qweight,) * experts, (qzeros,) * experts, (scales,) * experts, one_set=True)

    def __len__(self) -> int:
        return len(self.qweight)

    def shared(self) -> tuple[Any, Any, Any] | None:
        """(qweight, scales, qzeros) when every expert holds these tensors (a loader then
        prepares that one set E times), else None."""
        if self.one_set:
            return (self.qweight[0], self.scales[0], self.qzeros[0])
        return None


@dataclass(frozen=True)
class MoeCheckpoint:
    w13: ExpertBank
    w2: ExpertBank

    def bank(self, name: str) -> ExpertBank:
        return self.w13 if name == W13 else self.w2


def meta_checkpoint(layer: AwqMoeLayer) -> MoeCheckpoint:
    """The layer's checkpoint on the meta device. Meta tensors carry no data, so one set of
    tensors per bank stands for every expert: E references, not E allocations."""
    import torch

    banks = []
    for bank in BANKS:
        qweight, qzeros, scales = layer.checkpoint_shapes(bank)
        tensors = (
            meta_tensors.empty(qweight, torch.int32, "meta"),
            meta_tensors.empty(qzeros, torch.int32, "meta"),
            meta_tensors.empty(scales, torch.float16, "meta"),
        )
        banks.append(ExpertBank.repeated(*tensors, layer.num_experts))
    return MoeCheckpoint(*banks)
