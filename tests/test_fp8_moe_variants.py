"""The FP8 MoE single-token plan as the construction fixes it (docs/contracts/fp8moe.md §3.3),
for every listed set of W13 modes against every build: W13 `compact` if listed and its op
exists, else `indexed` under the same condition, else `active_dense`.

The category's probes list one mode beside `dense` at a time, so no retained row can tell
which of `compact` and `indexed` wins when both are listed and both ops are built: a loop
over the modes in another order passes `routectl check`. Expected values are the contract's
rule, written out case by case."""

from __future__ import annotations

import pytest

from native.catalogue import CATALOGUE
from native.kernels import fp8_moe as fm
from policies.fp8_moe import Fp8MoeOptions, variants
from routectl.replay.harness import RecordingNamespace
from tests.policy_helpers import resolve

COMPACT, INDEXED = fm.ST_COMPACT_W13_OP, fm.ST_INDEXED_W13_OP

CASES = [
    # (listed modes, ops missing from the build, the W13 plan)
    (["compact", "indexed", "dense"], (), "compact"),
    (["indexed", "compact", "dense"], (), "compact"),  # the order listed does not matter
    (["compact", "indexed", "dense"], (COMPACT,), "indexed"),
    (["compact", "indexed", "dense"], (INDEXED,), "compact"),
    (["compact", "indexed", "dense"], (COMPACT, INDEXED), "active_dense"),
    (["compact", "dense"], (), "compact"),
    (["compact", "dense"], (COMPACT,), "active_dense"),
    (["indexed", "dense"], (), "indexed"),
    (["indexed", "dense"], (INDEXED,), "active_dense"),
    (["dense"], (), "active_dense"),
    (["compact"], (), "compact"),
    (["indexed"], (COMPACT,), "indexed"),
]


@pytest.mark.parametrize(("modes", "missing", "expected"), CASES)
def test_the_single_token_w13_plan(
    modes: list[str], missing: tuple[str, ...], expected: str
) -> None:
    policy = resolve({}, {"sm70_fp8_moe": {"single_token_w13": modes}})
    chosen = variants(Fp8MoeOptions.of(policy), RecordingNamespace(CATALOGUE, remove=missing))
    assert chosen.st_w13 == expected
    assert chosen.flags()["single_token_w13"] == expected
