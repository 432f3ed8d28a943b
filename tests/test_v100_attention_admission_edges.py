"""The FLASH_ATTN_V100 procedure's admission rules at both sides of each bound
(docs/contracts/attention.md §4.4-4.6): the D256 GQA6 architecture entry's window (the v37
family and the Q8000 core), the split-KV3 kernel's, and the others the category's rows
sample at one point only. Each rule is asked directly of a constructed simulation (the
engine the constructor froze, no forward run), with the shape named by the contract.
Written for the mutation run of issue 28 (benchmarks/MUTATION.md, seventh session): the
retained rows hold these rules at the trace's shapes, which mostly sit far from the bounds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from native.kernels.v100_attention import XqaThresholds
from policies.v100_attention import Case, Layout, Policy, Simulation, simulate
from policies.v100_attention_variables import V100_ATTENTION_FIELDS

FP16_PREFILL = Case("prefill", "auto", 256, 6, False, "none", "none")


def values(**changes: Any) -> dict[str, Any]:
    """The section's defaults, with the given changes."""
    out: dict[str, Any] = {f.name: f.default for f in V100_ATTENTION_FIELDS}
    assert not set(changes) - set(out), changes
    out.update(changes)
    return out


def built(case: Case = FP16_PREFILL, layout: Layout | None = None, **policy: Any) -> Simulation:
    """A simulation whose engine is constructed (what the constructor froze)."""
    sim = Simulation(case, Policy(values(**policy)), layout or Layout())
    sim.construct()
    return sim


ARCH = Layout(present=("arch",))

# --- the architecture entry (§4.5) ----------------------------------------------------------

# The v37 family: 64 <= q <= 8192, q % 64 == 0, q < kv <= 262144, kv % 32 == 0.
V37_EDGES = [
    (64, 96, True),
    (8192, 8224, True),
    (64, 262144, True),
    (64, 64, False),  # KV must exceed q
    (96, 128, False),  # q % 64
    (64, 80, False),  # kv % 32
    (64, 262176, False),  # past the KV bound
    (8256, 8288, False),  # past the q bound
]


@pytest.mark.parametrize(("q", "kv", "admitted"), V37_EDGES)
def test_the_v37_architecture_window_on_both_sides(q, kv, admitted):
    assert built(layout=ARCH, prefill_d256_gqa_v37=True).arch_admits(q, kv) is admitted


# The Q8000 core (v37 off): 8000 <= q <= 8192, q <= kv <= 262144, kv % 32 == 0.
CORE_EDGES = [
    (8000, 8000, True),  # KV may equal q here
    (8192, 262144, True),
    (8100, 8128, True),  # no q % 64 rule
    (7999, 8000, False),
    (8193, 8224, False),
    (4096, 8192, False),
    (8000, 8016, False),  # kv % 32
    (8000, 262176, False),
]


@pytest.mark.parametrize(("q", "kv", "admitted"), CORE_EDGES)
def test_the_q8000_core_window_on_both_sides(q, kv, admitted):
    assert built(layout=ARCH).arch_admits(q, kv) is admitted


def test_the_architecture_entry_needs_gqa6_over_the_kv_heads_it_has():
    # Two KV heads of twelve query heads are GQA 6; none at all is no shape.
    assert built(layout=Layout(present=("arch",), kv_heads=2)).arch_admits(8000, 8000) is True
    assert built(layout=Layout(present=("arch",), kv_heads=0)).arch_admits(8000, 8000) is False
    eight = Case("prefill", "auto", 256, 8, False, "none", "none")
    assert built(eight, ARCH).arch_admits(8000, 8000) is False
    assert (
        built(layout=ARCH, prefill_d256_gqa_arch_128k_experimental=False).arch_admits(8000, 8000)
        is False
    )


# --- the split-KV3 kernel (§4.5) --------------------------------------------------------------

SPLITKV3 = Layout(present=("splitkv3",))


@pytest.mark.parametrize(
    ("q", "kv", "changes", "admitted"),
    [
        (4096, 32768, {}, True),  # at the minimum KV
        (4096, 32767, {}, False),
        (2048, 65536, {}, False),  # only q 4096 (or 8000 with its switch)
        (4097, 65536, {}, False),
        (8000, 65536, {}, False),
        (8000, 65536, {"prefill_dense_splitkv3_q8000_experimental": True}, True),
        (2048, 65536, {"prefill_dense_splitkv3_q8000_experimental": True}, False),
        (8001, 65536, {"prefill_dense_splitkv3_q8000_experimental": True}, False),
        # KV must exceed q, even under a lowered minimum.
        (4096, 4096, {"prefill_dense_splitkv3_min_kv": 4096}, False),
        (4096, 4128, {"prefill_dense_splitkv3_min_kv": 4096}, True),
        (4096, 65536, {"prefill_dense_splitkv3": False}, False),
    ],
)
def test_the_splitkv3_window_on_both_sides(q, kv, changes, admitted):
    assert built(layout=SPLITKV3, **changes).splitkv3_admits(q, kv) is admitted


def test_splitkv3_needs_its_kernel_loaded_and_one_kv_head_of_six():
    assert built().splitkv3_admits(4096, 65536) is False  # not in the trace's op set
    eight = Case("prefill", "auto", 256, 8, False, "none", "none")
    assert built(eight, SPLITKV3).splitkv3_admits(4096, 65536) is False
    two = Layout(present=("splitkv3",), kv_heads=2)
    assert built(layout=two).splitkv3_admits(4096, 65536) is False


# --- the gather Split-D prefix entry (§4.6) ---------------------------------------------------

FP16_PREFIX = Case("prefix", "auto", 256, 6, False, "none", "none")


@pytest.mark.parametrize(
    ("q", "seq", "changes", "gathers"),
    [
        (4096, 8192, {}, True),  # at both minimums
        (8192, 8192, {}, True),  # the sequence may be the query alone
        (2048, 8192, {}, False),  # under the minimum q
        (4096, 8160, {}, False),  # under the minimum KV
        (8192, 8160, {}, False),  # shorter than the query
        (4096, 8200, {}, False),  # seq % 32
        (4100, 8192, {}, False),  # q % 64 outside the Q8000 core
        (8100, 8224, {}, True),  # inside the core only seq % 32 counts
        (8193, 8224, {}, False),  # past the core
        (8100, 8224, {"prefill_d256_gqa_v37": True}, False),  # the v37 family has no core
        (4096, 8192, {"prefill_gather_dense": False}, False),
    ],
)
def test_the_gather_entry_on_both_sides(q, seq, changes, gathers):
    assert built(FP16_PREFIX, **changes).should_gather(q, seq) is gathers


# --- the DFlash2 grouped verifier's one boolean (§3.6) ----------------------------------------


def verifier(lengths: tuple[int, ...], page: int = 1648) -> Case:
    return Case("prefix", "fp8_e5m2", 256, 6, False, "dflash2", "none", lengths=lengths, page=page)


ONE_REQUEST = Layout(grouped_verify_max_query_tokens=16)


@pytest.mark.parametrize(
    ("lengths", "rows", "layout", "allowed"),
    [
        # One request: 8 or 16 rows, up to the native maximum of query tokens.
        ((8,), 8, ONE_REQUEST, True),
        ((16,), 16, ONE_REQUEST, True),
        ((12,), 12, ONE_REQUEST, False),
        ((16,), 16, Layout(grouped_verify_max_query_tokens=15), False),
        ((8,), 8, Layout(), False),  # the native op states no maximum
        ((4, 4), 8, ONE_REQUEST, False),  # two requests are no single one
    ],
)
def test_the_single_request_grouped_verifier(lengths, rows, layout, allowed):
    assert built(verifier(lengths), layout).grouped_verify_allowed(rows) is allowed


@pytest.mark.parametrize(
    ("lengths", "abi", "switch", "allowed"),
    [
        ((8, 8), 1, True, True),
        ((8,) * 4, 1, True, True),
        ((8,) * 8, 1, True, True),
        ((8,) * 3, 1, True, False),  # 2, 4 or 8 requests only
        ((8, 4), 1, True, False),  # every request of eight rows
        ((4, 4), 1, True, False),
        ((8, 8), 0, True, False),  # the request-major ABI is needed
        ((8, 8), 2, True, True),
        ((8, 8), 1, False, False),  # and the batched switch
    ],
)
def test_the_batched_grouped_verifier(lengths, abi, switch, allowed):
    sim = built(
        verifier(lengths),
        Layout(grouped_verify_request_major_abi=abi),
        dflash2_batched_grouped_verify=switch,
    )
    assert sim.grouped_verify_allowed(sum(lengths)) is allowed


@pytest.mark.parametrize("page", [1648, 1728, 3296, 3456])
def test_the_grouped_verifier_takes_each_measured_page(page):
    assert built(verifier((8,), page), ONE_REQUEST).grouped_verify_allowed(8) is True


@pytest.mark.parametrize("page", [1616, 1664, 3312, 3472])
def test_the_grouped_verifier_refuses_the_pages_beside_them(page):
    assert built(verifier((8,), page), ONE_REQUEST).grouped_verify_allowed(8) is False


def test_the_grouped_verifier_minimum_model_length_is_inclusive():
    at = Layout(grouped_verify_max_query_tokens=16, max_model_len=32768)
    assert built(verifier((8,)), at).grouped_verify_allowed(8) is True
    under = Layout(grouped_verify_max_query_tokens=16, max_model_len=32767)
    assert built(verifier((8,)), under).grouped_verify_allowed(8) is False


# --- the G6 partition hint (§4.4) -------------------------------------------------------------


def decode(codec: str = "fp8_e5m2", gqa: int = 6, page: int = 784) -> Case:
    return Case("decode", codec, 256, gqa, False, "none", "none", page=page)


@pytest.mark.parametrize(
    ("case", "layout", "rows", "hint"),
    [
        (decode(), Layout(), 1, 256),
        (decode(page=256), Layout(), 1, 256),  # the smallest page that takes it
        (decode(page=240), Layout(), 1, None),
        (decode(page=792), Layout(), 1, None),  # page % 16
        (decode(gqa=8), Layout(), 1, None),
        (decode(), Layout(kv_heads=2), 1, 256),  # twelve query heads over two
        (decode(), Layout(), 2, None),  # single-row calls only
        (decode("auto"), Layout(), 1, 256),
        (decode("auto", page=800), Layout(), 1, None),  # FP16 only at 784
    ],
)
def test_the_g6_partition_hint_on_both_sides(case, layout, rows, hint):
    assert built(case, layout).g6_hint(rows) == hint


# --- the E4M3 compact scalar tail and the XQA thresholds (§1.3, §4.4) --------------------------


def test_the_scalar_tail_takes_e4m3_gqa6_over_any_kv_heads():
    tail = ("scalar_tail",)
    e4m3 = decode("fp8_e4m3", page=16)
    assert built(e4m3, Layout(present=tail)).scalar_tail_takes() is True
    assert built(e4m3, Layout(present=tail, kv_heads=2)).scalar_tail_takes() is True
    assert built(decode("fp8_e4m3", gqa=8, page=16), Layout(present=tail)).scalar_tail_takes() is (
        False
    )
    assert built(decode("fp8_e4m3", page=24), Layout(present=tail)).scalar_tail_takes() is False
    # Loaded only beside the E4M3 grouped op.
    assert built(e4m3, Layout(present=tail), e4m3_grouped_fp32=False).scalar_tail_takes() is False


def test_every_xqa_threshold_is_the_policys_value():
    sim = built(
        decode(),
        e4m3_batch_xqa=False,
        smallq_decode_xqa_min_seq_len=68,
        decode_xqa_q4_min_seq_len=3,
        decode_fp8_xqa_min_seq_len=100,
    )
    assert sim.thresholds() == XqaThresholds(
        e4m3_batch_xqa=False, smallq_min_seq_len=68, gqa4_min_seq_len=3, e5m2_min_seq_len=100
    )


# --- the dense no-prefix calls and the DDTree branch verifier (§4.5-4.6) ----------------------


@pytest.mark.parametrize(
    ("lengths", "calls"),
    [((64,), 1), ((32, 32, 64), 2), ((32, 64, 32), 3), ((32, 32, 32), 1)],
)
def test_the_dense_prefill_calls_once_per_run_of_equal_lengths(lengths, calls):
    # Upstream packs consecutive sequences of one length into one dense call.
    case = Case("prefill", "auto", 128, 6, False, "none", "none", lengths=lengths)
    route = simulate(case, values(), Layout())
    assert route["rejected"] is None
    for forward in route["forwards"]:
        assert forward["routes"] == ["prefill_no_prefix_dense_flash"]
        assert [op["name"] for op in forward["ops"]] == ["dense"] * calls


@pytest.mark.parametrize(("lengths", "branch"), [((3,), True), ((2,), False), ((1, 2, 3), True)])
def test_a_tree_needs_the_branch_verifier_from_three_query_rows(lengths, branch):
    tree = Case("prefix", "auto", 256, 6, False, "ddtree", "none", lengths=lengths)
    assert built(tree).tree_requires_branch() is branch
    assert built(replace(tree, spec="mtp")).tree_requires_branch() is False


# --- the prefix path's per-sequence calls (§4.6) ----------------------------------------------


@pytest.mark.parametrize("lengths", [(0, 32), (32, 0), (32,)])
def test_a_sequence_without_query_rows_makes_no_call(lengths):
    case = Case("prefix", "auto", 128, 6, False, "none", "none", lengths=lengths)
    for forward in simulate(case, values(), Layout())["forwards"]:
        assert forward["routes"] == ["prefill_prefix_flash"]
        assert forward["ops"] == [
            {"name": "paged", "kv_cache_dtype": "auto", "causal": True, "window_size": [-1, -1]}
        ]


def test_without_the_paged_prefill_each_sequence_is_one_causal_dense_call():
    # A causal sliding window keeps its right edge at 0 (only a non-causal call mirrors it).
    case = Case("prefix", "auto", 128, 6, False, "none", "swa", lengths=(32, 32))
    dense = {"name": "dense", "causal": True, "window_size": [31, 0]}
    for forward in simulate(case, values(disable_paged_prefill=True), Layout())["forwards"]:
        assert forward["routes"] == ["prefill_prefix_flash"]
        assert forward["ops"] == [dense, dense]


@pytest.mark.parametrize(
    ("codec", "routes"),
    [
        ("fp8_e4m3", ["fp8_kv_prefill", "fp8_kv_prefill_no_prefix_paged_cache"]),
        ("fp8_e5m2", ["fp8_kv_prefill", "fp8_kv_prefill_no_prefix_paged_cache"]),
        ("auto", []),
    ],
)
def test_the_no_prefix_paged_cache_prefill_counts_an_fp8_cache(codec, routes):
    case = Case("prefill", codec, 128, 6, False, "none", "none", qlen=64)
    for forward in simulate(case, values(prefill_use_paged_cache=True), Layout())["forwards"]:
        assert forward["routes"] == [*routes, "prefill_no_prefix_paged_cache_flash"]


@pytest.mark.parametrize(
    ("switch", "route", "counter"),
    [
        ("decode_use_paged_prefill", "decode_paged_prefill", "decode_as_paged_prefill"),
        ("decode_dense_cache", "decode_dense_cache", "dense_cache_bridge"),
        ("decode_dense_reference", "decode_dense_reference", "dense_reference_bridge"),
    ],
)
@pytest.mark.parametrize("codec", ["fp8_e4m3", "fp8_e5m2", "auto"])
def test_each_diagnostic_decode_counts_an_fp8_cache(switch, route, counter, codec):
    case = Case("decode", codec, 128, 6, False, "none", "none")
    fp8 = [] if codec == "auto" else ["fp8_kv_decode", f"fp8_kv_decode_{counter}"]
    for forward in simulate(case, values(**{switch: True}), Layout())["forwards"]:
        assert forward["routes"] == [*fp8, route]


@pytest.mark.parametrize(
    ("cap", "enabled"), [(0, True), (131072, True), (131071, False), (1, False), (-1, True)]
)
def test_the_verifiers_model_length_cap_is_inclusive(cap, enabled):
    # <= 0: no cap; else the engine's maximum model length (131072) must not exceed it.
    verify = Case("prefix", "auto", 256, 6, False, "mtp", "none")
    assert built(verify, smallq_decode_max_model_len=cap).small_query_enabled() is enabled
