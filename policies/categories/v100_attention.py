"""Category sm70-attention: the FLASH_ATTN_V100 attention routes on SM70
(docs/contracts/attention.md §6).

One row per case of the reference trace: the 768 matrix cases (stage x codec x head x GQA x
capture x speculative method x mask, ids of §6.1's form), the 45 manifest cases as named edge
probes (§6.3), and the probes §6.3 asks routectl to add (each threshold on both sides, E5M2 at
each stage, GQA 4 and 8, E4M3 batch rows, the decode strategy, a partition-size setting, the
listed pages, the grouped FP32 codes, the entries the trace's op set leaves out). A row is the
procedure's two forwards (ordered route counters, native entries with their deciding keyword
scalars, policy reads, check results), its construction counters and its refusal; `case` is the
trace case it stands for (None for routectl's own probes), matched to the golden by exact
dictionary, never by position.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from native.kernels.v100_attention import GROUPED_REASONS, ROUTE_SPECS
from policies.categories.route_schemas import route_fragment
from policies.v100_attention import Case, Layout, simulate
from policies.v100_attention_variables import FIELD_NAMES, SECTION, VARIABLES
from routectl.category import Category
from routectl.replay.harness import ReplayContext
from routectl.rows import RowSpec
from routectl.sites import (
    DecisionSites,
    Declaration,
    Site,
    candidate_sites,
    recorded_only,
    unreachable,
)
from routectl.workload import EngineConfig

NAME = "sm70-attention"
CAPABILITY = 70
MODEL = "v100_attention"
SPEC_METHODS = ("dflash2", "ddtree")
# §5.1: the matrix axes in the trace's product order and spellings.
STAGES = ("prefill", "prefix", "decode", "mixed")
CODECS = ("auto", "fp8_e4m3")
HEADS = (128, 256)
GQAS = (1, 6)
CAPTURES = (False, True)
SPECS = ("none", "dflash2", "ddtree", "mtp")
MASKS = ("none", "swa", "anchor")
MATRIX_KEYS = ("stage", "codec", "head", "gqa", "capture", "spec", "mask")
KV_SPELLING = {"auto": "float16", "fp8": "fp8_e4m3"}

BASIS = (
    "CPU evaluation of the FLASH_ATTN_V100 selection procedure (docs/contracts/attention.md "
    "§4) for each case of the reference trace and routectl's own probes: two forwards' ordered "
    "route counters, native entries and their deciding keyword scalars, the refusals, with the "
    "policy resolved once per engine and the storage layout, loaded entries and declines taken "
    "as declared inputs (page 16, block table 0..n-1, seq = q + 64, one KV head unless a row "
    "says otherwise). Does not prove a kernel launch, numerics, device-side choices inside XQA, "
    "graph replay, or what a real build loads and declines."
)

# Routes no row reaches, with the reason (the test of every declared route checks this list
# against the rows).
UNREACHABLE: Mapping[str, str] = {
    "flashinfer_sm70_fixed_entry": "recorded by the sibling FlashInfer SM70 backend",
    "flashinfer_sm70_splitkv3_fast_visible": "recorded by the sibling FlashInfer SM70 backend",
    # The FA2 candidate records `fa2_route or "prefill_prefix_splitd_d256"`, and every branch
    # that can complete has set `fa2_route` to the contiguous, gather or paged name first.
    "prefill_prefix_splitd_d256": (
        "the FA2 candidate always names its contiguous, gather or paged route before it "
        "records, so the default name is never used (§2)"
    ),
}


def kv_spelling(codec: str) -> str:
    return KV_SPELLING.get(codec, codec)


def row_id(case: Mapping[str, Any]) -> str:
    """§6.1: `{stage}-h{head}g{gqa}-{mask}-{eager|graph}/{kv}/tp1/{spec}/c{n}/q{q}`."""
    c = to_case(case)
    mode = "graph" if c.capture else "eager"
    first = f"{c.stage}-h{c.head}g{c.gqa}-{c.mask}-{mode}"
    lengths = c.query_lengths
    return f"{first}/{kv_spelling(c.codec)}/tp1/{c.spec}/c{len(lengths)}/q{max(lengths)}"


def to_case(case: Mapping[str, Any]) -> Case:
    known = {f.name for f in fields(Case)}
    values = {k: v for k, v in case.items() if k in known}
    for key in ("lengths", "unavailable"):
        if key in values and values[key] is not None:
            values[key] = tuple(values[key])
    return Case(**values)


def _var(name: str) -> str:
    return VARIABLES[name]


@dataclass(frozen=True)
class AttentionProbe:
    """An edge probe (§6.3): a case (a manifest line in the trace's spelling, or routectl's
    own), the variables set before construction, the layout inputs it changes, whether it is a
    trace case, and what it proves."""

    name: str
    case: Mapping[str, Any]
    variables: Mapping[str, str] = field(default_factory=dict)
    layout: Mapping[str, Any] = field(default_factory=dict)
    traced: bool = False
    config: Mapping[str, Any] = field(default_factory=dict)
    doc: str = ""

    @property
    def id(self) -> str:
        return f"edge:{self.name}"


def _base(**overrides: Any) -> dict[str, Any]:
    case: dict[str, Any] = {
        "stage": "decode",
        "codec": "auto",
        "head": 256,
        "gqa": 6,
        "capture": False,
        "spec": "none",
        "mask": "none",
    }
    case.update(overrides)
    return case


def _env(**values: str) -> dict[str, str]:
    return {_var(name): value for name, value in values.items()}


def _traced(
    name: str, case: dict[str, Any], env: Mapping[str, str] | None = None, doc: str = ""
) -> AttentionProbe:
    line = dict(case)
    if env:
        line["env"] = dict(env)
    return AttentionProbe(name, line, dict(env or {}), traced=True, doc=doc)


def _pair(name: str, env: Mapping[str, str] | None = None, **case: Any) -> list[AttentionProbe]:
    """A manifest pair: eager, then `_graph` (capture)."""
    return [
        _traced(name, _base(**case, capture=False), env),
        _traced(f"{name}_graph", _base(**case, capture=True), env),
    ]


_DIAG_ALL = _env(decode_use_paged_prefill="1", decode_dense_cache="1", decode_dense_reference="1")
_DIAG_CACHE = _env(decode_dense_cache="1", decode_dense_reference="1")
_BFLA = _env(bfla_prefill="1", bfla_min_q="1", bfla_min_kv="1")
_CONTIG = _env(
    prefill_contig_dense="1", prefill_contig_dense_min_q="1", prefill_contig_dense_min_kv="1"
)
_SPLIT = _env(
    prefill_split_kv="1",
    prefill_split_kv_min_q="1",
    prefill_split_kv_min_kv="1",
    prefill_split_kv_tokens="32",
)
_GATHER = _env(
    prefill_gather_dense="1", prefill_gather_dense_min_q="1", prefill_gather_dense_min_kv="1"
)
_FALLBACK = _env(allow_triton_fallback="1")


def _manifest() -> list[AttentionProbe]:
    """§6.3's 45 manifest probes in file order (the trace tool's extra cases)."""
    probes: list[AttentionProbe] = [
        *_pair("decode_diagnostics_all", _DIAG_ALL),
        *_pair("decode_dense_cache_reference", _DIAG_CACHE),
        *_pair("decode_dense_reference", _env(decode_dense_reference="1")),
        *_pair("decode_xqa_off", _env(decode_use_xqa="0")),
        *_pair("prefix_bfla_forced", _BFLA, stage="prefix"),
        *_pair("prefix_contig_dense_forced", _CONTIG, stage="prefix"),
        *_pair(
            "prefix_contig_dense_copy",
            {**_CONTIG, **_env(prefill_contig_dense_allow_copy="1")},
            stage="prefix",
        ),
        *_pair("prefix_splitkv_forced", _SPLIT, stage="prefix"),
        *_pair("prefix_paged_cache", _env(prefill_use_paged_cache="1"), stage="prefix"),
        *_pair("prefix_paged_prefill_off", _env(enable_paged_prefill="0"), stage="prefix"),
        _traced("prefill_q1024", _base(stage="prefill", qlen=1024, decline=False)),
        _traced("prefill_q1024_declined", _base(stage="prefill", qlen=1024, decline=True)),
        _traced("prefix_q1024", _base(stage="prefix", qlen=1024, decline=False)),
        _traced("prefix_q1024_declined", _base(stage="prefix", qlen=1024, decline=True)),
        _traced("prefill_q8192", _base(stage="prefill", qlen=8192)),
        _traced(
            "mixed_dflash_draft",
            _base(
                stage="mixed", head=128, gqa=8, spec="dflash2", draft=True, qlen=8, lengths=[8, 8]
            ),
        ),
        _traced(
            "prefix_dflash_draft_graph",
            _base(
                stage="prefix", head=128, gqa=8, capture=True, spec="dflash2", draft=True, qlen=8
            ),
        ),
        _traced("metadata_none", _base(stage="prefix", metadata_none=True)),
    ]
    missing_dense = _base(stage="prefix", unavailable=["dense"])
    missing_dense["env"] = dict(_FALLBACK)
    probes.append(
        AttentionProbe("prefix_dense_op_missing", missing_dense, dict(_FALLBACK), traced=True)
    )
    missing_decode = _base(unavailable=["decode"])
    missing_decode["env"] = dict(_FALLBACK)
    probes.append(AttentionProbe("decode_op_missing", missing_decode, dict(_FALLBACK), traced=True))
    probes += [
        _traced("prefix_triton_forced", _base(stage="prefix"), _env(prefill_use_triton="1")),
        _traced(
            "decode_scalar_off",
            _base(),
            {**_FALLBACK, **_env(decode_use_scalar_paged="0")},
        ),
        _traced("prefill_paged_cache", _base(stage="prefill"), _env(prefill_use_paged_cache="1")),
    ]
    after = _base()
    after["after_init_env"] = _env(decode_use_xqa="0")
    probes.append(
        AttentionProbe(
            "decode_xqa_off_after_init",
            after,
            traced=True,
            doc="a variable set after construction: resolved once, XQA stays on (after_init)",
        )
    )
    gather = _base(stage="prefix", qlen=1024, decline=True)
    gather["env"] = dict(_GATHER)
    probes.append(
        AttentionProbe("prefix_gather_dense_declined", gather, dict(_GATHER), traced=True)
    )
    probes += [
        *_pair("prefix_dflash2_page832", stage="prefix", spec="dflash2", qlen=8, page=832),
        *_pair(
            "prefix_dflash2_page832_e4m3",
            stage="prefix",
            codec="fp8_e4m3",
            spec="dflash2",
            qlen=8,
            page=832,
        ),
        _traced("prefix_q1024_bfla", _base(stage="prefix", qlen=1024), _BFLA),
    ]
    contiguous = _base(stage="prefix", contiguous_kv=True)
    contiguous_env = {**_CONTIG, **_env(prefill_contig_dense_allow_copy="0")}
    contiguous["env"] = contiguous_env
    probes.append(
        AttentionProbe("prefix_contig_dense_contiguous_kv", contiguous, contiguous_env, traced=True)
    )
    for page in (784, 832):
        probes += [
            _traced(
                f"decode_e4m3_rev1_page{page}",
                _base(codec="fp8_e4m3", page=page, native_revision=1),
            ),
            _traced(
                f"decode_e4m3_rev1_page{page}_graph",
                _base(codec="fp8_e4m3", capture=True, page=page, native_revision=1),
            ),
        ]
    return probes


def _own(
    name: str,
    case: dict[str, Any],
    variables: Mapping[str, str] | None = None,
    doc: str = "",
    config: Mapping[str, Any] | None = None,
    **layout: Any,
) -> AttentionProbe:
    return AttentionProbe(name, case, dict(variables or {}), layout, False, dict(config or {}), doc)


_VERIFY = {"stage": "prefix", "spec": "mtp"}
_E5 = "fp8_e5m2"
_E4 = "fp8_e4m3"
_NO_E4_GROUPED = _env(e4m3_grouped_fp32="0")


def _own_probes() -> list[AttentionProbe]:
    """The probes §6.3 asks routectl to add (no golden case)."""
    probes: list[AttentionProbe] = []
    # The verify XQA minimum (4096): the live hint, and the capture workspace hint.
    for hint in (4095, 4096):
        probes.append(
            _own(f"verify_min_seq_{hint}", _base(**_VERIFY), smallq_max_seq_len_hint=hint)
        )
        probes.append(
            _own(
                f"verify_capture_workspace_{hint}",
                _base(**_VERIFY, capture=True),
                smallq_workspace_hint=hint,
            )
        )
    # The E5M2 decode minimum (16384): eager reads the max hint first, capture the static.
    for hint in (16383, 16384):
        probes.append(
            _own(f"decode_e5m2_min_seq_{hint}", _base(codec=_E5), decode_max_seq_len_hint=hint)
        )
        probes.append(
            _own(
                f"decode_e5m2_capture_static_{hint}",
                _base(codec=_E5, capture=True),
                decode_static_hint=hint,
                decode_max_seq_len_hint=1,
            )
        )
        # Capturing without a static hint: the workspace capacity comes next (§3.3 item 9).
        probes.append(
            _own(
                f"decode_e5m2_capture_workspace_{hint}",
                _base(codec=_E5, capture=True),
                decode_workspace_hint=hint,
                decode_max_seq_len_hint=1,
            )
        )
    # The GQA4 decode minimum (32768): the workspace hint first, then static, then max.
    for hint in (32767, 32768):
        probes.append(
            _own(f"decode_gqa4_min_seq_{hint}", _base(gqa=4), decode_max_seq_len_hint=hint)
        )
        probes.append(
            _own(
                f"decode_gqa4_workspace_{hint}",
                _base(gqa=4, capture=True),
                decode_workspace_hint=hint,
                decode_max_seq_len_hint=1 << 20,
            )
        )
    # The thresholds are policy values too: moved by their variables.
    probes.append(
        _own(
            "verify_min_seq_variable_68",
            _base(**_VERIFY),
            _env(smallq_decode_xqa_min_seq_len="68"),
            doc="the verify minimum at the live sequence length: XQA",
        )
    )
    probes.append(
        _own(
            "decode_gqa4_min_variable_1",
            _base(gqa=4),
            _env(decode_xqa_q4_min_seq_len="0"),
            decode_max_seq_len_hint=1,
            doc="a threshold clamps to 1",
        )
    )
    # E5M2 at each stage, and its verify minimum (max of 4096 and 16384).
    for stage in STAGES:
        probes.append(_own(f"e5m2_{stage}", _base(stage=stage, codec=_E5)))
    probes.append(_own("e5m2_verify", _base(**_VERIFY, codec=_E5)))
    probes.append(
        _own("e5m2_verify_xqa_16384", _base(**_VERIFY, codec=_E5), smallq_max_seq_len_hint=16384)
    )
    probes.append(
        _own("e5m2_verify_xqa_16383", _base(**_VERIFY, codec=_E5), smallq_max_seq_len_hint=16383)
    )
    probes.append(
        _own("e5m2_decode_gqa4", _base(codec=_E5, gqa=4), decode_max_seq_len_hint=1 << 20)
    )
    # GQA 4 and 8.
    for gqa in (4, 8):
        probes.append(_own(f"decode_gqa{gqa}", _base(gqa=gqa)))
        probes.append(
            _own(f"verify_gqa{gqa}", _base(**_VERIFY, gqa=gqa), smallq_max_seq_len_hint=4096)
        )
        probes.append(_own(f"mixed_gqa{gqa}", _base(stage="mixed", gqa=gqa)))
    # E4M3 batch XQA: decode and verify rows, on and off.
    for rows in (2, 32):
        for on in ("1", "0"):
            probes.append(
                _own(
                    f"decode_e4m3_rows{rows}_batch_{'on' if on == '1' else 'off'}",
                    _base(codec=_E4, lengths=[1] * rows),
                    _env(e4m3_batch_xqa=on),
                )
            )
    for rows in (2, 32):
        for on in ("1", "0"):
            probes.append(
                _own(
                    f"verify_e4m3_rows{rows}_batch_{'on' if on == '1' else 'off'}",
                    _base(**_VERIFY, codec=_E4, qlen=rows),
                    {**_NO_E4_GROUPED, **_env(e4m3_batch_xqa=on, smallq_decode_max_q="32")},
                    smallq_max_seq_len_hint=4096,
                )
            )
    # Zero rows: decode never admits them (the sequence rows differ first), on or off.
    for on in ("1", "0"):
        probes.append(
            _own(
                f"decode_e4m3_rows0_batch_{'on' if on == '1' else 'off'}",
                _base(codec=_E4, lengths=[0]),
                _env(e4m3_batch_xqa=on),
            )
        )
    # The small-query cap (16) on both sides: at the cap the verifier, above it the
    # per-sequence prefix path.
    for qlen in (16, 17):
        probes.append(_own(f"verify_q{qlen}_cap16", _base(**_VERIFY, qlen=qlen)))
    # The decode strategy and the XQA op's revision.
    probes.append(
        _own(
            "decode_e4m3_strategy_legacy_rev1_page784",
            _base(codec=_E4, page=784, native_revision=1),
            config={"sm70_decode_strategy": "legacy"},
            doc="legacy requested: the E4M3 dynamic page counter despite revision 1",
        )
    )
    probes.append(
        _own(
            "decode_e4m3_rev0_page784",
            _base(codec=_E4, page=784, native_revision=0),
            doc="revision 0: legacy strategy, its construction counter and the dynamic counter",
        )
    )
    probes.append(
        _own(
            "decode_e4m3_rev0_page784_p64_p256_off",
            _base(codec=_E4, page=784, native_revision=0),
            _env(xqa_e4m3_g6_p64_p256_auto="0"),
        )
    )
    # A partition-size setting: no G6 hint, no grouped FP32.
    probes.append(
        _own("decode_partition_size_page784", _base(page=784), _env(decode_partition_size="512"))
    )
    probes.append(
        _own(
            "verify_e4m3_partition_size",
            _base(**_VERIFY, codec=_E4),
            _env(decode_partition_size="512"),
            doc="grouped FP32 refused with decode_policy",
        )
    )
    probes.append(
        _own("decode_sawtooth_off_page784", _base(page=784), _env(xqa_g6_p1024_sawtooth="0"))
    )
    # The listed pages.
    for page in (784, 832, 848, 1616, 1648):
        probes.append(_own(f"decode_page{page}", _base(page=page)))
    probes.append(
        _own("decode_e5m2_page1648", _base(codec=_E5, page=1648), decode_max_seq_len_hint=16384)
    )
    probes.append(_own("verify_page848", _base(**_VERIFY, page=848)))
    probes.append(_own("verify_page1616_e5m2", _base(**_VERIFY, codec=_E5, page=1616)))
    probes.append(
        _own(
            "verify_dflash2_grouped_page1648",
            _base(stage="prefix", codec=_E5, spec="dflash2", qlen=8, page=1648),
            grouped_verify_max_query_tokens=16,
            doc="the DFlash2 grouped verifier (E5M2 only)",
        )
    )
    probes.append(
        _own(
            "verify_dflash2_grouped_e4m3_page1648",
            _base(stage="prefix", codec=_E4, spec="dflash2", qlen=8, page=1648),
            grouped_verify_max_query_tokens=16,
            doc="E4M3 goes to the grouped FP32 route instead",
        )
    )
    # Grouped FP32 codes through rows (the function's every code is tested directly).
    probes.append(
        _own(
            "grouped_operator_missing",
            _base(**_VERIFY, codec=_E4),
            _NO_E4_GROUPED,
            doc="operator_missing:grouped_e4m3_fp32",
        )
    )
    probes.append(
        _own(
            "grouped_rows_batch_revision",
            _base(stage="mixed", codec=_E4),
            _env(e4m3_batch_xqa="0"),
            doc="mixed E4M3 rows without XQA: operator_batch_revision, then scalar rows",
        )
    )
    probes.append(
        _own(
            "grouped_rows_revision6",
            _base(stage="mixed", codec=_E4),
            _env(e4m3_batch_xqa="0"),
            grouped_e4m3_batch_revision=6,
            doc="with batch revision 6 the grouped E4M3 rows take the call",
        )
    )
    probes.append(
        _own(
            "verify_e4m3_xqa",
            _base(**_VERIFY, codec=_E4),
            _NO_E4_GROUPED,
            smallq_max_seq_len_hint=4096,
        )
    )
    probes.append(
        _own("verify_fp16_xqa_swa", _base(**_VERIFY, mask="swa"), smallq_max_seq_len_hint=4096)
    )
    # Entries the trace's op set leaves out, and declines.
    probes.append(
        _own(
            "decode_e4m3_scalar_tail",
            _base(codec=_E4),
            _env(decode_use_xqa="0"),
            present=("scalar_tail",),
        )
    )
    probes.append(
        _own(
            "prefix_splitkv3_gather",
            _base(stage="prefix", qlen=4096),
            seq_extra=28672,
            present=("splitkv3",),
            doc="the gathered Split-D dense call takes the split-KV3 entry",
        )
    )
    probes.append(
        _own("prefix_q1024_contiguous_kv", _base(stage="prefix", qlen=1024), contiguous_kv=True)
    )
    probes.append(_own("prefix_q1024_gather", _base(stage="prefix", qlen=1024), _GATHER))
    probes.append(
        _own(
            "decode_paged_prefill_wmma",
            _base(),
            _env(decode_use_paged_prefill="1", decode_use_wmma_wrapper="1"),
        )
    )
    probes.append(_own("decode_dense_cache_mixed_rows", _base(lengths=[1, 1]), _DIAG_CACHE))
    for codec in (_E4, _E5):
        short = "e4m3" if codec == _E4 else "e5m2"
        for qlen, tail in ((1024, ""), (992, "_tailpad")):
            probes.append(
                _own(f"bridge_{short}_q{qlen}", _base(stage="prefix", codec=codec, qlen=qlen))
            )
            probes.append(
                _own(
                    f"bridge_{short}_q{qlen}_dense_declined",
                    _base(stage="prefix", codec=codec, qlen=qlen),
                    declines=("splitd_dense",),
                    doc=f"the bridge's paged Split-D form{tail and ' (tail padded)'}",
                )
            )
    probes.append(_own("bridge_e4m3_unaligned", _base(stage="prefix", codec=_E4), aligned=False))
    probes += _grouped_code_probes()
    probes += _architecture_probes()
    # The contiguous dense candidate's own Split-D call: the FA2 candidate saw no contiguous
    # view (the pages are not one tensor) and its paged form declined; BHMD is not loaded, so
    # the contiguous dense candidate copies the pages into a view and the dense Split-D form
    # completes there.
    probes.append(
        _own(
            "prefix_q1024_contig_copy_splitd",
            _base(stage="prefix", qlen=1024),
            {**_CONTIG, **_env(prefill_contig_dense_allow_copy="1")},
            unavailable=("bhmd",),
            declines=("splitd_paged",),
            doc="prefill_prefix_contig_dense_fa2_d256",
        )
    )
    # A captured draft batch of two uniform sequences: the capture route, then the batch.
    probes.append(
        _own(
            "prefix_dflash_draft_graph_two_seqs",
            _base(
                stage="prefix",
                head=128,
                gqa=8,
                capture=True,
                spec="dflash2",
                draft=True,
                qlen=8,
                lengths=[8, 8],
            ),
            doc="one sequence (the manifest's line 27) takes no batch route",
        )
    )
    probes.append(
        _own(
            "ddtree_triton_off",
            _base(stage="prefix", spec="ddtree"),
            _env(ddtree_triton_branch_attn="0"),
        )
    )
    probes.append(
        _own(
            "ddtree_triton_off_graph",
            _base(stage="prefix", spec="ddtree", capture=True),
            _env(ddtree_triton_branch_attn="0"),
        )
    )
    probes.append(
        _own(
            "ddtree_e4m3_strict",
            _base(stage="prefix", codec=_E4, spec="ddtree"),
            _env(ddtree_triton_branch_attn_strict="1"),
        )
    )
    probes.append(
        _own("mixed_decode_rows_off", _base(stage="mixed"), _env(prefill_prefix_decode_rows="0"))
    )
    probes.append(_own("verify_cap_off", _base(**_VERIFY), _env(smallq_decode_max_q="0")))
    probes.append(_own("decode_op_missing_strict", _base(unavailable=["decode"])))
    probes.append(_own("decode_scalar_off_strict", _base(), _env(decode_use_scalar_paged="0")))
    probes.append(
        _own("prefix_dense_op_missing_strict", _base(stage="prefix", unavailable=["dense"]))
    )
    probes.append(
        _own(
            "prefix_dense_op_missing_draft",
            _base(stage="prefix", unavailable=["dense"], draft=True),
        )
    )
    return probes


def _grouped_code_probes() -> list[AttentionProbe]:
    """Rows that reach the grouped FP32 admission codes (§3.5) no trace case reaches, each
    through the declared storage or metadata fact that code checks (§8.3-8.4)."""
    verify, e4 = _base(**_VERIFY), _base(**_VERIFY, codec=_E4)
    return [
        _own("grouped_fp16_op_missing", verify, unavailable=("grouped_fp16",)),
        _own("grouped_fp16_request_metadata", verify, parent_metadata=False),
        _own("grouped_fp16_five_requests", _base(**_VERIFY, lengths=[2] * 5)),
        _own("grouped_fp16_page832_cpu", _base(**_VERIFY, page=832), on_cuda=False),
        _own("grouped_e4m3_query_layout", e4, query_layout_ok=False),
        _own("grouped_e4m3_output_shape", e4, output_shape_ok=False),
        _own("grouped_e4m3_unaligned", e4, aligned=False),
        _own("grouped_e4m3_context_266240", e4, seq_extra=266240),
        _own("grouped_e4m3_row_tables", e4, smallq_table_rows=5),
        _own("grouped_e4m3_metadata_layout", e4, metadata_layout_ok=False),
        _own(
            "grouped_rows_17_groups",
            _base(stage="mixed", codec=_E4, lengths=[32, *([1] * 17)]),
            _env(e4m3_batch_xqa="0"),
            doc="seventeen eight-row groups: more than the E4M3 op's sixteen (query_rows)",
        ),
    ]


def _architecture_probes() -> list[AttentionProbe]:
    """The D256 GQA6 architecture entry (absent from the trace's op set) declared loaded:
    the Q8000 core, the fringe, the Q8192 specialization with and without padding, the v37
    family, the switch off and capture."""
    arch, both = ("arch",), ("arch", "arch_q8192")
    prefill = {"stage": "prefill"}
    return [
        _own("prefill_q8000_arch", _base(**prefill, qlen=8000), present=arch),
        _own(
            "prefill_q8000_arch_switch_off",
            _base(**prefill, qlen=8000),
            _env(prefill_d256_gqa_arch_128k_experimental="0"),
            present=arch,
        ),
        _own("prefill_q8000_arch_graph", _base(**prefill, qlen=8000, capture=True), present=arch),
        _own("prefill_q8128_arch_fringe", _base(**prefill, qlen=8128), present=arch),
        _own("prefill_q8128_arch_q8192", _base(**prefill, qlen=8128), present=both),
        _own("prefill_q8192_arch_q8192", _base(**prefill, qlen=8192), present=both),
        _own(
            "prefix_q1024_arch_v37",
            _base(stage="prefix", qlen=1024),
            _env(prefill_d256_gqa_v37="1"),
            present=arch,
            contiguous_kv=True,
        ),
    ]


MANIFEST = tuple(_manifest())
OWN_PROBES = tuple(_own_probes())
PROBES = (*MANIFEST, *OWN_PROBES)
_LAYOUT_FIELDS = {f.name for f in fields(Layout)}


def matrix_cases() -> list[dict[str, Any]]:
    """The 768 matrix cases in the trace's product order (§5.1)."""
    return [
        dict(zip(MATRIX_KEYS, values, strict=True))
        for values in itertools.product(STAGES, CODECS, HEADS, GQAS, CAPTURES, SPECS, MASKS)
    ]


def _engine(case: Mapping[str, Any]) -> EngineConfig:
    c = to_case(case)
    kv = kv_spelling(c.codec)
    return EngineConfig(
        tp=1,
        spec_method=c.spec,
        max_num_seqs=len(c.query_lengths),
        kv_dtype=kv if kv in ("float16", "bfloat16", "fp8_e4m3", "fp8_e5m2") else "float16",
        declared_methods=SPEC_METHODS,
    )


def _row(
    row_id_: str,
    case: Mapping[str, Any],
    traced: bool,
    variables: Mapping[str, str] | None = None,
    layout: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
) -> RowSpec:
    variables, layout, config = variables or {}, layout or {}, config or {}
    unknown = set(layout) - _LAYOUT_FIELDS
    if unknown:
        raise ValueError(f"{row_id_}: unknown layout inputs {sorted(unknown)}")
    return RowSpec(
        id=row_id_,
        model=MODEL,
        engine=_engine(case),
        capability=CAPABILITY,
        layer={"case": dict(case), "traced": traced, "layout": dict(layout)},
        variables=tuple(sorted(variables.items())),
        config={SECTION: dict(config)} if config else {},
    )


def _layout(values: Mapping[str, Any]) -> Layout:
    inputs: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return Layout(**inputs)


# --- decision sites (`routectl coverage`, docs/coverage.md) ---------------------------------

# The candidates the routing asks `select_route` about, with the codes their capability
# classes can return there (native/kernels/v100_attention.py: `is_supported`'s capability,
# `route_reason`'s stage and XQA rules, `shape_reason`'s declared limits in §3.2's order).
XQA_CODES = (
    "capability",
    "stage",
    "disabled",
    "unavailable",
    "window",
    "partition_or_window",
    "short_verify",
    "short_e5m2",
    "short_gqa4",
    "e5m2_gqa4",
    "e4m3_gqa",
    "e4m3_batch",
    "sequence_rows",
    "codec",
    "head_dim",
    "gqa",
)
XQA_CANDIDATES = ("decode_xqa_paged", "prefill_smallq_decode_xqa", "prefill_prefix_decode_rows_xqa")
# The routes a grouped FP32 admission (§3.5) decides, each with every grouped code.
GROUPED_CANDIDATES = (
    "prefill_smallq_fp16_grouped_fp32",
    "prefill_smallq_e4m3_grouped_fp32",
    "prefill_prefix_decode_rows_e4m3_grouped_fp32",
)
_ROUTES_TEST = "tests/test_v100_attention_routes.py::"
# The codes some row's verdicts show, per candidate (the rest are recorded-only: the
# capability tests set each limit alone). A row that starts or stops reaching one fails
# `routectl coverage --strict` (a stale declaration, or an uncovered site).
ROW_CODES: Mapping[str, tuple[str, ...]] = {
    "decode_xqa_paged": (
        "codec",
        "disabled",
        "e4m3_batch",
        "e5m2_gqa4",
        "gqa",
        "head_dim",
        "sequence_rows",
        "short_e5m2",
        "short_gqa4",
        "window",
    ),
    "prefill_smallq_decode_xqa": (
        "codec",
        "e4m3_batch",
        "gqa",
        "head_dim",
        "partition_or_window",
        "short_verify",
    ),
    "prefill_prefix_decode_rows_xqa": (
        "e4m3_batch",
        "gqa",
        "head_dim",
        "short_e5m2",
        "short_gqa4",
    ),
    "prefill_prefix_decode_rows_e4m3_grouped_fp32": ("operator_batch_revision", "query_rows"),
    "prefill_smallq_e4m3_grouped_fp32": (
        "causal_or_window",
        "context_capacity",
        "decode_policy",
        "head_shape",
        "kv_layout",
        "kv_shape_or_unmeasured_page",
        "metadata_layout",
        "operator_batch_revision",
        "operator_missing:grouped_e4m3_fp32",
        "output_shape",
        "query_or_output_layout",
        "row_metadata",
    ),
    "prefill_smallq_fp16_grouped_fp32": (
        "causal_or_window",
        "device_not_cuda",
        "head_shape",
        "kv_shape_or_unmeasured_page",
        "operator_missing:sm70_grouped_fp16_fwd",
        "query_rows",
        "request_group_count",
        "request_metadata",
    ),
}
# The grouped codes no route can reach whatever a row declares: each route's admission is
# called with its own codec and layout, and its op is loaded only for a cache of that codec.
UNREACHABLE_GROUPED_CODES: Mapping[str, str] = {
    "codec_unsupported": "each grouped route asks the admission for its own codec (FP16 or E4M3)",
    "layout_unsupported": "only the E4M3 rows ask for explicit groups, which E4M3 accepts",
    "kv_dtype": "each grouped op is loaded only for a cache of its own codec (§1.2)",
}
_PINNED = "the rows are the trace's 813 cases and the probes of §6.3"


def decision_sites() -> DecisionSites:
    """Every declared route counted in a forward (its `chosen` site), the XQA candidates with
    their codes and the grouped FP32 admissions with theirs. A route no row reaches is declared
    unreachable with `UNREACHABLE`'s reason; a code no row reaches is proved by the capability
    tests, which set each limit alone."""
    sites: list[Site] = [Site("chosen", name) for name in ROUTE_SPECS]
    for name in XQA_CANDIDATES:
        sites += candidate_sites(name, XQA_CODES)
    for name in GROUPED_CANDIDATES:
        sites += candidate_sites(name, GROUPED_REASONS)
    sites = list(dict.fromkeys(sites))
    declarations: dict[Site, Declaration] = {
        Site("chosen", name): unreachable(reason) for name, reason in UNREACHABLE.items()
    }
    for site in sites:
        if site.kind != "reason" or site.code in ROW_CODES.get(site.subject, ()):
            continue
        test = (
            "test_each_grouped_code_alone"
            if site.code in GROUPED_REASONS
            else "test_each_declared_limit_gives_its_code"
            if site.code in ("codec", "head_dim", "gqa")
            else "test_capability_classes_answer_for_sm70_only"
            if site.code == "capability"
            else "test_stage_disabled_unavailable_precede_the_shape"
            if site.code in ("stage", "disabled", "unavailable")
            else "test_each_xqa_rule_on_both_sides"
        )
        reason = UNREACHABLE_GROUPED_CODES.get(
            site.code or "",
            f"no row's layout or variables reach this code for this candidate ({_PINNED})",
        )
        declarations[site] = recorded_only(reason, _ROUTES_TEST + test)
    return DecisionSites(tuple(sites), declarations)


def attention_sites(route: Mapping[str, Any]) -> set[Site]:
    """The sites one row reaches: each route counted in a forward and each verdict."""
    # The counter families (FP8 and page counters) are observers named per build, not
    # routes of the declared table: only the table's names are sites.
    out: set[Site] = {
        Site("chosen", name) for name in route.get("construction", ()) if name in ROUTE_SPECS
    }
    for forward in route.get("forwards", ()):
        out.update(Site("chosen", n) for n in forward.get("routes", ()) if n in ROUTE_SPECS)
        for name, code in forward.get("verdicts", ()):
            if code is None:
                out.add(Site("chosen", name))
            else:
                out.update((Site("rejected", name), Site("reason", name, code)))
    return out


class V100AttentionCategory(Category):
    name = NAME
    basis = BASIS
    description = "FLASH_ATTN_V100 attention routes on SM70: both forwards' routes and entries"
    matrix_subject = "routes"
    spec_methods = SPEC_METHODS

    def __init__(self) -> None:
        rows = [_row(row_id(case), case, True) for case in matrix_cases()]
        rows += [_row(p.id, p.case, p.traced, p.variables, p.layout, p.config) for p in PROBES]
        self._rows = tuple(rows)

    def rows(self) -> Sequence[RowSpec]:
        return self._rows

    def route(self, ctx: ReplayContext) -> dict[str, Any]:
        layer = ctx.row.layer
        case = layer["case"]
        values = {name: ctx.policy.value(f"{SECTION}.{name}") for name in FIELD_NAMES}
        route = simulate(to_case(case), values, _layout(layer["layout"]))
        return {
            "case": dict(case) if layer["traced"] else None,
            "inputs": {
                "case": dict(case),
                "layout": dict(layer["layout"]),
                "variables": dict(ctx.row.variables),
            },
            **route,
        }

    def decision_sites(self) -> DecisionSites:
        return decision_sites()

    def reached_sites(self, route: Mapping[str, Any]) -> set[Site]:
        return attention_sites(route)

    def route_schema(self) -> Mapping[str, Any]:
        """`forwards` (routes, ops, predicates, checks, verdicts), `rejected`, the case and
        inputs."""
        return route_fragment(__name__)

    def matrix_label(self, route: Mapping[str, Any]) -> tuple[str, str] | None:
        """The work route of the first forward (observers left out), or the refusal."""
        if "forwards" not in route:
            return None
        if route["rejected"] is not None:
            return (f"refused ({route['rejected']['message']})", "status")
        work = _work_routes(route)
        return (work[0] if work else "none", "value")

    def matrix_reason(self, route: Mapping[str, Any]) -> str | None:
        if "forwards" not in route:
            return None
        return " > ".join(route["forwards"][0]["routes"]) if route["forwards"] else "refused"

    def explain_lines(self, route: dict[str, Any]) -> list[str]:
        """Each forward's routes, entries, policy reads and checks; the construction counters,
        the refusal and the case."""
        lines: list[str] = []
        if "forwards" not in route:
            return lines
        forwards = route.pop("forwards")
        for i, fw in enumerate(forwards):
            lines.append(f"forward {i}:")
            lines.append("  routes: " + (", ".join(fw["routes"]) or "(none)"))
            ops = [_op_text(op) for op in fw["ops"]]
            lines.append("  entries: " + (", ".join(ops) or "(none)"))
            lines.append(
                "  policy read: " + (", ".join(f"{n}={v}" for n, v in fw["predicates"]) or "-")
            )
            lines.append("  checks: " + (", ".join(f"{n}={v}" for n, v in fw["checks"]) or "-"))
        construction = route.pop("construction", [])
        if construction:
            lines.append("construction counters: " + ", ".join(construction))
        rejected = route.pop("rejected", None)
        if rejected is not None:
            lines.append(f"refused: {rejected['type']} ({rejected['message']})")
        case = route.pop("case", None)
        inputs = route.pop("inputs", {})
        lines.append(
            "case: "
            + (", ".join(f"{k}={v}" for k, v in (case or inputs.get("case", {})).items()))
            + ("" if case is not None else " (routectl's own probe)")
        )
        if inputs.get("layout"):
            lines.append(
                "layout inputs: " + ", ".join(f"{k}={v}" for k, v in inputs["layout"].items())
            )
        return lines


# The envelopes a prefill forward closes with: a cell shows the route inside them.
ENVELOPES = (
    "prefill_prefix_flash",
    "prefill_no_prefix_dense_flash",
    "prefill_no_prefix_paged_cache_flash",
)


def _work_routes(route: Mapping[str, Any]) -> list[str]:
    """The first forward's work routes (observers and families left out), the envelope last."""
    if not route["forwards"]:
        return []
    work = [
        name
        for name in route["forwards"][0]["routes"]
        if name in ROUTE_SPECS and not ROUTE_SPECS[name].observer
    ]
    inner = [name for name in work if name not in ENVELOPES]
    return inner + [name for name in work if name in ENVELOPES]


def _op_text(op: Mapping[str, Any]) -> str:
    extra = [f"{k}={v}" for k, v in op.items() if k != "name"]
    return op["name"] + (f"({', '.join(extra)})" if extra else "")


V100_ATTENTION_CATEGORY = V100AttentionCategory()

__all__ = [
    "MANIFEST",
    "NAME",
    "OWN_PROBES",
    "PROBES",
    "UNREACHABLE",
    "UNREACHABLE_GROUPED_CODES",
    "V100_ATTENTION_CATEGORY",
    "V100AttentionCategory",
    "matrix_cases",
    "row_id",
]
