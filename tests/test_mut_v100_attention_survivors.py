"""Survivors of the `policies.v100_attention` "rest" mutation run (benchmarks/mutation/
kernels-attention-rest.md, "Twelfth session" and "Thirteenth session"): the KV codec
spellings of a trace case; a draft's sliding window on both sides; the draft batch's bounds
on both sides; then the rules the trace's shapes never vary, each on both sides (the Split-D
wrapper's conditions and the Q8000 and Q8192 windows, the verifier and decode-row bounds, the
hints and facts handed to the XQA and grouped admissions, the split-KV counter of each
preferred prefix route, whole pages in the capacities).

docs/contracts/attention.md §5.1: a case's codec is the engine's `kv_cache_dtype`, where
"auto" and "float16" are the FP16 cache and "fp8" is another spelling of "fp8_e4m3" (the
backend normalizes "fp8" before it reaches an entry; other spellings pass as given). So each
pair routes alike in every stage: the whole simulated case (routes, entries and their
keywords, counters) is the same, but for the `kv_cache_dtype` text of "float16".
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from policies.v100_attention import Case, Layout, Policy, simulate
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


# --- the thirteenth session: the 121 left open ----------------------------------------------
# Each test below names the rule it holds; benchmarks/mutation/kernels-attention-rest.md
# ("Thirteenth session") lists the mutants it kills and why the others are equivalent.

FP16_VERIFY = Case("prefix", "auto", 256, 6, False, "mtp", "none")
E4M3_VERIFY = Case("prefix", "fp8_e4m3", 256, 6, False, "mtp", "none")


def first(case: Case, layout: Layout | None = None, **policy: Any) -> dict[str, Any]:
    """The first forward of `case` under the section's defaults with `policy` changed."""
    result = simulate(case, values(**policy), layout or Layout())
    assert result["rejected"] is None, result["rejected"]
    forward: dict[str, Any] = result["forwards"][0]
    return forward


def names(forward: dict[str, Any]) -> list[str]:
    return [op["name"] for op in forward["ops"]]


def verdict(forward: dict[str, Any], route: str) -> str | None:
    (code,) = [code for name, code in forward["verdicts"] if name == route]
    return code


def test_an_unknown_policy_field_is_named_in_the_error() -> None:
    with pytest.raises(AttributeError) as caught:
        _ = Policy(values()).no_such_field
    assert caught.value.args == ("no_such_field",)


@pytest.mark.parametrize(("draft", "window"), [(False, [31, 0]), (True, [31, 31])])
def test_the_triton_prefill_s_sliding_window_follows_the_pass_s_causality(
    draft: bool, window: list[int]
) -> None:
    case = Case("prefill", "auto", 256, 6, False, "none", "swa", draft=draft)
    forward = first(case, prefill_use_triton=True)
    assert forward["ops"] == [
        {"name": "triton_unified", "causal": not draft, "window_size": window}
    ]


def test_a_decode_of_unequal_rows_through_the_paged_prefill_calls_once_a_sequence() -> None:
    case = Case("decode", "fp8_e4m3", 256, 6, False, "none", "none", lengths=(1, 0))
    forward = first(case, decode_use_paged_prefill=True)
    paged = {"name": "paged", "kv_cache_dtype": "fp8_e4m3", "causal": True}
    assert forward["ops"] == [paged, paged]
    assert forward["routes"][-1] == "decode_paged_prefill"


# The Split-D D256 wrapper's admission (§4.5), each conjunct alone on its failing side.
DENSE_1024 = Case("prefill", "auto", 256, 6, False, "none", "none", qlen=1024)


@pytest.mark.parametrize(
    ("case", "policy", "taken"),
    [
        (DENSE_1024, {}, True),
        (DENSE_1024, {"fa2_d256_prefill": False}, False),
        (replace(DENSE_1024, head=128), {}, False),
        (replace(DENSE_1024, draft=True), {}, False),
        (replace(DENSE_1024, mask="swa"), {}, False),
    ],
)
def test_the_split_d_wrapper_needs_each_of_its_conditions(
    case: Case, policy: dict[str, Any], taken: bool
) -> None:
    forward = first(case, **policy)
    assert ("splitd_dense" in names(forward)) is taken
    assert ("prefill_dense_splitd_d256" in forward["routes"]) is taken


CONTIG_64 = Case("prefix", "auto", 256, 6, False, "none", "none", qlen=64, contiguous_kv=True)
CONTIG_64_POLICY = {
    "prefill_d256_gqa_v37": True,
    "prefill_contig_dense_min_q": 64,
    "prefill_contig_dense_min_kv": 64,
}


def test_below_1024_the_wrapper_opens_for_the_v37_architecture_entry_from_64_rows() -> None:
    # q = 64 is the v37 family's lower bound (and the wrapper's); kv = 64 + 64 exceeds it.
    forward = first(CONTIG_64, Layout(present=("arch",)), **CONTIG_64_POLICY)
    assert forward["ops"] == [{"name": "arch", "causal": True}]
    assert forward["routes"][:3] == [
        "prefill_dense_d256_gqa_arch_long",
        "prefill_dense_d256_gqa_v37",
        "prefill_prefix_contig_dense_fa2_d256",
    ]
    # Without the entry loaded the wrapper stays shut: no Split-D call below 1024.
    forward = first(CONTIG_64, Layout(), **CONTIG_64_POLICY)
    assert names(forward) == ["dense"]
    assert forward["routes"][0] == "prefill_prefix_contig_dense"


@pytest.mark.parametrize(("page", "taken"), [(16, True), (24, False), (32, True), (40, False)])
def test_the_paged_split_d_form_needs_pages_of_a_multiple_of_16(page: int, taken: bool) -> None:
    forward = first(Case("prefix", "auto", 256, 6, False, "none", "none", qlen=1024, page=page))
    assert ("splitd_paged" in names(forward)) is taken


# The Q8000 core: 8000 <= q <= 8192 needs only KV % 32 in the dense form, never in the paged.
def test_the_q8000_core_takes_a_dense_query_that_is_not_a_multiple_of_64() -> None:
    forward = first(replace(DENSE_1024, qlen=8032), Layout(present=("arch",)))
    assert forward["ops"] == [
        {"name": "arch", "causal": True},
        {"name": "splitd_dense", "causal": True},  # the leading fringe
    ]
    assert "prefill_dense_d256_gqa_79t_fp32_fringe_fallback" in forward["routes"]


@pytest.mark.parametrize(("q", "taken"), [(8032, False), (8064, True)])
def test_the_paged_form_keeps_the_64_row_rule_inside_the_q8000_window(q: int, taken: bool) -> None:
    case = Case("prefix", "auto", 256, 6, False, "none", "none", qlen=q)
    forward = first(case, prefill_gather_dense=False)
    assert ("splitd_paged" in names(forward)) is taken


def test_the_q8192_specialization_starts_above_8000_rows() -> None:
    both = Layout(present=("arch", "arch_q8192"))
    at_8000 = first(replace(DENSE_1024, qlen=8000), both)
    assert at_8000["ops"] == [{"name": "arch", "causal": True}]
    contig = Case("prefix", "auto", 256, 6, False, "none", "none", qlen=8001, contiguous_kv=True)
    above = first(contig, replace(both, seq_extra=63))  # kv = 8064, a multiple of 32
    assert above["ops"] == [{"name": "arch_q8192", "causal": True}]
    assert above["routes"][2:4] == [
        "prefill_dense_d256_gqa_79t_fp32_q8192",
        "prefill_dense_d256_gqa_79t_fp32_q8192_pad",
    ]
    # Without the specialization, 8001 rows already take the fringe.
    fringe = first(contig, Layout(present=("arch",), seq_extra=63))
    assert names(fringe) == ["arch", "splitd_dense"]
    assert "prefill_dense_d256_gqa_79t_fp32_fringe_fallback" in fringe["routes"]


def test_the_draft_batch_sees_its_sliding_window_on_both_sides() -> None:
    case = Case("prefix", "auto", 256, 6, False, "none", "swa", lengths=(4, 4), draft=True)
    forward = first(case)
    assert forward["ops"] == [
        {"name": "paged", "kv_cache_dtype": "auto", "causal": False, "window_size": [31, 31]}
    ]


@pytest.mark.parametrize(
    ("cap", "model_len", "smallq"),
    [(0, 131072, True), (1, 131072, False), (4096, 4096, True), (4096, 4097, False)],
)
def test_the_verifier_batch_keeps_the_model_length_cap_inclusive(
    cap: int, model_len: int, smallq: bool
) -> None:
    forward = first(FP16_VERIFY, Layout(max_model_len=model_len), smallq_decode_max_model_len=cap)
    assert any(r.startswith("prefill_smallq_") for r in forward["routes"]) is smallq


@pytest.mark.parametrize(
    ("lengths", "policy", "rows"),
    [
        ((32, 1), {}, True),  # two requests
        ((4,), {"smallq_decode_max_model_len": 1}, False),  # one request: never decode rows
        ((32, 16), {}, True),  # a request of exactly the small-query cap
        ((32, 2), {"smallq_decode_max_q": 1}, False),  # above a cap of 1
        ((32, 1), {"smallq_decode_max_q": 1}, True),
    ],
)
def test_the_mixed_decode_rows_take_two_or_more_requests_up_to_the_cap(
    lengths: tuple[int, ...], policy: dict[str, Any], rows: bool
) -> None:
    forward = first(Case("mixed", "auto", 256, 6, False, "none", "none", lengths=lengths), **policy)
    assert ("prefill_prefix_decode_rows_xqa" in forward["routes"]) is rows


def test_the_mixed_gqa4_rows_give_xqa_the_longest_chosen_sequence() -> None:
    # GQA 4 needs a hint of at least decode_xqa_q4_min_seq_len (32768): the rows' own maximum.
    case = Case("mixed", "auto", 256, 4, False, "none", "none", lengths=(32, 1))
    assert verdict(first(case, Layout(seq_extra=40000)), "prefill_prefix_decode_rows_xqa") is None
    short = first(case, Layout(seq_extra=30000))
    assert verdict(short, "prefill_prefix_decode_rows_xqa") == "short_gqa4"


def test_the_mixed_g6_rows_carry_the_partition_hint() -> None:
    case = Case("mixed", "auto", 256, 6, False, "none", "none", lengths=(32, 1), page=784)
    assert first(case)["ops"][0] == {
        "name": "xqa",
        "kv_cache_dtype": "auto",
        "window_size": [-1, -1],
        "partition_size_hint": 256,
        "batch_context_routing": True,
    }


def test_a_captured_verifier_reads_its_workspace_capacity() -> None:
    # Under capture the live maximum shows through the workspace capacity even when the
    # builder's hint is short: min(blocks * page, live) = 5004 >= 4096.
    captured = replace(FP16_VERIFY, capture=True)
    forward = first(captured, Layout(seq_extra=5000, smallq_max_seq_len_hint=1))
    assert verdict(forward, "prefill_smallq_decode_xqa") is None
    assert (
        verdict(
            first(FP16_VERIFY, Layout(seq_extra=5000, smallq_max_seq_len_hint=1)),
            "prefill_smallq_decode_xqa",
        )
        == "short_verify"
    )


@pytest.mark.parametrize(
    ("case", "route"),
    [
        (replace(FP16_VERIFY, page=832), "prefill_smallq_fp16_grouped_fp32"),
        (E4M3_VERIFY, "prefill_smallq_e4m3_grouped_fp32"),
    ],
)
def test_a_partition_hint_turns_the_grouped_and_xqa_verifiers_away(case: Case, route: str) -> None:
    assert verdict(first(case), route) is None
    hinted = first(case, Layout(smallq_partition_hint=256))
    assert verdict(hinted, route) == "decode_policy"
    assert verdict(hinted, "prefill_smallq_decode_xqa") == "partition_or_window"
    assert hinted["routes"][-2] == "prefill_smallq_decode_scalar"


def test_the_e4m3_grouped_verifier_reads_the_batch_revision_and_the_xqa_switch() -> None:
    two = replace(E4M3_VERIFY, lengths=(8, 8))
    route = "prefill_smallq_e4m3_grouped_fp32"
    assert verdict(first(two), route) == "operator_batch_revision"
    assert verdict(first(two, Layout(grouped_e4m3_batch_revision=6)), route) is None
    assert verdict(first(E4M3_VERIFY, smallq_decode_use_xqa=False), route) == "decode_policy"


MIXED_E4M3 = Case("mixed", "fp8_e4m3", 256, 6, False, "none", "none", lengths=(32, 4, 4))
REVISED = Layout(grouped_e4m3_batch_revision=6)


@pytest.mark.parametrize(
    ("layout", "policy", "code"),
    [
        (REVISED, {}, None),
        (REVISED, {"decode_partition_size": 256}, "decode_policy"),
        (REVISED, {"smallq_decode_use_xqa": False}, "decode_policy"),
        (replace(REVISED, query_layout_ok=False), {}, "query_or_output_layout"),
        (replace(REVISED, output_shape_ok=False), {}, "output_shape"),
        (replace(REVISED, aligned=False), {}, "kv_layout"),
        (replace(REVISED, metadata_layout_ok=False), {}, "metadata_layout"),
    ],
)
def test_the_mixed_e4m3_rows_hand_the_grouped_admission_every_fact(
    layout: Layout, policy: dict[str, Any], code: str | None
) -> None:
    forward = first(MIXED_E4M3, layout, e4m3_batch_xqa=False, **policy)
    assert verdict(forward, "prefill_prefix_decode_rows_e4m3_grouped_fp32") == code
    grouped = "prefill_prefix_decode_rows_e4m3_grouped_fp32" in forward["routes"]
    assert grouped is (code is None)


# Each preferred prefix route still asks the split-KV and bridge rules first (their counters).
SPLIT = {"prefill_split_kv": True}
LONG = Layout(seq_extra=40000)


@pytest.mark.parametrize(
    ("case", "policy", "route"),
    [
        (
            replace(DENSE_1024, stage="prefix"),
            {"bfla_prefill": True, "bfla_min_q": 1024},
            "prefill_prefix_bfla",
        ),
        (
            replace(DENSE_1024, stage="prefix", contiguous_kv=True),
            {},
            "prefill_prefix_contig_splitd_d256",
        ),
        (
            replace(DENSE_1024, stage="prefix", qlen=2048),
            {"fa2_d256_prefill": False, "prefill_contig_dense_allow_copy": True},
            "prefill_prefix_contig_dense_bhmd",
        ),
        (
            replace(DENSE_1024, stage="prefix", qlen=2048, contiguous_kv=True),
            {"fa2_d256_prefill": False},
            "prefill_prefix_contig_dense",
        ),
    ],
)
def test_the_preferred_prefix_routes_count_the_split_kv_rule_on_their_shape(
    case: Case, policy: dict[str, Any], route: str
) -> None:
    forward = first(case, LONG, **SPLIT, **policy)
    assert route in forward["routes"]
    assert ["_should_use_prefill_splitkv", True] in forward["checks"]
    # The same call past the split rule's maximum query counts it False.
    over = first(case, LONG, **SPLIT, **policy, prefill_split_kv_max_q=case.query_len - 1)
    assert ["_should_use_prefill_splitkv", False] in over["checks"]


@pytest.mark.parametrize(
    ("page", "seq", "code"),
    [(48, 266208, None), (48, 266240, "context_capacity"), (16, 266240, None)],
)
def test_the_grouped_context_capacity_counts_whole_pages(
    page: int, seq: int, code: str | None
) -> None:
    # 266240 tokens fill 5547 pages of 48 (266256 slots): past the 266240 the kernel holds.
    case = replace(E4M3_VERIFY, page=page, spec="dflash2")
    forward = first(case, Layout(seq_extra=seq - 4))
    assert verdict(forward, "prefill_smallq_e4m3_grouped_fp32") == code


@pytest.mark.parametrize("seq", [1728, 2048, 3168])
def test_the_bridge_s_paged_form_takes_a_context_that_ends_inside_a_page(seq: int) -> None:
    # With the dense form declining, the FP8 bridge's paged form (pages of 784) must take
    # every context that fits its pages, here a partly filled last page.
    case = Case("prefix", "fp8_e4m3", 256, 6, False, "none", "none", qlen=1024)
    forward = first(case, Layout(seq_extra=seq - 1024, declines=("splitd_dense",)))
    assert names(forward) == ["bridge", "splitd_dense", "splitd_paged"]
    assert "prefill_prefix_fp8_bridge_exact_d256" in forward["routes"]
