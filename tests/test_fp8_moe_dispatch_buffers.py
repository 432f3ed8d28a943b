"""What each FP8 MoE dispatch hands its ops beyond the recorded plan (docs/contracts/fp8moe.md
§4.4 and §5.1): the index buffers' shapes and dtypes (expert offsets E+1 in int32, the
unpermute's first-token offsets E+1 in int64, top_k+1 of them on the not-batched single-token
lane, none after the monolithic op, the inverse index over the routed slots), the token count
scalars, and the M a missing op's error names on every lane. The plans (`routectl::`
catalogue) keep only scalars, so a buffer of the wrong length passes the replay; the native
kernels would read past it. Expected values are literals from the contract for the 35B-A3B
layer at TP4 (E 256, top-k 8, H 2048, I 128)."""

from __future__ import annotations

from typing import Any

import pytest

from native.catalogue import CATALOGUE
from policies.categories.fp8_moe import FP8_MOE_CATEGORY, QWEN36_35B, call_inputs
from policies.fp8_moe import load_fp8_moe, select_fp8_moe
from routectl.errors import SelectionError
from routectl.replay.harness import RecordingNamespace
from routectl.workload import Hardware
from tests.policy_helpers import resolve

BASE = "35b_a3b_fp8/fp8_e4m3/tp4/none/c8/q8192"
E, TOP_K, H, INTER = 256, 8, 2048, 128
PREFIX = "model.layers.0.mlp.experts"
DECOMPOSED = {"VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_DECOMPOSED": "1"}
NATIVE_UNPERMUTE = {"VLLM_SM70_FP8_MOE_LEGACY_SINGLE_TOKEN_COMPACT_NATIVE_UNPERMUTE": "1"}
NOT_BATCHED = {"VLLM_SM70_FP8_MOE_BATCHED_GEMM": "0"}
# Not batched, the reduce through moe_unpermute (both weighted-reduce inputs off).
ST_UNPERMUTE = {**NOT_BATCHED, "VLLM_SM70_MOE_SINGLE_TOKEN_UNPERMUTE_FASTPATH": "0"}


DEVICES: set[str] = set()  # every device a logged argument was on (cleared per log)


class ArgumentLog:
    """A recording namespace that also keeps every call's arguments: a tensor as its shape
    and dtype, anything else as it is (the namespace is injected, as the engine does)."""

    def __init__(self, inner: RecordingNamespace) -> None:
        self._inner = inner
        self.calls: list[tuple[str, dict[str, Any]]] = []
        DEVICES.clear()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _keep(self, op: str, kwargs: dict[str, Any]) -> None:
        self.calls.append((op, {k: _described(v) for k, v in kwargs.items()}))

    def call(self, op: str, /, **kwargs: Any) -> Any:
        self._keep(op, kwargs)
        return self._inner.call(op, **kwargs)

    def call_repeated(self, op: str, times: int, /, **kwargs: Any) -> Any:
        self._keep(op, kwargs)
        return self._inner.call_repeated(op, times, **kwargs)

    def args(self, op: str) -> list[dict[str, Any]]:
        return [kwargs for name, kwargs in self.calls if name == op]


def _described(value: Any) -> Any:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        # A shape holds integers (a float would be a halved size, `/` for `//`), and every
        # buffer stays on the checkpoint's device (meta in replay).
        assert all(type(d) is int for d in value.shape), value.shape
        DEVICES.add(str(value.device))
        return (tuple(value.shape), str(value.dtype).removeprefix("torch."))
    if isinstance(value, list):
        return [_described(v) for v in value]
    return value


def _engine() -> Any:
    return next(r for r in FP8_MOE_CATEGORY.rows() if r.id == BASE).engine


def dispatched(m: int, env: dict[str, str] | None = None, remove: tuple[str, ...] = ()) -> Any:
    ns = ArgumentLog(RecordingNamespace(CATALOGUE, remove=remove))
    layer = load_fp8_moe(QWEN36_35B, resolve(env or {}), Hardware(70), _engine(), ns)
    ns.calls.clear()
    layer.apply(*call_inputs(m, layer.state["layer"]))
    return ns, layer


def test_preparation_hands_each_bank_fp8_codes_and_fp32_block_scales():
    # §4.1: each expert's W13 (n 2I, k H) and W2 (n H, k I), 128-blocks of scales.
    ns = ArgumentLog(RecordingNamespace(CATALOGUE))
    load_fp8_moe(QWEN36_35B, resolve({}), Hardware(70), _engine(), ns)
    prepares = ns.args("fp8_sm70_prepare")
    assert [(p["weight"], p["weight_scale"]) for p in prepares] == [
        (((2 * INTER, H), "float8_e4m3fn"), ((2, 16), "float32")),
        (((H, INTER), "float8_e4m3fn"), ((16, 1), "float32")),
    ]
    assert [p["group_size"] for p in prepares] == [128, 128]


@pytest.mark.parametrize("m", [2, 40])
def test_the_routed_lane_sizes_its_index_buffers_by_experts_and_slots(m):
    ns, _ = dispatched(m)
    slots = m * TOP_K
    (permute,) = ns.args("moe_permute_with_scratch")
    assert permute["expert_offsets"] == ((E + 1,), "int32")
    assert permute["permuted_idx"] == permute["inv_permuted_idx"] == ((slots,), "int32")
    assert permute["permuted_input"] == ((slots, H), "float16")
    assert (permute["num_tokens"], permute["total_slots"], permute["num_experts"]) == (m, slots, E)
    gemms = ns.args("fp8_moe_gemm_sm70_out")
    assert [g["expert_offsets"] for g in gemms] == [((E + 1,), "int32")] * 2
    # W13 k = H, n = 2I; then SiLU halves it; W2 k = I, n = H (§5.2).
    assert [g["out"] for g in gemms] == [((slots, 2 * INTER), "float16"), ((slots, H), "float16")]
    (silu,) = ns.args("silu_and_mul")
    assert silu["input"] == ((slots, 2 * INTER), "float16")
    assert silu["result"] == ((slots, INTER), "float16")
    (unpermute,) = ns.args("moe_unpermute")
    assert unpermute["expert_first_token_offset"] == ((E + 1,), "int64")
    assert unpermute["inv_permuted_idx"] == ((slots,), "int32")
    assert unpermute["permuted_hidden_states"] == ((slots, H), "float16")
    assert unpermute["hidden_states"] == ((m, H), "float16")
    assert DEVICES == {"meta"}


def test_the_monolithic_op_then_unpermute_passes_no_offsets():
    # §5.1: with compact_native_unpermute, a moe_unpermute without offsets into the output.
    ns, _ = dispatched(1, NATIVE_UNPERMUTE)
    (unpermute,) = ns.args("moe_unpermute")
    assert unpermute["expert_first_token_offset"] is None
    assert unpermute["inv_permuted_idx"] == ((TOP_K,), "int32")
    assert unpermute["permuted_hidden_states"] == ((TOP_K, H), "float16")
    assert unpermute["topk"] == TOP_K


def test_the_decomposed_m1_lane_sizes_its_exact_layout_buffers():
    ns, _ = dispatched(1, DECOMPOSED)
    (prepare,) = ns.args("awq_moe_single_token_exact_layout_prepare")
    assert prepare["expert_offsets"] == ((E + 1,), "int32")
    assert prepare["sorted_ids"] == ((TOP_K,), "int32")
    assert (prepare["num_experts"], prepare["num_tokens"]) == (E, 1)
    (unpermute,) = ns.args("moe_unpermute")
    assert unpermute["expert_first_token_offset"] == ((E + 1,), "int64")
    assert unpermute["inv_permuted_idx"] == ((TOP_K,), "int32")


def test_the_single_token_weighted_reduce_is_one_token_over_top_k_slots():
    ns, _ = dispatched(1, NOT_BATCHED)
    (reduce,) = ns.args("awq_moe_single_token_weighted_reduce_out")
    assert (reduce["num_tokens"], reduce["total_slots"]) == (1, TOP_K)
    assert reduce["input"] == ((TOP_K, H), "float16")


def test_the_single_token_unpermute_reads_the_first_top_k_plus_one_offsets():
    # §5.1, M = 1 not batched: the reduce through moe_unpermute gets the first top_k + 1 of
    # the E + 1 int64 offsets (one token's routes fill the only slots), not all E + 1.
    ns, _ = dispatched(1, ST_UNPERMUTE)
    (unpermute,) = ns.args("moe_unpermute")
    assert unpermute["expert_first_token_offset"] == ((TOP_K + 1,), "int64")
    assert unpermute["inv_permuted_idx"] == ((TOP_K,), "int32")
    assert unpermute["permuted_hidden_states"] == ((TOP_K, H), "float16")
    assert unpermute["hidden_states"] == ((1, H), "float16")
    assert unpermute["topk"] == TOP_K


# §6 item 5: a stage op the construction does not check fails at the first call that needs
# it, naming M, on each lane (an op the construction checks is never called missing: the lane
# falls back, §3.3).
PLAIN_PERMUTE = {"VLLM_SM70_FP8_MOE_PERMUTE_WITH_SCRATCH": "0"}
MISSING = [
    ("awq_moe_single_token_exact_layout_prepare", DECOMPOSED, 1),
    ("fp8_moe_gemm_sm70_out", DECOMPOSED, 1),
    ("silu_and_mul", DECOMPOSED, 1),
    ("moe_unpermute", DECOMPOSED, 1),
    ("moe_unpermute", NATIVE_UNPERMUTE, 1),
    ("silu_and_mul", NOT_BATCHED, 1),
    ("moe_unpermute", ST_UNPERMUTE, 1),
    ("moe_permute", PLAIN_PERMUTE, 2),
    ("silu_and_mul", {}, 2),
]


@pytest.mark.parametrize(("op", "env", "m"), MISSING)
def test_a_missing_op_names_the_token_count_of_its_lane(op, env, m):
    ns = RecordingNamespace(CATALOGUE, remove=(op,))
    layer = load_fp8_moe(QWEN36_35B, resolve(env), Hardware(70), _engine(), ns)
    for earlier in range(1, m):
        layer.apply(*call_inputs(earlier, layer.state["layer"]))
    with pytest.raises(SelectionError) as info:
        layer.apply(*call_inputs(m, layer.state["layer"]))
    assert info.value.code == "missing_native_ops"
    assert info.value.message == (
        f"{PREFIX}: SM70 TurboMind op _C::{op} is not available (dispatch, M {m})"
    )


# --- selection (docs/contracts/fp8moe.md §2.1) ----------------------------------------------


def test_an_ignored_layer_is_unquantized_without_a_kernel():
    desc = {**QWEN36_35B, "ignored": True}
    ns = RecordingNamespace(CATALOGUE)
    decision = select_fp8_moe(desc, resolve({}), Hardware(70), _engine(), ns)
    assert decision.kernel is None and decision.capability == 70
    assert decision.status is not None and decision.status[0] == "unquantized"
    assert "ignored" in decision.status[1]
    # TurboMind's own verdict is still recorded (it would have served the layer).
    assert [(v.name, v.ok) for v in decision.selection.verdicts] == [("TurboMindFp8MoE", True)]
    loaded = load_fp8_moe(desc, resolve({}), Hardware(70), _engine(), ns)
    assert loaded.decision.status == decision.status and loaded.resident == {}
    assert ns.calls == []


def test_turbomind_off_is_a_policy_decision_and_capability_75_a_fallback():
    # selection.FALLBACK_STAGES: a policy rejection is a decision; the startup report prints
    # the stage of each verdict.
    ns = RecordingNamespace(CATALOGUE)
    off = select_fp8_moe(
        QWEN36_35B, resolve({}, {"sm70_fp8": {"enabled": False}}), Hardware(70), _engine(), ns
    )
    (verdict,) = off.selection.verdicts
    assert (verdict.ok, verdict.code, verdict.stage) == (False, "turbomind_off", "policy")
    assert off.selection.fallback is False
    turing = select_fp8_moe(QWEN36_35B, resolve({}), Hardware(75), _engine(), ns)
    (verdict,) = turing.selection.verdicts
    assert (verdict.ok, verdict.stage) == (False, "capability")
    assert turing.selection.fallback is True


def test_moe_dequant_without_the_dequant_fallback_is_another_backend():
    # §2.1: TurboMind off, moe_dequant_fallback on but dequant_fallback off: the generic
    # backend oracle serves the layer (nothing is dequantized here).
    config = {
        "sm70_fp8": {"enabled": False, "moe_dequant_fallback": True, "dequant_fallback": False}
    }
    ns = RecordingNamespace(CATALOGUE)
    decision = select_fp8_moe(QWEN36_35B, resolve({}, config), Hardware(70), _engine(), ns)
    assert decision.kernel is None and decision.capability == 70
    assert decision.status is not None and decision.status[0] == "other_backend"
    assert "sm70_fp8.dequant_fallback is false" in decision.status[1]
    assert [v.code for v in decision.selection.verdicts] == ["turbomind_off"]
    loaded = load_fp8_moe(QWEN36_35B, resolve({}, config), Hardware(70), _engine(), ns)
    assert loaded.resident == {} and ns.calls == []


def test_a_dequant_fallback_describes_its_fp16_banks_on_meta():
    config = {
        "sm70_fp8": {"enabled": False, "moe_dequant_fallback": True, "dequant_fallback": True}
    }
    loaded = load_fp8_moe(
        QWEN36_35B, resolve({}, config), Hardware(70), _engine(), RecordingNamespace(CATALOGUE)
    )
    assert loaded.decision.status is not None and loaded.decision.status[0] == "dequant_fallback"
    # §4.4: twice the FP8 code bytes, E x 3 x H x I in all (TP4: I 128).
    assert {k: (tuple(t.shape), str(t.device)) for k, t in loaded.resident.items()} == {
        "w13_fp16": ((2 * E * H * 2 * INTER,), "meta"),
        "w2_fp16": ((2 * E * INTER * H,), "meta"),
    }


# A small layer whose banks fit in host memory: what the engine loads from a real checkpoint.
SMALL = {**QWEN36_35B, "experts": 4, "top_k": 2, "hidden": 256, "local_intermediate": 128}


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_every_tensor_the_load_makes_is_on_the_checkpoints_device(device):
    import torch

    tensors = {"w13": torch.empty((4, 256, 256), dtype=torch.float8_e4m3fn, device=device)}
    ns = ArgumentLog(RecordingNamespace(CATALOGUE))
    loaded = load_fp8_moe(SMALL, resolve({}), Hardware(70), _engine(), ns, tensors=tensors)
    assert DEVICES == {device}
    assert {str(t.device) for t in loaded.resident.values()} == {device}
    # A routed call on that device allocates its buffers there (a real device refuses a
    # size that is not an integer, where meta's shared tensors would not tell).
    m, top_k = 2, SMALL["top_k"]
    x = torch.empty((m, SMALL["hidden"]), dtype=torch.float16, device=device)
    ids = torch.empty((m, top_k), dtype=torch.int32, device=device)
    weights = torch.empty((m, top_k), dtype=torch.float32, device=device)
    out = loaded.apply(x, ids, weights)
    assert (tuple(out.shape), str(out.device)) == ((m, SMALL["hidden"]), device)
    # Without a checkpoint (replay), everything is on meta.
    ns = ArgumentLog(RecordingNamespace(CATALOGUE))
    loaded = load_fp8_moe(SMALL, resolve({}), Hardware(70), _engine(), ns)
    assert DEVICES == {"meta"}
    assert {str(t.device) for t in loaded.resident.values()} == {"meta"}


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_a_dequant_fallback_makes_its_fp16_banks_on_the_checkpoints_device(device):
    import torch

    config = {
        "sm70_fp8": {"enabled": False, "moe_dequant_fallback": True, "dequant_fallback": True}
    }
    tensors = {"w13": torch.empty((4, 256, 256), dtype=torch.float8_e4m3fn, device=device)}
    loaded = load_fp8_moe(
        SMALL, resolve({}, config), Hardware(70), _engine(), RecordingNamespace(CATALOGUE),
        tensors=tensors,
    )  # fmt: skip
    assert loaded.decision.status is not None and loaded.decision.status[0] == "dequant_fallback"
    assert sorted(loaded.resident) == ["w13_fp16", "w2_fp16"]
    assert {str(t.device) for t in loaded.resident.values()} == {device}


def test_a_layer_never_called_has_no_last_call_for_the_startup_report():
    from policies.fp8_moe_loader import FP8_MOE_LOADER

    loaded = load_fp8_moe(
        QWEN36_35B, resolve({}), Hardware(70), _engine(), RecordingNamespace(CATALOGUE)
    )
    assert FP8_MOE_LOADER.last_call is not None
    assert FP8_MOE_LOADER.last_call(loaded) is None
    loaded.apply(*call_inputs(2, loaded.state["layer"]))
    assert FP8_MOE_LOADER.last_call(loaded) == {
        "stages": [
            "lane=routed",
            "w13=batched",
            "w2=batched",
            "reduce=unpermute",
            "buffers=persistent",
        ],
        "rejected": [],
    }
