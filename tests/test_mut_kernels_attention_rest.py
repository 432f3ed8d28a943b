"""The FLASH_ATTN_V100 procedure's rules that the retained rows sample at one point only, for
the functions of `policies.v100_attention` the seventh session did not mutate (benchmarks/
mutation/kernels-attention-rest.md): the prefix-anchored window's construction refusals, the
switches the constructor freezes, the BFLA, contiguous-dense and split-KV admissions on both
sides of each threshold, the FP8 bridge's query padding, and the decode paged prefill's
entry. From docs/contracts/attention.md §1.2 (and ../shared/CONTRACTS-attention.md §1.2),
§4.4, §4.6 and §11.4 ("the bridge pads a query not a multiple of 64 when the KV length is a
multiple of 32").

Each rule is asked of a constructed `Simulation` (the engine the constructor froze) or of
`simulate` for whole forwards; the outputs compared are whole (every route and entry of the
forward, the whole frozen engine), not single keys.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from policies.v100_attention import Case, Layout, Policy, Simulation, simulate
from tests.test_v100_attention_admission_edges import built, values

FP16_PREFIX = Case("prefix", "auto", 256, 6, False, "none", "none")
ANCHOR = Case("prefix", "auto", 128, 1, False, "none", "anchor")


def fresh(case: Case = FP16_PREFIX, layout: Layout | None = None, **policy: Any) -> Simulation:
    """A constructed simulation with an empty forward to record into."""
    return built(case, layout, **policy)


def recorded(sim: Simulation) -> tuple[list[str], list[dict[str, Any]]]:
    return sim.fw.routes, sim.fw.ops


# --- the prefix-anchored window's refusals (§1.2) ---------------------------------------------


@pytest.mark.parametrize(
    ("policy", "layout", "rejected"),
    [
        # No Triton prefill with the anchor (the type and core the procedure records).
        (
            {"prefill_use_triton": True},
            Layout(),
            ("ValueError", "prefix-anchored SWA cannot use the Triton prefill"),
        ),
        # The anchor-aware decode: the decode op loaded and the scalar paged decode on; either
        # one missing refuses.
        (
            {"decode_use_scalar_paged": False},
            Layout(),
            ("RuntimeError", "requires the masked scalar paged decode extension"),
        ),
        (
            {},
            Layout(unavailable=("decode",)),
            ("RuntimeError", "requires the masked scalar paged decode extension"),
        ),
        # The anchor-aware paged prefill.
        (
            {"disable_paged_prefill": True},
            Layout(),
            ("RuntimeError", "requires the masked paged prefill extension"),
        ),
        (
            {},
            Layout(unavailable=("paged",)),
            ("RuntimeError", "requires the masked paged prefill extension"),
        ),
    ],
)
def test_the_anchor_refuses_at_construction_without_its_entries(
    policy: dict[str, Any], layout: Layout, rejected: tuple[str, str]
) -> None:
    kind, message = rejected
    # A refusal at construction: no forward started, no construction counter.
    assert simulate(ANCHOR, values(**policy), layout) == {
        "forwards": [],
        "rejected": {"type": kind, "message": message},
        "construction": [],
    }


def test_the_anchor_with_its_entries_is_constructed() -> None:
    # The other side of each refusal: the defaults load every anchor-aware entry.
    result = simulate(ANCHOR, values(), Layout())
    assert result["rejected"] is None
    assert len(result["forwards"]) == 2


# --- the switches the constructor freezes (§1.2) ----------------------------------------------


def engine(case: Case = FP16_PREFIX, layout: Layout | None = None, **policy: Any) -> dict[str, Any]:
    return dataclasses.asdict(built(case, layout, **policy).e)


@pytest.mark.parametrize(
    ("case", "switch", "field"),
    [
        # each Flash feature needs its own switch; the op being loaded does not turn it on
        (
            Case("prefix", "fp8_e4m3", 256, 6, False, "none", "none"),
            "fp8_prefill_bridge",
            "fp8_bridge",
        ),
        (
            Case("prefix", "fp8_e5m2", 256, 6, False, "none", "none"),
            "fp8_prefill_bridge",
            "fp8_bridge",
        ),
        (FP16_PREFIX, "prefill_contig_dense", "contig_dense"),
        (FP16_PREFIX, "smallq_decode_use_xqa", "smallq_xqa"),
        (FP16_PREFIX, "dflash2_grouped_verify", "grouped_verify"),
    ],
)
def test_a_switch_turned_off_turns_off_its_feature_and_nothing_else(
    case: Case, switch: str, field: str
) -> None:
    on = engine(case)
    assert on[field] is True  # the default is on, with its op loaded
    off: dict[str, Any] = {switch: False}
    assert engine(case, **off) == {**on, field: False}


def test_split_kv_needs_its_switch_and_the_paged_prefill() -> None:
    # Off by default (§1.2); on with its switch; off again without the paged prefill.
    off = engine()
    assert off["splitkv"] is False
    assert engine(prefill_split_kv=True) == {**off, "splitkv": True}
    no_paged = engine(disable_paged_prefill=True)
    assert no_paged["paged_prefill"] is False
    assert engine(prefill_split_kv=True, disable_paged_prefill=True) == no_paged
    # the contiguous dense candidate needs the paged prefill too
    assert no_paged["contig_dense"] is False and no_paged["gather_dense"] is False


def test_an_e4m3_grouped_op_declared_unavailable_is_not_loaded() -> None:
    e4m3 = Case("prefix", "fp8_e4m3", 256, 6, False, "none", "none")
    assert "grouped_e4m3" in engine(e4m3)["ops"]
    unloaded = engine(e4m3, Layout(unavailable=("grouped_e4m3",)))
    assert unloaded == {**engine(e4m3), "ops": engine(e4m3)["ops"] - {"grouped_e4m3"}}


# --- BFLA and the contiguous dense candidate per sequence (§4.6) ------------------------------

BFLA_OP = {"name": "bfla", "kv_cache_dtype": "auto", "causal": True, "window_size": [-1, -1]}
PAGED_OP = {"name": "paged", "kv_cache_dtype": "auto", "causal": True, "window_size": [-1, -1]}


@pytest.mark.parametrize(
    ("q", "seq", "policy", "takes"),
    [
        # the minimums (4096, 32768) are inclusive
        (4096, 32768, {}, True),
        (4095, 32768, {}, False),
        (4096, 32767, {}, False),
        (4096, 32768, {"bfla_min_q": 4097}, False),
        (4096, 32768, {"bfla_min_kv": 32769}, False),
        # block_n <= 0 refuses; 1 is a block
        (4096, 32768, {"bfla_mask_block_n": 0}, False),
        (4096, 32768, {"bfla_mask_block_n": 1}, True),
        (4096, 32768, {"bfla_prefill": False}, False),
    ],
)
def test_bfla_on_both_sides_of_its_minimums(
    q: int, seq: int, policy: dict[str, Any], takes: bool
) -> None:
    # FA2 off, so that a refused BFLA call falls to the plain paged entry (no counter).
    sim = fresh(**{"bfla_prefill": True, "fa2_d256_prefill": False, **policy})
    sim.sequence(q, seq, 1)
    assert recorded(sim) == ((["prefill_prefix_bfla"], [BFLA_OP]) if takes else ([], [PAGED_OP]))
    assert ["_should_use_prefill_bfla", takes] in sim.fw.checks


@pytest.mark.parametrize(
    ("q", "seq", "takes"),
    [(1536, 8192, True), (1535, 8192, False), (1536, 8191, False), (1535, 8191, False)],
)
def test_the_contiguous_dense_minimums_are_inclusive_and_both_needed(
    q: int, seq: int, takes: bool
) -> None:
    # A physically contiguous FP16 cache, FA2 off: the contiguous dense candidate (q >= 1536
    # and KV >= 8192), else the plain paged entry.
    sim = fresh(layout=Layout(contiguous_kv=True), fa2_d256_prefill=False)
    sim.sequence(q, seq, 1)
    dense = {"name": "dense", "causal": True, "window_size": [-1, -1]}
    assert recorded(sim) == (
        (["prefill_prefix_contig_dense"], [dense]) if takes else ([], [PAGED_OP])
    )


# --- the split-KV admission (§1.2 thresholds, §4.6) -------------------------------------------

SPLIT: dict[str, Any] = {"prefill_split_kv": True}


@pytest.mark.parametrize(
    ("q", "seq", "policy", "split"),
    [
        # min_q 1, max_q 2048 (inclusive), KV >= min_kv 32768 and KV > the 32768 split tokens
        (1, 32769, {}, True),
        (0, 32769, {}, False),
        (2048, 32769, {}, True),
        (2049, 32769, {}, False),
        (2048, 32768, {}, False),  # not above the split tokens
        (2, 32769, {"prefill_split_kv_max_q": 1}, False),
        (1, 32769, {"prefill_split_kv_max_q": 1}, True),
        (4096, 32769, {"prefill_split_kv_max_q": 0}, True),  # <= 0: unbounded
        (4, 32768, {"prefill_split_kv_tokens": 100}, True),  # KV at the minimum
        (4, 32767, {"prefill_split_kv_tokens": 100}, False),
        (4, 200, {"prefill_split_kv_tokens": 100, "prefill_split_kv_min_kv": 200}, True),
        (4, 100, {"prefill_split_kv_tokens": 100, "prefill_split_kv_min_kv": 100}, False),
        (8, 32769, {"prefill_split_kv_min_q": 9}, False),
        (9, 32769, {"prefill_split_kv_min_q": 9}, True),
    ],
)
def test_split_kv_on_both_sides_of_each_threshold(
    q: int, seq: int, policy: dict[str, Any], split: bool
) -> None:
    assert fresh(**SPLIT, **policy).prepare_fallback(q, seq) == (split, False)


@pytest.mark.parametrize(
    ("case", "policy"),
    [
        (FP16_PREFIX, {}),  # the switch off
        (Case("prefix", "auto", 128, 6, False, "none", "none"), SPLIT),  # D128
        (Case("prefix", "fp8_e5m2", 256, 6, False, "none", "none"), SPLIT),  # not FP16
        (Case("prefix", "auto", 256, 6, False, "none", "none", draft=True), SPLIT),  # not causal
    ],
)
def test_split_kv_needs_its_switch_d256_fp16_and_a_causal_call(
    case: Case, policy: dict[str, Any]
) -> None:
    # An admitted shape (q 1024, KV 65536) refused for each missing condition.
    split, _ = fresh(case, **policy).prepare_fallback(1024, 65536)
    assert split is False
    assert fresh(**SPLIT).prepare_fallback(1024, 65536) == (True, False)


# --- the FP8 bridge's query padding (§4.6, §11.4) ---------------------------------------------

E4M3_PREFIX = Case("prefix", "fp8_e4m3", 256, 6, False, "none", "none")
BRIDGE_OP = {"name": "bridge", "kv_cache_dtype": "fp8_e4m3"}
SPLITD = {"name": "splitd_dense", "causal": True}
FP16_PAGED = {"name": "paged", "kv_cache_dtype": "fp16", "causal": True, "window_size": [-1, -1]}
TAILPAD = "prefill_prefix_fp8_bridge_exact_dense_d256_tailpad"
EXACT = "prefill_prefix_fp8_bridge_exact_dense_d256"
E4M3_BRIDGE = "prefill_prefix_fp8_e4m3_bridge"


@pytest.mark.parametrize(
    ("q", "seq", "routes", "ops"),
    [
        # q 1025 pads to 1088 when KV is a multiple of 32 and 1088 fits in it
        (1025, 2048, [TAILPAD, E4M3_BRIDGE], [BRIDGE_OP, SPLITD]),
        (1025, 1088, [TAILPAD, E4M3_BRIDGE], [BRIDGE_OP, SPLITD]),  # the padded query = KV
        # 1088 > 1056: no padding, and 1025 is no Split-D query: the FP16 paged call
        (1025, 1056, [E4M3_BRIDGE], [BRIDGE_OP, FP16_PAGED]),
        (1025, 2049, [E4M3_BRIDGE], [BRIDGE_OP, FP16_PAGED]),  # KV not a multiple of 32
        (1088, 2048, [EXACT, E4M3_BRIDGE], [BRIDGE_OP, SPLITD]),  # exact: nothing to pad
    ],
)
def test_the_bridge_pads_the_query_to_64_when_it_fits(
    q: int, seq: int, routes: list[str], ops: list[dict[str, Any]]
) -> None:
    sim = fresh(E4M3_PREFIX)
    assert sim.fp8_bridge(q, seq) is True
    assert recorded(sim) == (routes, ops)


# --- the decode paged prefill's entry (§1.2: BHMD out on, the WMMA wrapper off) --------------


@pytest.mark.parametrize(
    ("policy", "entry"),
    [
        ({}, {"name": "paged_bhmd", "kv_cache_dtype": "auto", "causal": True}),
        (
            {"decode_use_bhmd_out": False},
            {"name": "paged", "kv_cache_dtype": "auto", "causal": True},
        ),
        ({"decode_use_wmma_wrapper": True}, {"name": "wmma", "kv_cache_dtype": "auto"}),
    ],
)
def test_the_decode_paged_prefill_takes_its_variant_entry(
    policy: dict[str, Any], entry: dict[str, Any]
) -> None:
    case = Case("decode", "auto", 128, 6, False, "none", "none")
    result = simulate(case, values(decode_use_paged_prefill=True, **policy), Layout())
    for forward in result["forwards"]:
        assert (forward["routes"], forward["ops"]) == (["decode_paged_prefill"], [entry])


def test_the_bhmd_variant_needs_its_entry_loaded() -> None:
    case = Case("decode", "auto", 128, 6, False, "none", "none")
    policy = values(decode_use_paged_prefill=True)
    result = simulate(case, policy, Layout(unavailable=("paged_bhmd",)))
    paged = {"name": "paged", "kv_cache_dtype": "auto", "causal": True}
    assert [(f["routes"], f["ops"]) for f in result["forwards"]] == [
        (["decode_paged_prefill"], [paged])
    ] * 2
    # Policy is the mapping the simulation reads; nothing else is consulted.
    assert Policy(policy).decode_use_bhmd_out is True
