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
from routectl.errors import InputError
from routectl.io.jsonread import shorten
from routectl.reasons import OK, Check, reject

W13 = "w13"
W2 = "w2"
BANKS = (W13, W2)
AWQ_BITS = 4


# The codes `AwqMoeLayer.partition_check` can return (declared for `routectl coverage`).
PARTITION_CODES = ("misaligned_partition", "group_size")


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
        """The layer a row's model-level description gives at tensor-parallel size `tp`.
        A caller's spec is checked here, the library's entry for it: not a mapping, a
        required key missing or a value of the wrong type is an InputError naming the key."""
        if not isinstance(spec, Mapping):
            raise InputError(
                f"an AWQ MoE layer spec must be a mapping with {', '.join(REQUIRED_KEYS)}, "
                f"got {type(spec).__name__}"
            )
        missing = [key for key in REQUIRED_KEYS if key not in spec]
        if missing:
            raise InputError(
                f"the AWQ MoE layer spec lacks {', '.join(map(repr, missing))} (it needs "
                f"{', '.join(REQUIRED_KEYS)})"
            )
        group = _spec_value(spec, "group", int)
        return cls(
            prefix=_spec_value(spec, "prefix", str, "model.layers.0.mlp.experts"),
            layer_id=_spec_value(spec, "layer_id", int, 0),
            num_experts=_spec_value(spec, "experts", int),
            top_k=_spec_value(spec, "top_k", int),
            hidden=_spec_value(spec, "hidden", int),
            intermediate_total=_spec_value(spec, "intermediate", int),
            tp=_spec_value({"tp": tp}, "tp", int),
            checkpoint_group=group,
            prepared_group=_spec_value(spec, "prepared_group", int, group),
            bits=_spec_value(spec, "bits", int, AWQ_BITS),
            zero_points=_spec_value(spec, "zero_points", bool, True),
            bias=_spec_value(spec, "bias", bool, False),
            act_dtype=_spec_value(spec, "act_dtype", str, "float16"),
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


# The keys an AWQ MoE layer spec must hold; the others have defaults.
REQUIRED_KEYS = ("experts", "top_k", "hidden", "intermediate", "group")
_NO_DEFAULT = object()


def _spec_value(spec: Mapping[str, Any], key: str, kind: type, default: Any = _NO_DEFAULT) -> Any:
    """`spec[key]` when it is a `kind` (an int never a bool, a bool never an int: a string
    or float for a number is refused, not converted), else `default` when the key is absent."""
    if key not in spec and default is not _NO_DEFAULT:
        return default
    value = spec[key]
    exact = type(value) is bool if kind is bool else isinstance(value, kind)
    if not exact or (kind is int and isinstance(value, bool)):
        raise InputError(
            f"the AWQ MoE layer spec's {key!r} must be {KIND_WORDS[kind]}, got "
            f"{shorten(value)} ({type(value).__name__})"
        )
    return value


KIND_WORDS = {int: "an integer", bool: "true or false", str: "a string"}


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
