"""The Flash-Next batch projections as replay checks them (`native.ops_flash_next`): out =
x @ weight.T, so x's width is the weight's K and out is (M, N) (docs/contracts/flashnext.md
§2.4-9); each rule on both sides, with the message that names the shapes, through the recording
namespace for every projection op.
"""

from __future__ import annotations

import pytest
import torch

from native import ops_flash_next as ofn
from native.catalogue import CATALOGUE
from routectl.replay.harness import RecordingNamespace

PROJECTIONS = (
    ofn.DENSE_BATCH_OP,
    ofn.GDN_INPUT_BATCH_OP,
    ofn.SHARED_UP_BATCH_OP,
    ofn.ROUTER_BATCH_OP,
)


def meta(*shape: int) -> torch.Tensor:
    return torch.empty(shape, dtype=torch.float16, device="meta")


@pytest.mark.parametrize("op", PROJECTIONS)
def test_a_projection_needs_x_of_the_weight_k_and_out_of_m_by_n(op: str) -> None:
    assert CATALOGUE.ops[op] is ofn.OPS[op]
    ns = RecordingNamespace(CATALOGUE)
    # The packed GDN input (4128, 2560) at M = 3: every dimension distinct.
    weight = meta(4128, 2560)
    ns.call(op, out=meta(3, 4128), x=meta(3, 2560), weight=weight)
    assert ns.calls == [{"op": op, "plan": {"m": 3, "n": 4128, "k": 2560}}]
    with pytest.raises(ValueError) as err:
        ns.call(op, out=meta(3, 4128), x=meta(3, 2048), weight=weight)
    assert str(err.value) == "activation width 2048 does not match weight K 2560"
    for out in ((3, 2560), (4, 4128), (4128, 3)):
        with pytest.raises(ValueError) as err:
            ns.call(op, out=meta(*out), x=meta(3, 2560), weight=weight)
        assert str(err.value) == f"out {out} is not (3, 4128) for this projection"
    assert len(ns.calls) == 1
