"""A random AutoAWQ checkpoint of a whole AWQ MoE layer, every expert distinct.

Drawn in packed form: an AutoAWQ int32 word holds eight 4-bit codes and every bit pattern is
a valid word, so a uniformly random word is exactly `packing.pack_checkpoint` of eight
uniformly random codes 0..15, the distribution of `packing.random_expert`. Drawing words
costs well under a second for Qwen3.8's 1,024 expert matrices, where drawing codes and
packing them takes about 30 s on two cores. Scales are drawn as `random_expert` draws them.
`expert_weights` reads one expert back through the independent unpacker, and
`packs_back` checks the packer maps those logical weights to the very same tensors.

The tensors are stacked (E, ...) as an engine holds its parameters; the checkpoint hands out
per-expert views of them.
"""

from __future__ import annotations

import torch

from native.moe_layer import BANKS, AwqMoeLayer, ExpertBank, MoeCheckpoint
from native.reference.packing import (
    AwqCheckpoint,
    ExpertWeights,
    pack_checkpoint,
    unpack_checkpoint,
)

# random_expert's scales: rand * SCALE_SPAN + SCALE_FLOOR (the seed test's choice).
SCALE_SPAN = 0.01
SCALE_FLOOR = 0.001


def _random_words(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    words = torch.randint(-(2**31), 2**31, shape, generator=generator, dtype=torch.int64)
    return words.to(torch.int32)


def _bank(layer: AwqMoeLayer, bank: str, generator: torch.Generator) -> ExpertBank:
    e = layer.num_experts
    qweight, qzeros, scales = layer.checkpoint_shapes(bank)
    return ExpertBank.from_stacked(
        _random_words((e, *qweight), generator),
        _random_words((e, *qzeros), generator),
        (torch.rand((e, *scales), generator=generator) * SCALE_SPAN + SCALE_FLOOR).half(),
    )


def random_moe_checkpoint(layer: AwqMoeLayer, seed: int = 0) -> MoeCheckpoint:
    """W13 (gate columns then up columns, as a checkpoint holds them) and W2 of every expert
    of `layer` (one tensor-parallel rank)."""
    generator = torch.Generator().manual_seed(seed)
    w13, w2 = (_bank(layer, bank, generator) for bank in BANKS)
    return MoeCheckpoint(w13, w2)


def expert_checkpoint(checkpoint: MoeCheckpoint, bank: str, expert: int) -> AwqCheckpoint:
    source = checkpoint.bank(bank)
    return AwqCheckpoint(source.qweight[expert], source.qzeros[expert], source.scales[expert])


def expert_weights(checkpoint: MoeCheckpoint, bank: str, expert: int) -> ExpertWeights:
    """One expert's logical weights, read back by the independent unpacker."""
    return unpack_checkpoint(expert_checkpoint(checkpoint, bank, expert))


def packs_back(checkpoint: MoeCheckpoint, bank: str, expert: int) -> bool:
    """The AutoAWQ packer maps the expert's logical weights back to its very tensors."""
    original = expert_checkpoint(checkpoint, bank, expert)
    again = pack_checkpoint(unpack_checkpoint(original))
    return all(
        torch.equal(a, b)
        for a, b in (
            (again.qweight, original.qweight),
            (again.qzeros, original.qzeros),
            (again.scales, original.scales),
        )
    )


__all__ = ["expert_checkpoint", "expert_weights", "packs_back", "random_moe_checkpoint"]
