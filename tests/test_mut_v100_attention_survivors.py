"""Survivors of the `policies.v100_attention` "rest" mutation run (benchmarks/mutation/
kernels-attention-rest.md, "Twelfth session"): the KV codec spellings of a trace case; a
draft's sliding window on both sides; the draft batch's bounds on both sides.

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


@pytest.mark.parametrize("stage", STAGES)
def test_a_draft_s_sliding_window_reaches_both_sides_and_a_target_s_only_back(stage: str) -> None:
    # SWA keeps SWA_WINDOW - 1 = 31 tokens back; a draft (non-causal) pass sees as many ahead,
    # a causal one none. Decode is causal for either (one new token a step).
    def windows(draft: bool) -> set[tuple[Any, tuple[int, ...]]]:
        result = simulate(
            Case(stage, "auto", 256, 6, False, "none", "swa", draft=draft), values(), Layout()
        )
        return {
            (op.get("causal"), tuple(op["window_size"]))
            for forward in result["forwards"]
            for op in forward["ops"]
            if "window_size" in op
        }

    if stage == "decode":
        assert windows(True) == windows(False) == {(None, (31, 0))}
    else:
        assert windows(False) == {(True, (31, 0))}
        assert windows(True) == {(False, (31, 31))}


@pytest.mark.parametrize("stage", ["prefix", "mixed"])
def test_the_draft_batch_takes_two_or_more_uniform_requests_of_up_to_16_tokens(stage: str) -> None:
    def first_routes(lengths: tuple[int, ...]) -> list[str]:
        drafted = Case(stage, "auto", 256, 6, False, "none", "none", draft=True, lengths=lengths)
        return simulate(drafted, values(), Layout())["forwards"][0]["routes"]

    batch = "prefill_prefix_dflash_noncausal_batch"
    for lengths in ((2, 2), (16, 16), (16, 16, 16)):
        assert first_routes(lengths) == [batch, "prefill_prefix_flash"], lengths
    for lengths in ((17, 17), (16,), (16, 15)):
        assert first_routes(lengths) == ["prefill_prefix_flash"], lengths
    # One token a request is a decode, before the batch is asked.
    assert first_routes((1, 1)) == ["decode_xqa_paged"]
