"""Both sides of the FLASH_ATTN_V100 limits the route tests sampled on one side only
(docs/contracts/attention.md §2, §3.3, §3.5): the verify XQA batch and sequence minimums at
their edges, the mixed-row E5M2 hint, the grouped FP32 group counts, row counts, head and page
shapes and context capacity at each bound, the row tables, FP16's late cache dtype, and which
names are observers. Written for the mutation run of issue 28 (benchmarks/MUTATION.md,
seventh session): each case tells apart two limits a refactor could confuse (`<` and `<=`,
`1` and `2`, one row and two)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from native.kernels.v100_attention import (
    E4M3,
    E5M2,
    FP16,
    ROUTE_FAMILIES,
    ROUTE_SPECS,
    RouteContext,
    RouteShape,
    XqaThresholds,
    grouped_fp32_reason,
    is_observer,
    route_reason,
)
from tests.test_v100_attention_routes import E4M3_OK, FP16_OK

SHAPE = RouteShape(rows=1, heads_q=6, heads_kv=1, head_dim=256, page_size=16)
VERIFY = ROUTE_SPECS["prefill_smallq_decode_xqa"]
ROWS = ROUTE_SPECS["prefill_prefix_decode_rows_xqa"]


def verify(**changes: object) -> RouteContext:
    base = RouteContext(
        stage="verify",
        codec=FP16,
        shape=SHAPE,
        enabled=True,
        available=True,
        max_seq_len_hint=4096,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


# The minimum clamped to one: a policy minimum of 0 or 1 still needs a seen length of 1.
ANY_LENGTH = XqaThresholds(smallq_min_seq_len=1)
NO_MINIMUM = XqaThresholds(smallq_min_seq_len=0)

VERIFY_EDGES = [
    # E4M3 verify: one row needs no batch XQA; two rows do, and it is off.
    (verify(codec=E4M3), None),
    (verify(codec=E4M3, shape=replace(SHAPE, rows=2)), None),
    (
        verify(
            codec=E4M3,
            shape=replace(SHAPE, rows=2),
            thresholds=XqaThresholds(e4m3_batch_xqa=False),
        ),
        "e4m3_batch",
    ),
    (verify(codec=E4M3, thresholds=XqaThresholds(e4m3_batch_xqa=False)), None),
    # No hint at all is a seen length of 0, short even for a minimum of 0 or 1.
    (verify(max_seq_len_hint=None, thresholds=ANY_LENGTH), "short_verify"),
    (verify(max_seq_len_hint=None, thresholds=NO_MINIMUM), "short_verify"),
    (verify(max_seq_len_hint=None, capturing=True, thresholds=ANY_LENGTH), "short_verify"),
    (verify(max_seq_len_hint=1, thresholds=ANY_LENGTH), None),
    (verify(max_seq_len_hint=1, thresholds=NO_MINIMUM), None),
    (
        verify(
            max_seq_len_hint=None,
            workspace_seq_capacity_hint=1,
            capturing=True,
            thresholds=ANY_LENGTH,
        ),
        None,
    ),
]


@pytest.mark.parametrize(("context", "code"), VERIFY_EDGES)
def test_verify_xqa_batch_and_minimum_at_their_edges(context, code):
    assert route_reason(VERIFY, context) == code


def test_mixed_rows_read_the_max_hint_for_e5m2():
    rows = RouteContext(
        stage="mixed_decode",
        codec=E5M2,
        shape=replace(SHAPE, heads_q=8),
        enabled=True,
        available=True,
    )
    assert route_reason(ROWS, replace(rows, max_seq_len_hint=16384)) is None
    assert route_reason(ROWS, replace(rows, max_seq_len_hint=16383)) == "short_e5m2"
    # Mixed rows read no other hint.
    assert route_reason(ROWS, replace(rows, static_seq_len_hint=16384)) == "short_e5m2"


# --- grouped FP32 (§3.5) at each bound ------------------------------------------------------

E4M3_GROUPS = replace(E4M3_OK, explicit_groups=True, batch_revision=6)

GROUPED_EDGES = [
    # Explicit eight-row groups: 1..16 groups of exactly eight rows.
    (replace(E4M3_GROUPS, groups=1, rows=8), None),
    (replace(E4M3_GROUPS, groups=16, rows=128), None),
    (replace(E4M3_GROUPS, groups=1, rows=4), "query_rows"),
    (replace(E4M3_GROUPS, groups=0, rows=0), "query_rows"),
    (replace(E4M3_GROUPS, groups=17, rows=136), "query_rows"),
    # Request rows: FP16 up to 4 parents, one parent of 2..8 rows.
    (replace(FP16_OK, groups=4, rows=32), None),
    (replace(FP16_OK, groups=1, rows=2), None),
    (replace(E4M3_OK, groups=16, rows=128, batch_revision=6), None),
    # E4M3 takes any number of query heads of 256, but the KV heads must be a sixth of them.
    (replace(E4M3_OK, heads_q=0, heads_kv=1), "head_shape"),
    (replace(E4M3_OK, heads_q=0, heads_kv=0), "head_shape"),
    (replace(E4M3_OK, heads_q=1), "kv_shape_or_unmeasured_page"),
    (replace(E4M3_OK, heads_q=12, heads_kv=2), None),
    # A page of 0 is no page, though 0 % 16 is 0.
    (replace(E4M3_OK, page_size=0), "kv_shape_or_unmeasured_page"),
    # Context capacity: 0 < width x page <= 266240, both sides.
    (replace(FP16_OK, table_width=320), None),
    (replace(FP16_OK, table_width=321), "context_capacity"),
    (replace(E4M3_OK, table_width=16640), None),
    (replace(E4M3_OK, table_width=0), "context_capacity"),
    # Request rows' own block tables: as many as the rows, as wide as the parent's.
    (replace(FP16_OK, row_table_rows=7), "row_metadata"),
    (replace(FP16_OK, row_table_rows=8, row_table_width=1), None),
    (replace(FP16_OK, row_table_width=2), "row_metadata"),
    # Explicit groups carry no per-row tables to check.
    (replace(E4M3_GROUPS, groups=1, rows=8, row_table_rows=7), None),
    # FP16 checks that the cache stores its codec late, with the layout.
    (replace(FP16_OK, cache_stores_codec=False), "kv_layout"),
    (replace(FP16_OK, cache_stores_codec=False, metadata_layout_ok=False), "kv_layout"),
]


@pytest.mark.parametrize(("inputs", "code"), GROUPED_EDGES)
def test_grouped_fp32_at_each_bound(inputs, code):
    assert grouped_fp32_reason(inputs) == code


# --- observers (§2) ---------------------------------------------------------------------------


def test_observers_are_the_declared_observers_and_every_family_counter():
    declared = {name for name in ROUTE_SPECS if is_observer(name)}
    assert declared == {name for name, spec in ROUTE_SPECS.items() if spec.observer}
    assert "decode_strategy_legacy_revision" in declared
    assert not is_observer("decode_xqa_paged")
    assert not is_observer("prefill_triton_safe")
    # A family counter is in no table row: recorded beside the route, so an observer.
    family_names = ("decode_xqa_e4m3_dynamic_page64", "decode_xqa_p256_page16", "fp8_kv_decode")
    for name in family_names:
        assert name not in ROUTE_SPECS
        assert any(p.fullmatch(name) for p in ROUTE_FAMILIES.values())
        assert is_observer(name)
