"""The Triton kernels' test data can show what the tests claim (CPU, no GPU): in every
reduced case of tests/test_triton_gpu.py, with the router weights balanced, dropping any one
route changes the FP16 output, so a kernel that lost a route (or gave it another expert's
chains) cannot pass. With the weights as drawn the adversarial expert's routes hide some
others': the GPU runs on those showed W2's redo dropping expert 0 unnoticed."""

from __future__ import annotations

import pytest
import torch

from tests.qpn_triton_helpers import balanced_weights, expected_routes, hidden_routes
from tests.test_triton_gpu import REDUCED_CASES, reduced_inputs


@pytest.mark.parametrize("name", sorted(REDUCED_CASES))
def test_every_route_shows_in_the_balanced_reduced_cases(name: str) -> None:
    x, w13, s13, w2, s2, ids, topk = reduced_inputs(name, "balanced")
    routes, _ = expected_routes(x, w13, s13, w2, s2, ids)
    assert hidden_routes(routes, topk) == []
    # Every valid id has a route (not zero), so every one of them is checked above.
    valid = [r for r, e in enumerate(ids.reshape(-1).tolist()) if 0 <= e < w13.shape[0]]
    assert [r for r in range(routes.shape[0]) if routes[r].any()] == valid


def test_the_drawn_weights_hide_routes_that_balanced_ones_show() -> None:
    # chains-recheck as drawn: expert 0's routes (3 and 7 of the ids) are below half an ulp
    # of the adversarial expert's sums.
    x, w13, s13, w2, s2, ids, drawn = reduced_inputs("chains-recheck")
    routes, _ = expected_routes(x, w13, s13, w2, s2, ids)
    assert hidden_routes(routes, drawn) == [3, 7]
    assert hidden_routes(routes, balanced_weights(routes, drawn)) == []


def test_balancing_scales_each_weight_by_a_power_of_two() -> None:
    x, w13, s13, w2, s2, ids, drawn = reduced_inputs("packed-unpaired-widen")
    routes, _ = expected_routes(x, w13, s13, w2, s2, ids)
    balanced = balanced_weights(routes, drawn)
    mantissa, _ = torch.frexp(drawn)
    assert torch.equal(torch.frexp(balanced)[0], mantissa)
    # A route's largest output times its scale lands within a factor sqrt(2) of 1; an
    # invalid id's weight is left as drawn.
    for r in range(routes.shape[0]):
        scale = float(balanced[0, r] / drawn[0, r])
        peak = float(routes[r].abs().max())
        assert peak == 0 and scale == 1 or 2**-0.5 <= peak * scale <= 2**0.5, r
