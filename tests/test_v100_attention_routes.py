"""The declared FLASH_ATTN_V100 routes and their reasons (docs/contracts/attention.md §2-3):
the table's literals, `shape_reason` and `route_reason` in order with both sides of each
rule, the selector keeping every verdict, and every grouped FP32 admission code."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from native.kernels.v100_attention import (
    ALL_CODECS,
    E4M3,
    E5M2,
    FLASHINFER_SM70,
    FP16,
    GROUPED_REASONS,
    ROUTE_SPECS,
    GroupedInputs,
    RouteCandidate,
    RouteContext,
    RouteShape,
    XqaThresholds,
    grouped_fp32_reason,
    route_reason,
    select_route,
    shape_reason,
    validate_route,
)


def test_the_table_declares_57_routes_by_stage():
    assert len(ROUTE_SPECS) == 57
    stages = Counter(spec.stage for spec in ROUTE_SPECS.values())
    assert stages == {
        "decode": 9,
        "verify": 7,
        "mixed_decode": 3,
        "prefill": 31,
        "any": 2,
        "metadata": 5,
    }


def test_nine_fallbacks_eight_literal_observers_three_xqa_routes():
    fallbacks = {n for n, s in ROUTE_SPECS.items() if s.fallback}
    assert fallbacks == {
        "decode_scalar_paged",
        "decode_triton_no_flash_decode",
        "decode_triton_scalar_disabled",
        "decode_strategy_legacy_revision",
        "prefill_smallq_decode_scalar",
        "prefill_prefix_decode_rows_scalar",
        "prefill_triton_safe",
        "unsupported_triton_fallback",
        "dflash_draft_triton_fallback",
    }
    observers = {n for n, s in ROUTE_SPECS.items() if s.observer}
    assert len(observers) == 8
    assert {"flashinfer_sm70_fixed_entry", "decode_strategy_legacy_revision"} <= observers
    assert {n for n, s in ROUTE_SPECS.items() if s.xqa} == {
        "decode_xqa_paged",
        "prefill_smallq_decode_xqa",
        "prefill_prefix_decode_rows_xqa",
    }


def test_ddtree_triton_is_not_a_fallback_and_flashinfer_routes_are_another_backend():
    # The decision: the routing code's truth, not the KV path matrix's "fallback".
    assert not ROUTE_SPECS["prefill_ddtree_triton"].fallback
    assert ROUTE_SPECS["prefill_ddtree_triton"].codecs == ALL_CODECS
    other = {n for n, s in ROUTE_SPECS.items() if s.backend == FLASHINFER_SM70}
    assert other == {"flashinfer_sm70_fixed_entry", "flashinfer_sm70_splitkv3_fast_visible"}
    assert ROUTE_SPECS["flashinfer_sm70_fixed_entry"].page_sizes == (784,)


def test_names_match_the_table_then_the_families():
    for name in (
        "decode_xqa_e4m3_dynamic_page784",
        "decode_xqa_p256_page1616",
        "fp8_kv_decode",
        "fp8_kv_decode_xqa_paged",
        "fp8_kv_prefill_prefix",
    ):
        assert validate_route(name) == name
    for name in ("decode_xqa_pX_page784", "fp8_kv_verify", "decode_xqa"):
        with pytest.raises(ValueError, match="Undeclared Flash-V100 route"):
            validate_route(name)


SHAPE = RouteShape(rows=1, heads_q=6, heads_kv=1, head_dim=256, page_size=16)


def test_route_shape_gqa_is_zero_when_heads_do_not_divide():
    assert SHAPE.gqa == 6
    assert replace(SHAPE, heads_kv=4).gqa == 0
    assert replace(SHAPE, heads_kv=0).gqa == 0


# Each declared limit, violated alone: (route, codec, shape change, code).
SHAPE_CASES = [
    ("decode_xqa_paged", None, {}, "codec"),
    ("prefill_smallq_fp16_grouped_fp32", E4M3, {}, "codec"),
    ("decode_xqa_paged", FP16, {"head_dim": 128}, "head_dim"),
    ("decode_xqa_paged", FP16, {"heads_q": 2}, "gqa"),
    ("prefill_smallq_e4m3_grouped_fp32", E4M3, {"page_size": 24}, "page_alignment"),
    ("prefill_smallq_e4m3_grouped_fp32", E4M3, {"page_size": 0}, "page_alignment"),
    ("flashinfer_sm70_fixed_entry", FP16, {"page_size": 832}, "page_size"),
    ("prefill_dense_d256_gqa_arch_long", FP16, {"chunk_size": 63}, "min_chunk"),
    ("prefill_dense_d256_gqa_arch_long", FP16, {"chunk_size": 8193}, "max_chunk"),
    ("prefill_dense_d256_gqa_v37", FP16, {"chunk_size": 96}, "chunk_alignment"),
    ("prefill_dense_splitd_d256_splitkv3_kernel", FP16, {"chunk_size": 4097}, "chunk_size"),
    ("prefill_dense_d256_gqa_79t_fp32_q8192_pad", FP16, {"chunk_size": 8192}, "max_chunk"),
]


@pytest.mark.parametrize(("route", "codec", "change", "code"), SHAPE_CASES)
def test_each_declared_limit_gives_its_code(route, codec, change, code):
    spec = ROUTE_SPECS[route]
    admitted = {
        "prefill_dense_d256_gqa_arch_long": 64,
        "prefill_dense_d256_gqa_v37": 128,
        "prefill_dense_splitkv3_kernel": 4096,
        "prefill_dense_splitd_d256_splitkv3_kernel": 4096,
        "prefill_dense_d256_gqa_79t_fp32_q8192_pad": 8191,
        "flashinfer_sm70_fixed_entry": 0,
    }
    base = replace(
        SHAPE,
        page_size=784 if route == "flashinfer_sm70_fixed_entry" else 16,
        chunk_size=admitted.get(route, 0),
    )
    good_codec = codec if code != "codec" else spec.codecs[0]
    assert shape_reason(spec, good_codec, base) is None
    assert shape_reason(spec, codec, replace(base, **change)) == code


def test_the_shape_order_is_codec_head_gqa_page():
    spec = ROUTE_SPECS["prefill_smallq_e4m3_grouped_fp32"]
    wrong = RouteShape(rows=1, heads_q=2, heads_kv=1, head_dim=128, page_size=24)
    assert shape_reason(spec, FP16, wrong) == "codec"
    assert shape_reason(spec, E4M3, wrong) == "head_dim"
    assert shape_reason(spec, E4M3, replace(wrong, head_dim=256)) == "gqa"
    assert shape_reason(spec, E4M3, replace(wrong, head_dim=256, heads_q=6)) == "page_alignment"


def ctx(**changes):
    base = RouteContext(stage="decode", codec=FP16, shape=SHAPE, enabled=True, available=True)
    return replace(base, **changes)


XQA = ROUTE_SPECS["decode_xqa_paged"]
VERIFY = ROUTE_SPECS["prefill_smallq_decode_xqa"]
ROWS = ROUTE_SPECS["prefill_prefix_decode_rows_xqa"]
G4 = replace(SHAPE, heads_q=4)


def test_stage_disabled_unavailable_precede_the_shape():
    wrong = ctx(shape=replace(SHAPE, head_dim=128))
    assert route_reason(XQA, replace(wrong, stage="verify")) == "stage"
    assert route_reason(XQA, replace(wrong, enabled=False)) == "disabled"
    assert route_reason(XQA, replace(wrong, available=False)) == "unavailable"
    assert route_reason(XQA, wrong) == "head_dim"
    # `any` matches every stage.
    assert route_reason(ROUTE_SPECS["unsupported_triton_fallback"], ctx(stage="verify")) is None


# Both sides of each XQA rule (§3.3 steps 1-10): (spec, context, code).
XQA_CASES = [
    (
        VERIFY,
        ctx(stage="verify", max_seq_len_hint=4096, partition_size_hint=256),
        "partition_or_window",
    ),
    (VERIFY, ctx(stage="verify", max_seq_len_hint=4096, window=True), "partition_or_window"),
    (VERIFY, ctx(stage="verify", max_seq_len_hint=4096), None),
    (XQA, ctx(seq_rows=2), "sequence_rows"),
    (XQA, ctx(seq_rows=1), None),
    (VERIFY, ctx(stage="verify", max_seq_len_hint=4096, shape=replace(SHAPE, heads_q=8)), None),
    (XQA, ctx(shape=G4, max_seq_len_hint=32767), "short_gqa4"),
    (XQA, ctx(shape=G4, max_seq_len_hint=32768), None),
    (XQA, ctx(shape=G4), "short_gqa4"),  # no hint present
    # Decode reads the first present of (workspace, static, max).
    (XQA, ctx(shape=G4, workspace_seq_capacity_hint=32767, max_seq_len_hint=1 << 20), "short_gqa4"),
    (XQA, ctx(shape=G4, static_seq_len_hint=32768, max_seq_len_hint=1), None),
    (ROWS, ctx(stage="mixed_decode", shape=G4, max_seq_len_hint=32767), "short_gqa4"),
    (ROWS, ctx(stage="mixed_decode", shape=G4, max_seq_len_hint=32768), None),
    (XQA, ctx(codec=E4M3, shape=replace(SHAPE, heads_q=8)), "e4m3_gqa"),
    (XQA, ctx(codec=E4M3), None),
    (XQA, ctx(codec=E4M3, shape=replace(SHAPE, rows=2)), None),
    (
        XQA,
        ctx(
            codec=E4M3, shape=replace(SHAPE, rows=2), thresholds=XqaThresholds(e4m3_batch_xqa=False)
        ),
        "e4m3_batch",
    ),
    (
        XQA,
        ctx(codec=E4M3, shape=replace(SHAPE, rows=0), seq_rows=0),
        "e4m3_batch",
    ),  # decode admits no 0 rows
    (
        VERIFY,
        ctx(stage="verify", codec=E4M3, shape=replace(SHAPE, rows=0), max_seq_len_hint=4096),
        None,
    ),  # verify does
    (
        VERIFY,
        ctx(
            stage="verify",
            codec=E4M3,
            shape=replace(SHAPE, rows=32),
            max_seq_len_hint=4096,
            thresholds=XqaThresholds(e4m3_batch_xqa=False),
        ),
        "e4m3_batch",
    ),
    (VERIFY, ctx(stage="verify", max_seq_len_hint=4095), "short_verify"),
    (
        VERIFY,
        ctx(stage="verify", max_seq_len_hint=1, workspace_seq_capacity_hint=4096),
        "short_verify",
    ),
    (
        VERIFY,
        ctx(stage="verify", max_seq_len_hint=1, workspace_seq_capacity_hint=4096, capturing=True),
        None,
    ),
    (VERIFY, ctx(stage="verify", codec=E5M2, max_seq_len_hint=16383), "short_verify"),
    (VERIFY, ctx(stage="verify", codec=E5M2, max_seq_len_hint=16384), None),
    (XQA, ctx(codec=E5M2, shape=G4, max_seq_len_hint=1 << 20), "e5m2_gqa4"),
    (XQA, ctx(codec=E5M2, max_seq_len_hint=16383), "short_e5m2"),
    (XQA, ctx(codec=E5M2, max_seq_len_hint=16384), None),
    # Eager reads (max, static, workspace); capture (static, workspace, max).
    (XQA, ctx(codec=E5M2, max_seq_len_hint=1, static_seq_len_hint=16384), "short_e5m2"),
    (
        XQA,
        ctx(codec=E5M2, max_seq_len_hint=1, static_seq_len_hint=16384, capturing=True),
        None,
    ),
    (ROWS, ctx(stage="mixed_decode", codec=E5M2, max_seq_len_hint=16383), "short_e5m2"),
    (XQA, ctx(window=True), "window"),
    (ROWS, ctx(stage="mixed_decode", window=True), None),
]


@pytest.mark.parametrize(("spec", "context", "code"), XQA_CASES)
def test_each_xqa_rule_on_both_sides(spec, context, code):
    assert route_reason(spec, context) == code


def test_thresholds_are_policy_values():
    low = XqaThresholds(smallq_min_seq_len=68, gqa4_min_seq_len=1, e5m2_min_seq_len=100)
    assert route_reason(VERIFY, ctx(stage="verify", max_seq_len_hint=68, thresholds=low)) is None
    assert route_reason(XQA, ctx(shape=G4, max_seq_len_hint=1, thresholds=low)) is None
    assert route_reason(XQA, ctx(codec=E5M2, max_seq_len_hint=100, thresholds=low)) is None


def test_the_selector_keeps_every_verdict_and_takes_the_fallback():
    chosen, verdicts = select_route(
        70, ctx(window=True), ("decode_xqa_paged",), "decode_scalar_paged"
    )
    assert chosen is ROUTE_SPECS["decode_scalar_paged"]
    assert [v.to_json() for v in verdicts] == [{"route": "decode_xqa_paged", "code": "window"}]
    chosen, verdicts = select_route(70, ctx(), ("decode_xqa_paged",), "decode_scalar_paged")
    assert chosen is XQA and verdicts[0].code is None
    chosen, _ = select_route(
        70, ctx(stage="mixed_decode", window=True), ("prefill_prefix_decode_rows_xqa",)
    )
    assert chosen is not None  # a window is a decode-stage reason only
    chosen, _ = select_route(70, ctx(shape=G4), ("decode_xqa_paged",))
    assert chosen is None
    with pytest.raises(ValueError, match="Route is not a declared fallback"):
        select_route(70, ctx(shape=G4), ("decode_xqa_paged",), "decode_dense_cache")


def test_capability_classes_answer_for_sm70_only():
    candidate = RouteCandidate(XQA)
    assert candidate.is_supported(70) == (True, None)
    assert candidate.is_supported(75) == (False, "capability")
    assert candidate.can_implement(ctx(window=True)) == (False, "window")
    chosen, verdicts = select_route(75, ctx(), ("decode_xqa_paged",), "decode_scalar_paged")
    assert verdicts[0].code == "capability" and chosen.name == "decode_scalar_paged"


# --- grouped FP32 admission (§3.5) ---------------------------------------------------------

FP16_OK = GroupedInputs(
    codec=FP16,
    layer_codec=FP16,
    rows=8,
    groups=1,
    heads_q=6,
    head_dim=256,
    heads_kv=1,
    page_size=832,
    table_width=1,
    operator_present=True,
)
E4M3_OK = replace(FP16_OK, codec=E4M3, layer_codec=E4M3, page_size=16, table_width=5)
E4M3_ROWS = replace(E4M3_OK, explicit_groups=True, rows=16, groups=2, batch_revision=6)

# Each code, produced alone by one change of an admitted input.
GROUPED_CASES = [
    (replace(FP16_OK, codec=None), "codec_unsupported"),
    (replace(FP16_OK, codec=E5M2), "codec_unsupported"),
    (replace(FP16_OK, explicit_groups=True), "layout_unsupported"),
    (replace(E4M3_ROWS, rows=15), "query_rows"),
    (replace(FP16_OK, operator_present=False), "operator_missing:sm70_grouped_fp16_fwd"),
    (replace(E4M3_OK, operator_present=False), "operator_missing:grouped_e4m3_fp32"),
    (replace(E4M3_ROWS, batch_revision=5), "operator_batch_revision"),
    (replace(FP16_OK, layer_codec=E4M3), "kv_dtype"),
    (replace(E4M3_OK, smallq_xqa=False), "decode_policy"),
    (replace(E4M3_OK, partition_hint=True), "decode_policy"),
    (replace(FP16_OK, partition_setting=True), "decode_policy"),
    (replace(FP16_OK, causal=False), "causal_or_window"),
    (replace(E4M3_OK, window=True), "causal_or_window"),
    (replace(FP16_OK, parent_metadata=False), "request_metadata"),
    (replace(FP16_OK, groups=5, rows=40), "request_group_count"),
    (replace(E4M3_OK, groups=17, rows=136, batch_revision=6), "request_group_count"),
    (replace(FP16_OK, rows=1), "query_rows"),
    (replace(FP16_OK, rows=9), "query_rows"),
    (replace(E4M3_OK, groups=2, rows=9, batch_revision=6), "query_rows"),
    (replace(FP16_OK, heads_q=12, heads_kv=2), "head_shape"),
    (replace(E4M3_OK, head_dim=128), "head_shape"),
    (replace(E4M3_OK, query_layout_ok=False), "query_or_output_layout"),
    (replace(FP16_OK, query_layout_ok=False), "query_or_output_layout"),
    (replace(E4M3_OK, output_shape_ok=False), "output_shape"),
    (replace(FP16_OK, output_shape_ok=False), "output_shape"),
    (replace(FP16_OK, page_size=848), "kv_shape_or_unmeasured_page"),
    (replace(E4M3_OK, page_size=24), "kv_shape_or_unmeasured_page"),
    (replace(E4M3_OK, heads_q=8), "kv_shape_or_unmeasured_page"),
    (replace(E4M3_OK, cache_stores_codec=False), "kv_layout"),
    (replace(FP16_OK, cache_layout_ok=False), "kv_layout"),
    (replace(E4M3_OK, table_width=16641), "context_capacity"),
    (replace(FP16_OK, parent_seq_rows=2), "request_metadata"),
    (replace(FP16_OK, row_lengths=7), "row_metadata"),
    (replace(E4M3_OK, row_table_width=4), "row_metadata"),
    (replace(FP16_OK, on_cuda=False), "device_not_cuda"),
    (replace(FP16_OK, metadata_layout_ok=False), "metadata_layout"),
    (replace(E4M3_OK, metadata_layout_ok=False), "metadata_layout"),
]


@pytest.mark.parametrize(("inputs", "code"), GROUPED_CASES)
def test_each_grouped_code_alone(inputs, code):
    assert grouped_fp32_reason(inputs) == code


def test_admitted_grouped_inputs_and_every_code_covered():
    assert grouped_fp32_reason(FP16_OK) is None
    assert grouped_fp32_reason(E4M3_OK) is None
    assert grouped_fp32_reason(E4M3_ROWS) is None
    assert grouped_fp32_reason(replace(E4M3_OK, on_cuda=False)) is None  # E4M3 needs no CUDA
    assert {code for _, code in GROUPED_CASES} == set(GROUPED_REASONS)


def test_fp16_and_e4m3_order_layout_and_metadata_differently():
    # E4M3 checks the query layout before the KV shape, FP16 after the row metadata.
    bad_both = dict(query_layout_ok=False, page_size=24)
    assert grouped_fp32_reason(replace(E4M3_OK, **bad_both)) == "query_or_output_layout"
    fp16 = replace(FP16_OK, query_layout_ok=False, page_size=848)
    assert grouped_fp32_reason(fp16) == "kv_shape_or_unmeasured_page"
    # E4M3 checks metadata before cache layout; FP16 the other way round.
    e4 = replace(E4M3_OK, metadata_layout_ok=False, cache_layout_ok=False)
    assert grouped_fp32_reason(e4) == "metadata_layout"
    f16 = replace(FP16_OK, metadata_layout_ok=False, cache_layout_ok=False)
    assert grouped_fp32_reason(f16) == "kv_layout"
