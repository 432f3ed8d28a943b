"""The `sm70-attention` rows against the attention contract's own statements, case by case.

Every expected route list below was worked out by hand from docs/contracts/attention.md and
is written as a literal, with the contract lines it comes from; nothing is computed by a
second copy of the selection procedure. The one reference file read is the trace's case list
(../shared/reference-golden/attention/flash_v100_trace_cases.jsonl), as expected values of
the rows' `case` objects. `basis="G"` marks an expectation the contract marks **[G]**
(checked against sampled golden cases); `derived` ones follow the contract's procedure and
are the first place to look when a row disagrees (the contract may be silent on a detail).

Each expectation holds for both forwards (docs/contracts/attention.md §7: the sampled golden
never shows forwards 0 and 1 differing in routes).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests import attention_literals as A

# --- loading: a missing snapshot fails every test, naming the file (never a skip) -----------


@pytest.fixture(scope="module")
def rows() -> dict[str, A.Row]:
    try:
        return A.load_rows()
    except A.SnapshotMissing as missing:
        message = str(missing)
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="module")
def manifest() -> list[dict[str, Any]]:
    try:
        return A.load_reference_cases()
    except A.SnapshotMissing as missing:
        message = str(missing)
    pytest.fail(message, pytrace=False)


def row_of(rows: dict[str, A.Row], row_id: str) -> A.Row:
    assert row_id in rows, f"{A.CATEGORY} has no row {row_id}"
    return rows[row_id]


def routed(rows: dict[str, A.Row], row_id: str) -> A.Row:
    """The row, which must have routes: not refused, two forwards (§6.2)."""
    row = row_of(rows, row_id)
    assert row.rejected is None, f"{row_id}: refused {row.rejected}, expected routes"
    assert len(row.forwards) == 2, f"{row_id}: {len(row.forwards)} forwards, expected 2"
    return row


def golden_keys(manifest: list[dict[str, Any]]) -> set[str]:
    return {A.canonical(c) for c in A.matrix_cases() + manifest}


def added_probes(rows: dict[str, A.Row], manifest: list[dict[str, Any]]) -> list[A.Row]:
    """The rows that stand for no golden case: the probes routectl adds (§6.3)."""
    golden = golden_keys(manifest)
    return [r for r in rows.values() if r.case is None or A.canonical(r.case) not in golden]


def test_the_snapshot_is_the_attention_category(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §6: the proposed category's name is `sm70-attention`.
    document = json.loads(A.SNAPSHOT.read_text(encoding="utf-8"))
    assert document["category"] == A.CATEGORY
    assert len(rows) == len(document["rows"]), "two rows share one id"


# --- ids and cases: docs/contracts/attention.md §5.1, §6.1, §6.3, §7 --------------------------


def test_every_id_has_the_matrix_or_the_edge_form(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §6.1: {stage}-h{head}g{gqa}-{mask}-{eager|graph}/{kv}/tp1/
    # {spec}/c{sequences}/q{query_len}; kv float16 (trace `auto`) or fp8_e4m3 (fp8_e5m2 for
    # the probes §6.3 adds); spec none/dflash2/ddtree/mtp; manifest cases are `edge:<name>`.
    bad = []
    for row_id in rows:
        matrix = A.MATRIX_ID.fullmatch(row_id)
        if matrix is None:
            if A.EDGE_ID.fullmatch(row_id) is None:
                bad.append(row_id)
            continue
        if matrix["kv"] not in ("float16", "fp8_e4m3", "fp8_e5m2") or matrix["spec"] not in (
            "none",
            "dflash2",
            "ddtree",
            "mtp",
        ):
            bad.append(row_id)
    assert bad == []


def test_the_contracts_example_id_is_the_golden_line_457_case(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §6.1: golden case (decode, auto, 256, 6, false, none, none)
    # -> sm70-attention:decode-h256g6-none-eager/float16/tp1/none/c1/q1; §7: that case is
    # line 457, i.e. matrix index 456 of the product order of §5.1.
    row = row_of(rows, "decode-h256g6-none-eager/float16/tp1/none/c1/q1")
    expected = {
        "stage": "decode",
        "codec": "auto",
        "head": 256,
        "gqa": 6,
        "capture": False,
        "spec": "none",
        "mask": "none",
    }
    assert A.canonical(row.case or {}) == A.canonical(expected)
    assert A.matrix_cases()[456] == expected


def test_the_768_matrix_rows_carry_their_own_case(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §5.1 (the seven axes, the trace's spellings: codec `auto`),
    # §6.1 (c: 3 for mixed, else 1; q: 32, 4 with a spec, 1 for decode), §7 (a row and a
    # golden case are matched by exact case dictionary).
    cases = A.matrix_cases()
    assert len(cases) == 768
    missing, wrong = [], []
    for case in cases:
        row_id = A.matrix_id(case)
        if row_id not in rows:
            missing.append(row_id)
        elif A.canonical(rows[row_id].case or {}) != A.canonical(case):
            wrong.append((row_id, rows[row_id].case))
    assert missing == [] and wrong == []


def test_the_45_manifest_probes_carry_their_manifest_line(
    rows: dict[str, A.Row], manifest: list[dict[str, Any]]
) -> None:
    # docs/contracts/attention.md §6.3: manifest line n -> edge:<name n>; §5.1: the manifest
    # keys beyond the seven (env, qlen, decline, page, ...) are part of the case.
    assert len(manifest) == len(A.MANIFEST_PROBES) == 45
    missing, wrong = [], []
    for name, case in zip(A.MANIFEST_PROBES, manifest, strict=True):
        row_id = f"edge:{name}"
        if row_id not in rows:
            missing.append(row_id)
        elif A.canonical(rows[row_id].case or {}) != A.canonical(case):
            wrong.append((row_id, rows[row_id].case, case))
    assert missing == [] and wrong == []


def test_the_golden_cases_are_the_813_and_each_is_one_row(
    rows: dict[str, A.Row], manifest: list[dict[str, Any]]
) -> None:
    # docs/contracts/attention.md §5.1 (768 + 45 = 813 cases) and §7 (the comparison keys on
    # the case object and fails on a case present on one side only: so no two rows may carry
    # the same golden case, and none may be missing).
    golden = Counter(A.canonical(c) for c in A.matrix_cases() + manifest)
    assert len(golden) == 813 and set(golden.values()) == {1}
    carried = Counter(A.canonical(r.case) for r in rows.values() if r.case is not None)
    assert {k for k in golden if carried[k] != 1} == set()


# --- the route table: docs/contracts/attention.md §2, §4.1 --------------------------------------


def test_the_route_literals_are_the_contracts_57() -> None:
    # docs/contracts/attention.md §2: 57 names (decode 9, verify 7, mixed_decode 3, prefill
    # 31, any 2, metadata 5); 9 declared fallbacks, 8 literal observers, 3 XQA routes.
    groups = (
        A.DECODE_ROUTES,
        A.VERIFY_ROUTES,
        A.MIXED_DECODE_ROUTES,
        A.PREFILL_ROUTES,
        A.ANY_ROUTES,
        A.METADATA_ROUTES,
    )
    assert [len(g) for g in groups] == [9, 7, 3, 31, 2, 5]
    assert len(set(A.DECLARED_ROUTES)) == 57
    assert (len(A.FALLBACK_ROUTES), len(A.OBSERVER_ROUTES), len(A.XQA_ROUTES)) == (9, 8, 3)
    assert (A.FALLBACK_ROUTES | A.OBSERVER_ROUTES | A.XQA_ROUTES) <= set(A.DECLARED_ROUTES)


def declared(name: str) -> bool:
    return name in A.DECLARED_ROUTES or any(p.fullmatch(name) for p in A.FAMILY_PATTERNS)


def test_every_recorded_route_is_declared_or_a_family_counter(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §2 ("a name is first matched whole against the table, then
    # against the patterns") and §4.1 (any other name is a ValueError, "Undeclared Flash-V100
    # route"): no row may show a name outside both.
    undeclared = sorted(
        {(r.id, name) for r in rows.values() for name in r.all_routes() if not declared(name)}
    )
    assert undeclared == []


# The one declared route no declared input reaches: docs/contracts/attention.md §2 records
# prefill_prefix_splitd_d256 "only if the candidate's route variable is empty", and §4.6's FA2
# candidate names its contiguous, gather or paged Split-D route on every branch that runs an
# entry. The architecture routes and the contiguous dense Split-D route are reached by rows
# that declare the architecture entry loaded, or the Split-D paged form declining (the
# issue's explicit inputs).
NAMELESS_SPLITD_ROUTE = "prefill_prefix_splitd_d256"


def test_each_declared_route_is_reached_or_is_a_flashinfer_route(rows: dict[str, A.Row]) -> None:
    # The acceptance, from docs/contracts/attention.md §2: each declared route is
    # reached by some row, except the two FlashInfer SM70 routes (they belong to the sibling
    # FlashInfer SM70 backend, §2 "prefill"); decode_strategy_legacy_revision is counted at
    # construction, which §6.2 keeps outside `forwards` (§5.2: the trace cannot show it).
    in_forwards = set().union(*(r.all_routes() for r in rows.values()))
    outside = set().union(*(r.strings_outside_forwards() for r in rows.values()))
    unreached = [
        name
        for name in A.DECLARED_ROUTES
        if name not in A.FLASHINFER_ROUTES
        and name != NAMELESS_SPLITD_ROUTE
        and name not in (outside if name in A.CONSTRUCTION_ROUTES else in_forwards)
    ]
    assert unreached == []
    assert in_forwards & set(A.FLASHINFER_ROUTES) == set()
    assert NAMELESS_SPLITD_ROUTE not in in_forwards
    assert in_forwards & A.CONSTRUCTION_ROUTES == set()


# --- refusals: docs/contracts/attention.md §5.1, §1.2, §4.6 -------------------------------------


def matrix_ids(**fixed: Any) -> Iterator[str]:
    """The matrix ids whose case has the given axis values (a product filter, no rule)."""
    for case in A.matrix_cases():
        if all(case[k] in (v if isinstance(v, tuple) else (v,)) for k, v in fixed.items()):
            yield A.matrix_id(case)


def refused(rows: dict[str, A.Row], row_id: str) -> dict[str, Any]:
    rejected = row_of(rows, row_id).rejected
    assert rejected is not None, f"{row_id}: expected a refusal, rejected is null"
    assert set(rejected) >= {"type", "message"}, rejected
    return dict(rejected)


def test_anchor_with_an_fp8_cache_is_refused_at_construction(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §1.2: prefix_anchored_decode_window needs "decoder attention
    # and an FP16 KV cache (`ValueError`, core "prefix-anchored SWA requires")"; it is a
    # constructor keyword, so every stage refuses: 4 stages x 2 heads x 2 GQA x 2 captures x 4
    # specs = 128 cases (§5.1 lists it among the trace's three refusals).
    ids = list(matrix_ids(codec="fp8_e4m3", mask="anchor"))
    assert len(ids) == 128
    for row_id in ids:
        rejected = refused(rows, row_id)
        assert rejected["type"] == "ValueError", (row_id, rejected)
        assert A.ANCHOR_FP8_CORE in rejected["message"], (row_id, rejected)


def test_anchor_with_ddtree_is_refused_on_the_prefix_path(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §4.6: the DDTree tree verifier, "anchored -> `RuntimeError`,
    # core "does not support ddtree""; the prefix and mixed stages have a prefix context
    # (seq = q + 64, §5.1) and so take the prefix path (§4.5 step 3); FP16 only, since an FP8
    # cache is refused earlier, at construction (§1.2).
    ids = list(matrix_ids(stage=("prefix", "mixed"), codec="auto", spec="ddtree", mask="anchor"))
    assert len(ids) == 16
    for row_id in ids:
        rejected = refused(rows, row_id)
        assert rejected["type"] == "RuntimeError", (row_id, rejected)
        assert A.ANCHOR_DDTREE_CORE in rejected["message"], (row_id, rejected)


def test_ddtree_with_an_fp8_cache_under_capture_is_refused(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §5.1: "ddtree with an FP8 cache under capture (core
    # "unsupported key cache dtype")"; §4.6: eager, the same case falls back to
    # prefill_ddtree_dense (a non-strict eager failure), captured it raises. The prefix and
    # mixed stages reach the tree verifier (§4.5 step 2, §4.6 [G] "mixed ... captured
    # ddtree"). The contract names no exception type for this one: only the core is checked.
    ids = list(
        matrix_ids(
            stage=("prefix", "mixed"), codec="fp8_e4m3", capture=True, spec="ddtree", mask="none"
        )
    )
    assert len(ids) == 8
    for row_id in ids:
        rejected = refused(rows, row_id)
        assert isinstance(rejected["type"], str) and rejected["type"], (row_id, rejected)
        assert A.DDTREE_FP8_CAPTURE_CORE in rejected["message"], (row_id, rejected)


def test_golden_rows_refuse_only_with_the_three_refusals(
    rows: dict[str, A.Row], manifest: list[dict[str, Any]]
) -> None:
    # docs/contracts/attention.md §5.1: "The tool accepts exactly three refusals, and any other
    # exception fails it"; §6.2: `rejected` is null or {type, message}.
    golden = golden_keys(manifest)
    other = []
    for row in rows.values():
        if row.case is None or A.canonical(row.case) not in golden or row.rejected is None:
            continue
        message = str(row.rejected.get("message"))
        if not any(core in message for core in A.REFUSAL_CORES):
            other.append((row.id, dict(row.rejected)))
    assert other == []


def test_no_matrix_row_outside_the_three_conditions_is_refused(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §5.1: the golden holds all 813 cases and the tool accepts no
    # exception but the three refusals, so a matrix case meeting none of their conditions
    # (anchor with FP8; anchor with ddtree; ddtree with FP8 under capture) has routes.
    refused_ids = [
        A.matrix_id(case)
        for case in A.matrix_cases()
        if not (case["mask"] == "anchor" and case["codec"] == "fp8_e4m3")
        and not (case["mask"] == "anchor" and case["spec"] == "ddtree")
        and not (case["spec"] == "ddtree" and case["codec"] == "fp8_e4m3" and case["capture"])
        and row_of(rows, A.matrix_id(case)).rejected is not None
    ]
    assert refused_ids == []


@pytest.mark.parametrize(
    "row_id",
    [
        # docs/contracts/attention.md §4.4 [G]: decode with the anchor mask is not refused for an
        # FP16 cache (it takes decode_scalar_paged); §1.2 refuses FP8 only.
        "decode-h256g6-anchor-eager/float16/tp1/none/c1/q1",
        # docs/contracts/attention.md §5.1: only ddtree refuses under capture with FP8; dflash2 does
        # not.
        "prefix-h256g6-none-graph/fp8_e4m3/tp1/dflash2/c1/q4",
        # docs/contracts/attention.md §4.6 [G]: FP8 ddtree eager is not refused
        # (prefill_ddtree_dense).
        "prefix-h128g6-none-eager/fp8_e4m3/tp1/ddtree/c1/q4",
        # docs/contracts/attention.md §4.6: the anchored per-sequence route exists for FP16 prefix
        # without ddtree.
        "prefix-h256g6-anchor-graph/float16/tp1/mtp/c1/q4",
    ],
)
def test_the_refusals_stop_at_their_stated_conditions(rows: dict[str, A.Row], row_id: str) -> None:
    routed(rows, row_id)


def test_unrefused_golden_rows_record_two_forwards(
    rows: dict[str, A.Row], manifest: list[dict[str, Any]]
) -> None:
    # docs/contracts/attention.md §5.2 (two forwards per case) and §6.2 (`forwards`: [F0, F1]).
    golden = golden_keys(manifest)
    bad = [
        r.id
        for r in rows.values()
        if r.case is not None
        and A.canonical(r.case) in golden
        and r.rejected is None
        and len(r.forwards) != 2
    ]
    assert bad == []


# --- case by case: the matrix and the manifest probes ----------------------------------------


@dataclass(frozen=True)
class Expect:
    """What the contract determines for one row, in both forwards. `routes` is the whole
    ordered list; the other fields constrain it partly where the contract leaves the rest
    open (starts/ends/contains/excludes, or `route_set` for the names without their count).
    `ops_*` constrain the op (and JIT) names; `codes` must appear among the route's strings
    (the verdicts the selectors keep); basis "G" = the contract marks it [G]."""

    row: str
    routes: tuple[str, ...] | None = None
    starts: tuple[str, ...] = ()
    ends: str | None = None
    contains: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    route_set: frozenset[str] | None = None
    ops: tuple[str, ...] | None = None
    ops_contain: tuple[str, ...] = ()
    ops_exclude: tuple[str, ...] = ()
    ops_any: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()
    basis: str = "derived"


def check(rows: dict[str, A.Row], e: Expect) -> None:
    row = routed(rows, e.row)
    for f in (0, 1):
        got, names = row.routes(f), row.op_names(f)
        where = f"{e.row} forward {f} ({e.basis}): routes {got}, ops {names}"
        if e.routes is not None:
            assert tuple(got) == e.routes, where
        assert tuple(got[: len(e.starts)]) == e.starts, where
        if e.ends is not None:
            assert got and got[-1] == e.ends, where
        assert all(name in got for name in e.contains), where
        assert not any(name in got for name in e.excludes), where
        if e.route_set is not None:
            assert set(got) == e.route_set, where
        if e.ops is not None:
            assert tuple(names) == e.ops, where
        assert all(name in names for name in e.ops_contain), where
        assert not any(name in names for name in e.ops_exclude), where
        if e.ops_any:
            assert any(name in names for name in e.ops_any), where
    missing = [code for code in e.codes if code not in row.strings()]
    assert missing == [], f"{e.row}: no verdict {missing} recorded in the row's route"


FP8_DECODE_XQA = ("fp8_kv_decode", "fp8_kv_decode_xqa_paged")
FP8_DECODE_SCALAR = ("fp8_kv_decode", "fp8_kv_decode_scalar_paged")
FP8_PREFIX = ("fp8_kv_prefill", "fp8_kv_prefill_prefix")
CAPTURE_SMALLQ_DDTREE = ("prefill_capture_smallq", "prefill_capture_smallq_ddtree_metadata")
CAPTURE_SMALLQ_OTHER = ("prefill_capture_smallq", "prefill_capture_smallq_no_ddtree_metadata")

# Defaults in force for every matrix case (§5.1: the environment is cleared): decode XQA and
# verify XQA on, scalar paged decode on, paged prefill on, no diagnostic decode, BFLA and
# split-KV off, small-query cap 16, contig dense minimums 1536/8192, gather dense 4096/8192
# (docs/contracts/attention.md §1.2). Synthetic layout: one KV head, heads_q = gqa, page 16,
# q = 32 (4 with a spec), seq = q + 64 (prefill: q), mixed query lengths [q, 1, 4] (§5.1).
MATRIX_EXPECTATIONS = [
    # ---- decode (docs/contracts/attention.md §4.4) ----
    # §4.4 [G] "auto/D256/GQA6/none: decode_xqa_paged"; §4.4 XQA bullet: FP16 counts no FP8
    # counter, and no family counter (the G6 hint needs page >= 256; page is 16); §2:
    # decode_xqa_paged's op is `xqa`.
    Expect(
        "decode-h256g6-none-eager/float16/tp1/none/c1/q1",
        routes=("decode_xqa_paged",),
        ops_contain=("xqa",),
        ops_exclude=("decode",),
        basis="G",
    ),
    # docs/contracts/attention.md §3.3: no XQA reason depends on capture for FP16 GQA6 (short_gqa4
    # is GQA4, short_e5m2 E5M2 only); §4.4 candidates 2-4 are off by default, so capture changes
    # nothing.
    Expect(
        "decode-h256g6-none-graph/float16/tp1/none/c1/q1",
        routes=("decode_xqa_paged",),
        ops_contain=("xqa",),
    ),
    # docs/contracts/attention.md §4.4: the XQA codec excludes only (E4M3 and a DFlash selector
    # target); FP16 decode with a spec is the one-token decode (§5.1 decode query lengths [1]).
    Expect(
        "decode-h256g6-none-eager/float16/tp1/mtp/c1/q1",
        routes=("decode_xqa_paged",),
        ops_contain=("xqa",),
    ),
    Expect(
        "decode-h256g6-none-graph/float16/tp1/dflash2/c1/q1",
        routes=("decode_xqa_paged",),
        ops_contain=("xqa",),
    ),
    # docs/contracts/attention.md §4.4 [G] "SWA ... decode_scalar_paged"; §3.3 item 10 `window`
    # (decode with a window); §2: decode_scalar_paged's op is `decode`.
    Expect(
        "decode-h256g6-swa-eager/float16/tp1/none/c1/q1",
        routes=("decode_scalar_paged",),
        ops_contain=("decode",),
        ops_exclude=("xqa",),
        codes=("window",),
        basis="G",
    ),
    # docs/contracts/attention.md §4.4 [G] "anchor ... decode_scalar_paged"; §1.2: the anchor window
    # turns decode XQA off, so §3.3's `disabled` (enabled = decode XQA, §4.4 step 6).
    Expect(
        "decode-h256g6-anchor-eager/float16/tp1/none/c1/q1",
        routes=("decode_scalar_paged",),
        ops_contain=("decode",),
        codes=("disabled",),
        basis="G",
    ),
    # docs/contracts/attention.md §4.4 [G] "D128 ... decode_scalar_paged"; §2 decode_xqa_paged is
    # D256; §3.2 `head_dim`.
    Expect(
        "decode-h128g6-none-eager/float16/tp1/none/c1/q1",
        routes=("decode_scalar_paged",),
        ops_contain=("decode",),
        codes=("head_dim",),
        basis="G",
    ),
    # docs/contracts/attention.md §4.4 [G] "GQA1 ... decode_scalar_paged"; §2 GQA 4/6/8; §3.2 `gqa`.
    Expect(
        "decode-h256g1-none-eager/float16/tp1/none/c1/q1",
        routes=("decode_scalar_paged",),
        ops_contain=("decode",),
        codes=("gqa",),
        basis="G",
    ),
    # docs/contracts/attention.md §3.2 order: codec -> head_dim -> gqa: D128 GQA1 fails on head_dim
    # first.
    Expect(
        "decode-h128g1-swa-graph/float16/tp1/ddtree/c1/q1",
        routes=("decode_scalar_paged",),
        ops_contain=("decode",),
        codes=("head_dim",),
    ),
    # docs/contracts/attention.md §4.4 XQA bullet: "FP8 caches count `fp8_kv_decode` and
    # `fp8_kv_decode_xqa_paged` first", no family counter (page 16 < 256), then the op, then
    # decode_xqa_paged; §3.3 items 5-6 pass (GQA 6, one row). Same shape as §4.4 [G] "page 832: no
    # page counter".
    Expect(
        "decode-h256g6-none-eager/fp8_e4m3/tp1/none/c1/q1",
        routes=(*FP8_DECODE_XQA, "decode_xqa_paged"),
        ops_contain=("xqa",),
    ),
    Expect(
        "decode-h256g6-none-graph/fp8_e4m3/tp1/mtp/c1/q1",
        routes=(*FP8_DECODE_XQA, "decode_xqa_paged"),
        ops_contain=("xqa",),
    ),
    # docs/contracts/attention.md §4.4 scalar bullet: "the FP8 counters with suffix `scalar_paged`",
    # the scalar-tail op absent in the trace (§5.1), so the paged decode op, then
    # decode_scalar_paged.
    Expect(
        "decode-h128g6-none-eager/fp8_e4m3/tp1/none/c1/q1",
        routes=(*FP8_DECODE_SCALAR, "decode_scalar_paged"),
        ops_contain=("decode",),
        codes=("head_dim",),
    ),
    Expect(
        "decode-h256g1-none-graph/fp8_e4m3/tp1/none/c1/q1",
        routes=(*FP8_DECODE_SCALAR, "decode_scalar_paged"),
        ops_contain=("decode",),
        codes=("gqa",),
    ),
    Expect(
        "decode-h256g6-swa-eager/fp8_e4m3/tp1/none/c1/q1",
        routes=(*FP8_DECODE_SCALAR, "decode_scalar_paged"),
        ops_contain=("decode",),
        codes=("window",),
    ),
    # ---- prefill, no prefix: seq = q (docs/contracts/attention.md §4.5 step 4) ----
    # Not every sequence has >= 1024 tokens, no paged-cache switch: the dense op per run of
    # equal lengths, then prefill_no_prefix_dense_flash (§2: its op is `dense`). FP8 counters
    # belong to the prefix context (§4.5 step 3) only.
    Expect(
        "prefill-h256g6-none-eager/float16/tp1/none/c1/q32",
        routes=("prefill_no_prefix_dense_flash",),
        ops_contain=("dense",),
    ),
    Expect(
        "prefill-h128g1-swa-eager/float16/tp1/none/c1/q32",
        routes=("prefill_no_prefix_dense_flash",),
        ops_contain=("dense",),
    ),
    Expect(
        "prefill-h256g6-none-eager/fp8_e4m3/tp1/none/c1/q32",
        routes=("prefill_no_prefix_dense_flash",),
        ops_contain=("dense",),
    ),
    # A spec (q = 4) without a prefix context, eager: docs/contracts/attention.md §4.5 step 2 is for
    # capture only, the prefix path (and its verifiers, §4.6) needs step 3's prefix context.
    Expect(
        "prefill-h256g6-none-eager/float16/tp1/mtp/c1/q4",
        routes=("prefill_no_prefix_dense_flash",),
        ops_contain=("dense",),
    ),
    Expect(
        "prefill-h128g6-none-eager/float16/tp1/dflash2/c1/q4",
        routes=("prefill_no_prefix_dense_flash",),
        ops_contain=("dense",),
    ),
    Expect(
        "prefill-h128g1-swa-eager/fp8_e4m3/tp1/ddtree/c1/q4",
        routes=("prefill_no_prefix_dense_flash",),
        ops_contain=("dense",),
    ),
    # ---- prefix: seq = q + 64, one sequence (docs/contracts/attention.md §4.5 step 3, §4.6) ----
    # §4.6 [G] "prefix auto/D256/GQA6/none: prefill_prefix_flash only (every `_should_*`
    # false)": q 32 > cap 16 (no verifier), one sequence (no decode rows), BFLA and split-KV
    # off, q < 1024 (no FA2), contig minimum 1536 not met, not FP8: plain paged (no counter).
    Expect(
        "prefix-h256g6-none-eager/float16/tp1/none/c1/q32",
        routes=("prefill_prefix_flash",),
        ops_contain=("paged",),
        basis="G",
    ),
    # The same walk holds for D128/GQA1 and with a window (docs/contracts/attention.md §4.6
    # per-sequence list: nothing before plain paged is admitted by default).
    Expect(
        "prefix-h128g1-none-eager/float16/tp1/none/c1/q32",
        routes=("prefill_prefix_flash",),
        ops_contain=("paged",),
    ),
    Expect(
        "prefix-h256g6-swa-eager/float16/tp1/none/c1/q32",
        routes=("prefill_prefix_flash",),
        ops_contain=("paged",),
    ),
    # docs/contracts/attention.md §4.6 per sequence, item 1: "anchored ->
    # prefill_prefix_paged_anchored" (§2: `paged` with anchor lengths), then the envelope (§4.5 step
    # 3).
    Expect(
        "prefix-h256g6-anchor-eager/float16/tp1/none/c1/q32",
        routes=("prefill_prefix_paged_anchored", "prefill_prefix_flash"),
        ops_contain=("paged",),
    ),
    # docs/contracts/attention.md §4.6 [G] "prefix auto/D256/GQA6/dflash2 (q 4, seq 68):
    # prefill_smallq_decode_scalar, prefill_prefix_flash (inferred: FP16 grouped needs page 832; XQA
    # `short_verify`)"; §2: the scalar verifier's op is `decode`; §3.5: FP16 page must be 832.
    Expect(
        "prefix-h256g6-none-eager/float16/tp1/dflash2/c1/q4",
        routes=("prefill_smallq_decode_scalar", "prefill_prefix_flash"),
        ops_contain=("decode",),
        codes=("kv_shape_or_unmeasured_page", "short_verify"),
        basis="G",
    ),
    # mtp: the same small-query verifier (docs/contracts/attention.md §4.6: small query needs
    # causal, no anchor, decode op, max q 4 <= cap 16); the DFlash2 grouped verifier is E5M2 only
    # (§3.6).
    Expect(
        "prefix-h256g6-none-eager/float16/tp1/mtp/c1/q4",
        routes=("prefill_smallq_decode_scalar", "prefill_prefix_flash"),
        ops_contain=("decode",),
        codes=("short_verify",),
    ),
    # D128 GQA1: prefill_smallq_decode_xqa is D256, GQA 6/8 (docs/contracts/attention.md §2): shape
    # `head_dim` (§3.2).
    Expect(
        "prefix-h128g1-none-eager/float16/tp1/mtp/c1/q4",
        routes=("prefill_smallq_decode_scalar", "prefill_prefix_flash"),
        ops_contain=("decode",),
        codes=("head_dim",),
    ),
    # GQA1 D256: `gqa` (docs/contracts/attention.md §3.2 shape; §3.3 item 3 for verify as well).
    Expect(
        "prefix-h256g1-none-eager/float16/tp1/dflash2/c1/q4",
        routes=("prefill_smallq_decode_scalar", "prefill_prefix_flash"),
        ops_contain=("decode",),
        codes=("gqa",),
    ),
    # A window: the verifier still runs (causal; docs/contracts/attention.md §4.6 excludes only the
    # anchor), XQA fails on §3.3 item 1 `partition_or_window`.
    Expect(
        "prefix-h256g6-swa-eager/float16/tp1/mtp/c1/q4",
        routes=("prefill_smallq_decode_scalar", "prefill_prefix_flash"),
        ops_contain=("decode",),
        codes=("partition_or_window",),
    ),
    # The anchor: small query needs "no anchor" and docs/contracts/attention.md §1.2 sets the cap to
    # 0; per sequence, item 1 anchored.
    Expect(
        "prefix-h256g6-anchor-eager/float16/tp1/mtp/c1/q4",
        routes=("prefill_prefix_paged_anchored", "prefill_prefix_flash"),
        ops_contain=("paged",),
        excludes=("prefill_smallq_decode_scalar",),
    ),
    # docs/contracts/attention.md §4.6 [G] "prefix E4M3/D128/GQA6/dflash2: FP8 prefix counters,
    # prefill_smallq_decode_scalar, prefill_prefix_flash"; §4.5 step 3 names the counters.
    Expect(
        "prefix-h128g6-none-eager/fp8_e4m3/tp1/dflash2/c1/q4",
        routes=(*FP8_PREFIX, "prefill_smallq_decode_scalar", "prefill_prefix_flash"),
        basis="G",
    ),
    # docs/contracts/attention.md §4.6 [G] "the same with ddtree, eager: FP8 prefix counters,
    # prefill_ddtree_dense, prefill_prefix_flash".
    Expect(
        "prefix-h128g6-none-eager/fp8_e4m3/tp1/ddtree/c1/q4",
        routes=(*FP8_PREFIX, "prefill_ddtree_dense", "prefill_prefix_flash"),
        basis="G",
    ),
    # D256: the tree verifier's choice does not depend on the head (docs/contracts/attention.md §4.6
    # DDTree bullet).
    Expect(
        "prefix-h256g6-none-eager/fp8_e4m3/tp1/ddtree/c1/q4",
        routes=(*FP8_PREFIX, "prefill_ddtree_dense", "prefill_prefix_flash"),
    ),
    # docs/contracts/attention.md §4.5 step 3 with D128: the FP8 bridge needs D256 (§4.6 item 6):
    # plain paged.
    Expect(
        "prefix-h128g1-none-eager/fp8_e4m3/tp1/none/c1/q32",
        routes=(*FP8_PREFIX, "prefill_prefix_flash"),
    ),
    # D256, q 32: the FP8 bridge is admitted (docs/contracts/attention.md §4.6 item 6: switch on by
    # default, D256, q >= 32, causal, no window); which bridge counter it records the contract
    # leaves to the storage facts (§8.3), so only the envelope is fixed.
    Expect(
        "prefix-h256g6-none-eager/fp8_e4m3/tp1/none/c1/q32",
        starts=FP8_PREFIX,
        ends="prefill_prefix_flash",
    ),
    # FP16 ddtree eager: the tree verifier (docs/contracts/attention.md §4.6) with the Triton branch
    # on by default (§1.3 VLLM_DFLASH_DDTREE_TRITON_BRANCH_ATTN True); §2 its JIT kernel.
    Expect(
        "prefix-h256g6-none-eager/float16/tp1/ddtree/c1/q4",
        routes=("prefill_ddtree_triton", "prefill_prefix_flash"),
        ops_contain=("_ddtree_paged_attention_kernel",),
    ),
    # Captured, a spec: docs/contracts/attention.md §4.5 step 2 "prefill_capture_smallq,
    # `..._ddtree_metadata` or `..._no_ddtree_metadata`, and the prefix path", as §4.6 [G] shows for
    # the mixed stage (no envelope there).
    Expect(
        "prefix-h256g6-none-graph/float16/tp1/ddtree/c1/q4",
        routes=(*CAPTURE_SMALLQ_DDTREE, "prefill_ddtree_triton"),
    ),
    Expect(
        "prefix-h256g6-none-graph/float16/tp1/mtp/c1/q4",
        routes=(*CAPTURE_SMALLQ_OTHER, "prefill_smallq_decode_scalar"),
    ),
    Expect(
        "prefix-h128g1-none-graph/float16/tp1/dflash2/c1/q4",
        routes=(*CAPTURE_SMALLQ_OTHER, "prefill_smallq_decode_scalar"),
    ),
    # ---- mixed: query lengths [q, 1, 4], three sequences (docs/contracts/attention.md §4.6) ----
    # §4.6 [G] "mixed auto/D256/GQA6 captured ddtree: prefill_capture_smallq,
    # `..._ddtree_metadata`, prefill_ddtree_triton".
    Expect(
        "mixed-h256g6-none-graph/float16/tp1/ddtree/c3/q4",
        routes=(*CAPTURE_SMALLQ_DDTREE, "prefill_ddtree_triton"),
        basis="G",
    ),
    # docs/contracts/attention.md §4.6 [G] "captured mtp: prefill_capture_smallq,
    # `..._no_ddtree_metadata`, prefill_smallq_decode_scalar".
    Expect(
        "mixed-h256g6-none-graph/float16/tp1/mtp/c3/q4",
        routes=(*CAPTURE_SMALLQ_OTHER, "prefill_smallq_decode_scalar"),
        basis="G",
    ),
    # Eager, a spec: [4, 1, 4] all within the cap: the small-query batch candidate (before decode
    # rows in docs/contracts/attention.md §4.6's list), then the envelope (§4.5 step 3).
    Expect(
        "mixed-h256g6-none-eager/float16/tp1/mtp/c3/q4",
        routes=("prefill_smallq_decode_scalar", "prefill_prefix_flash"),
    ),
    Expect(
        "mixed-h256g6-none-eager/float16/tp1/ddtree/c3/q4",
        routes=("prefill_ddtree_triton", "prefill_prefix_flash"),
    ),
    Expect(
        "mixed-h256g6-none-eager/fp8_e4m3/tp1/ddtree/c3/q4",
        routes=(*FP8_PREFIX, "prefill_ddtree_dense", "prefill_prefix_flash"),
    ),
    # No spec, [32, 1, 4]: q 32 > cap, so no verifier; decode rows (flag on by default per the
    # issue, causal, no anchor, > 1 sequence, no window, not capturing) take the rows of q 1 and 4:
    # XQA is D256 (docs/contracts/attention.md §2), so D128 GQA1 goes to the scalar rows; the q 32
    # row goes per sequence to plain paged. How often the rows' counter is recorded is left open.
    Expect(
        "mixed-h128g1-none-eager/float16/tp1/none/c3/q32",
        route_set=frozenset({"prefill_prefix_decode_rows_scalar", "prefill_prefix_flash"}),
        ends="prefill_prefix_flash",
        ops_contain=("decode",),
    ),
    # D256 GQA6: XQA or scalar rows (docs/contracts/attention.md §3.3 `sequence_rows` depends on how
    # rows are counted, which the contract does not fix), never the E4M3 grouped rows (FP16).
    Expect(
        "mixed-h256g6-none-eager/float16/tp1/none/c3/q32",
        ends="prefill_prefix_flash",
        excludes=("prefill_prefix_decode_rows_e4m3_grouped_fp32",),
    ),
    # A window: decode rows need "no window": every row per sequence, plain paged.
    Expect(
        "mixed-h256g6-swa-eager/float16/tp1/none/c3/q32",
        routes=("prefill_prefix_flash",),
    ),
    # The anchor: decode rows need "no anchor": per sequence, item 1 anchored.
    Expect(
        "mixed-h256g6-anchor-eager/float16/tp1/none/c3/q32",
        route_set=frozenset({"prefill_prefix_paged_anchored", "prefill_prefix_flash"}),
        ends="prefill_prefix_flash",
    ),
    # FP8 D128: the counters first (docs/contracts/attention.md §4.5 step 3), the scalar rows (XQA
    # and E4M3 grouped rows are D256), the envelope last.
    Expect(
        "mixed-h128g6-none-eager/fp8_e4m3/tp1/none/c3/q32",
        starts=FP8_PREFIX,
        contains=("prefill_prefix_decode_rows_scalar",),
        excludes=("prefill_prefix_decode_rows_xqa", "prefill_prefix_decode_rows_e4m3_grouped_fp32"),
        ends="prefill_prefix_flash",
    ),
]


@pytest.mark.parametrize("expect", MATRIX_EXPECTATIONS, ids=lambda e: e.row)
def test_matrix_row_routes(rows: dict[str, A.Row], expect: Expect) -> None:
    check(rows, expect)


def test_every_should_check_is_false_on_the_plain_prefix_row(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §4.6 [G]: "prefix auto/D256/GQA6/none: prefill_prefix_flash
    # only (every `_should_*` false)"; §6.2: checks reduced to true/false/null/non-null.
    row = routed(rows, "prefix-h256g6-none-eager/float16/tp1/none/c1/q32")
    for f in (0, 1):
        should = [(name, result) for name, result in row.checks(f) if name.startswith("_should_")]
        assert should, f"forward {f}: no `_should_*` check recorded"
        assert all(result is False for _, result in should), should


PROBE_EXPECTATIONS = [
    # docs/contracts/attention.md §6.3 lines 1-2 with §4.4: candidate 2 (decode paged prefill,
    # paged prefill on, not capturing) comes first; §2 its ops `paged`, `paged_bhmd` or `wmma`.
    Expect(
        "edge:decode_diagnostics_all",
        routes=("decode_paged_prefill",),
        ops_any=("paged", "paged_bhmd", "wmma"),
    ),
    # docs/contracts/attention.md §4.4 candidates 2-4 are "not capturing"; §5.3: captured decode
    # cases with an env never record decode_dense_cache, decode_dense_reference or
    # decode_paged_prefill: the base row's decode_xqa_paged.
    Expect("edge:decode_diagnostics_all_graph", routes=("decode_xqa_paged",)),
    # Lines 3-4: candidate 3 (dense cache) before 4 (dense reference); one FP16 sequence does not
    # divert (docs/contracts/attention.md §2 decode_dense_cache: "FP8 or several sequences divert");
    # op `dense`.
    Expect(
        "edge:decode_dense_cache_reference",
        routes=("decode_dense_cache",),
        ops_contain=("dense",),
    ),
    Expect("edge:decode_dense_cache_reference_graph", routes=("decode_xqa_paged",)),
    # Lines 5-6: candidate 4; docs/contracts/attention.md §2 "gather, dequantize, `dense`".
    Expect(
        "edge:decode_dense_reference",
        routes=("decode_dense_reference",),
        ops_contain=("dense",),
    ),
    Expect("edge:decode_dense_reference_graph", routes=("decode_xqa_paged",)),
    # Lines 7-8: decode XQA off -> docs/contracts/attention.md §3.3 `disabled` -> the declared
    # fallback (§4.4 step 6).
    Expect(
        "edge:decode_xqa_off",
        routes=("decode_scalar_paged",),
        ops_contain=("decode",),
        ops_exclude=("xqa",),
        codes=("disabled",),
    ),
    Expect(
        "edge:decode_xqa_off_graph",
        routes=("decode_scalar_paged",),
        ops_contain=("decode",),
        codes=("disabled",),
    ),
    # Lines 9-10: BFLA forced with minimums 1 (docs/contracts/attention.md §4.6 item 2: switch, op,
    # causal, no window, D256, FP16, minimums, block_n 256 > 0); nothing declines unless the row
    # says (issue).
    Expect(
        "edge:prefix_bfla_forced",
        routes=("prefill_prefix_bfla", "prefill_prefix_flash"),
        ops_contain=("bfla",),
    ),
    Expect(
        "edge:prefix_bfla_forced_graph", contains=("prefill_prefix_bfla",), ops_contain=("bfla",)
    ),
    # Lines 11-12: contig dense forced without allow-copy: docs/contracts/attention.md §4.6 item 4
    # (BHMD) needs allow-copy, so never the BHMD route.
    Expect("edge:prefix_contig_dense_forced", excludes=("prefill_prefix_contig_dense_bhmd",)),
    Expect("edge:prefix_contig_dense_forced_graph", excludes=("prefill_prefix_contig_dense_bhmd",)),
    # Lines 13-14: with allow-copy: docs/contracts/attention.md §4.6 item 4 (contig admission,
    # allow-copy, BHMD op, view built) -> prefill_prefix_contig_dense_bhmd, op `bhmd` (§2).
    Expect(
        "edge:prefix_contig_dense_copy",
        contains=("prefill_prefix_contig_dense_bhmd",),
        ends="prefill_prefix_flash",
        ops_contain=("bhmd",),
    ),
    Expect(
        "edge:prefix_contig_dense_copy_graph",
        contains=("prefill_prefix_contig_dense_bhmd",),
        ops_contain=("bhmd",),
    ),
    # Lines 15-16: split-KV forced (docs/contracts/attention.md §4.6 item 7: switch, op, causal,
    # D256, FP16, minimums 1, KV 96 > 32 split tokens) -> prefill_prefix_splitkv, op `splitkv` (§2).
    Expect(
        "edge:prefix_splitkv_forced",
        routes=("prefill_prefix_splitkv", "prefill_prefix_flash"),
        ops_contain=("splitkv",),
    ),
    Expect(
        "edge:prefix_splitkv_forced_graph",
        contains=("prefill_prefix_splitkv",),
        ops_contain=("splitkv",),
    ),
    # Lines 17: the paged-cache switch acts only without a prefix (docs/contracts/attention.md §4.5
    # step 4): the base prefix row's routes.
    Expect("edge:prefix_paged_cache", routes=("prefill_prefix_flash",)),
    # Lines 19-20: paged prefill off -> "gather + dense (no counter)" (docs/contracts/attention.md
    # §4.6).
    Expect(
        "edge:prefix_paged_prefill_off",
        routes=("prefill_prefix_flash",),
        ops_contain=("dense",),
        ops_exclude=("paged",),
    ),
    Expect("edge:prefix_paged_prefill_off_graph", ops_contain=("dense",), ops_exclude=("paged",)),
    # Line 21: every sequence >= 1024 -> the Split-D wrapper (docs/contracts/attention.md §4.5 step
    # 4): FA2 on, FP16, D256, q 1024 >= 64, causal, q % 64 and KV % 32; dense form: architecture op
    # and split-KV3 absent (§5.1) -> plain Split-D, prefill_dense_splitd_d256.
    Expect(
        "edge:prefill_q1024",
        routes=("prefill_dense_splitd_d256", "prefill_no_prefix_dense_flash"),
    ),
    # Line 22: the wrapper declines (docs/contracts/attention.md §4.5 "declines by returning
    # nothing"): the dense op, prefill_no_prefix_dense_flash; §5.3 the splitd op then a dense op.
    Expect(
        "edge:prefill_q1024_declined",
        routes=("prefill_no_prefix_dense_flash",),
        ops_contain=("dense",),
    ),
    # Line 23: prefix q 1024: docs/contracts/attention.md §4.6 item 3 FA2 (q >= 1024): no contiguous
    # view, gather dense minimum 4096 not met -> paged Split-D, op `splitd_paged` (§2).
    Expect(
        "edge:prefix_q1024",
        contains=("prefill_prefix_paged_splitd_d256",),
        ends="prefill_prefix_flash",
        ops_contain=("splitd_paged",),
    ),
    # Line 24: declined: no Split-D route; the envelope still closes the forward.
    Expect(
        "edge:prefix_q1024_declined",
        excludes=A.SPLITD_ROUTES,
        ends="prefill_prefix_flash",
    ),
    # Line 25: q 8192: the architecture ops are absent (docs/contracts/attention.md §5.1), so none
    # of the long-prefill family; plain Split-D as at 1024.
    Expect(
        "edge:prefill_q8192",
        routes=("prefill_dense_splitd_d256", "prefill_no_prefix_dense_flash"),
    ),
    # Line 26: a DFlash draft batch (docs/contracts/attention.md §4.6 first batch candidate,
    # non-causal).
    Expect("edge:mixed_dflash_draft", contains=("prefill_prefix_dflash_noncausal_batch",)),
    # Line 27: captured draft: docs/contracts/attention.md §4.5 step 2
    # "prefill_capture_dflash_noncausal_paged, then the prefix path without the prefill_prefix_flash
    # envelope".
    # The case has one sequence (no `lengths`, §5.1: prefix [q]). The batch candidate is the
    # non-causal DFlash draft *batch* of §4.6: the manifest's eager line 26 gives it two
    # sequences ([8, 8]) to reach it; one sequence takes it only with a draft page layout the
    # trace does not use (page 16, no window), so the prefix path runs per sequence: none of
    # its candidates admits a non-causal call (BFLA, FA2, contiguous, bridge and split-KV
    # all need causal), the plain paged entry runs without a counter, and capture leaves the
    # envelope out. The capture route alone, in both forwards.
    Expect(
        "edge:prefix_dflash_draft_graph",
        routes=("prefill_capture_dflash_noncausal_paged",),
        ops=("paged",),
    ),
    # Line 28: docs/contracts/attention.md §4.3 step 1: the observer, "no op" (§2).
    Expect("edge:metadata_none", routes=("metadata_none_zero_output",), ops=()),
    # Line 29: no dense op = an unsupported layer (docs/contracts/attention.md §4.3 step 3), Triton
    # fallback allowed, not a draft layer -> unsupported_triton_fallback.
    Expect("edge:prefix_dense_op_missing", routes=("unsupported_triton_fallback",)),
    # Line 30: docs/contracts/attention.md §4.4 candidate 1 with the fallback allowed.
    Expect("edge:decode_op_missing", routes=("decode_triton_no_flash_decode",)),
    # Line 31: docs/contracts/attention.md §4.5 step 1.
    Expect("edge:prefix_triton_forced", routes=("prefill_triton_safe",)),
    # Line 32: docs/contracts/attention.md §4.4 candidate 5 (scalar decode off, allowed) precedes
    # candidate 6 (XQA).
    Expect(
        "edge:decode_scalar_off",
        routes=("decode_triton_scalar_disabled",),
        ops_exclude=("xqa", "decode"),
    ),
    # Line 33: docs/contracts/attention.md §4.5 step 4: the paged-cache switch with paged prefill ->
    # the prefix path (q 32: plain paged), then prefill_no_prefix_paged_cache_flash.
    Expect(
        "edge:prefill_paged_cache",
        routes=("prefill_no_prefix_paged_cache_flash",),
        ops_contain=("paged",),
    ),
    # Line 34: routectl resolves the policy once per engine (docs/contracts/attention.md §0 proposed
    # pin, the decision): a change after construction has no effect, the base row's XQA
    # decode.
    Expect("edge:decode_xqa_off_after_init", routes=("decode_xqa_paged",), ops_contain=("xqa",)),
    # Line 35: gather dense admitted (minimums 1) then declined: no Split-D route.
    Expect(
        "edge:prefix_gather_dense_declined",
        excludes=A.SPLITD_ROUTES,
        ends="prefill_prefix_flash",
    ),
    # Lines 36-37: page 832, q 8, GQA 6 x 256 FP16: docs/contracts/attention.md §3.5 FP16 grouped
    # (page must be 832, one group 2..8 rows, 6 heads x 256) -> prefill_smallq_fp16_grouped_fp32, op
    # `grouped_fp16`.
    Expect(
        "edge:prefix_dflash2_page832",
        contains=("prefill_smallq_fp16_grouped_fp32",),
        ops_contain=("grouped_fp16",),
    ),
    Expect(
        "edge:prefix_dflash2_page832_graph",
        starts=CAPTURE_SMALLQ_OTHER,
        contains=("prefill_smallq_fp16_grouped_fp32",),
        ops_contain=("grouped_fp16",),
    ),
    # Lines 38-39: E4M3 (page % 16, any heads x 256) -> prefill_smallq_e4m3_grouped_fp32, op
    # `grouped_e4m3`; eager with the FP8 prefix counters first (docs/contracts/attention.md §4.5
    # step 3).
    Expect(
        "edge:prefix_dflash2_page832_e4m3",
        starts=FP8_PREFIX,
        contains=("prefill_smallq_e4m3_grouped_fp32",),
        ops_contain=("grouped_e4m3",),
    ),
    Expect(
        "edge:prefix_dflash2_page832_e4m3_graph",
        contains=("prefill_smallq_e4m3_grouped_fp32",),
        ops_contain=("grouped_e4m3",),
    ),
    # Line 40: BFLA (docs/contracts/attention.md §4.6 item 2) precedes FA2 (item 3).
    Expect(
        "edge:prefix_q1024_bfla",
        routes=("prefill_prefix_bfla", "prefill_prefix_flash"),
        excludes=A.SPLITD_ROUTES,
    ),
    # Line 41: a contiguous KV, allow-copy 0: item 5 contiguous dense (q 32 < 1024: dense).
    Expect(
        "edge:prefix_contig_dense_contiguous_kv",
        contains=("prefill_prefix_contig_dense",),
        excludes=("prefill_prefix_contig_dense_bhmd",),
        ops_contain=("dense",),
    ),
    # Lines 42-45: docs/contracts/attention.md §4.4 [G] "E4M3 revision 1 page 784: `fp8_kv_decode`,
    # `fp8_kv_decode_xqa_paged`, `decode_xqa_p256_page784`, decode_xqa_paged (page 832: no page
    # counter)"; the G6 hint does not depend on capture (§4.4 hint conditions).
    Expect(
        "edge:decode_e4m3_rev1_page784",
        routes=(*FP8_DECODE_XQA, "decode_xqa_p256_page784", "decode_xqa_paged"),
        ops_contain=("xqa",),
        basis="G",
    ),
    Expect(
        "edge:decode_e4m3_rev1_page784_graph",
        routes=(*FP8_DECODE_XQA, "decode_xqa_p256_page784", "decode_xqa_paged"),
        basis="G",
    ),
    Expect(
        "edge:decode_e4m3_rev1_page832",
        routes=(*FP8_DECODE_XQA, "decode_xqa_paged"),
        basis="G",
    ),
    Expect(
        "edge:decode_e4m3_rev1_page832_graph",
        routes=(*FP8_DECODE_XQA, "decode_xqa_paged"),
        basis="G",
    ),
]


@pytest.mark.parametrize("expect", PROBE_EXPECTATIONS, ids=lambda e: e.row)
def test_manifest_probe_routes(rows: dict[str, A.Row], expect: Expect) -> None:
    check(rows, expect)


def test_the_page_784_hint_reaches_the_xqa_op(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §4.4: "FP16 or shared-strategy E4M3 -> 256, for page 784
    # only" (revision 1 = shared, §1.2 sm70_decode_strategy); §6.2 records the op keyword
    # `partition_size_hint`.
    row = routed(rows, "edge:decode_e4m3_rev1_page784")
    for f in (0, 1):
        xqa = [op for op in row.ops(f) if op.get("name") == "xqa"]
        assert xqa and all(op.get("partition_size_hint") == 256 for op in xqa), row.ops(f)


# --- the manifest probes' stated differences from their base row (docs/contracts/attention.md
# §6.3 names each probe after what it changes; the base is the matrix row of its seven keys) ---

DECODE_BASE = "decode-h256g6-none-eager/float16/tp1/none/c1/q1"
DECODE_BASE_GRAPH = "decode-h256g6-none-graph/float16/tp1/none/c1/q1"
PREFIX_BASE = "prefix-h256g6-none-eager/float16/tp1/none/c1/q32"
E4M3_DECODE_BASE = "decode-h256g6-none-eager/fp8_e4m3/tp1/none/c1/q1"


def same_routes(rows: dict[str, A.Row], probe: str, base: str) -> None:
    p, b = routed(rows, probe), routed(rows, base)
    for f in (0, 1):
        assert p.routes(f) == b.routes(f), (probe, base, f)


@pytest.mark.parametrize(
    ("probe", "base"),
    [
        # docs/contracts/attention.md §0 and the issue: resolve-once, so the after-init change is no
        # change (a documented difference from the env-era golden).
        ("edge:decode_xqa_off_after_init", DECODE_BASE),
        # docs/contracts/attention.md §5.3: captured decode with an env records none of the three
        # diagnostic routes.
        ("edge:decode_diagnostics_all_graph", DECODE_BASE_GRAPH),
        ("edge:decode_dense_cache_reference_graph", DECODE_BASE_GRAPH),
        ("edge:decode_dense_reference_graph", DECODE_BASE_GRAPH),
        # docs/contracts/attention.md §4.5 step 4: the paged-cache switch is read without a prefix
        # only.
        ("edge:prefix_paged_cache", PREFIX_BASE),
        # docs/contracts/attention.md §4.4: page 832 gets no G6 hint (784 only), nor does the base's
        # page 16 (< 256).
        ("edge:decode_e4m3_rev1_page832", E4M3_DECODE_BASE),
    ],
)
def test_probes_that_change_nothing_routectl_decides(
    rows: dict[str, A.Row], probe: str, base: str
) -> None:
    same_routes(rows, probe, base)


def test_probes_that_add_or_swap_one_route_of_their_base(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §4.6 items 2 and 7 (BFLA, split-KV) add their counter before
    # the prefix envelope; §4.4 the 784 page counter sits between the FP8 counters and
    # decode_xqa_paged. Written as base -> probe edits of the base's own routes.
    base = routed(rows, PREFIX_BASE).routes(0)
    assert routed(rows, "edge:prefix_bfla_forced").routes(0) == [
        "prefill_prefix_bfla",
        *base,
    ]
    assert routed(rows, "edge:prefix_splitkv_forced").routes(0) == [
        "prefill_prefix_splitkv",
        *base,
    ]
    e4m3 = routed(rows, E4M3_DECODE_BASE).routes(0)
    assert routed(rows, "edge:decode_e4m3_rev1_page784").routes(0) == [
        *e4m3[:-1],
        "decode_xqa_p256_page784",
        e4m3[-1],
    ]
    # docs/contracts/attention.md §4.4: XQA off swaps decode_xqa_paged for its declared fallback.
    assert routed(rows, "edge:decode_xqa_off").routes(0) == [
        "decode_scalar_paged" if name == "decode_xqa_paged" else name
        for name in routed(rows, DECODE_BASE).routes(0)
    ]


# --- rules the golden test enforces (docs/contracts/attention.md §5.3) -------------------------


def test_decline_cases_show_a_splitd_op_a_null_try_and_then_dense_or_paged(
    rows: dict[str, A.Row], manifest: list[dict[str, Any]]
) -> None:
    # docs/contracts/attention.md §5.3: "Decline cases show a `splitd_*` op, then
    # `_try_sm70_fa2_d256_prefill` returning null, then a `dense` or `paged` op."
    declines = [
        f"edge:{name}"
        for name, case in zip(A.MANIFEST_PROBES, manifest, strict=True)
        if case.get("decline") is True
    ]
    assert declines == [
        "edge:prefill_q1024_declined",
        "edge:prefix_q1024_declined",
        "edge:prefix_gather_dense_declined",
    ]
    for row_id in declines:
        row = routed(rows, row_id)
        for f in (0, 1):
            names = row.op_names(f)
            first = next((i for i, n in enumerate(names) if n.startswith("splitd_")), None)
            assert first is not None, (row_id, f, names)
            assert any(n in ("dense", "paged") for n in names[first + 1 :]), (row_id, f, names)
            assert ("_try_sm70_fa2_d256_prefill", None) in row.checks(f), (row_id, f)


def test_captured_decode_with_an_env_records_no_diagnostic_route(
    rows: dict[str, A.Row], manifest: list[dict[str, Any]]
) -> None:
    # docs/contracts/attention.md §5.3: "Captured decode cases with an env never record
    # decode_dense_cache, decode_dense_reference or decode_paged_prefill."
    diagnostic = {"decode_dense_cache", "decode_dense_reference", "decode_paged_prefill"}
    captured = [
        f"edge:{name}"
        for name, case in zip(A.MANIFEST_PROBES, manifest, strict=True)
        if case["stage"] == "decode" and case["capture"] and case.get("env")
    ]
    assert len(captured) == 4
    assert [(i, row_of(rows, i).all_routes() & diagnostic) for i in captured] == [
        (i, set()) for i in captured
    ]


# --- construction and FP8 counters (docs/contracts/attention.md §1.2, §4.4, §4.5) -------------


@pytest.mark.parametrize(
    ("row_id", "legacy"),
    [
        # docs/contracts/attention.md §1.2 sm70_decode_strategy: E4M3 with XQA enabled (decode XQA
        # on, D256, heads_q = 6 x heads_kv), native revision 0 (§5.1 default) -> `legacy` plus the
        # observer decode_strategy_legacy_revision, counted at construction, for every stage.
        ("decode-h256g6-none-eager/fp8_e4m3/tp1/none/c1/q1", True),
        ("prefix-h256g6-swa-graph/fp8_e4m3/tp1/mtp/c1/q4", True),
        ("prefill-h256g6-none-eager/fp8_e4m3/tp1/none/c1/q32", True),
        # XQA not enabled (D128, or heads_q = heads_kv): `legacy`, no observer.
        ("decode-h128g6-none-eager/fp8_e4m3/tp1/none/c1/q1", False),
        ("decode-h256g1-none-eager/fp8_e4m3/tp1/none/c1/q1", False),
        # Non-E4M3 codecs are `shared`.
        ("decode-h256g6-none-eager/float16/tp1/none/c1/q1", False),
        # Revision 1 >= 1: `shared`.
        ("edge:decode_e4m3_rev1_page784", False),
        ("edge:decode_e4m3_rev1_page832_graph", False),
    ],
)
def test_the_legacy_strategy_observer_is_a_construction_counter(
    rows: dict[str, A.Row], row_id: str, legacy: bool
) -> None:
    row = row_of(rows, row_id)
    assert ("decode_strategy_legacy_revision" in row.strings_outside_forwards()) is legacy
    assert "decode_strategy_legacy_revision" not in row.all_routes()


def row_codec(row: A.Row) -> str | None:
    """The row's KV codec in the trace's spelling (the case's, else the id's kv slot)."""
    if row.probe_case is not None and "codec" in row.probe_case:
        return str(row.probe_case["codec"])
    matrix = A.MATRIX_ID.fullmatch(row.id)
    if matrix is None:
        return None
    return {"float16": "auto"}.get(matrix["kv"], matrix["kv"])


def row_stage(row: A.Row) -> str | None:
    if row.probe_case is not None and "stage" in row.probe_case:
        return str(row.probe_case["stage"])
    matrix = A.MATRIX_ID.fullmatch(row.id)
    return matrix["stage"] if matrix else None


def row_gqa(row: A.Row) -> int | None:
    if row.probe_case is not None and "gqa" in row.probe_case:
        return int(row.probe_case["gqa"])
    matrix = A.MATRIX_ID.fullmatch(row.id)
    return int(matrix["gqa"]) if matrix else None


def test_fp8_decode_counts_its_counters_before_the_paged_decode(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §4.4: XQA "FP8 caches count `fp8_kv_decode` and
    # `fp8_kv_decode_xqa_paged` first"; scalar "the FP8 counters with suffix `scalar_paged`".
    # Over every FP8 decode row (E4M3 and the E5M2 probes) that reaches paged decode.
    seen, bad = 0, []
    for row in rows.values():
        if row_codec(row) not in ("fp8_e4m3", "fp8_e5m2") or row_stage(row) != "decode":
            continue
        for f in range(len(row.forwards)):
            got = row.routes(f)
            if "decode_xqa_paged" in got:
                want: tuple[str, ...] = ("fp8_kv_decode", "fp8_kv_decode_xqa_paged")
            elif "decode_scalar_paged" in got:
                want = ("fp8_kv_decode", "fp8_kv_decode_scalar_paged")
            else:
                continue
            seen += 1
            if tuple(got[:2]) != want:
                bad.append((row.id, f, got))
    assert bad == [] and seen > 0


def test_fp8_prefix_forwards_open_with_the_prefill_counters(rows: dict[str, A.Row]) -> None:
    # docs/contracts/attention.md §4.5 step 3: with a prefix context "FP8 caches count
    # `fp8_kv_prefill` and `fp8_kv_prefill_prefix`; the prefix path; prefill_prefix_flash":
    # every eager FP8 forward closed by the envelope opens with the two counters.
    seen, bad = 0, []
    for row in rows.values():
        capture = row.case.get("capture") if row.case is not None else None
        if row_codec(row) not in ("fp8_e4m3", "fp8_e5m2") or capture is not False:
            continue
        for f in range(len(row.forwards)):
            got = row.routes(f)
            if got and got[-1] == "prefill_prefix_flash":
                seen += 1
                if tuple(got[:2]) != ("fp8_kv_prefill", "fp8_kv_prefill_prefix"):
                    bad.append((row.id, f, got))
    assert bad == [] and seen > 0


# --- the thresholds' two sides and the probes §6.3 asks routectl to add ------------------------
# The contract fixes the probes' subject, not their names: a probe is taken to stand at a
# threshold value when that number is in its id or among its case's values.


def case_values(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set().union(*(case_values(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(case_values(v) for v in value)) if value else set()
    return {str(value)}


def at_value(row: A.Row, number: int) -> bool:
    if re.search(rf"(?<![0-9]){number}(?![0-9])", row.id):
        return True
    return row.probe_case is not None and str(number) in case_values(dict(row.probe_case))


@dataclass(frozen=True)
class Threshold:
    """One §3.3 minimum: below `low` + 1 the XQA routes must not be taken and the named
    code is recorded; at `low` + 1 an XQA route is taken."""

    name: str
    low: int
    codes: tuple[str, ...]
    codecs: tuple[str | None, ...]
    gqas: tuple[int | None, ...] | None


THRESHOLDS = [
    # docs/contracts/attention.md §3.3 item 7 `short_verify`: max(max seq hint, workspace
    # capacity when capturing) < max(1, minimum), minimum 4096 (§1.3 default); E5M2 verify
    # has the E5M2 minimum too, so the E5M2 probes are the next threshold's; GQA 4 has its
    # own (item 4).
    Threshold("verify", 4095, ("short_verify",), ("auto", "fp8_e4m3", None), (6, 8, None)),
    # docs/contracts/attention.md §3.3 item 9 `short_e5m2` (decode; mixed: max seq hint) below 16384
    # (§1.3), or item 7 for an E5M2 verify probe (minimum "at least the E5M2 one"); GQA 4 is item
    # 8's.
    Threshold("e5m2", 16383, ("short_e5m2", "short_verify"), ("fp8_e5m2",), (6, 8, None)),
    # docs/contracts/attention.md §3.3 item 4 `short_gqa4`: below the GQA4 minimum 32768 (§1.3);
    # FP16 (E4M3 GQA 4 is item 5's `e4m3_gqa`, E5M2 GQA 4 item 8's).
    Threshold("gqa4", 32767, ("short_gqa4",), ("auto", None), (4,)),
]


def threshold_rows(
    rows: dict[str, A.Row], manifest: list[dict[str, Any]], t: Threshold, number: int
) -> list[A.Row]:
    out = []
    for row in added_probes(rows, manifest):
        if not at_value(row, number) or row_codec(row) not in t.codecs:
            continue
        if "_batch_" in row.id:
            continue  # the E4M3 batch-XQA probes (§6.3 rows 0/2/32) test the batch rule
        if (row.probe_case or {}).get("mask", "none") != "none":
            continue  # a window refuses XQA before any threshold (§3.3 partition_or_window)
        if t.gqas is not None and row_gqa(row) not in t.gqas:
            continue
        if t.name == "verify" and not any(
            n.startswith("prefill_smallq_") for n in row.all_routes()
        ):
            continue  # not a verifier row (§4.6 small query)
        out.append(row)
    return out


def captured_with_workspace_hint(row: A.Row) -> bool:
    """A probe that captures and declares a workspace capacity hint (§3.3 items 4, 7, 9)."""
    case = row.probe_case or {}
    return bool(case.get("capture")) and any(
        key.endswith("workspace_hint") and value is not None for key, value in case.items()
    )


@pytest.mark.parametrize("threshold", THRESHOLDS, ids=lambda t: t.name)
def test_each_threshold_has_both_sides_with_and_without_a_workspace_hint(
    rows: dict[str, A.Row], manifest: list[dict[str, Any]], threshold: Threshold
) -> None:
    # docs/contracts/attention.md §6.3: "the threshold edges of 3.3 (verify 4095/4096, E5M2
    # 16383/16384, GQA4 32767/32768, each with and without a capture workspace hint)": two
    # probes at least on each side.
    below = threshold_rows(rows, manifest, threshold, threshold.low)
    above = threshold_rows(rows, manifest, threshold, threshold.low + 1)
    assert len(below) >= 2 and len(above) >= 2, (
        f"{threshold.name}: probes at {threshold.low}: {[r.id for r in below]}, "
        f"at {threshold.low + 1}: {[r.id for r in above]} (two on each side expected)"
    )
    for side, group in (("below", below), ("above", above)):
        hinted = [r for r in group if captured_with_workspace_hint(r)]
        assert hinted and len(hinted) < len(group), (
            f"{threshold.name} {side}: {[r.id for r in group]} (one with a capture workspace "
            f"hint and one without expected; with: {[r.id for r in hinted]})"
        )
    for row in below:
        assert row.rejected is None, row.id
        assert row.all_routes() & A.XQA_ROUTES == set(), (row.id, row.all_routes())
        assert set(threshold.codes) & row.strings(), (row.id, threshold.codes)
    for row in above:
        routed(rows, row.id)
        for f in (0, 1):
            assert set(row.routes(f)) & A.XQA_ROUTES, (row.id, f, row.routes(f))


@pytest.mark.parametrize("stage", A.STAGES)
def test_e5m2_is_probed_at_each_stage(rows: dict[str, A.Row], stage: str) -> None:
    # docs/contracts/attention.md §6.3 "E5M2 at each stage" (§9 question 6: no golden case).
    assert [r.id for r in rows.values() if row_codec(r) == "fp8_e5m2" and row_stage(r) == stage]


@pytest.mark.parametrize("gqa", [4, 8])
def test_gqa_4_and_8_are_probed(rows: dict[str, A.Row], gqa: int) -> None:
    # docs/contracts/attention.md §6.3 "GQA 4 and 8" (the matrix has 1 and 6, §5.1).
    assert [r.id for r in rows.values() if row_gqa(r) == gqa]


@pytest.mark.parametrize("page", [784, 832, 848, 1616, 1648])
def test_the_listed_page_sizes_are_probed(rows: dict[str, A.Row], page: int) -> None:
    # docs/contracts/attention.md §6.3 "pages 784/832/848/1616/1648" (the trace's `page` key,
    # §5.1).
    assert [
        r.id for r in rows.values() if r.probe_case is not None and r.probe_case.get("page") == page
    ]


def test_a_partition_size_setting_removes_the_g6_hint_and_the_grouped_routes(
    rows: dict[str, A.Row],
) -> None:
    # docs/contracts/attention.md §1.3 VLLM_FLASH_V100_DECODE_PARTITION_SIZE: "when set, also
    # removes the G6 hint and the grouped FP32 routes (`decode_policy`)"; §4.4: the family
    # counters follow only a G6 hint; §6.3 asks for "a partition-size setting".
    grouped = {
        "prefill_smallq_fp16_grouped_fp32",
        "prefill_smallq_e4m3_grouped_fp32",
        "prefill_prefix_decode_rows_e4m3_grouped_fp32",
    }
    hinted = re.compile(r"decode_xqa_(?:e4m3_dynamic_page|p[0-9]+_page)[0-9]+")
    probes = [
        r
        for r in rows.values()
        if r.probe_case is not None
        and "VLLM_FLASH_V100_DECODE_PARTITION_SIZE" in (r.probe_case.get("env") or {})
    ]
    assert probes, "no row sets VLLM_FLASH_V100_DECODE_PARTITION_SIZE in its case env"
    for row in probes:
        routes = row.all_routes()
        assert routes & grouped == set(), (row.id, routes)
        assert not any(hinted.fullmatch(name) for name in routes), (row.id, routes)


# --- reason codes (docs/contracts/attention.md §3.3, §3.5, §6.3) -------------------------------


@pytest.mark.parametrize(
    "code",
    [
        # docs/contracts/attention.md §3.3 items the matrix and §6.3's probes must reach: `window`
        # (decode SWA D256 GQA6), `partition_or_window` (verify with SWA), `disabled` (XQA off, §6.3
        # lines 7-8), `short_verify` / `short_e5m2` / `short_gqa4` (the threshold probes),
        # `e4m3_batch` ("rows 0/2/32 with E4M3 batch XQA on and off"); §3.2 `head_dim` (D128) and
        # `gqa`.
        "window",
        "partition_or_window",
        "disabled",
        "short_verify",
        "short_e5m2",
        "short_gqa4",
        "e4m3_batch",
        "head_dim",
        "gqa",
    ],
)
def test_each_xqa_reason_the_probes_reach_is_recorded(rows: dict[str, A.Row], code: str) -> None:
    assert any(code in r.strings() for r in rows.values()), (
        f"no row of {A.SNAPSHOT.name} records the XQA route reason {code!r}"
    )


# --- routes behind the entries the trace's op set leaves out (routectl's own probes) -----------
# docs/contracts/attention.md §4.5, the Split-D wrapper's dense form: "the architecture op
# (counters `..._gqa_arch_long`, then `_v37` or `_79t_fp32`, then above 8000 `_q8192` (+ `_pad`
# below 8192) or `_fringe_fallback`), else split-KV3 ..., else plain Split-D"; §1.3: the
# architecture admission needs its switch; §2: the 79T routes span 8000..8192, the v37 one a
# multiple of 64. The rows declare the entry loaded (the explicit inputs).

ARCH = "prefill_dense_d256_gqa_arch_long"
T79 = "prefill_dense_d256_gqa_79t_fp32"
NO_PREFIX_SPLITD = ("prefill_dense_splitd_d256", "prefill_no_prefix_dense_flash")
ARCH_ROUTES = (
    ARCH,
    "prefill_dense_d256_gqa_v37",
    T79,
    "prefill_dense_d256_gqa_79t_fp32_fringe_fallback",
    "prefill_dense_d256_gqa_79t_fp32_q8192",
    "prefill_dense_d256_gqa_79t_fp32_q8192_pad",
)

OWN_PROBE_EXPECTATIONS = [
    # q 8000 exactly (the Q8000 core): the family counters, then the wrapper's caller.
    Expect("edge:prefill_q8000_arch", routes=(ARCH, T79, *NO_PREFIX_SPLITD), ops=("arch",)),
    # The admission switch off: plain Split-D (§1.3 "architecture-op admission").
    Expect(
        "edge:prefill_q8000_arch_switch_off",
        routes=NO_PREFIX_SPLITD,
        ops=("splitd_dense",),
    ),
    # Capturing: the architecture entry is not admitted; q % 64 -> plain Split-D.
    Expect("edge:prefill_q8000_arch_graph", routes=NO_PREFIX_SPLITD, excludes=ARCH_ROUTES),
    # 8128 > 8000 without the Q8192 specialization: the fringe counter.
    Expect(
        "edge:prefill_q8128_arch_fringe",
        routes=(ARCH, T79, "prefill_dense_d256_gqa_79t_fp32_fringe_fallback", *NO_PREFIX_SPLITD),
        ops_contain=("arch",),
    ),
    # With the Q8192 specialization: 8128 < 8192 is padded, 8192 is not.
    Expect(
        "edge:prefill_q8128_arch_q8192",
        routes=(
            ARCH,
            T79,
            "prefill_dense_d256_gqa_79t_fp32_q8192",
            "prefill_dense_d256_gqa_79t_fp32_q8192_pad",
            *NO_PREFIX_SPLITD,
        ),
    ),
    Expect(
        "edge:prefill_q8192_arch_q8192",
        routes=(ARCH, T79, "prefill_dense_d256_gqa_79t_fp32_q8192", *NO_PREFIX_SPLITD),
    ),
    # The v37 family on a contiguous prefix view (§4.6 FA2 -> contig Split-D, q 1024 < KV).
    Expect(
        "edge:prefix_q1024_arch_v37",
        routes=(
            ARCH,
            "prefill_dense_d256_gqa_v37",
            "prefill_prefix_contig_splitd_d256",
            "prefill_prefix_flash",
        ),
    ),
    # §4.6: FA2 (no contiguous view; gather minimum 4096 unmet -> paged Split-D, which the row
    # declares declining) -> contiguous BHMD (its op declared absent) -> contiguous dense with
    # the copy allowed: "FA2, else dense" -> the dense Split-D form completes.
    Expect(
        "edge:prefix_q1024_contig_copy_splitd",
        routes=("prefill_prefix_contig_dense_fa2_d256", "prefill_prefix_flash"),
        ops=("splitd_paged", "splitd_dense"),
    ),
    # §4.5 step 2 with two uniform draft sequences: the capture route, then §4.6's first
    # batch candidate, and no envelope.
    Expect(
        "edge:prefix_dflash_draft_graph_two_seqs",
        routes=("prefill_capture_dflash_noncausal_paged", "prefill_prefix_dflash_noncausal_batch"),
        ops=("paged",),
    ),
]


@pytest.mark.parametrize("expect", OWN_PROBE_EXPECTATIONS, ids=lambda e: e.row)
def test_own_probe_routes(rows: dict[str, A.Row], expect: Expect) -> None:
    check(rows, expect)


def test_the_captured_draft_calls_the_paged_entry_non_causally(rows: dict[str, A.Row]) -> None:
    # §4.5 step 2: a DFlash draft layer "with non-causal metadata".
    for name in ("edge:prefix_dflash_draft_graph", "edge:prefix_dflash_draft_graph_two_seqs"):
        row = routed(rows, name)
        for f in (0, 1):
            assert [o.get("causal") for o in row.ops(f)] == [False], (name, row.ops(f))


def test_architecture_routes_appear_only_where_the_entry_is_declared(
    rows: dict[str, A.Row],
) -> None:
    # §5.1: the trace's op set has no architecture entry, so no golden case and no probe that
    # leaves it out may record a long-prefill family route.
    for row in rows.values():
        declared = "arch" in ((row.probe_case or {}).get("present") or ())
        if row.all_routes() & set(ARCH_ROUTES):
            assert declared, row.id


# --- §3.5: every grouped FP32 admission code is recorded by a row ---------------------------
# The routes whose admission §3.5 describes (§2 "verify" and "mixed_decode").
GROUPED_ROUTES = frozenset(
    {
        "prefill_smallq_fp16_grouped_fp32",
        "prefill_smallq_e4m3_grouped_fp32",
        "prefill_prefix_decode_rows_e4m3_grouped_fp32",
    }
)
# Three codes no routed call can return: §4.6 asks the FP16 admission for the FP16 route and
# the E4M3 one for the two E4M3 routes (so a codec outside the admission's table never
# reaches it, `codec_unsupported`), only the E4M3 rows ask for explicit groups, which E4M3
# accepts (`layout_unsupported`), and §1.2 loads each grouped op only for a cache of its own
# codec (`kv_dtype`: the op is missing first).
NO_ROUTED_CALL = frozenset({"codec_unsupported", "layout_unsupported", "kv_dtype"})


def grouped_verdicts(rows: dict[str, A.Row]) -> dict[str, set[tuple[str, str]]]:
    """code -> {(row id, route)} over every grouped verdict the rows keep."""
    out: dict[str, set[tuple[str, str]]] = {}
    for row in rows.values():
        for forward in row.forwards:
            for verdict in forward.get("verdicts") or ():
                route, code = verdict[0], verdict[1]
                if route in GROUPED_ROUTES and isinstance(code, str):
                    out.setdefault(code, set()).add((row.id, route))
    return out


@pytest.mark.parametrize("code", A.GROUPED_FP32_CODES)
def test_each_grouped_fp32_code_is_recorded_by_a_row(rows: dict[str, A.Row], code: str) -> None:
    # docs/contracts/attention.md §6.3: "one probe per grouped FP32 reason code".
    seen = grouped_verdicts(rows).get(code, set())
    if code in NO_ROUTED_CALL:
        assert seen == set(), (code, sorted(seen))
        return
    assert seen, f"no row of {A.SNAPSHOT.name} records the grouped FP32 code {code!r}"
    for row_id, route in seen:
        # A refused admission never takes its route in that row.
        assert route not in rows[row_id].all_routes(), (code, row_id, route)


def test_the_grouped_codes_are_the_contracts_twenty() -> None:
    # §3.5 lists 21 checks, `query_rows` twice (before and after the group count).
    assert len(A.GROUPED_FP32_CODES) == len(set(A.GROUPED_FP32_CODES)) == 20
    assert NO_ROUTED_CALL <= set(A.GROUPED_FP32_CODES)


# --- §6.3 "rows 0/2/32 with E4M3 batch XQA on and off" -----------------------------------------


@pytest.mark.parametrize("rows_asked", [0, 2, 32])
def test_e4m3_rows_are_probed_with_batch_xqa_on_and_off(
    rows: dict[str, A.Row], rows_asked: int
) -> None:
    # §3.3 item 6: E4M3 with rows != 1 (decode) or > 1 (verify) is refused `e4m3_batch` unless
    # rows > 1 and E4M3 batch XQA is on; "decode and mixed do not" admit 0 rows.
    found: dict[str, list[str]] = {"1": [], "0": []}
    for row in rows.values():
        case = row.probe_case or {}
        if row.case is not None or case.get("codec") != "fp8_e4m3":
            continue
        lengths = case.get("lengths")
        asked = sum(lengths) if lengths else case.get("qlen")
        switch = (case.get("env") or {}).get("VLLM_FLASH_V100_E4M3_BATCH_XQA")
        if asked == rows_asked and switch in found:
            found[switch].append(row.id)
            xqa = row.all_routes() & A.XQA_ROUTES
            if rows_asked == 0 or switch == "0":
                assert xqa == set(), (row.id, xqa)
    assert found["1"] and found["0"], found


# --- the small-query cap (§1.2 SMALLQ_DECODE_MAX_Q "16"; §4.6 "max q <= cap") on both sides ----


def test_the_small_query_cap_has_both_sides(rows: dict[str, A.Row]) -> None:
    verifier = {name for name in A.DECLARED_ROUTES if name.startswith("prefill_smallq_")}
    seen = set()
    for row in rows.values():
        case = row.probe_case or {}
        if row.case is not None or case.get("stage") != "prefix" or case.get("spec") == "none":
            continue
        if case.get("env") or case.get("qlen") not in (16, 17) or case.get("lengths"):
            continue
        seen.add(case["qlen"])
        took = bool(routed(rows, row.id).all_routes() & verifier)
        assert took == (case["qlen"] == 16), (row.id, row.all_routes())
    assert seen == {16, 17}
