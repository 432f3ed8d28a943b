"""FP64 oracle of the QPN M1 op (docs/contracts/core.md §6 "Acceptance") and the seed's bound
checker.

Takes the op's own arguments (any implementation's, a GPU build's moved to CPU included),
decodes the selected experts with the independent unpacker in `packing`, and computes:
intermediate = fp16(fp16(silu32(g)) * u) with g, u the FP64 W13 dots rounded to fp16
(exactly the contract's value for one-hot inputs); route[r] = fp16(FP64 dot(intermediate[r],
W2)); out_ref = FP64 sum of weight[r] * route[r].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from native.awq_schemas import GROUP_SIZE, HIDDEN, NUM_EXPERTS, W2_K
from native.reference.fp64 import round_fp16_by_quantum
from native.reference.packing import PreparedExpert, UnpackedExpert, unpack_prepared

RELATIVE_BOUND = 2e-3
ABSOLUTE_FLOOR = 2.0**-24


@dataclass(frozen=True)
class OracleResult:
    intermediate: torch.Tensor  # (10, 160) float16
    routes: torch.Tensor  # (10, 2560) float16
    out: torch.Tensor  # (2560,) float64


@dataclass(frozen=True)
class BoundCheck:
    """An output against the FP64 reference under the seed's bounds."""

    max_abs_error: float
    max_abs_bound: float
    l2_error: float
    l2_bound: float

    @property
    def max_abs_margin(self) -> float:
        """max|out - ref| / bound: at most 1 passes."""
        return self.max_abs_error / self.max_abs_bound

    @property
    def l2_margin(self) -> float:
        return self.l2_error / self.l2_bound

    @property
    def passed(self) -> bool:
        # Written so that NaN errors fail.
        return self.max_abs_error <= self.max_abs_bound and self.l2_error <= self.l2_bound


def decode(unpacked: UnpackedExpert, group_size: int = GROUP_SIZE) -> torch.Tensor:
    """fp16(q*scale + bias), one rounding of the exact float64 value."""
    scales = unpacked.scales.to(torch.float64).repeat_interleave(group_size, dim=0)
    biases = unpacked.biases.to(torch.float64).repeat_interleave(group_size, dim=0)
    return round_fp16_by_quantum(unpacked.codes.to(torch.float64) * scales + biases)


def silu32_fp16(gate: torch.Tensor) -> torch.Tensor:
    """fp16(silu32(g)): g / (1 + exp(-g)) in float32 with a correctly rounded float32 exp."""
    g = gate.to(torch.float32)
    e = torch.exp(-gate.to(torch.float64)).to(torch.float32)
    return round_fp16_by_quantum((g / (e + 1)).to(torch.float64))


def _decoded(words: torch.Tensor, meta: torch.Tensor, expert: int) -> torch.Tensor:
    return decode(unpack_prepared(PreparedExpert(words[expert], meta[expert]), GROUP_SIZE))


def oracle_qpn_m1(
    input: torch.Tensor,
    w13: torch.Tensor,
    s13: torch.Tensor,
    w2: torch.Tensor,
    s2: torch.Tensor,
    ids: torch.Tensor,
    topk: torch.Tensor,
    *,
    intermediate: torch.Tensor | None = None,
) -> OracleResult:
    """The FP64 reference; pass an implementation's `intermediate` to build the output
    reference from it (the seed's formula) instead of from the oracle's own."""
    x = input.reshape(-1).to(torch.float64)
    expert_ids = [int(i) for i in ids.reshape(-1).tolist()]
    weights = topk.reshape(-1).to(torch.float64)
    own = torch.zeros((len(expert_ids), W2_K), dtype=torch.float16)
    routes = torch.zeros((len(expert_ids), HIDDEN), dtype=torch.float16)
    decoded: dict[tuple[str, int], torch.Tensor] = {}

    def weights_of(stage: str, expert: int) -> torch.Tensor:
        if (stage, expert) not in decoded:
            words, meta = (w13, s13) if stage == "w13" else (w2, s2)
            decoded[stage, expert] = _decoded(words, meta, expert).to(torch.float64)
        return decoded[stage, expert]

    for r, expert in enumerate(expert_ids):
        if not 0 <= expert < NUM_EXPERTS:
            continue
        columns = round_fp16_by_quantum(x @ weights_of("w13", expert))
        gate, up = columns[0::2], columns[1::2]
        own[r] = round_fp16_by_quantum(silu32_fp16(gate).to(torch.float64) * up.to(torch.float64))
        row = own[r] if intermediate is None else intermediate.reshape(own.shape)[r]
        routes[r] = round_fp16_by_quantum(row.to(torch.float64) @ weights_of("w2", expert))
    out = (weights[:, None] * routes.to(torch.float64)).sum(dim=0)
    return OracleResult(own, routes, out)


def check_bounds(out: torch.Tensor, ref: torch.Tensor) -> BoundCheck:
    """max|out-ref| <= 2e-3*max|ref| + 2^-24 and ||out-ref||_2 <= 2e-3*||ref||_2 +
    sqrt(n)*2^-24 (n = 2560 for the QPN output)."""
    o = out.reshape(-1).to(torch.float64)
    r = ref.reshape(-1).to(torch.float64)
    diff = o - r
    return BoundCheck(
        max_abs_error=float(diff.abs().max()),
        max_abs_bound=RELATIVE_BOUND * float(r.abs().max()) + ABSOLUTE_FLOOR,
        l2_error=float(torch.linalg.vector_norm(diff)),
        l2_bound=RELATIVE_BOUND * float(torch.linalg.vector_norm(r))
        + math.sqrt(r.numel()) * ABSOLUTE_FLOOR,
    )


def fp16_ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise distance in fp16 ulps (0 for equal values, +0 and -0 included)."""

    def ordered(h: torch.Tensor) -> torch.Tensor:
        bits = h.contiguous().view(torch.int16).to(torch.int32)
        return torch.where(bits < 0, -(bits & 0x7FFF), bits)

    return (ordered(a) - ordered(b)).abs()
