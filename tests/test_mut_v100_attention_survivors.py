"""Survivors of the `policies.v100_attention` "rest" mutation run (benchmarks/mutation/
kernels-attention-rest.md, "Twelfth session"): the KV codec spellings of a trace case.

docs/contracts/attention.md §5.1: a case's codec is the engine's `kv_cache_dtype`, where
"auto" and "float16" are the FP16 cache and "fp8" is another spelling of "fp8_e4m3" (the
backend normalizes "fp8" before it reaches an entry; other spellings pass as given). So each
pair routes alike in every stage: the whole simulated case (routes, entries and their
keywords, counters) is the same, but for the `kv_cache_dtype` text of "float16".
"""

from __future__ import annotations

from typing import Any

import pytest

from policies.v100_attention import Case, Layout, simulate
from tests.test_v100_attention_admission_edges import values

STAGES = ("prefill", "prefix", "decode", "mixed")


def case(stage: str, codec: str) -> Case:
    return Case(stage, codec, 256, 6, False, "none", "none")


def spelled(result: dict[str, Any], given: str, shown: str) -> dict[str, Any]:
    """The result with each entry's `kv_cache_dtype` text `given` read as `shown`."""
    for forward in result["forwards"]:
        for op in forward["ops"]:
            if op.get("kv_cache_dtype") == given:
                op["kv_cache_dtype"] = shown
    return result


@pytest.mark.parametrize("stage", STAGES)
def test_fp8_routes_as_fp8_e4m3_and_reaches_the_entries_normalized(stage: str) -> None:
    fp8 = simulate(case(stage, "fp8"), values(), Layout())
    assert fp8 == simulate(case(stage, "fp8_e4m3"), values(), Layout())
    texts = {op.get("kv_cache_dtype") for f in fp8["forwards"] for op in f["ops"]}
    assert "fp8" not in texts
    assert ("fp8_e4m3" in texts) == (stage != "prefill")  # a prefill's dense entries take none


@pytest.mark.parametrize("stage", STAGES)
def test_float16_routes_as_auto(stage: str) -> None:
    fp16 = simulate(case(stage, "float16"), values(), Layout())
    texts = {op.get("kv_cache_dtype") for f in fp16["forwards"] for op in f["ops"]}
    assert ("float16" in texts) == (stage != "prefill")
    assert spelled(fp16, "float16", "auto") == simulate(case(stage, "auto"), values(), Layout())


@pytest.mark.parametrize("stage", STAGES)
def test_the_fp8_cache_routes_apart_from_the_fp16_one(stage: str) -> None:
    # The pairs above are not vacuous: the codec reaches the recorded forward.
    fp16 = simulate(case(stage, "auto"), values(), Layout())
    fp8 = simulate(case(stage, "fp8_e4m3"), values(), Layout())
    assert spelled(fp8, "fp8_e4m3", "auto") != fp16
