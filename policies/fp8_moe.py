"""The SM70 block-FP8 mixture-of-experts family (docs/contracts/fp8moe.md): the method
selection in the contract's order (§2.1), the variants fixed at construction (§3.3), the
preparation of both banks (§4) and the apply lanes per token count (§5.1).

`load_fp8_moe` is the one code path of the engine and of replay: the namespace is injected
(recording in replay), every tensor it makes is on the checkpoint's device (meta in replay).
A layer no TurboMind kernel serves is a Decision with kernel None and a status code
(`dequant_fallback`, `other_backend`, `not_admitted`, `unquantized`), never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from native import meta_tensors
from native.kernels import fp8_moe as fm
from native.kernels.fp8_sm70 import FP8_PREPARE_OP, STRIDED_PTRS_OP
from policies.linear_fp8_sm70 import (
    DEQUANT_CODE,
    OTHER_BACKEND_CODE,
    checkpoint_admission,
    force_marlin,
)
from routectl.errors import SelectionError
from routectl.namespaces.native_ns import NativeNamespace
from routectl.policy.loaded import Decision, PreparedLayer
from routectl.policy.resolve import ResolvedPolicy
from routectl.policy.selection import Evaluation, Selection, select
from routectl.reasons import Reason
from routectl.workload import EngineConfig, Hardware

FAMILY = "sm70-fp8-moe"
SECTION = "sm70_fp8_moe"
TURBOMIND = fm.METHOD_NAME
NOT_ADMITTED_CODE = "not_admitted"
UNQUANTIZED_CODE = "unquantized"
PARTIAL_WARNING = "partial_scale_block"
# The 11 route fields (hashed); the 3 diagnostics are never hashed (docs/contracts/fp8moe.md §1.3).
ROUTE_FIELDS = (
    "batched",
    "w13_per_expert",
    "w2_per_expert",
    "legacy_compact",
    "permute_scratch",
    "compact_exact_layout",
    "compact_native_unpermute",
    "compact_decomposed",
    "single_token_w13",
    "single_token_w2",
    "single_token_reduce",
)
DIAGNOSTICS = ("compact_compare", "compact_compare_reports", "strict_compare_fail")


@dataclass(frozen=True)
class Fp8MoeOptions:
    """The section as the method reads it at construction."""

    batched: bool
    w13_per_expert: bool
    w2_per_expert: bool
    legacy_compact: bool
    permute_scratch: bool
    compact_exact_layout: bool
    compact_native_unpermute: bool
    compact_decomposed: bool
    single_token_w13: tuple[str, ...]
    single_token_w2: str
    single_token_reduce: str
    compact_compare: bool

    @classmethod
    def of(cls, policy: ResolvedPolicy) -> Fp8MoeOptions:
        s = policy.section(SECTION)
        return cls(
            batched=bool(s.batched),
            w13_per_expert=bool(s.w13_per_expert),
            w2_per_expert=bool(s.w2_per_expert),
            legacy_compact=bool(s.legacy_compact),
            permute_scratch=bool(s.permute_scratch),
            compact_exact_layout=bool(s.compact_exact_layout),
            compact_native_unpermute=bool(s.compact_native_unpermute),
            compact_decomposed=bool(s.compact_decomposed),
            single_token_w13=tuple(s.single_token_w13),
            single_token_w2=str(s.single_token_w2),
            single_token_reduce=str(s.single_token_reduce),
            compact_compare=bool(s.compact_compare),
        )


# --- selection (docs/contracts/fp8moe.md §2.1) ------------------------------------------------


def _status(selection: Selection, cc: int, code: str, message: str) -> Decision:
    return Decision(None, selection, cc, status=(code, message))


def select_fp8_moe(
    desc: Mapping[str, Any],
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    ns: NativeNamespace,
    *,
    environ: Mapping[str, str] | None = None,
) -> Decision:
    """The first match of §2.1: an ignored layer, the checkpoint admission (from `environ`,
    the variables the engine started with, where given), the dequant lane, TurboMind, else
    another backend. TurboMind's construction checks stop the load (SelectionError)."""
    cc = hardware.capability
    sm70 = fm.SM70[0] <= cc < fm.SM70[1]
    enabled = bool(policy.value("sm70_fp8.enabled"))
    marlin = force_marlin(policy)
    moe_dequant = bool(policy.value("sm70_fp8.moe_dequant_fallback"))
    dequant = bool(policy.value("sm70_fp8.dequant_fallback"))

    def policy_gate() -> Evaluation:
        supported, why = fm.TurboMindFp8MoE.is_supported(cc)
        if not supported:
            assert why is not None
            return Evaluation.failed(why, "capability")
        if not enabled:
            return Evaluation.failed(
                Reason(
                    "turbomind_off",
                    "sm70_fp8.enabled is false"
                    + (" (the legacy backend is marlin)" if marlin else ""),
                ),
                "policy",
            )
        return Evaluation.passed()

    selection = select([(TURBOMIND, policy_gate)])
    if desc.get("ignored"):
        return _status(selection, cc, UNQUANTIZED_CODE, "the layer is ignored: unquantized MoE")
    if environ is not None:
        admitted, refusal = checkpoint_admission(environ, cc)
        if not admitted:
            assert refusal is not None
            return _status(
                selection,
                cc,
                NOT_ADMITTED_CODE,
                f"{refusal.message}; the engine refuses the checkpoint (another backend at "
                "capability 75 or above)",
            )
    if sm70 and moe_dequant and not enabled and not marlin:
        if dequant:
            return _status(
                selection,
                cc,
                DEQUANT_CODE,
                "sm70_fp8.moe_dequant_fallback and sm70_fp8.dequant_fallback are true and "
                "TurboMind is off: the experts are dequantized to FP16 at load and run on "
                "the unquantized fused-MoE method",
            )
        return _status(
            selection,
            cc,
            OTHER_BACKEND_CODE,
            "sm70_fp8.moe_dequant_fallback is true but sm70_fp8.dequant_fallback is false: "
            "Fp8MoEMethod's generic backend oracle serves the layer",
        )
    if selection.chosen is not None:
        return Decision(selection.chosen, selection, cc)
    if not sm70:
        why = f"capability {cc} is outside 70..74"
    elif marlin:
        why = "the legacy backend is marlin"
    else:
        why = "sm70_fp8.enabled and sm70_fp8.moe_dequant_fallback are false"
    return _status(
        selection,
        cc,
        OTHER_BACKEND_CODE,
        f"the SM70 TurboMind FP8 MoE method does not apply ({why}); Fp8MoEMethod's generic "
        "backend oracle serves the layer",
    )


# --- construction (docs/contracts/fp8moe.md §2.2, §3.3) ---------------------------------------


@dataclass(frozen=True)
class Variants:
    """What the method fixes at construction, never per call."""

    batched: bool
    legacy: bool
    st_w13: str  # compact | indexed | active_dense
    st_w2: str  # indexed | active_dense
    st_reduce: str  # weighted | unpermute
    permute: str  # the permute op
    w13_per_expert: bool
    w2_per_expert: bool
    exact_layout: bool
    native_unpermute: bool
    decomposed: bool

    def flags(self) -> dict[str, Any]:
        return {
            "batched": self.batched,
            "legacy_single_token": self.legacy,
            "single_token_w13": self.st_w13,
            "single_token_w2": self.st_w2,
            "single_token_reduce": self.st_reduce,
            "permute": self.permute,
            "w13_per_expert": self.w13_per_expert,
            "w2_per_expert": self.w2_per_expert,
            "compact_exact_layout": self.exact_layout,
            "compact_native_unpermute": self.native_unpermute,
            "compact_decomposed": self.decomposed,
        }


def variants(options: Fp8MoeOptions, ns: NativeNamespace) -> Variants:
    """§3.3: every optional op missing falls back silently."""
    w13 = "active_dense"
    for mode, op in (("compact", fm.ST_COMPACT_W13_OP), ("indexed", fm.ST_INDEXED_W13_OP)):
        if mode in options.single_token_w13 and ns.has_op(op):
            w13 = mode
            break
    indexed_w2 = options.single_token_w2 == "indexed" and ns.has_op(fm.ST_INDEXED_STAGE_OP)
    weighted = options.single_token_reduce == "weighted" and ns.has_op(fm.WEIGHTED_REDUCE_OP)
    scratch = options.permute_scratch and ns.has_op(fm.PERMUTE_SCRATCH_OP)
    return Variants(
        batched=options.batched,
        legacy=options.batched and options.legacy_compact and ns.has_op(fm.LEGACY_OP),
        st_w13=w13,
        st_w2="indexed" if indexed_w2 else "active_dense",
        st_reduce="weighted" if weighted else "unpermute",
        permute=fm.PERMUTE_SCRATCH_OP if scratch else fm.PERMUTE_OP,
        w13_per_expert=options.w13_per_expert,
        w2_per_expert=options.w2_per_expert,
        exact_layout=options.compact_exact_layout,
        native_unpermute=options.compact_native_unpermute,
        decomposed=options.compact_decomposed,
    )


def _fail(layer: str, reason: Reason, selection: Selection) -> SelectionError:
    return SelectionError(reason.code, f"{layer}: {reason.message}", selection.verdicts)


# --- load -------------------------------------------------------------------------------------


def load_fp8_moe(
    desc: Mapping[str, Any],
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    ns: NativeNamespace,
    *,
    tensors: Any = None,
    workspace: Any = None,
    environ: Mapping[str, str] | None = None,
) -> PreparedLayer:
    """Select, then (TurboMind) check, prepare both banks expert by expert, build the four
    pointer tables and the persistent workspace; the layer's apply dispatches one call.
    `workspace` is accepted for the loader protocol: the method owns its workspace."""
    decision = select_fp8_moe(desc, policy, hardware, engine, ns, environ=environ)
    layer = fm.Fp8MoeLayer.for_rank(desc, engine.tp)
    # Every tensor the load makes lies beside the checkpoint's (meta in a replay): the
    # dequantized FP16 banks as much as TurboMind's.
    device = "meta" if tensors is None else tensors["w13"].device
    if decision.kernel is None:
        resident = {}
        if decision.status is not None and decision.status[0] == DEQUANT_CODE:
            resident = {
                name: meta_tensors.empty((size,), "uint8", device)
                for name, size in layer.dequant_bytes().items()
            }
        return PreparedLayer(decision=decision, resident=resident, state={"layer": layer})
    ok, reason = fm.TurboMindFp8MoE.can_implement(layer, ns)
    if not ok:
        assert reason is not None
        raise _fail(layer.prefix, reason, decision.selection)
    options = Fp8MoeOptions.of(policy)
    chosen = variants(options, ns)
    flags = {
        **chosen.flags(),
        "partial_n_block": layer.partial_n_block,
        "partial_k_block": layer.partial_k_block,
        "compact_compare": options.compact_compare,
    }
    warnings: list[dict[str, str]] = []
    if layer.partial_n_block or layer.partial_k_block:
        warnings.append(
            {
                "code": PARTIAL_WARNING,
                "message": f"{layer.prefix}: local intermediate {layer.intermediate} leaves a "
                "partial 128-block (W13 N "
                f"{2 * layer.intermediate}, W2 K {layer.intermediate}); the native scale "
                "expansion may give the first up rows a gate block's scale (unverified)",
            }
        )
    banks = _prepare(layer, ns, device)
    resident = {
        name: meta_tensors.empty((size,), "uint8", device)
        for name, size in layer.bank_bytes().items()
    }
    resident.update(
        {
            f"workspace_{name}": meta_tensors.empty((size,), "uint8", device)
            for name, size in layer.workspace_bytes().items()
        }
    )
    decision = Decision(TURBOMIND, decision.selection, decision.capability, flags=flags)
    dispatcher = Dispatcher(layer, chosen, ns, banks, decision.selection)
    return PreparedLayer(
        decision=decision,
        resident=resident,
        apply=dispatcher.apply,
        state={"layer": layer, "dispatcher": dispatcher, "warnings": warnings},
    )


def _prepare(layer: fm.Fp8MoeLayer, ns: NativeNamespace, device: Any) -> dict[str, Any]:
    """§4.1: each expert's W13 and W2 through fp8_sm70_prepare, then the pointer tables."""
    prepared: dict[str, tuple[Any, Any]] = {}
    for bank, (k, n) in (("w13", layer.w13_kn()), ("w2", layer.w2_kn())):
        rows = -(-n // fm.BLOCK)
        cols = -(-k // fm.BLOCK)
        weight = meta_tensors.empty((n, k), "float8_e4m3fn", device)
        scales = meta_tensors.empty((rows, cols), "float32", device)
        codes, prepared_scales, _meta = ns.call_repeated(
            FP8_PREPARE_OP,
            layer.experts,
            weight=weight,
            weight_scale=scales,
            group_size=fm.BLOCK,
            interleave_gated=False,
        )
        prepared[bank] = (codes, prepared_scales)
    out: dict[str, Any] = {}
    for bank, (codes, prepared_scales) in prepared.items():
        out[f"{bank}_ptrs_w"] = ns.call(STRIDED_PTRS_OP, tensors=[codes])
        out[f"{bank}_ptrs_s"] = ns.call(STRIDED_PTRS_OP, tensors=[prepared_scales])
    return out


# --- dispatch (docs/contracts/fp8moe.md §5.1) -------------------------------------------------


class Dispatcher:
    """One apply call of M tokens: the lane, its stage ops, what it records as `stages`."""

    def __init__(
        self,
        layer: fm.Fp8MoeLayer,
        v: Variants,
        ns: NativeNamespace,
        banks: Mapping[str, Any],
        selection: Selection,
    ) -> None:
        self.selection = selection
        self.layer = layer
        self.v = v
        self.ns = ns
        self.banks = banks
        self.last: dict[str, Any] | None = None
        self.tags: list[str] = []

    def _need(self, op: str, m: int) -> None:
        if not self.ns.has_op(op):
            raise SelectionError(
                "missing_native_ops",
                f"{self.layer.prefix}: {fm.MISSING_OP.format(op=op)} (dispatch, M {m})",
                self.selection.verdicts,
            )

    def _call(self, op: str, m: int, stage: str, **kwargs: Any) -> None:
        self._need(op, m)
        self.tags.append(stage)
        self.ns.call(op, **kwargs)

    def apply(self, x: Any, ids: Any, weights: Any) -> Any:
        m = int(x.shape[0])
        self.tags = []
        out = _fp16((m, self.layer.hidden), x)
        buffers = "persistent" if m <= fm.PERSISTENT_TOKENS else "temporary"
        entry: dict[str, Any] = {"m": m, "lane": "none", "w13": None, "w2": None, "reduce": None}
        if m == 0:
            pass
        elif m == 1 and self.v.batched and self.v.legacy:
            entry.update(self._legacy(x, ids, weights, out))
        elif m == 1 and not self.v.batched:
            entry.update(self._single_token(x, ids, weights, out))
        else:
            entry.update(self._routed(x, ids, weights, out))
        entry["buffers"] = buffers
        self.last = entry
        return out

    # -- lanes --

    def _legacy(self, x: Any, ids: Any, weights: Any, out: Any) -> dict[str, Any]:
        layer, v = self.layer, self.v
        slots = layer.top_k
        if v.decomposed:
            self._call(
                fm.EXACT_LAYOUT_OP,
                1,
                "prepare",
                topk_ids=ids,
                expert_offsets=_int32((layer.experts + 1,), x),
                sorted_ids=_int32((slots,), x),
                num_experts=layer.experts,
                num_tokens=1,
            )
            # No permute: the token's row serves each of its top_k routes.
            inter = self._gemms(_fp16((slots, layer.hidden), x), slots, batched=True, m=1)
            self._unpermute(inter, weights, out, 1, offsets=layer.experts + 1)
            return {"lane": "legacy_decomposed", "w13": "batched", "w2": "batched",
                    "reduce": "unpermute"}  # fmt: skip
        w13_k, w13_n = layer.w13_kn()
        w2_k, w2_n = layer.w2_kn()
        self._call(
            fm.LEGACY_OP,
            1,
            "legacy",
            out=out,
            input=x,
            topk_weights=weights,
            topk_ids=ids,
            w13_ptrs_w=self.banks["w13_ptrs_w"],
            w13_ptrs_s=self.banks["w13_ptrs_s"],
            w2_ptrs_w=self.banks["w2_ptrs_w"],
            w2_ptrs_s=self.banks["w2_ptrs_s"],
            workspace=_fp16((slots, w13_n), x),
            total_slots=slots,
            group_size=fm.BLOCK,
            w13_k=w13_k,
            w13_n=w13_n,
            w2_k=w2_k,
            w2_n=w2_n,
            hidden_logical_size=layer.hidden,
            fused_gated_silu=False,
            fused_weighted_reduce=False,
            broadcast_input=False,
            w2_direct_reduce=False,
            indexed_expert_ptrs=False,
            exact_per_route=v.exact_layout,
        )
        reduce = "fused"
        if v.native_unpermute:
            self._unpermute(_fp16((slots, layer.hidden), x), weights, out, 1, offsets=None)
            reduce = "unpermute"
        return {"lane": "legacy", "w13": "fused", "w2": "fused", "reduce": reduce}

    def _single_token(self, x: Any, ids: Any, weights: Any, out: Any) -> dict[str, Any]:
        layer, v = self.layer, self.v
        slots = layer.top_k
        w13_op = {
            "compact": fm.ST_COMPACT_W13_OP,
            "indexed": fm.ST_INDEXED_W13_OP,
            "active_dense": fm.ST_DENSE_W13_OP,
        }[v.st_w13]
        gate_up = self._st_stage(
            w13_op, "w13", x, ids, layer.w13_kn(), hidden_logical_size=layer.hidden
        )
        inter = self._silu(gate_up, 1)
        w2_op = fm.ST_INDEXED_STAGE_OP if v.st_w2 == "indexed" else fm.ST_DENSE_STAGE_OP
        sorted_out = self._st_stage(w2_op, "w2", inter, ids, layer.w2_kn())
        if v.st_reduce == "weighted":
            self._call(
                fm.WEIGHTED_REDUCE_OP,
                1,
                "reduce",
                out=out,
                input=sorted_out,
                topk_weights=weights,
                num_tokens=1,
                total_slots=slots,
            )
        else:
            # §5.1: the engine hands the op the first top_k + 1 of its E + 1 int64 offsets
            # (a view of `expert_offsets64`): one token's routes are the only slots.
            self._unpermute(sorted_out, weights, out, 1, offsets=layer.top_k + 1)
        return {"lane": "single_token", "w13": v.st_w13, "w2": v.st_w2, "reduce": v.st_reduce}

    def _st_stage(
        self, op: str, bank: str, rows: Any, ids: Any, kn: tuple[int, int], **extra: Any
    ) -> Any:
        """One single-token stage over `bank`; `extra` goes after the shared arguments, so the
        call keeps the argument order the recorded stages were taken with."""
        k, n = kn
        slots = self.layer.top_k
        result = _fp16((slots, n), rows)
        self._call(
            op,
            1,
            bank,
            out=result,
            input=rows,
            topk_ids=ids,
            strided_ptrs_w=self.banks[f"{bank}_ptrs_w"],
            strided_ptrs_s=self.banks[f"{bank}_ptrs_s"],
            total_slots=slots,
            k=k,
            n=n,
            group_size=fm.BLOCK,
            **extra,
        )
        return result

    def _routed(self, x: Any, ids: Any, weights: Any, out: Any) -> dict[str, Any]:
        layer, v = self.layer, self.v
        m = int(x.shape[0])
        slots = m * layer.top_k
        permuted = _fp16((slots, layer.hidden), x)
        self._call(
            v.permute,
            m,
            "permute",
            input=x,
            topk_ids=ids,
            permuted_input=permuted,
            expert_offsets=_int32((layer.experts + 1,), x),
            permuted_idx=_int32((slots,), x),
            inv_permuted_idx=_int32((slots,), x),
            num_experts=layer.experts,
            num_tokens=m,
            total_slots=slots,
        )
        sorted_out = self._gemms(permuted, slots, batched=v.batched, m=m)
        self._unpermute(sorted_out, weights, out, m, offsets=layer.experts + 1)
        return {
            "lane": "routed",
            "w13": self._stage_mode(v.w13_per_expert),
            "w2": self._stage_mode(v.w2_per_expert),
            "reduce": "unpermute",
        }

    def _stage_mode(self, per_expert: bool) -> str:
        if not self.v.batched:
            return "dense"
        return "per_expert" if per_expert else "batched"

    # -- stages --

    def _gemms(self, rows: Any, slots: int, *, batched: bool, m: int) -> Any:
        layer = self.layer
        k, n = layer.w13_kn()
        gate_up = _fp16((slots, n), rows)
        self._stage(rows, gate_up, "w13", k, n, batched, self.v.w13_per_expert and batched, m)
        inter = self._silu(gate_up, m)
        k, n = layer.w2_kn()
        sorted_out = _fp16((slots, n), rows)
        self._stage(inter, sorted_out, "w2", k, n, batched, self.v.w2_per_expert and batched, m)
        return sorted_out

    def _stage(
        self, rows: Any, out: Any, bank: str, k: int, n: int, batched: bool, per_expert: bool,
        m: int,
    ) -> None:  # fmt: skip
        layer = self.layer
        ptrs_w, ptrs_s = self.banks[f"{bank}_ptrs_w"], self.banks[f"{bank}_ptrs_s"]
        offsets = _int32((layer.experts + 1,), rows)
        if per_expert:
            self._call(
                fm.PER_EXPERT_OP,
                m,
                bank,
                out=out,
                x=rows.reshape(rows.shape[0], 1, k),
                ptrs=ptrs_w,
                group_size=fm.BLOCK,
                k_ld=k,
                q_ld=n,
            )
        elif batched:
            self._call(
                fm.GEMM_OP,
                m,
                bank,
                out=out,
                sorted_input=rows,
                expert_offsets=offsets,
                strided_ptrs_w=ptrs_w,
                strided_ptrs_s=ptrs_s,
                num_experts=layer.experts,
                k=k,
                n=n,
                group_size=fm.BLOCK,
                gated_silu=False,
            )
        else:
            self._call(
                fm.DENSE_STAGE_OP,
                m,
                bank,
                out=out,
                sorted_input=rows,
                expert_offsets=offsets,
                dense_expert_ids=_int32((layer.experts,), rows),
                strided_ptrs_w=ptrs_w,
                strided_ptrs_s=ptrs_s,
                num_experts=layer.experts,
                k=k,
                n=n,
                group_size=fm.BLOCK,
            )

    def _silu(self, gate_up: Any, m: int) -> Any:
        result = _fp16((gate_up.shape[0], gate_up.shape[1] // 2), gate_up)
        self._call(fm.SILU_AND_MUL_OP, m, "silu", result=result, input=gate_up)
        return result

    def _unpermute(self, rows: Any, weights: Any, out: Any, m: int, *, offsets: int | None) -> None:
        """`offsets`: how many int64 first-token offsets the op reads (None: no offsets)."""
        self._call(
            fm.UNPERMUTE_OP,
            m,
            "reduce",
            permuted_hidden_states=rows,
            topk_weights=weights,
            inv_permuted_idx=_int32((rows.shape[0],), rows),
            expert_first_token_offset=None if offsets is None else _int64((offsets,), rows),
            topk=self.layer.top_k,
            hidden_states=out,
        )


def _fp16(shape: tuple[int, ...], like: Any) -> Any:
    return meta_tensors.empty_beside(shape, "float16", like)


def _int32(shape: tuple[int, ...], like: Any) -> Any:
    return meta_tensors.empty_beside(shape, "int32", like)


def _int64(shape: tuple[int, ...], like: Any) -> Any:
    return meta_tensors.empty_beside(shape, "int64", like)


__all__ = [
    "FAMILY",
    "NOT_ADMITTED_CODE",
    "PARTIAL_WARNING",
    "ROUTE_FIELDS",
    "SECTION",
    "TURBOMIND",
    "Dispatcher",
    "Fp8MoeOptions",
    "load_fp8_moe",
    "select_fp8_moe",
    "variants",
]
