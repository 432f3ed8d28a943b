"""FP64 helpers of the packers and the oracle, written independently of `numerics`.

`numerics` rounds float64 to fp16 through round-to-odd float32; this module scales by the
fp16 quantum of each value instead, so a rounding bug in one shows up against the other.
"""

from __future__ import annotations

import torch

_FP16_MANTISSA_BITS = 10
_FP16_MIN_NORMAL_EXP = -14


def round_fp16_by_quantum(x: torch.Tensor) -> torch.Tensor:
    """Round float64 to the nearest fp16 (ties to even), once.

    For |x| in [2^e, 2^(e+1)) fp16 values are multiples of 2^(e-10) (2^-24 below the normal
    range); dividing by that quantum is exact, torch.round ties to even, and the product is
    an fp16 value (or 65536 and above, which the final cast turns into inf as IEEE does).
    """
    x = x.to(torch.float64)
    _, exponent = torch.frexp(x)  # x = m * 2^exponent, 0.5 <= |m| < 1
    binade = torch.clamp(exponent.to(torch.float64) - 1, min=_FP16_MIN_NORMAL_EXP)
    quantum = torch.exp2(binade - _FP16_MANTISSA_BITS)
    return (torch.round(x / quantum) * quantum).to(torch.float16)
