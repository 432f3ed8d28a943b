"""The FLASH_ATTN_V100 selection procedure as a pure function (docs/contracts/attention.md
§4): one case (stage, codec, head size, GQA, capture, speculative method, mask and the
manifest's extra keys), the resolved `v100_attention` policy and the explicit layout inputs
give the two forwards' ordered route counters, native entries (with their deciding keyword
scalars), policy reads and check results, the construction-time counters, or one of the
refusals.

Nothing is read from tensors: storage facts (page size, contiguous block table and K/V,
alignment, sequence lengths, KV heads), which native entries are loaded and which decline, and
the metadata builder's hints are `Layout` fields, defaulting to the reference trace's
synthetic layout (the issue's decision). The policy is resolved once per engine: a variable
changed after construction changes nothing (`after_init_env` is kept as an input only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from native.kernels.v100_attention import (
    E4M3,
    E5M2,
    FP16,
    GroupedInputs,
    RouteContext,
    RouteShape,
    XqaThresholds,
    grouped_fp32_reason,
    select_route,
    validate_route,
)
from policies.v100_attention_variables import AUTOMATIC_PARTITION, SECTION

CAPABILITY = 70
MAX_MODEL_LEN = 131072
# The FP8 bridge's FP16 workspace page (docs/contracts/attention.md §4.6).
BRIDGE_PAGE = 784
SWA_WINDOW = 32
ANCHOR_WINDOW = 32
MIXED_ROWS_GROUP = 8
# The core entries `_get_flash_ops` returns, in its order (§5.1's fake labels).
CORE_OPS = ("dense", "bhmd", "decode", "xqa", "wmma", "paged", "paged_bhmd", "bfla", "splitkv")
# The other entries the trace's op set loads (a row may declare one absent).
LOADED_OPS = ("grouped_verify", "splitd_dense", "splitd_paged", "grouped_fp16", "grouped_e4m3")
# Entries the trace's op set leaves out (§5.1), which a row may declare loaded: the E4M3
# compact scalar tail, the split-KV3 dense kernel, the D256 GQA6 architecture entry and its
# Q8192 specialization.
OPTIONAL_OPS = ("scalar_tail", "splitkv3", "arch", "arch_q8192")
# The entries a row may declare to return nothing (the Split-D wrapper's two forms).
DECLINING_OPS = ("splitd_dense", "splitd_paged")
# The keyword scalars a row keeps per native entry (§6.2).
DECIDING_KEYWORDS = (
    "kv_cache_dtype",
    "window_size",
    "causal",
    "partition_size_hint",
    "anchored_window",
    "batch_context_routing",
    "dflash2_window_split",
)
NON_NULL = "non-null"


class Refusal(Exception):
    """One of the procedure's refusals: the exception type upstream raises and the core of
    its message, the part a row records (§5.1: anchor with FP8, anchor with ddtree, ddtree
    with FP8 under capture; and the other fail-closed cores of §4)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class Layout:
    """Explicit storage, native and metadata inputs of one row (the issue's decision): the
    defaults are the reference trace's synthetic layout."""

    page: int = 16
    seq_extra: int = 64  # context before the query (prefill: none)
    kv_heads: int = 1
    contiguous_block_table: bool = True  # block table 0..n-1
    contiguous_kv: bool = False  # K and V each one contiguous tensor
    aligned: bool = True  # 16-byte aligned pages, 8-element strides
    unavailable: tuple[str, ...] = ()  # entries not loaded (`CORE_OPS`, `LOADED_OPS`)
    # Entries beyond the trace's op set (`OPTIONAL_OPS`, absent by default).
    present: tuple[str, ...] = ()
    declines: tuple[str, ...] = ()  # entries that return nothing (`DECLINING_OPS`)
    native_revision: int = 0  # the XQA op's shared-strategy revision
    grouped_e4m3_batch_revision: int = 0
    grouped_verify_max_query_tokens: int = 0
    grouped_verify_request_major_abi: int = 0
    bfla_mask_built: bool = True
    # Storage and metadata facts the grouped FP32 admission reads (§3.5, §8.3-8.4): the
    # request-level block table and sequence lengths are attached, the persistent small-query
    # tables have one row per query row (None), Q and the output are FP16, contiguous and
    # 16-byte aligned on one device, the output has Q's shape, the metadata is int32 and
    # contiguous, and Q lives on the CUDA device.
    parent_metadata: bool = True
    smallq_table_rows: int | None = None
    query_layout_ok: bool = True
    output_shape_ok: bool = True
    metadata_layout_ok: bool = True
    on_cuda: bool = True
    # The metadata builder's hints (None: derived from the sequence lengths as the trace's
    # builder does: decode attaches none; the verifier sees the live maximum).
    decode_max_seq_len_hint: int | None = None
    decode_workspace_hint: int | None = None
    decode_static_hint: int | None = None
    smallq_max_seq_len_hint: int | None = None
    smallq_workspace_hint: int | None = None
    smallq_partition_hint: int | None = None
    max_model_len: int = MAX_MODEL_LEN

    def __post_init__(self) -> None:
        # A misspelt entry would silently change nothing: refuse it.
        for name, allowed in (
            ("unavailable", (*CORE_OPS, *LOADED_OPS)),
            ("present", OPTIONAL_OPS),
            ("declines", DECLINING_OPS),
        ):
            unknown = sorted(set(getattr(self, name)) - set(allowed))
            if unknown:
                raise ValueError(f"layout {name}: unknown entries {unknown}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class Case:
    """A trace case (§5.1): the seven matrix keys and the manifest's extra keys."""

    stage: str
    codec: str
    head: int
    gqa: int
    capture: bool
    spec: str
    mask: str
    qlen: int | None = None
    lengths: tuple[int, ...] | None = None
    decline: bool = False
    draft: bool = False
    page: int | None = None
    metadata_none: bool = False
    unavailable: tuple[str, ...] = ()
    contiguous_kv: bool = False
    native_revision: int | None = None

    @property
    def query_len(self) -> int:
        if self.qlen is not None:
            return self.qlen
        return 4 if self.spec != "none" else 32

    @property
    def query_lengths(self) -> tuple[int, ...]:
        if self.lengths is not None:
            return self.lengths
        q = self.query_len
        return {"prefill": (q,), "prefix": (q,), "decode": (1,), "mixed": (q, 1, 4)}[self.stage]


def _kv_codec(codec: str) -> str | None:
    return {
        "auto": FP16,
        "float16": FP16,
        "fp8": E4M3,
        "fp8_e4m3": E4M3,
        "fp8_e5m2": E5M2,
    }.get(codec)


def _kv_dtype_text(codec: str) -> str:
    # The normalized spelling the backend passes to its entries.
    return {"fp8": "fp8_e4m3"}.get(codec, codec)


class Policy:
    """The resolved `v100_attention` values (a mapping from field name), read by name."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None


def policy_values(policy: Any, names: Sequence[str]) -> dict[str, Any]:
    """The section's values from a ResolvedPolicy."""
    return {name: policy.value(f"{SECTION}.{name}") for name in names}


@dataclass
class Forward:
    routes: list[str] = field(default_factory=list)
    ops: list[dict[str, Any]] = field(default_factory=list)
    predicates: list[list[Any]] = field(default_factory=list)
    checks: list[list[Any]] = field(default_factory=list)
    # Every verdict the route selector and the grouped FP32 admission returned, admitted or
    # not: [route, reason code or None] (the selector keeps them; coverage reads them).
    verdicts: list[list[Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "routes": list(self.routes),
            "ops": list(self.ops),
            "predicates": list(self.predicates),
            "checks": list(self.checks),
            "verdicts": list(self.verdicts),
        }


def _scalar(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Engine:
    """What the constructor froze (§1.2, §4): policy-derived switches and loaded entries."""

    codec: str | None
    kv_dtype: str
    head: int
    heads_q: int
    heads_kv: int
    ops: frozenset[str]
    sliding: bool
    anchor: bool
    use_flash_v100: bool
    use_decode: bool
    paged_prefill: bool
    fp8_bridge: bool
    splitkv: bool
    bfla: bool
    contig_dense: bool
    gather_dense: bool
    smallq_cap: int
    decode_paged_prefill: bool
    decode_dense_cache: bool
    decode_dense_reference: bool
    decode_xqa: bool
    smallq_xqa: bool
    decode_strategy: str
    grouped_verify: bool


class Simulation:
    """One case's two forwards (§4.3-4.6)."""

    def __init__(self, case: Case, policy: Policy, layout: Layout) -> None:
        self.case, self.p, self.layout = case, policy, layout
        self.forwards: list[Forward] = []
        self.construction: list[str] = []
        self.fw = Forward()
        self.capturing = case.capture
        self.lengths = case.query_lengths
        extra = 0 if case.stage == "prefill" else layout.seq_extra
        self.seqs = tuple(q + extra for q in self.lengths)
        self.page = case.page if case.page is not None else layout.page
        self.blocks = -(-max(self.seqs) // self.page)
        self.bridge_workspace = False
        self.tail_workspace = False
        self.gather_workspace = False
        self.first_prefix_log = True
        # The manifest's `decline` makes both Split-D entries return nothing (§5.1).
        self.declines = set(layout.declines) | (
            {"splitd_dense", "splitd_paged"} if case.decline else set()
        )

    # --- recording ------------------------------------------------------------------------

    def route(self, name: str) -> None:
        self.fw.routes.append(validate_route(name))

    def op(self, label: str, **keywords: Any) -> None:
        entry: dict[str, Any] = {"name": label}
        entry.update({k: _scalar(v) for k, v in keywords.items() if k in DECIDING_KEYWORDS})
        self.fw.ops.append(entry)

    def jit(self, name: str) -> None:
        self.fw.ops.append({"name": name, "jit": True})

    def predicate(self, name: str, value: Any) -> Any:
        self.fw.predicates.append([name, value])
        return value

    def select(
        self, ctx: RouteContext, candidates: tuple[str, ...], fallback: str | None = None
    ) -> Any:
        """`select_route`, its verdicts kept in the forward."""
        chosen, verdicts = select_route(CAPABILITY, ctx, candidates, fallback)
        self.fw.verdicts.extend([v.route, v.code] for v in verdicts)
        return chosen

    def grouped(self, route: str, code: str | None) -> str | None:
        """A grouped FP32 admission's reason code (None: admitted), kept as `route`'s verdict."""
        self.fw.verdicts.append([route, code])
        return code

    def check(self, name: str, result: Any) -> Any:
        shown = result if result is None or isinstance(result, bool) else NON_NULL
        self.fw.checks.append([name, shown])
        return result

    def fp8(self, stage: str, route: str) -> None:
        if self.e.codec in (E4M3, E5M2):
            self.route(f"fp8_kv_{stage}")
            self.route(f"fp8_kv_{stage}_{route}")

    # --- construction -------------------------------------------------------------------

    def construct(self) -> None:
        case, p, layout = self.case, self.p, self.layout
        codec = _kv_codec(case.codec)
        unavailable = set(case.unavailable) | set(layout.unavailable)
        ops = {name for name in CORE_OPS if name not in unavailable}
        ops |= {"grouped_verify", "splitd_dense", "splitd_paged"} - unavailable
        ops |= {"bridge_e5m2"} | ({"bridge_e4m3"} if codec == E4M3 else set())
        e4m3_grouped = p.e4m3_grouped_fp32 and codec == E4M3
        if e4m3_grouped and "grouped_e4m3" not in unavailable:
            ops.add("grouped_e4m3")
            # The scalar tail is initialized with the E4M3 grouped op (§1.2).
            if "scalar_tail" in layout.present:
                ops.add("scalar_tail")
        # The FP16 grouped op is loaded for an FP16 cache only (on capability 70).
        if codec == FP16 and "grouped_fp16" not in unavailable:
            ops.add("grouped_fp16")
        if "splitkv3" in layout.present:
            ops.add("splitkv3")
        # The architecture entry is looked up only with its switch on (§1.3); its Q8192
        # specialization only beside it.
        if "arch" in layout.present and p.prefill_d256_gqa_arch_128k_experimental:
            ops.add("arch")
            if "arch_q8192" in layout.present:
                ops.add("arch_q8192")
        paged = "paged" in ops and p.enable_paged_prefill and not p.disable_paged_prefill
        bridge_op = "bridge_e4m3" if codec == E4M3 else "bridge_e5m2"
        decode_xqa = p.decode_use_xqa
        strategy = self._strategy(codec, decode_xqa, "xqa" in ops, case)
        anchor = case.mask == "anchor"
        self.e = Engine(
            codec=codec,
            kv_dtype=_kv_dtype_text(case.codec),
            head=case.head,
            heads_q=case.gqa * layout.kv_heads,
            heads_kv=layout.kv_heads,
            ops=frozenset(ops),
            sliding=case.mask == "swa",
            anchor=anchor,
            use_flash_v100="dense" in ops,
            use_decode="decode" in ops,
            paged_prefill=paged,
            fp8_bridge=bridge_op in ops and p.fp8_prefill_bridge,
            splitkv="splitkv" in ops and p.prefill_split_kv and paged and not anchor,
            bfla="bfla" in ops and p.bfla_prefill and paged and not anchor,
            contig_dense="dense" in ops and paged and p.prefill_contig_dense and not anchor,
            gather_dense=paged and p.prefill_gather_dense and not anchor,
            smallq_cap=0 if anchor else p.smallq_decode_max_q,
            decode_paged_prefill=p.decode_use_paged_prefill and not anchor,
            decode_dense_cache=p.decode_dense_cache and not anchor,
            decode_dense_reference=p.decode_dense_reference and not anchor,
            decode_xqa=decode_xqa and not anchor,
            smallq_xqa=decode_xqa and p.smallq_decode_use_xqa and not anchor,
            decode_strategy=strategy,
            grouped_verify=p.dflash2_grouped_verify and "grouped_verify" in ops,
        )
        if anchor:
            if codec != FP16:
                raise Refusal("ValueError", "prefix-anchored SWA requires")
            if p.prefill_use_triton:
                raise Refusal("ValueError", "prefix-anchored SWA cannot use the Triton prefill")
            if "decode" not in ops or not p.decode_use_scalar_paged:
                raise Refusal("RuntimeError", "requires the masked scalar paged decode extension")
            if not paged:
                raise Refusal("RuntimeError", "requires the masked paged prefill extension")

    def _strategy(self, codec: str | None, decode_xqa: bool, xqa_op: bool, case: Case) -> str:
        """`KernelConfig.sm70_decode_strategy`'s effective value (§1.2), captured once."""
        if self.p.sm70_decode_strategy == "legacy":
            return "legacy"
        if codec != E4M3:
            return "shared"
        enabled = decode_xqa and case.head == 256 and case.gqa == 6
        if not enabled or not xqa_op:
            return "legacy"
        revision = (
            case.native_revision
            if case.native_revision is not None
            else self.layout.native_revision
        )
        if revision >= 1:
            return "shared"
        self.construction.append(validate_route("decode_strategy_legacy_revision"))
        return "legacy"

    # --- shared pieces --------------------------------------------------------------------

    def window(self, causal: bool) -> tuple[int, int]:
        if not self.e.sliding:
            return (-1, -1)
        left, right = SWA_WINDOW - 1, 0
        if not causal and left >= 0 and right == 0:
            right = left
        return (left, right)

    def xqa_codec(self) -> str | None:
        codec = self.e.codec
        if codec not in (FP16, E4M3, E5M2):
            return None
        # A DFlash selector target on E4M3 takes the grouped FP32 verifier (§4.4).
        if codec == E4M3 and self.case.spec == "dflash2":
            return None
        return codec

    @property
    def causal(self) -> bool:
        return not self.case.draft

    def thresholds(self) -> XqaThresholds:
        p = self.p
        return XqaThresholds(
            e4m3_batch_xqa=p.e4m3_batch_xqa,
            smallq_min_seq_len=p.smallq_decode_xqa_min_seq_len,
            gqa4_min_seq_len=p.decode_xqa_q4_min_seq_len,
            e5m2_min_seq_len=p.decode_fp8_xqa_min_seq_len,
        )

    def g6_hint(self, rows: int) -> int | None:
        """The G6 partition hint (§4.4): page-aligned GQA6 D256 single-row calls."""
        e, page = self.e, self.page
        if (
            self.p.decode_partition_size != AUTOMATIC_PARTITION
            or not self.p.xqa_g6_p1024_sawtooth
            or rows != 1
            or e.head != 256
            or page < 256
            or page % 16
            or e.heads_q != 6 * e.heads_kv
        ):
            return None
        if e.codec == E5M2:
            return 256
        if e.codec == E4M3 and e.decode_strategy == "legacy":
            return 64
        if e.codec in (FP16, E4M3):
            return 256 if page == 784 else None
        return None

    def scalar_tail_takes(self) -> bool:
        e = self.e
        return (
            "scalar_tail" in e.ops
            and e.codec == E4M3
            and e.head == 256
            and e.heads_q == 6 * e.heads_kv
            and self.page % 16 == 0
        )

    def call_decode_paged(self, *, anchored: bool = False) -> bool:
        """`_call_flash_attn_decode_paged`: the scalar tail may take the call; True if it
        did."""
        if self.scalar_tail_takes():
            self.route("decode_e4m3_compact_scalar_tail")
            return True
        keywords: dict[str, Any] = {
            "kv_cache_dtype": self.e.kv_dtype,
            "window_size": self.window(True),
            "partition_size_hint": None,
        }
        if anchored:
            keywords["anchored_window"] = ANCHOR_WINDOW
        self.op("decode", **keywords)
        return False

    def triton(self) -> None:
        self.op("triton_unified", causal=self.causal, window_size=self.window(self.causal))

    # --- forward (§4.3) -------------------------------------------------------------------

    def run(self) -> None:
        for _ in range(2):
            self.fw = Forward()
            self.forwards.append(self.fw)
            self.forward()
            self.first_prefix_log = False

    def forward(self) -> None:
        case, e, p = self.case, self.e, self.p
        if case.metadata_none:
            self.route("metadata_none_zero_output")
            return
        supported = self.check("_supports_flash_v100_path", e.use_flash_v100)
        if not supported:
            if not (p.allow_triton_fallback or case.draft):
                raise Refusal("RuntimeError", "FLASH_ATTN_V100 cannot run this layer/config")
            self.route(
                "dflash_draft_triton_fallback" if case.draft else "unsupported_triton_fallback"
            )
            self.triton()
            return
        for name, value in (
            ("use_decode_scalar_paged", p.decode_use_scalar_paged),
            ("use_decode_paged_prefill", e.decode_paged_prefill),
            ("use_flash_v100_prefill_paged", e.paged_prefill),
            ("use_triton_prefill", p.prefill_use_triton),
        ):
            self.predicate(name, value)
        if max(self.lengths) > 1:
            self.prefill()
        else:
            self.decode()

    # --- decode (§4.4) --------------------------------------------------------------------

    def decode(self) -> None:
        e, p = self.e, self.p
        if not self.predicate("use_flash_v100_decode", e.use_decode):
            if not p.allow_triton_fallback:
                raise Refusal("RuntimeError", "paged decode op is unavailable")
            self.predicate("use_flash_v100", e.use_flash_v100)
            self.route("decode_triton_no_flash_decode")
            self.triton()
            return
        if (
            self.predicate("use_decode_paged_prefill", e.decode_paged_prefill)
            and self.predicate("use_flash_v100_prefill_paged", e.paged_prefill)
            and not self.capturing
        ):
            self.fp8("decode", "decode_as_paged_prefill")
            self.decode_as_paged_prefill()
            self.route("decode_paged_prefill")
            return
        if self.predicate("use_decode_dense_cache", e.decode_dense_cache) and not self.capturing:
            self.fp8("decode", "dense_cache_bridge")
            if e.codec in (E4M3, E5M2) or len(self.lengths) != 1:
                if e.paged_prefill:
                    self.decode_as_paged_prefill()
                else:
                    self.dense_per_sequence()
            else:
                self.op("dense", causal=True)
            self.route("decode_dense_cache")
            return
        if (
            self.predicate("use_decode_dense_reference", e.decode_dense_reference)
            and not self.capturing
        ):
            self.fp8("decode", "dense_reference_bridge")
            self.dense_per_sequence()
            self.route("decode_dense_reference")
            return
        if not self.predicate("use_decode_scalar_paged", p.decode_use_scalar_paged):
            if not p.allow_triton_fallback:
                raise Refusal("RuntimeError", "decode has no enabled Flash route")
            self.route("decode_triton_scalar_disabled")
            self.triton()
            return
        self.decode_paged()

    def decode_as_paged_prefill(self) -> None:
        e, p = self.e, self.p
        uniform = len(set(self.lengths)) == 1
        if uniform and self.lengths[0] == 1 and p.decode_use_wmma_wrapper and "wmma" in e.ops:
            self.op("wmma", kv_cache_dtype=e.kv_dtype)
        elif uniform and self.lengths[0] == 1 and p.decode_use_bhmd_out and "paged_bhmd" in e.ops:
            self.op("paged_bhmd", kv_cache_dtype=e.kv_dtype, causal=True)
        elif uniform:
            self.op("paged", kv_cache_dtype=e.kv_dtype, causal=True)
        else:
            for _ in self.lengths:
                self.op("paged", kv_cache_dtype=e.kv_dtype, causal=True)

    def dense_per_sequence(self) -> None:
        for _ in self.lengths:
            self.op("dense", causal=True)

    def decode_paged(self) -> None:
        e, layout = self.e, self.layout
        rows = sum(self.lengths)
        ctx = RouteContext(
            stage="decode",
            codec=self.xqa_codec(),
            shape=RouteShape(rows, e.heads_q, e.heads_kv, e.head, self.page),
            enabled=e.decode_xqa,
            available="xqa" in e.ops,
            seq_rows=len(self.seqs),
            max_seq_len_hint=layout.decode_max_seq_len_hint,
            workspace_seq_capacity_hint=layout.decode_workspace_hint,
            static_seq_len_hint=layout.decode_static_hint,
            window=e.sliding,
            capturing=self.capturing,
            thresholds=self.thresholds(),
        )
        chosen = self.select(ctx, ("decode_xqa_paged",), "decode_scalar_paged")
        self.check("select_route", chosen)
        if chosen is not None and chosen.name == "decode_xqa_paged":
            self.fp8("decode", "xqa_paged")
            hint = self.g6_hint(rows)
            if hint is not None:
                if (
                    ctx.codec == E4M3
                    and e.decode_strategy == "legacy"
                    and rows == 1
                    and self.p.xqa_e4m3_g6_p64_p256_auto
                ):
                    self.route(f"decode_xqa_e4m3_dynamic_page{self.page}")
                else:
                    self.route(f"decode_xqa_p{hint}_page{self.page}")
            self.op(
                "xqa",
                kv_cache_dtype=e.kv_dtype,
                window_size=self.window(True),
                partition_size_hint=hint,
                batch_context_routing=False,
            )
            self.route("decode_xqa_paged")
            return
        self.fp8("decode", "scalar_paged")
        self.call_decode_paged(anchored=e.anchor)
        self.route("decode_scalar_paged")

    # --- prefill (§4.5) -------------------------------------------------------------------

    def small_query_enabled(self) -> bool:
        e, p = self.e, self.p
        enabled = (
            self.causal
            and e.use_decode
            and e.smallq_cap > 0
            and max(self.lengths) <= e.smallq_cap
            and (
                p.smallq_decode_max_model_len <= 0
                or self.layout.max_model_len <= p.smallq_decode_max_model_len
            )
        )
        return bool(self.check("_small_query_decode_enabled", enabled))

    def prefill(self) -> None:
        e, p, case = self.e, self.p, self.case
        if self.predicate("use_triton_prefill", p.prefill_use_triton):
            self.route("prefill_triton_safe")
            self.triton()
            return
        if self.capturing:
            if case.draft and not self.causal:
                self.route("prefill_capture_dflash_noncausal_paged")
                self.prefix_path()
                return
            if self.small_query_enabled():
                self.route("prefill_capture_smallq")
                self.route(
                    "prefill_capture_smallq_ddtree_metadata"
                    if case.spec == "ddtree"
                    else "prefill_capture_smallq_no_ddtree_metadata"
                )
                self.prefix_path()
                return
        has_prefix = any(q != s for q, s in zip(self.lengths, self.seqs, strict=True))
        smallq = has_prefix and self.small_query_enabled()
        if has_prefix:
            if self.first_prefix_log and not smallq:
                self.predicate("use_flash_v100_prefill_paged", e.paged_prefill)
            self.fp8("prefill", "prefix")
            self.prefix_path()
            self.route("prefill_prefix_flash")
            return
        if self.predicate("use_prefill_paged_cache", p.prefill_use_paged_cache) and (
            self.predicate("use_flash_v100_prefill_paged", e.paged_prefill)
        ):
            self.fp8("prefill", "no_prefix_paged_cache")
            self.prefix_path()
            self.route("prefill_no_prefix_paged_cache_flash")
            return
        self.dense_no_prefix()
        self.route("prefill_no_prefix_dense_flash")

    def dense_no_prefix(self) -> None:
        q = min(self.lengths)
        if q >= 1024:
            result = self.try_fa2(q=max(self.lengths), kv=max(self.lengths), paged=False)
            if result:
                self.route("prefill_dense_splitd_d256")
                return
        runs = [
            length
            for i, length in enumerate(self.lengths)
            if i == 0 or length != self.lengths[i - 1]
        ]
        for _ in runs:
            self.op("dense", causal=self.causal, window_size=self.window(self.causal))

    def try_fa2(self, *, q: int, kv: int, paged: bool, fp16_kv: bool = True) -> bool:
        """The Split-D D256 wrapper (§4.5): True when an entry completed."""
        e, p = self.e, self.p
        ok = (
            p.fa2_d256_prefill
            and fp16_kv
            and e.head == 256
            and q >= 64
            and self.causal
            and not e.sliding
        )
        if ok and q < 1024:
            # Below 1024 only the v37 family's dense admission lets the wrapper on.
            ok = not paged and p.prefill_d256_gqa_v37 and self.arch_admits(q, kv)
        if ok and paged and self.page % 16:
            ok = False
        ok = ok and "splitd_dense" in e.ops and "splitd_paged" in e.ops
        # The Q8000-core dispatch needs only KV % 32 (dense form, not the v37 family).
        q8000_core = not paged and not p.prefill_d256_gqa_v37 and 8000 <= q <= 8192
        eligible = ok and ((q8000_core and kv % 32 == 0) or (q % 64 == 0 and kv % 32 == 0))
        result = False
        if eligible and paged:
            if self.page % 4 == 0 and kv <= self.blocks * self.page:
                self.op("splitd_paged", causal=True)
                result = "splitd_paged" not in self.declines
        elif eligible:
            result = self.dense_architecture(q, kv)
            if not result and self.splitkv3_admits(q, kv):
                self.op("splitkv3", causal=True)
                self.route("prefill_dense_splitd_d256_splitkv3_kernel")
                result = True
            if not result and q % 64 == 0 and kv % 32 == 0:
                self.op("splitd_dense", causal=True)
                result = "splitd_dense" not in self.declines
        self.check("_try_sm70_fa2_d256_prefill", NON_NULL if result else None)
        return result

    def arch_admits(self, q: int, kv: int) -> bool:
        """The D256 GQA6 architecture entry's admission (§4.5): the v37 family or the
        Q8000-core window, FP16 GQA 6 x 256 contiguous, not capturing."""
        e, p = self.e, self.p
        if p.prefill_d256_gqa_v37:
            shape = 64 <= q <= 8192 and q % 64 == 0 and q < kv <= 262144 and kv % 32 == 0
        else:
            shape = 8000 <= q <= 8192 and q <= kv <= 262144 and kv % 32 == 0
        return (
            "arch" in e.ops
            and shape
            and e.codec == FP16
            and e.head == 256
            and e.heads_kv > 0
            and e.heads_q == 6 * e.heads_kv
            and not self.capturing
        )

    def dense_architecture(self, q: int, kv: int) -> bool:
        """The architecture entry inside the wrapper's dense form, with its counters: the
        long-prefill route, then the v37 family or the 79T FP32 one, then above 8000 the
        Q8192 specialization (padded below 8192) or the dense fringe."""
        e, p = self.e, self.p
        if not self.arch_admits(q, kv):
            return False
        q8192 = "arch_q8192" in e.ops and not p.prefill_d256_gqa_v37 and q > 8000
        if p.prefill_d256_gqa_v37 or q8192:
            self.op("arch_q8192" if q8192 else "arch", causal=True)
        elif q == 8000 or kv % 32 == 0:
            self.op("arch", causal=True)
            if q > 8000:
                # The leading fringe goes through the exact dense Split-D entry.
                self.op("splitd_dense", causal=True)
        else:
            return False
        self.route("prefill_dense_d256_gqa_arch_long")
        if p.prefill_d256_gqa_v37:
            self.route("prefill_dense_d256_gqa_v37")
            return True
        self.route("prefill_dense_d256_gqa_79t_fp32")
        if q > 8000:
            if q8192:
                self.route("prefill_dense_d256_gqa_79t_fp32_q8192")
                if q < 8192:
                    self.route("prefill_dense_d256_gqa_79t_fp32_q8192_pad")
            else:
                self.route("prefill_dense_d256_gqa_79t_fp32_fringe_fallback")
        return True

    def splitkv3_admits(self, q: int, kv: int) -> bool:
        e, p = self.e, self.p
        gqa6 = e.heads_q == 6 and e.heads_kv == 1
        return bool(
            "splitkv3" in e.ops
            and p.prefill_dense_splitkv3
            and gqa6
            and (q == 4096 or (p.prefill_dense_splitkv3_q8000_experimental and q == 8000))
            and kv >= p.prefill_dense_splitkv3_min_kv
            and kv > q
            and not self.capturing
        )

    # --- the prefix path (§4.6) -----------------------------------------------------------

    def prefix_path(self) -> None:
        e, case = self.e, self.case
        if e.anchor and not e.paged_prefill:
            raise Refusal("RuntimeError", "anchored decode-window mask requires the paged prefill")
        complete, consumed = self.batch()
        if complete:
            return
        for i, q in enumerate(self.lengths):
            if i in consumed or q <= 0:
                continue
            seq = self.seqs[i]
            if not e.paged_prefill:
                self.op("dense", causal=self.causal, window_size=self.window(self.causal))
                continue
            if e.anchor:
                self.route("prefill_prefix_paged_anchored")
                self.op(
                    "paged",
                    kv_cache_dtype=e.kv_dtype,
                    causal=self.causal,
                    window_size=self.window(self.causal),
                    anchored_window=ANCHOR_WINDOW,
                )
                continue
            self.sequence(q, seq, len(self.lengths))
        del case

    def tree_requires_branch(self) -> bool:
        # The trace's parent rows: [0, 0, 0, 1, 2, ...] (parent max(0, j - 2)); a request with
        # three or more tree tokens has a node whose parent is not its predecessor.
        return self.case.spec == "ddtree" and any(q >= 3 for q in self.lengths)

    def batch(self) -> tuple[bool, set[int]]:
        e, p, case = self.e, self.p, self.case
        n, max_q = len(self.lengths), max(self.lengths)
        uniform = len(set(self.lengths)) == 1
        if (
            e.paged_prefill
            and not self.causal
            and case.draft
            and not e.anchor
            and n > 1
            and 0 < max_q <= 16
            and uniform
        ):
            self.route("prefill_prefix_dflash_noncausal_batch")
            self.op(
                "paged",
                kv_cache_dtype=e.kv_dtype,
                causal=False,
                window_size=self.window(False),
            )
            return True, set()
        if self.causal and self.tree_requires_branch():
            if e.anchor:
                raise Refusal("RuntimeError", "does not support ddtree")
            self.tree_prefill()
            return True, set()
        if (
            self.causal
            and not e.anchor
            and e.use_decode
            and e.smallq_cap > 0
            and max_q <= e.smallq_cap
            and (
                p.smallq_decode_max_model_len <= 0
                or self.layout.max_model_len <= p.smallq_decode_max_model_len
            )
            and not e.decode_paged_prefill
        ):
            self.small_query_prefill()
            return True, set()
        if (
            p.prefill_prefix_decode_rows
            and self.causal
            and not e.anchor
            and n > 1
            and e.use_decode
            and e.paged_prefill
            and not e.decode_paged_prefill
            and not e.decode_dense_cache
            and not e.decode_dense_reference
            and not e.sliding
            and not self.capturing
        ):
            return False, self.decode_rows()
        return False, set()

    def tree_prefill(self) -> None:
        e, p = self.e, self.p
        if p.ddtree_triton_branch_attn:
            if e.codec == FP16:
                self.jit("_ddtree_paged_attention_kernel")
                self.route("prefill_ddtree_triton")
                return
            # The Triton verifier refuses a quantized cache before its launch.
            if self.capturing or p.ddtree_triton_branch_attn_strict:
                raise Refusal("ValueError", "unsupported key cache dtype")
        if self.capturing:
            raise Refusal("RuntimeError", "DDTree dense verifier fallback is not CUDA-graph safe")
        self.route("prefill_ddtree_dense")

    # --- the small-query verifier (§4.6, §3.5, §3.6) ------------------------------------

    def smallq_hints(self) -> tuple[int, int, int | None]:
        layout = self.layout
        live = max(self.seqs)
        max_hint = layout.smallq_max_seq_len_hint
        workspace = layout.smallq_workspace_hint
        return (
            live if max_hint is None else max_hint,
            min(self.blocks * self.page, live) if workspace is None else workspace,
            layout.smallq_partition_hint,
        )

    def grouped_verify_allowed(self, rows: int) -> bool:
        """The DFlash2 grouped verifier's one boolean (§3.6)."""
        e, p, layout = self.e, self.p, self.layout
        n = len(self.lengths)
        single = n == 1 and rows in (8, 16) and rows <= layout.grouped_verify_max_query_tokens
        batched = (
            p.dflash2_batched_grouped_verify
            and layout.grouped_verify_request_major_abi >= 1
            and n in (2, 4, 8)
            and max(self.lengths) == 8
            and rows == n * 8
        )
        return bool(
            e.grouped_verify
            and (single or batched)
            and self.case.spec == "dflash2"
            and layout.max_model_len >= p.dflash2_grouped_verify_min_model_len
            and self.causal
            and not e.sliding
            and (e.heads_q, e.head) == (6, 256)
            and self.page in (1648, 1728, 3296, 3456)
            and e.heads_kv == 1
            and e.codec == E5M2
        )

    def grouped_inputs(self, codec: str, rows: int, partition_hint: int | None) -> GroupedInputs:
        e, p = self.e, self.p
        return GroupedInputs(
            codec=codec,
            layer_codec=e.codec or "",
            rows=rows,
            groups=len(self.lengths),
            heads_q=e.heads_q,
            head_dim=e.head,
            heads_kv=e.heads_kv,
            page_size=self.page,
            table_width=self.blocks,
            operator_present=("grouped_fp16" if codec == FP16 else "grouped_e4m3") in e.ops,
            batch_revision=self.layout.grouped_e4m3_batch_revision,
            smallq_xqa=e.smallq_xqa,
            partition_hint=partition_hint is not None,
            partition_setting=p.decode_partition_size != AUTOMATIC_PARTITION,
            causal=self.causal,
            window=e.sliding,
            **self.grouped_storage(rows),
        )

    def grouped_storage(self, rows: int) -> dict[str, Any]:
        """The storage and metadata facts of §3.5 that a row declares (`Layout`)."""
        layout = self.layout
        table_rows = layout.smallq_table_rows
        return {
            "parent_metadata": layout.parent_metadata,
            "row_lengths": table_rows,
            "row_table_rows": table_rows,
            "query_layout_ok": layout.query_layout_ok,
            "output_shape_ok": layout.output_shape_ok,
            "cache_layout_ok": layout.aligned,
            "metadata_layout_ok": layout.metadata_layout_ok,
            "on_cuda": layout.on_cuda,
        }

    def small_query_prefill(self) -> None:
        e = self.e
        rows = sum(self.lengths)
        if e.grouped_verify and self.grouped_verify_allowed(rows):
            self.op("grouped_verify", kv_cache_dtype=e.kv_dtype)
            self.fp8("decode", "dflash2_grouped_verify")
            self.route("prefill_smallq_dflash2_grouped_verify")
            return
        max_hint, workspace, partition = self.smallq_hints()
        # Each grouped candidate of the cache's codec is asked, loaded or not: an absent op
        # answers `operator_missing` (as an absent XQA op answers `unavailable`), which takes
        # the same route as upstream's skip of a missing op.
        if e.codec == FP16 and (
            self.grouped(
                "prefill_smallq_fp16_grouped_fp32",
                grouped_fp32_reason(self.grouped_inputs(FP16, rows, partition)),
            )
            is None
        ):
            self.op("grouped_fp16")
            self.route("prefill_smallq_fp16_grouped_fp32")
            return
        if e.codec == E4M3 and (
            self.grouped(
                "prefill_smallq_e4m3_grouped_fp32",
                grouped_fp32_reason(self.grouped_inputs(E4M3, rows, partition)),
            )
            is None
        ):
            self.op("grouped_e4m3")
            self.fp8("decode", "grouped_fp32")
            self.route("prefill_smallq_e4m3_grouped_fp32")
            return
        ctx = RouteContext(
            stage="verify",
            codec=self.xqa_codec(),
            shape=RouteShape(rows, e.heads_q, e.heads_kv, e.head, self.page),
            enabled=e.smallq_xqa,
            available="xqa" in e.ops,
            seq_rows=rows,
            max_seq_len_hint=max_hint,
            workspace_seq_capacity_hint=workspace,
            partition_size_hint=partition,
            window=e.sliding,
            capturing=self.capturing,
            thresholds=self.thresholds(),
        )
        if self.select(ctx, ("prefill_smallq_decode_xqa",)) is not None:
            self.fp8("decode", "xqa_paged")
            self.op(
                "xqa",
                kv_cache_dtype=e.kv_dtype,
                window_size=self.window(True),
                partition_size_hint=None,
                batch_context_routing=False,
            )
            self.route("prefill_smallq_decode_xqa")
            return
        self.call_decode_paged()
        self.route("prefill_smallq_decode_scalar")

    # --- mixed-batch decode rows ---------------------------------------------------------

    def decode_rows(self) -> set[int]:
        e, p = self.e, self.p
        cap = max(1, e.smallq_cap)
        chosen = [i for i, q in enumerate(self.lengths) if 1 <= q <= cap]
        if not chosen:
            return set()
        num_rows = sum(self.lengths[i] for i in chosen)
        max_hint = max(self.seqs[i] for i in chosen)
        ctx = RouteContext(
            stage="mixed_decode",
            codec=self.xqa_codec(),
            shape=RouteShape(num_rows, e.heads_q, e.heads_kv, e.head, self.page),
            enabled=e.decode_xqa,
            available="xqa" in e.ops,
            max_seq_len_hint=max_hint,
            thresholds=self.thresholds(),
        )
        spec = self.select(ctx, ("prefill_prefix_decode_rows_xqa",))
        use_xqa = self.check("select_route", spec) is not None
        if e.codec == E4M3 and not use_xqa:
            groups = sum(-(-self.lengths[i] // MIXED_ROWS_GROUP) for i in chosen)
            inputs = GroupedInputs(
                codec=E4M3,
                layer_codec=E4M3,
                rows=groups * MIXED_ROWS_GROUP,
                groups=groups,
                heads_q=e.heads_q,
                head_dim=e.head,
                heads_kv=e.heads_kv,
                page_size=self.page,
                table_width=self.blocks,
                operator_present="grouped_e4m3" in e.ops,
                batch_revision=self.layout.grouped_e4m3_batch_revision,
                explicit_groups=True,
                smallq_xqa=e.smallq_xqa,
                partition_setting=p.decode_partition_size != AUTOMATIC_PARTITION,
                query_layout_ok=self.layout.query_layout_ok,
                output_shape_ok=self.layout.output_shape_ok,
                cache_layout_ok=self.layout.aligned,
                metadata_layout_ok=self.layout.metadata_layout_ok,
                on_cuda=self.layout.on_cuda,
            )
            admitted = (
                self.grouped(
                    "prefill_prefix_decode_rows_e4m3_grouped_fp32", grouped_fp32_reason(inputs)
                )
                is None
            )
            if "grouped_e4m3" in e.ops:
                # Upstream calls the grouped rows only with the op loaded.
                self.check("_run_mixed_rows_grouped_e4m3", admitted)
            if admitted:
                self.op("grouped_e4m3")
                self.fp8("decode", "grouped_fp32")
                self.route("prefill_prefix_decode_rows_e4m3_grouped_fp32")
                return set(chosen)
        if use_xqa:
            self.op(
                "xqa",
                kv_cache_dtype=e.kv_dtype,
                window_size=self.window(True),
                partition_size_hint=self.g6_hint(num_rows),
                batch_context_routing=True,
            )
            self.fp8("decode", "xqa_paged")
            self.route("prefill_prefix_decode_rows_xqa")
        else:
            self.call_decode_paged()
            self.fp8("decode", "scalar_paged")
            self.route("prefill_prefix_decode_rows_scalar")
        return set(chosen)

    # --- one sequence of the prefix path ---------------------------------------------------

    def contiguous_view(self, allow_copy: bool) -> bool:
        """`contiguous_paged_kv_view`: FP16 pages that are physically contiguous."""
        return (
            self.e.codec == FP16
            and (allow_copy or self.case.contiguous_kv or self.layout.contiguous_kv)
            and self.layout.contiguous_block_table
        )

    def sequence(self, q: int, seq: int, num_seqs: int) -> None:
        e, p = self.e, self.p
        causal, window = self.causal, self.window(self.causal)
        fp16_kv = e.codec == FP16
        kw = {"kv_cache_dtype": e.kv_dtype, "causal": causal, "window_size": window}
        # BFLA (§4.6)
        should_bfla = self.check(
            "_should_use_prefill_bfla",
            e.bfla
            and causal
            and not e.sliding
            and e.head == 256
            and fp16_kv
            and q >= p.bfla_min_q
            and seq >= p.bfla_min_kv
            and p.bfla_mask_block_n > 0,
        )
        if should_bfla and self.layout.bfla_mask_built:
            self.prepare_fallback(q, seq)
            self.route("prefill_prefix_bfla")
            self.op("bfla", **kw)
            return
        # Split-D D256 (FA2)
        if (
            p.fa2_d256_prefill
            and fp16_kv
            and q >= 1024
            and e.head == 256
            and causal
            and not (e.sliding)
        ):
            if self.contiguous_view(False):
                route, done = (
                    "prefill_prefix_contig_splitd_d256",
                    self.try_fa2(q=q, kv=seq, paged=False),
                )
            elif (
                self.should_gather(q, seq)
                and "splitd_dense" in e.ops
                and (not self.capturing or self.gather_workspace)
            ):
                self.gather_workspace = True
                route, done = (
                    "prefill_prefix_gather_splitd_d256",
                    self.try_fa2(q=q, kv=seq, paged=False),
                )
            else:
                route, done = (
                    "prefill_prefix_paged_splitd_d256",
                    self.try_fa2(q=q, kv=seq, paged=True),
                )
            if done:
                self.prepare_fallback(q, seq)
                self.route(route)
                return
        # contiguous BHMD, then contiguous dense
        contig_allowed = self.check(
            "_should_use_prefill_contig_dense",
            e.contig_dense
            and causal
            and not e.sliding
            and e.head == 256
            and fp16_kv
            and q >= p.prefill_contig_dense_min_q
            and seq >= p.prefill_contig_dense_min_kv,
        )
        if (
            contig_allowed
            and p.prefill_contig_dense_allow_copy
            and "bhmd" in e.ops
            and fp16_kv
            and self.layout.contiguous_block_table
        ):
            self.prepare_fallback(q, seq)
            self.route("prefill_prefix_contig_dense_bhmd")
            self.op("bhmd", causal=causal, window_size=window)
            return
        if contig_allowed and self.contiguous_view(p.prefill_contig_dense_allow_copy):
            self.prepare_fallback(q, seq)
            if p.fa2_d256_prefill and self.try_fa2(q=q, kv=seq, paged=False):
                self.route("prefill_prefix_contig_dense_fa2_d256")
            else:
                self.route("prefill_prefix_contig_dense")
                self.op("dense", causal=causal, window_size=window)
            return
        use_split, use_bridge = self.prepare_fallback(q, seq)
        if use_bridge:
            if self.fp8_bridge(q, seq):
                return
            self.op("paged", **kw)
            return
        if use_split:
            self.route("prefill_prefix_splitkv")
            self.op("splitkv", **kw)
            return
        self.op("paged", **kw)

    def should_gather(self, q: int, seq: int) -> bool:
        e, p = self.e, self.p
        q8192 = not p.prefill_d256_gqa_v37 and 8000 <= q <= 8192
        aligned = (q8192 and seq % 32 == 0) or (q % 64 == 0 and seq % 32 == 0)
        eligible = (
            e.gather_dense
            and q >= p.prefill_gather_dense_min_q
            and seq >= p.prefill_gather_dense_min_kv
            and seq >= q
            and aligned
            and e.head == 256
            and self.causal
            and not e.sliding
            and e.codec == FP16
            and not self.capturing
        )
        return bool(self.check("_should_use_prefill_gather_dense", eligible))

    def prepare_fallback(self, q: int, seq: int) -> tuple[bool, bool]:
        e, p = self.e, self.p
        split = self.check(
            "_should_use_prefill_splitkv",
            e.splitkv
            and self.causal
            and e.head == 256
            and e.codec == FP16
            and q >= p.prefill_split_kv_min_q
            and not (p.prefill_split_kv_max_q > 0 and q > p.prefill_split_kv_max_q)
            and seq >= p.prefill_split_kv_min_kv
            and seq > p.prefill_split_kv_tokens,
        )
        aligned = e.codec != E4M3 or self.layout.aligned
        bridge = self.check(
            "_should_use_fp8_prefill_bridge",
            aligned
            and e.fp8_bridge
            and e.paged_prefill
            and e.codec in (E4M3, E5M2)
            and e.head == 256
            and q >= 32
            and self.causal
            and not e.sliding,
        )
        return bool(split), bool(bridge)

    def fp8_bridge(self, q: int, seq: int) -> bool:
        """`_run_fp8_prefill_bridge` and its caller's counters: True when the bridge ran (the
        paged FP16 call included)."""
        e = self.e
        if not self.bridge_workspace and self.capturing:
            self.check("_run_fp8_prefill_bridge", None)
            return False
        self.bridge_workspace = True
        self.op("bridge", kv_cache_dtype=e.kv_dtype)
        exact_q, tail = q, False
        if q % 64 and seq % 32 == 0:
            padded = -(-q // 64) * 64
            if padded <= seq and (self.tail_workspace or not self.capturing):
                self.tail_workspace = True
                exact_q, tail = padded, True
        window = self.window(self.causal)
        if self.try_fa2(q=exact_q, kv=seq, paged=False):
            name = "prefill_prefix_fp8_bridge_exact_dense_d256"
            self.route(name + ("_tailpad" if tail else ""))
        elif self.try_fa2_bridge_paged(exact_q, seq):
            name = "prefill_prefix_fp8_bridge_exact_d256"
            self.route(name + ("_tailpad" if tail else ""))
        else:
            self.op("paged", kv_cache_dtype="fp16", causal=self.causal, window_size=window)
        self.check("_run_fp8_prefill_bridge", NON_NULL)
        self.route(
            "prefill_prefix_fp8_e4m3_bridge"
            if e.codec == E4M3
            else "prefill_prefix_fp8_e5m2_bridge"
        )
        return True

    def try_fa2_bridge_paged(self, q: int, seq: int) -> bool:
        # The bridge's paged form reads its own FP16 workspace of page 784.
        page, blocks = self.page, self.blocks
        self.page, self.blocks = BRIDGE_PAGE, -(-seq // BRIDGE_PAGE)
        try:
            return self.try_fa2(q=q, kv=seq, paged=True)
        finally:
            self.page, self.blocks = page, blocks


def simulate(case: Case, values: Mapping[str, Any], layout: Layout) -> dict[str, Any]:
    """The route of one case (§6.2): both forwards, the construction counters and the
    refusal, if any."""
    sim = Simulation(case, Policy(values), layout)
    rejected: dict[str, str] | None = None
    try:
        sim.construct()
        sim.run()
    except Refusal as refusal:
        rejected = {"type": refusal.kind, "message": refusal.message}
    return {
        "forwards": [f.to_json() for f in sim.forwards],
        "rejected": rejected,
        "construction": list(sim.construction),
    }


__all__ = [
    "CORE_OPS",
    "DECIDING_KEYWORDS",
    "Case",
    "Layout",
    "Refusal",
    "simulate",
]
