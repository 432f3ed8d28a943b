"""The FLASH_ATTN_V100 route table and its capability classes (docs/contracts/attention.md
§2-3): the 57 declared routes with their stage, codecs, shape limits and roles, the four
observer families, the route shape, `shape_reason` / `route_reason` in the contract's order,
`select_route` keeping every candidate's verdict, and the grouped FP32 admission codes (§3.5).

Every function here is pure: a route context is explicit data (the codec the XQA operator
would read, the host-visible shape, the sequence hints the metadata builder would attach, the
window), never tensors. Only the three XQA routes consult their limits at run time (§3.4); the
other declared limits are data, proved per route and codec by the tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

FP16 = "float16"
E4M3 = "fp8_e4m3"
E5M2 = "fp8_e5m2"
BF16 = "bfloat16"
DEFAULT_CODECS = (FP16, E4M3, E5M2)
ALL_CODECS = (*DEFAULT_CODECS, BF16)
FP8_CODECS = (E4M3, E5M2)

# The backend that records a route: the two FlashInfer SM70 observers belong to the sibling
# backend, whose routing routectl does not model (§2).
FLASH_V100 = "flash_attn_v100"
FLASHINFER_SM70 = "flashinfer_sm70"

STAGES = ("decode", "verify", "mixed_decode", "prefill", "any", "metadata")


@dataclass(frozen=True)
class RouteSpec:
    """One declared route (§2): the counter name and the limits it declares."""

    name: str
    stage: str
    codecs: tuple[str, ...] = DEFAULT_CODECS
    head_dims: tuple[int, ...] = ()  # empty: any
    gqa_ratios: tuple[int, ...] = ()
    page_alignment: int = 0
    page_sizes: tuple[int, ...] = ()
    chunk_alignment: int = 0
    min_chunk: int = 0
    max_chunk: int = 0
    chunk_sizes: tuple[int, ...] = ()
    fallback: bool = False
    observer: bool = False
    xqa: bool = False
    backend: str = FLASH_V100


def _d256(**limits: object) -> dict[str, object]:
    return {"head_dims": (256,), **limits}


_G6 = {"head_dims": (256,), "gqa_ratios": (6,), "page_alignment": 16}
_GQA6_LONG = {"codecs": (FP16,), "head_dims": (256,), "gqa_ratios": (6,)}

ROUTE_SPECS: Mapping[str, RouteSpec] = {
    spec.name: spec
    for spec in (
        # decode (9)
        RouteSpec("decode_xqa_paged", "decode", head_dims=(256,), gqa_ratios=(4, 6, 8), xqa=True),
        RouteSpec("decode_scalar_paged", "decode", fallback=True),
        RouteSpec("decode_dense_cache", "decode"),
        RouteSpec("decode_paged_prefill", "decode"),
        RouteSpec("decode_dense_reference", "decode", codecs=ALL_CODECS),
        RouteSpec("decode_e4m3_compact_scalar_tail", "decode", codecs=(E4M3,), **_G6),  # type: ignore[arg-type]
        RouteSpec("decode_triton_no_flash_decode", "decode", codecs=ALL_CODECS, fallback=True),
        RouteSpec("decode_triton_scalar_disabled", "decode", codecs=ALL_CODECS, fallback=True),
        RouteSpec(
            "decode_strategy_legacy_revision",
            "decode",
            codecs=(E4M3,),
            fallback=True,
            observer=True,
        ),
        # verify = small-query prefix prefill (7)
        RouteSpec(
            "prefill_smallq_decode_xqa", "verify", head_dims=(256,), gqa_ratios=(6, 8), xqa=True
        ),
        RouteSpec("prefill_smallq_decode_scalar", "verify", fallback=True),
        RouteSpec("prefill_smallq_fp16_grouped_fp32", "verify", codecs=(FP16,), **_G6),  # type: ignore[arg-type]
        RouteSpec("prefill_smallq_e4m3_grouped_fp32", "verify", codecs=(E4M3,), **_G6),  # type: ignore[arg-type]
        RouteSpec("prefill_smallq_dflash2_grouped_verify", "verify"),
        RouteSpec("prefill_ddtree_triton", "verify", codecs=ALL_CODECS),
        RouteSpec("prefill_ddtree_dense", "verify"),
        # mixed-batch decode rows (3)
        RouteSpec(
            "prefill_prefix_decode_rows_xqa",
            "mixed_decode",
            head_dims=(256,),
            gqa_ratios=(4, 6, 8),
            xqa=True,
        ),
        RouteSpec(
            "prefill_prefix_decode_rows_e4m3_grouped_fp32",
            "mixed_decode",
            codecs=(E4M3,),
            **_G6,  # type: ignore[arg-type]
        ),
        RouteSpec("prefill_prefix_decode_rows_scalar", "mixed_decode", fallback=True),
        # prefill (31): envelopes and per-sequence prefix routes
        RouteSpec("prefill_no_prefix_dense_flash", "prefill"),
        RouteSpec("prefill_no_prefix_paged_cache_flash", "prefill"),
        RouteSpec("prefill_prefix_flash", "prefill"),
        RouteSpec("prefill_prefix_bfla", "prefill"),
        RouteSpec("prefill_prefix_contig_dense", "prefill"),
        RouteSpec("prefill_prefix_contig_dense_bhmd", "prefill"),
        RouteSpec("prefill_prefix_contig_dense_fa2_d256", "prefill"),
        RouteSpec("prefill_prefix_splitkv", "prefill"),
        RouteSpec("prefill_prefix_paged_anchored", "prefill"),
        RouteSpec("prefill_prefix_dflash_noncausal_batch", "prefill"),
        # Split-D D256 (FP16)
        RouteSpec("prefill_dense_splitd_d256", "prefill", codecs=(FP16,), head_dims=(256,)),
        RouteSpec("prefill_prefix_splitd_d256", "prefill", codecs=(FP16,), head_dims=(256,)),
        RouteSpec("prefill_prefix_paged_splitd_d256", "prefill", codecs=(FP16,), head_dims=(256,)),
        RouteSpec("prefill_prefix_gather_splitd_d256", "prefill", codecs=(FP16,), head_dims=(256,)),
        RouteSpec("prefill_prefix_contig_splitd_d256", "prefill", codecs=(FP16,), head_dims=(256,)),
        # long-prefill D256 GQA6 family (architecture ops, absent in the trace)
        RouteSpec(
            "prefill_dense_splitd_d256_splitkv3_kernel",
            "prefill",
            chunk_sizes=(4096, 8000),
            **_GQA6_LONG,  # type: ignore[arg-type]
        ),
        RouteSpec(
            "prefill_dense_d256_gqa_arch_long",
            "prefill",
            min_chunk=64,
            max_chunk=8192,
            **_GQA6_LONG,  # type: ignore[arg-type]
        ),
        RouteSpec(
            "prefill_dense_d256_gqa_v37",
            "prefill",
            min_chunk=64,
            max_chunk=8192,
            chunk_alignment=64,
            **_GQA6_LONG,  # type: ignore[arg-type]
        ),
        RouteSpec(
            "prefill_dense_d256_gqa_79t_fp32",
            "prefill",
            min_chunk=8000,
            max_chunk=8192,
            **_GQA6_LONG,  # type: ignore[arg-type]
        ),
        RouteSpec(
            "prefill_dense_d256_gqa_79t_fp32_fringe_fallback",
            "prefill",
            min_chunk=8001,
            max_chunk=8192,
            **_GQA6_LONG,  # type: ignore[arg-type]
        ),
        RouteSpec(
            "prefill_dense_d256_gqa_79t_fp32_q8192",
            "prefill",
            min_chunk=8001,
            max_chunk=8192,
            **_GQA6_LONG,  # type: ignore[arg-type]
        ),
        RouteSpec(
            "prefill_dense_d256_gqa_79t_fp32_q8192_pad",
            "prefill",
            min_chunk=8001,
            max_chunk=8191,
            **_GQA6_LONG,  # type: ignore[arg-type]
        ),
        # FP8 bridges
        RouteSpec(
            "prefill_prefix_fp8_bridge_exact_d256", "prefill", codecs=FP8_CODECS, head_dims=(256,)
        ),
        RouteSpec(
            "prefill_prefix_fp8_bridge_exact_d256_tailpad",
            "prefill",
            codecs=FP8_CODECS,
            head_dims=(256,),
        ),
        RouteSpec(
            "prefill_prefix_fp8_bridge_exact_dense_d256",
            "prefill",
            codecs=FP8_CODECS,
            head_dims=(256,),
        ),
        RouteSpec(
            "prefill_prefix_fp8_bridge_exact_dense_d256_tailpad",
            "prefill",
            codecs=FP8_CODECS,
            head_dims=(256,),
        ),
        RouteSpec("prefill_prefix_fp8_e4m3_bridge", "prefill", codecs=(E4M3,)),
        RouteSpec("prefill_prefix_fp8_e5m2_bridge", "prefill", codecs=(E5M2,)),
        RouteSpec("prefill_triton_safe", "prefill", codecs=ALL_CODECS, fallback=True),
        # the sibling FlashInfer SM70 backend's observers
        RouteSpec(
            "flashinfer_sm70_fixed_entry",
            "prefill",
            codecs=(FP16,),
            head_dims=(256,),
            page_alignment=16,
            page_sizes=(784,),
            observer=True,
            backend=FLASHINFER_SM70,
        ),
        RouteSpec(
            "flashinfer_sm70_splitkv3_fast_visible",
            "prefill",
            codecs=(FP16,),
            head_dims=(256,),
            page_alignment=16,
            page_sizes=(784,),
            observer=True,
            backend=FLASHINFER_SM70,
        ),
        # any stage (2)
        RouteSpec("unsupported_triton_fallback", "any", codecs=ALL_CODECS, fallback=True),
        RouteSpec("dflash_draft_triton_fallback", "any", codecs=ALL_CODECS, fallback=True),
        # metadata observers (5)
        RouteSpec("metadata_none_zero_output", "metadata", codecs=ALL_CODECS, observer=True),
        RouteSpec(
            "prefill_capture_dflash_noncausal_paged", "metadata", codecs=ALL_CODECS, observer=True
        ),
        RouteSpec("prefill_capture_smallq", "metadata", codecs=ALL_CODECS, observer=True),
        RouteSpec(
            "prefill_capture_smallq_ddtree_metadata", "metadata", codecs=ALL_CODECS, observer=True
        ),
        RouteSpec(
            "prefill_capture_smallq_no_ddtree_metadata",
            "metadata",
            codecs=ALL_CODECS,
            observer=True,
        ),
    )
}

# The observer families (§2, "families"): a name is matched against the table first.
ROUTE_FAMILIES: Mapping[str, re.Pattern[str]] = {
    "decode_xqa_e4m3_dynamic_page": re.compile(r"decode_xqa_e4m3_dynamic_page[0-9]+"),
    "decode_xqa_p_page": re.compile(r"decode_xqa_p[0-9]+_page[0-9]+"),
    "fp8_kv_decode": re.compile(r"fp8_kv_decode(?:_[a-z0-9_]+)?"),
    "fp8_kv_prefill": re.compile(r"fp8_kv_prefill(?:_[a-z0-9_]+)?"),
}
CONSTRUCTION_ROUTES = ("decode_strategy_legacy_revision",)


def validate_route(name: str) -> str:
    """`name` when it is declared (the table first, then the families); else ValueError
    (core "Undeclared Flash-V100 route"): a recorded name outside both is a bug."""
    if name in ROUTE_SPECS or any(p.fullmatch(name) for p in ROUTE_FAMILIES.values()):
        return name
    raise ValueError(f"Undeclared Flash-V100 route: {name!r}")


def is_observer(name: str) -> bool:
    """An observer or family counter: recorded beside the route that does the work."""
    spec = ROUTE_SPECS.get(name)
    return spec.observer if spec is not None else True


# --- route shape and reasons (§3) ---------------------------------------------------------


@dataclass(frozen=True)
class RouteShape:
    """The host-visible shape of a call (§3.1); it never reads device sequence lengths."""

    rows: int
    heads_q: int
    heads_kv: int
    head_dim: int
    page_size: int = 0
    chunk_size: int = 0

    @property
    def gqa(self) -> int:
        if self.heads_kv <= 0 or self.heads_q % self.heads_kv:
            return 0
        return self.heads_q // self.heads_kv


def shape_reason(spec: RouteSpec, codec: str | None, shape: RouteShape) -> str | None:
    """The first declared limit `shape` (with `codec`) violates, in §3.2's order."""
    if codec is None or codec not in spec.codecs:
        return "codec"
    if spec.head_dims and shape.head_dim not in spec.head_dims:
        return "head_dim"
    if spec.gqa_ratios and shape.gqa not in spec.gqa_ratios:
        return "gqa"
    if spec.page_alignment > 1 and (shape.page_size <= 0 or shape.page_size % spec.page_alignment):
        return "page_alignment"
    if spec.page_sizes and shape.page_size not in spec.page_sizes:
        return "page_size"
    if spec.min_chunk and shape.chunk_size < spec.min_chunk:
        return "min_chunk"
    if spec.max_chunk and shape.chunk_size > spec.max_chunk:
        return "max_chunk"
    if spec.chunk_alignment and shape.chunk_size % spec.chunk_alignment:
        return "chunk_alignment"
    if spec.chunk_sizes and shape.chunk_size not in spec.chunk_sizes:
        return "chunk_size"
    return None


@dataclass(frozen=True)
class XqaThresholds:
    """The policy values the XQA rules read (§1.3), resolved once per engine."""

    e4m3_batch_xqa: bool = True
    smallq_min_seq_len: int = 4096
    gqa4_min_seq_len: int = 32768
    e5m2_min_seq_len: int = 16384


@dataclass(frozen=True)
class RouteContext:
    """What `route_reason` reads (§3.3): the stage, the XQA codec (None: the operator does not
    read this cache natively), the shape, whether the route is enabled and its op loaded, and
    the hints the metadata builder attaches (None: absent)."""

    stage: str
    codec: str | None
    shape: RouteShape
    enabled: bool
    available: bool
    seq_rows: int | None = None
    max_seq_len_hint: int | None = None
    workspace_seq_capacity_hint: int | None = None
    static_seq_len_hint: int | None = None
    partition_size_hint: int | None = None
    window: bool = False
    capturing: bool = False
    thresholds: XqaThresholds = XqaThresholds()


def _first_present(*hints: int | None) -> int | None:
    return next((h for h in hints if h is not None), None)


def _xqa_reason(spec: RouteSpec, ctx: RouteContext) -> str | None:
    """Steps 1-10 of §3.3 (XQA specs only)."""
    verify = ctx.stage == "verify"
    rows, gqa, limits = ctx.shape.rows, ctx.shape.gqa, ctx.thresholds
    if verify and (ctx.partition_size_hint is not None or ctx.window):
        return "partition_or_window"
    if ctx.seq_rows is not None and ctx.seq_rows != rows:
        return "sequence_rows"
    if verify and gqa not in (6, 8):
        return "gqa"
    if not verify and gqa == 4:
        if ctx.stage == "decode":
            hint = _first_present(
                ctx.workspace_seq_capacity_hint, ctx.static_seq_len_hint, ctx.max_seq_len_hint
            )
        else:
            hint = ctx.max_seq_len_hint
        if hint is None or hint < limits.gqa4_min_seq_len:
            return "short_gqa4"
    if ctx.codec == E4M3 and gqa != 6:
        return "e4m3_gqa"
    if ctx.codec == E4M3:
        batch_ok = rows > 1 and limits.e4m3_batch_xqa
        if verify and rows > 1 and not batch_ok:
            return "e4m3_batch"
        if not verify and rows != 1 and not batch_ok:
            return "e4m3_batch"
    if verify:
        minimum = limits.smallq_min_seq_len
        if ctx.codec == E5M2:
            minimum = max(minimum, limits.e5m2_min_seq_len)
        seen = max(
            ctx.max_seq_len_hint or 0,
            (ctx.workspace_seq_capacity_hint or 0) if ctx.capturing else 0,
        )
        if seen < max(1, minimum):
            return "short_verify"
    if not verify and ctx.codec == E5M2 and gqa == 4:
        return "e5m2_gqa4"
    if not verify and ctx.codec == E5M2:
        if ctx.stage == "decode":
            order = (
                (ctx.static_seq_len_hint, ctx.workspace_seq_capacity_hint, ctx.max_seq_len_hint)
                if ctx.capturing
                else (
                    ctx.max_seq_len_hint,
                    ctx.static_seq_len_hint,
                    ctx.workspace_seq_capacity_hint,
                )
            )
            hint = _first_present(*order)
        else:
            hint = ctx.max_seq_len_hint
        if hint is None or hint < limits.e5m2_min_seq_len:
            return "short_e5m2"
    if ctx.stage == "decode" and ctx.window:
        return "window"
    return None


def route_reason(spec: RouteSpec, ctx: RouteContext) -> str | None:
    """Why `spec` cannot serve `ctx`, in §3.3's order; None: it can."""
    if spec.stage not in (ctx.stage, "any"):
        return "stage"
    if not ctx.enabled:
        return "disabled"
    if not ctx.available:
        return "unavailable"
    reason = shape_reason(spec, ctx.codec, ctx.shape)
    if reason is not None:
        return reason
    return _xqa_reason(spec, ctx) if spec.xqa else None


# --- capability classes and the selector (§3.4, §4.1) -------------------------------------


@dataclass(frozen=True)
class Verdict:
    """One candidate's outcome: its name and the reason code (None: admitted)."""

    route: str
    code: str | None

    def to_json(self) -> dict[str, str | None]:
        return {"route": self.route, "code": self.code}


@dataclass(frozen=True)
class RouteCandidate:
    """A declared route as a capability class: `is_supported` (the hardware) and
    `can_implement` (the call's context) return the contract's reason codes."""

    spec: RouteSpec

    def is_supported(self, capability: int) -> tuple[bool, str | None]:
        # The backend is SM70's; its grouped FP32 verifiers need capability exactly 70.
        if capability != 70:
            return False, "capability"
        return True, None

    def can_implement(self, ctx: RouteContext) -> tuple[bool, str | None]:
        reason = route_reason(self.spec, ctx)
        return reason is None, reason


def select_route(
    capability: int,
    ctx: RouteContext,
    candidates: Sequence[str],
    fallback: str | None = None,
) -> tuple[RouteSpec | None, tuple[Verdict, ...]]:
    """The first admitted candidate in order (§4.1), with every candidate's verdict. None
    admitted: the declared fallback, or None without one."""
    verdicts: list[Verdict] = []
    chosen: RouteSpec | None = None
    for name in candidates:
        candidate = RouteCandidate(ROUTE_SPECS[validate_route(name)])
        ok, code = candidate.is_supported(capability)
        if ok:
            ok, code = candidate.can_implement(ctx)
        verdicts.append(Verdict(name, code))
        if ok and chosen is None:
            chosen = candidate.spec
    if chosen is None and fallback is not None:
        spec = ROUTE_SPECS[validate_route(fallback)]
        if not spec.fallback:
            # Core "Route is not a declared fallback": a caller's bug, as upstream.
            raise ValueError(f"Route is not a declared fallback: {fallback!r}")
        chosen = spec
    return chosen, tuple(verdicts)


# --- grouped FP32 admission (§3.5) --------------------------------------------------------

GROUP_ROWS = 8
MAX_CONTEXT = 266240
GROUPED_OPERATORS = {FP16: "sm70_grouped_fp16_fwd", E4M3: "grouped_e4m3_fp32"}
GROUPED_REASONS = (
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


@dataclass(frozen=True)
class GroupedContract:
    max_groups: int
    explicit_groups: bool
    page_sizes: tuple[int, ...]
    page_alignment: int
    query_heads: int | None
    require_cuda: bool
    batch_revision: int | None
    early_query_layout: bool
    early_cache_dtype: bool
    metadata_before_cache_layout: bool


GROUPED_CONTRACTS: Mapping[str, GroupedContract] = {
    FP16: GroupedContract(4, False, (832,), 1, 6, True, None, False, False, False),
    E4M3: GroupedContract(16, True, (), 16, None, False, 6, True, True, True),
}


@dataclass(frozen=True)
class GroupedInputs:
    """What the grouped admission reads, as explicit facts (§3.5). `groups` is the number of
    parent requests (request rows) or of eight-row groups (explicit groups)."""

    codec: str | None
    layer_codec: str
    rows: int
    groups: int
    heads_q: int
    head_dim: int
    heads_kv: int
    page_size: int
    table_width: int
    operator_present: bool
    batch_revision: int = 0
    explicit_groups: bool = False
    smallq_xqa: bool = True
    partition_hint: bool = False
    partition_setting: bool = False
    causal: bool = True
    window: bool = False
    parent_metadata: bool = True
    parent_seq_rows: int | None = None  # None: as many as groups
    row_lengths: int | None = None  # None: as many as rows
    row_table_rows: int | None = None  # None: as many as rows
    row_table_width: int | None = None  # None: the parent's width
    cache_stores_codec: bool = True
    query_layout_ok: bool = True
    output_shape_ok: bool = True
    cache_layout_ok: bool = True
    metadata_layout_ok: bool = True
    on_cuda: bool = True


def grouped_fp32_reason(inputs: GroupedInputs) -> str | None:
    """The first failing grouped FP32 check (§3.5), None: admitted. FP16 and E4M3 check query
    layout, cache dtype and metadata in different orders, as upstream does."""
    if inputs.codec is None or inputs.codec not in GROUPED_CONTRACTS:
        return "codec_unsupported"
    contract = GROUPED_CONTRACTS[inputs.codec]
    if inputs.explicit_groups and not contract.explicit_groups:
        return "layout_unsupported"
    groups, rows = inputs.groups, inputs.rows
    if inputs.explicit_groups and not (
        1 <= groups <= contract.max_groups and rows == groups * GROUP_ROWS
    ):
        return "query_rows"
    batch_supported = (
        contract.batch_revision is None
        or groups <= 1
        or inputs.batch_revision >= contract.batch_revision
    )
    if not inputs.operator_present:
        return f"operator_missing:{GROUPED_OPERATORS[inputs.codec]}"
    if not batch_supported:
        return "operator_batch_revision"
    if inputs.layer_codec != inputs.codec:
        return "kv_dtype"
    if not inputs.smallq_xqa or inputs.partition_hint or inputs.partition_setting:
        return "decode_policy"
    if not inputs.causal or inputs.window:
        return "causal_or_window"
    if not inputs.explicit_groups and not inputs.parent_metadata:
        return "request_metadata"
    if not 1 <= groups <= contract.max_groups:
        return "request_group_count"
    if not ((groups == 1 and 2 <= rows <= GROUP_ROWS) or (groups > 1 and rows == groups * 8)):
        return "query_rows"
    if contract.query_heads is not None:
        if (inputs.heads_q, inputs.head_dim) != (contract.query_heads, 256):
            return "head_shape"
    elif inputs.heads_q <= 0 or inputs.head_dim != 256:
        return "head_shape"
    if contract.early_query_layout and not inputs.query_layout_ok:
        return "query_or_output_layout"
    if contract.early_query_layout and not inputs.output_shape_ok:
        return "output_shape"
    page = inputs.page_size
    if (
        page <= 0
        or page % contract.page_alignment
        or (contract.page_sizes and page not in contract.page_sizes)
        or inputs.heads_kv * 6 != inputs.heads_q
        or inputs.head_dim != 256
    ):
        return "kv_shape_or_unmeasured_page"
    if contract.early_cache_dtype and not inputs.cache_stores_codec:
        return "kv_layout"
    if not 0 < inputs.table_width * page <= MAX_CONTEXT:
        return "context_capacity"
    if not inputs.explicit_groups and (inputs.parent_seq_rows or groups) != groups:
        return "request_metadata"
    row_width = inputs.table_width if inputs.row_table_width is None else inputs.row_table_width
    if (inputs.row_lengths if inputs.row_lengths is not None else rows) != rows or (
        not inputs.explicit_groups
        and (
            (inputs.row_table_rows if inputs.row_table_rows is not None else rows) != rows
            or row_width != inputs.table_width
        )
    ):
        return "row_metadata"
    if contract.require_cuda and not inputs.on_cuda:
        return "device_not_cuda"
    if not contract.early_query_layout:
        if not inputs.output_shape_ok:
            return "output_shape"
        if not inputs.query_layout_ok:
            return "query_or_output_layout"
    if contract.metadata_before_cache_layout and not inputs.metadata_layout_ok:
        return "metadata_layout"
    if not inputs.cache_layout_ok or (
        not contract.early_cache_dtype and not inputs.cache_stores_codec
    ):
        return "kv_layout"
    if not contract.metadata_before_cache_layout and not inputs.metadata_layout_ok:
        return "metadata_layout"
    return None


__all__ = [
    "ALL_CODECS",
    "BF16",
    "CONSTRUCTION_ROUTES",
    "DEFAULT_CODECS",
    "E4M3",
    "E5M2",
    "FLASHINFER_SM70",
    "FLASH_V100",
    "FP16",
    "GROUPED_REASONS",
    "GroupedInputs",
    "ROUTE_FAMILIES",
    "ROUTE_SPECS",
    "RouteCandidate",
    "RouteContext",
    "RouteShape",
    "RouteSpec",
    "Verdict",
    "XqaThresholds",
    "grouped_fp32_reason",
    "is_observer",
    "route_reason",
    "select_route",
    "shape_reason",
    "validate_route",
]
