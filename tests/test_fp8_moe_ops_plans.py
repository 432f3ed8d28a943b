"""The FP8 MoE ops' recorded plans where an argument is absent (`native.ops_fp8_moe`): the
family declares its calling convention by argument name without having pinned the fork's
bindings (docs/contracts/fp8moe.md §9, open question 5), so each of its plan keys but the
token count is optional (the catalogue's rule, `routectl.namespaces.ops.PlanKey`): a call
that lacks an argument (an observed binding of another convention) records the other keys and
omits that one, instead of failing the plan. The full plans are
`tests/test_fp8_moe_whole_plans.py`'s.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from native import ops_fp8_moe
from native.catalogue import CATALOGUE
from routectl.namespaces.ops import OpSpec, derive_plan


def arguments(spec: OpSpec) -> dict[str, Any]:
    """Every argument of `spec`: tensors of distinct (rows, 64) shapes, ints 1000 + i."""
    out: dict[str, Any] = {}
    for i, (name, kind, _optional) in enumerate(spec.arg_kinds):
        if kind == "tensor":
            out[name] = torch.empty((i + 1, 64), dtype=torch.float16, device="meta")
        else:
            out[name] = (i % 2 == 0) if spec.arg(name).type == "bool" else 1000 + i
    return out


def planned_ops() -> list[str]:
    return [name for name, spec in ops_fp8_moe.OPS.items() if spec.plan]


@pytest.mark.parametrize("op", planned_ops())
def test_each_plan_key_but_m_is_omitted_with_its_argument_and_only_it(op: str) -> None:
    spec = ops_fp8_moe.OPS[op]
    assert CATALOGUE.ops[op] is spec
    kwargs = arguments(spec)
    whole = derive_plan(spec, kwargs)
    assert list(whole) == [key.key for key in spec.plan]
    for key in spec.plan:
        argument = key.source.split(":")[1]
        rest = {name: value for name, value in kwargs.items() if name != argument}
        if key.key == "m":
            # The token count is every call's: without it the plan is refused.
            with pytest.raises(ValueError, match="plan key 'm' needs"):
                derive_plan(spec, rest)
            continue
        kept = {k: v for k, v in whole.items() if k != key.key}
        assert derive_plan(spec, rest) == kept, key.key


def test_the_keys_follow_their_arguments() -> None:
    # A sample of sources, literally (the whole-plan test holds the rest): the batched GEMM's
    # routed slots are the permuted rows, its experts / k / n / group the scalars so named.
    spec = ops_fp8_moe.OPS["fp8_moe_gemm_sm70_out"]
    kwargs = arguments(spec)
    rows = kwargs["sorted_input"].shape[0]
    assert derive_plan(spec, kwargs) == {
        "routed_slots": rows,
        "experts": kwargs["num_experts"],
        "k": kwargs["k"],
        "n": kwargs["n"],
        "group": kwargs["group_size"],
        "gated": kwargs["gated_silu"],
    }
