"""Reading the retained `sm70-attention` snapshot for the attention literal tests
(tests/test_attention_contract_literals.py), and the contract's names as literals.

Everything here is plumbing or a name copied from docs/contracts/attention.md (section cited
on each): the route table, the families, the 6.3 probe names, the reason codes and the row id
grammar. No selection rule is restated here: the tests write every expected route by hand.
The snapshot's envelope is routectl's ({"schema_version", "category", "basis", "rows"}, each
row {"id", "route"}); a row's `route` is the contract's 6.2 shape. Two spellings the
contract leaves open are both accepted: a row id with or without the `sm70-attention:`
category prefix, and the row's trace `case` object beside `route` or inside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CATEGORY = "sm70-attention"
SNAPSHOT = ROOT / "snapshots" / f"{CATEGORY}.json"
# The shared reference data sits beside the checkout (../shared from a worktree or from
# main); it is read as expected values only (the trace's case list), never as rows.
REFERENCE_CASES = (
    ROOT / "tests" / "fixtures" / "reference" / "attention" / "flash_v100_trace_cases.jsonl"
)

# --- docs/contracts/attention.md §2: the 57 declared routes, by the section's groups ----------

DECODE_ROUTES = (
    "decode_xqa_paged",
    "decode_scalar_paged",
    "decode_dense_cache",
    "decode_paged_prefill",
    "decode_dense_reference",
    "decode_e4m3_compact_scalar_tail",
    "decode_triton_no_flash_decode",
    "decode_triton_scalar_disabled",
    "decode_strategy_legacy_revision",
)
VERIFY_ROUTES = (
    "prefill_smallq_decode_xqa",
    "prefill_smallq_decode_scalar",
    "prefill_smallq_fp16_grouped_fp32",
    "prefill_smallq_e4m3_grouped_fp32",
    "prefill_smallq_dflash2_grouped_verify",
    "prefill_ddtree_triton",
    "prefill_ddtree_dense",
)
MIXED_DECODE_ROUTES = (
    "prefill_prefix_decode_rows_xqa",
    "prefill_prefix_decode_rows_e4m3_grouped_fp32",
    "prefill_prefix_decode_rows_scalar",
)
# The long-prefill D256 GQA6 family (§2 "prefill", its chunk table); `..._79t_fp32_*` there
# abbreviates prefill_dense_d256_gqa_79t_fp32.
LONG_PREFILL_ROUTES = (
    "prefill_dense_splitd_d256_splitkv3_kernel",
    "prefill_dense_d256_gqa_arch_long",
    "prefill_dense_d256_gqa_v37",
    "prefill_dense_d256_gqa_79t_fp32",
    "prefill_dense_d256_gqa_79t_fp32_fringe_fallback",
    "prefill_dense_d256_gqa_79t_fp32_q8192",
    "prefill_dense_d256_gqa_79t_fp32_q8192_pad",
)
# §2 "FP8 bridges": `..._d256_tailpad` after prefill_prefix_fp8_bridge_exact_d256 is read as
# that name plus `_tailpad` (the only reading under which the four are two exact/tailpad
# pairs, as the `..._exact_dense_d256(_tailpad)` pair is).
FP8_BRIDGE_ROUTES = (
    "prefill_prefix_fp8_bridge_exact_d256",
    "prefill_prefix_fp8_bridge_exact_d256_tailpad",
    "prefill_prefix_fp8_bridge_exact_dense_d256",
    "prefill_prefix_fp8_bridge_exact_dense_d256_tailpad",
    "prefill_prefix_fp8_e4m3_bridge",
    "prefill_prefix_fp8_e5m2_bridge",
)
SPLITD_ROUTES = (
    "prefill_dense_splitd_d256",
    "prefill_prefix_splitd_d256",
    "prefill_prefix_paged_splitd_d256",
    "prefill_prefix_gather_splitd_d256",
    "prefill_prefix_contig_splitd_d256",
)
FLASHINFER_ROUTES = ("flashinfer_sm70_fixed_entry", "flashinfer_sm70_splitkv3_fast_visible")
PREFILL_ROUTES = (
    (
        "prefill_no_prefix_dense_flash",
        "prefill_no_prefix_paged_cache_flash",
        "prefill_prefix_flash",
        "prefill_prefix_bfla",
        "prefill_prefix_contig_dense",
        "prefill_prefix_contig_dense_bhmd",
        "prefill_prefix_contig_dense_fa2_d256",
        "prefill_prefix_splitkv",
        "prefill_prefix_paged_anchored",
        "prefill_prefix_dflash_noncausal_batch",
    )
    + SPLITD_ROUTES
    + LONG_PREFILL_ROUTES
    + FP8_BRIDGE_ROUTES
    + ("prefill_triton_safe",)
    + FLASHINFER_ROUTES
)
ANY_ROUTES = ("unsupported_triton_fallback", "dflash_draft_triton_fallback")
METADATA_ROUTES = (
    "metadata_none_zero_output",
    "prefill_capture_dflash_noncausal_paged",
    "prefill_capture_smallq",
    "prefill_capture_smallq_ddtree_metadata",
    "prefill_capture_smallq_no_ddtree_metadata",
)
DECLARED_ROUTES = (
    DECODE_ROUTES
    + VERIFY_ROUTES
    + MIXED_DECODE_ROUTES
    + PREFILL_ROUTES
    + ANY_ROUTES
    + METADATA_ROUTES
)
# §2 "Totals": 9 declared fallbacks, 8 literal observers, 3 XQA routes.
FALLBACK_ROUTES = frozenset(
    {
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
)
OBSERVER_ROUTES = frozenset(
    {"decode_strategy_legacy_revision", *FLASHINFER_ROUTES, *METADATA_ROUTES}
)
XQA_ROUTES = frozenset(
    {"decode_xqa_paged", "prefill_smallq_decode_xqa", "prefill_prefix_decode_rows_xqa"}
)
# Counted at construction (§2 decode table; §6.2 puts construction-time counters outside
# `forwards`, and §5.2 says the trace cannot show them).
CONSTRUCTION_ROUTES = frozenset({"decode_strategy_legacy_revision"})
# §2 "families (O)": a name outside the table must match one of the four in full.
FAMILY_PATTERNS = (
    re.compile(r"decode_xqa_e4m3_dynamic_page[0-9]+"),
    re.compile(r"decode_xqa_p[0-9]+_page[0-9]+"),
    re.compile(r"fp8_kv_decode(?:_[a-z0-9_]+)?"),
    re.compile(r"fp8_kv_prefill(?:_[a-z0-9_]+)?"),
)

# --- docs/contracts/attention.md §3.3 and §3.5: reason codes -----------------------------------

SHAPE_CODES = (
    "codec",
    "head_dim",
    "gqa",
    "page_alignment",
    "page_size",
    "min_chunk",
    "max_chunk",
    "chunk_alignment",
    "chunk_size",
)
ROUTE_CODES = ("stage", "disabled", "unavailable")
XQA_CODES = (
    "partition_or_window",
    "sequence_rows",
    "gqa",
    "short_gqa4",
    "e4m3_gqa",
    "e4m3_batch",
    "short_verify",
    "e5m2_gqa4",
    "short_e5m2",
    "window",
)
# §3.5's table, first failing check first (`query_rows` appears twice there: one code).
GROUPED_FP32_CODES = (
    "codec_unsupported",
    "layout_unsupported",
    "query_rows",
    "operator_missing:sm70_grouped_fp16_fwd",
    "operator_missing:grouped_e4m3_fp32",
    "operator_batch_revision",
    "kv_dtype",
    "decode_policy",
    "causal_or_window",
    "request_metadata",
    "request_group_count",
    "head_shape",
    "query_or_output_layout",
    "output_shape",
    "kv_shape_or_unmeasured_page",
    "kv_layout",
    "context_capacity",
    "row_metadata",
    "device_not_cuda",
    "metadata_layout",
)

# --- docs/contracts/attention.md §5.1: the refusals' message cores ----------------------------

ANCHOR_FP8_CORE = "prefix-anchored SWA requires"
ANCHOR_DDTREE_CORE = "does not support ddtree"
DDTREE_FP8_CAPTURE_CORE = "unsupported key cache dtype"
REFUSAL_CORES = (ANCHOR_FP8_CORE, ANCHOR_DDTREE_CORE, DDTREE_FP8_CAPTURE_CORE)

# --- docs/contracts/attention.md §6.3: manifest line (1-based) -> probe name -------------------

MANIFEST_PROBES: tuple[str, ...] = (
    "decode_diagnostics_all",
    "decode_diagnostics_all_graph",
    "decode_dense_cache_reference",
    "decode_dense_cache_reference_graph",
    "decode_dense_reference",
    "decode_dense_reference_graph",
    "decode_xqa_off",
    "decode_xqa_off_graph",
    "prefix_bfla_forced",
    "prefix_bfla_forced_graph",
    "prefix_contig_dense_forced",
    "prefix_contig_dense_forced_graph",
    "prefix_contig_dense_copy",
    "prefix_contig_dense_copy_graph",
    "prefix_splitkv_forced",
    "prefix_splitkv_forced_graph",
    "prefix_paged_cache",
    "prefix_paged_cache_graph",
    "prefix_paged_prefill_off",
    "prefix_paged_prefill_off_graph",
    "prefill_q1024",
    "prefill_q1024_declined",
    "prefix_q1024",
    "prefix_q1024_declined",
    "prefill_q8192",
    "mixed_dflash_draft",
    "prefix_dflash_draft_graph",
    "metadata_none",
    "prefix_dense_op_missing",
    "decode_op_missing",
    "prefix_triton_forced",
    "decode_scalar_off",
    "prefill_paged_cache",
    "decode_xqa_off_after_init",
    "prefix_gather_dense_declined",
    "prefix_dflash2_page832",
    "prefix_dflash2_page832_graph",
    "prefix_dflash2_page832_e4m3",
    "prefix_dflash2_page832_e4m3_graph",
    "prefix_q1024_bfla",
    "prefix_contig_dense_contiguous_kv",
    "decode_e4m3_rev1_page784",
    "decode_e4m3_rev1_page784_graph",
    "decode_e4m3_rev1_page832",
    "decode_e4m3_rev1_page832_graph",
)

# --- docs/contracts/attention.md §5.1 and §6.1: the matrix axes and the id grammar -------------

STAGES = ("prefill", "prefix", "decode", "mixed")
CODECS = ("auto", "fp8_e4m3")
HEADS = (128, 256)
GQAS = (1, 6)
CAPTURES = (False, True)
SPECS = ("none", "dflash2", "ddtree", "mtp")
MASKS = ("none", "swa", "anchor")
KV_OF_CODEC = {"auto": "float16", "fp8_e4m3": "fp8_e4m3"}
MATRIX_ID = re.compile(
    r"(?P<stage>prefill|prefix|decode|mixed)-h(?P<head>[0-9]+)g(?P<gqa>[0-9]+)"
    r"-(?P<mask>none|swa|anchor)-(?P<mode>eager|graph)"
    r"/(?P<kv>[a-z0-9_]+)/tp1/(?P<spec>[a-z0-9]+)/c(?P<sequences>[0-9]+)/q(?P<query>[0-9]+)"
)
EDGE_ID = re.compile(r"edge:[a-z0-9_]+")


class SnapshotMissing(Exception):
    """The retained snapshot (or the reference case list) is not where the tests read it."""


def bare_id(row_id: str) -> str:
    """The id without the optional `sm70-attention:` prefix (§6.1 writes it with the prefix,
    routectl's retained files without)."""
    prefix = f"{CATEGORY}:"
    return row_id[len(prefix) :] if row_id.startswith(prefix) else row_id


@dataclass(frozen=True)
class Row:
    """One snapshot row: its bare id, its route object and its trace case (or None)."""

    id: str
    route: Mapping[str, Any]
    case: Mapping[str, Any] | None

    @property
    def probe_case(self) -> Mapping[str, Any] | None:
        """The trace case, or for routectl's own probes (no golden case) the keys the row
        declares as inputs: its case keys, layout inputs, and variables as `env`."""
        if self.case is not None:
            return self.case
        inputs = self.route.get("inputs")
        if not isinstance(inputs, Mapping) or not isinstance(inputs.get("case"), Mapping):
            return None
        return {
            **inputs["case"],
            **(inputs.get("layout") or {}),
            "env": dict(inputs.get("variables") or {}),
        }

    @property
    def forwards(self) -> list[Mapping[str, Any]]:
        forwards = self.route.get("forwards")
        return list(forwards) if isinstance(forwards, list) else []

    @property
    def rejected(self) -> Mapping[str, Any] | None:
        rejected = self.route.get("rejected")
        return rejected if isinstance(rejected, Mapping) else None

    def routes(self, forward: int) -> list[str]:
        return [_name(r) for r in self.forwards[forward].get("routes", [])]

    def ops(self, forward: int) -> list[Mapping[str, Any]]:
        return [
            o if isinstance(o, Mapping) else {"name": o}
            for o in self.forwards[forward].get("ops", [])
        ]

    def op_names(self, forward: int) -> list[str]:
        return [str(o.get("name")) for o in self.ops(forward)]

    def checks(self, forward: int) -> list[tuple[str, Any]]:
        out = []
        for check in self.forwards[forward].get("checks", []):
            if isinstance(check, Mapping):
                out.append((str(check.get("name")), check.get("result")))
            else:
                out.append((str(check[0]), check[1]))
        return out

    def all_routes(self) -> set[str]:
        return {name for f in range(len(self.forwards)) for name in self.routes(f)}

    def strings(self) -> set[str]:
        """Every string value anywhere in the route (verdict codes, counters, names), the
        trace case (when it sits inside the route) left out."""
        return set(string_leaves({k: v for k, v in self.route.items() if k != "case"}))

    def strings_outside_forwards(self) -> set[str]:
        return set(
            string_leaves({k: v for k, v in self.route.items() if k not in ("forwards", "case")})
        )


def _name(entry: Any) -> str:
    return str(entry.get("name")) if isinstance(entry, Mapping) else str(entry)


def string_leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from string_leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from string_leaves(item)


def load_rows(path: Path = SNAPSHOT) -> dict[str, Row]:
    """The snapshot's rows by bare id; SnapshotMissing when the file is absent."""
    if not path.is_file():
        raise SnapshotMissing(
            f"{path} does not exist: the sm70-attention category's retained snapshot "
            "(issue 35) must be generated and committed before these literal tests can pass "
            "(python -m routectl snapshot -c sm70-attention -o snapshots/sm70-attention.json)"
        )
    data = json.loads(path.read_text(encoding="utf-8"))
    rows: dict[str, Row] = {}
    for raw in data["rows"]:
        route = raw["route"]
        case = raw.get("case", route.get("case") if isinstance(route, Mapping) else None)
        rows[bare_id(raw["id"])] = Row(bare_id(raw["id"]), route, case)
    return rows


def load_reference_cases(path: Path = REFERENCE_CASES) -> list[dict[str, Any]]:
    """The 45 manifest cases, in file order (§5.1)."""
    if not path.is_file():
        raise SnapshotMissing(
            f"{path} does not exist: the shared attention reference data "
            "(tests/fixtures/reference/attention/, a copy of the reference case list) is missing"
        )
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def matrix_cases() -> list[dict[str, Any]]:
    """The 768 matrix cases in the trace's product order and spellings (§5.1)."""
    return [
        {
            "stage": stage,
            "codec": codec,
            "head": head,
            "gqa": gqa,
            "capture": capture,
            "spec": spec,
            "mask": mask,
        }
        for stage in STAGES
        for codec in CODECS
        for head in HEADS
        for gqa in GQAS
        for capture in CAPTURES
        for spec in SPECS
        for mask in MASKS
    ]


def matrix_id(case: Mapping[str, Any]) -> str:
    """§6.1's id of a matrix case: c is 3 for mixed (query lengths [q, 1, 4]) else 1; q is
    the largest query length: 1 for decode, else 32, or 4 with a spec (§5.1)."""
    mode = "graph" if case["capture"] else "eager"
    sequences = 3 if case["stage"] == "mixed" else 1
    query = 1 if case["stage"] == "decode" else (32 if case["spec"] == "none" else 4)
    return (
        f"{case['stage']}-h{case['head']}g{case['gqa']}-{case['mask']}-{mode}"
        f"/{KV_OF_CODEC[case['codec']]}/tp1/{case['spec']}/c{sequences}/q{query}"
    )


def canonical(case: Mapping[str, Any]) -> str:
    """A case dict as a hashable key: exact dict equality (§7), key order ignored."""
    return json.dumps(case, sort_keys=True)
