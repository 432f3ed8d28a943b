"""The Triton QPN M1 kernels under Triton's interpreter on tests/qpn_order_data.py's inputs:
the FP16 bits show the contract's summation order and single roundings, for both layouts and
both kernel configurations of tests/triton_interpreter_cases.py.

Run by tests/test_numerics_order.py in a child process with TRITON_INTERPRET=1 (Triton reads it
when the kernels are defined); not collected by a plain pytest run.
"""

from __future__ import annotations

import os

import pytest
import torch

from native.reference.triton_qpn import QpnConfig, launch_qpn_m1
from tests.qpn_order_data import GATE, GEOMETRY, ROUTE, crafted, out_literals

if os.environ.get("TRITON_INTERPRET") != "1":
    raise RuntimeError("run under TRITON_INTERPRET=1 (see tests/test_numerics_order.py)")

CONFIGS = {
    "pairs": QpnConfig(w13_pairs=16, w13_warps=4, w2_columns=64),
    "chains": QpnConfig(
        w13_pairs=32, w2_columns=128, w13_x_first=False, w13_gate_up=False, w2_paired=False
    ),
}


@pytest.mark.parametrize("compact", [False, True], ids=["4-byte", "3-byte"])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_the_bits_show_the_contracts_order(compact: bool, config: str) -> None:
    x, topk, ids, banks = crafted()
    out = torch.full((1, GEOMETRY.w2_n), float("nan"), dtype=torch.float16)
    intermediate = torch.full((10, GEOMETRY.w2_k), float("nan"), dtype=torch.float16)
    launch_qpn_m1(
        out, intermediate, x, *banks[compact], ids, topk,
        compact=compact, geometry=GEOMETRY, config=CONFIGS[config],
    )  # fmt: skip
    assert intermediate[:, 0].tolist() == [16.0] * 10
    assert intermediate[:, 1].tolist() == [GATE] * 10  # slice order: 13, not 12 or 14
    assert not intermediate[:, 2:].any()
    assert out[0, 0].item() == out_literals()["fma chain"]  # one rounding per route, in order
    assert ROUTE == 0.5 + 2**-11
    assert out[0, 2:].tolist() == [0.0] * (GEOMETRY.w2_n - 2)
    assert out[0, 1].item() == 22.09375
