"""The SM70 AWQ mixture-of-experts family (docs/contracts/core.md §3): the method selection
(TurboMind AWQ MoE, else MoeWNA16), the load-time resolutions, and the loader that prepares every
expert's W13 and W2 banks and dispatches apply calls through the route selector.

`load_awq_moe` is the one code path of the engine and of replay: with the engine's namespace
and checkpoint it prepares real banks; in replay the namespace records and the checkpoint
lives on the meta device.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from native import meta_tensors
from native import moe_stages as st
from native.awq_layout import metadata_layout
from native.awq_schemas import PREPARE_COMPACT_OP, PREPARE_OP
from native.moe_layer import (
    BANKS,
    PARTITION_CODES,
    W13,
    AwqMoeLayer,
    MoeCheckpoint,
    meta_checkpoint,
)
from native.ops_moe import (
    CHUNKED_W2_OP,
    INDEXED_W13_OP,
    METHOD_NAME,
    METHOD_REQUIRED_OPS,
    PERMUTE_METADATA_OP,
    SINGLE_TOKEN_OP,
)
from policies.awq_moe_admission import (
    FAMILY_GATE_CODES,
    CallFacts,
    admit_indexed_prefill,
    admit_qpn_m1,
    family_gate,
    key,
    layer_batched,
    requested_by,
    resolve_compact_metadata,
    resolve_w2_chunk_tokens,
)
from policies.awq_moe_routes import LoadedRoute, RouteChoice, select_route
from routectl.errors import SelectionError
from routectl.namespaces.native_ns import NativeNamespace, missing_ops
from routectl.policy.loaded import Decision, Fallback, PreparedLayer, tensor_bytes
from routectl.policy.resolve import ResolvedPolicy
from routectl.policy.selection import Evaluation, Selection, select
from routectl.reasons import Check, Reason, missing_ops_reason, reject
from routectl.workload import EngineConfig, Hardware

FAMILY = "sm70-awq-moe"
TURBOMIND = METHOD_NAME
MOE_WNA16 = "MoeWNA16"
TURBOMIND_GROUPS = (32, 64, 128)
WNA16_BITS = (4, 8)
# The reason codes each method candidate can return (`select_method`), declared once.
TURBOMIND_CODES = (
    *FAMILY_GATE_CODES,
    "weight_bits",
    "zero_points",
    "bias",
    *PARTITION_CODES,
    "missing_native_ops",
)
WNA16_CODES = ("weight_bits", *PARTITION_CODES)
RESIDENT = {
    (W13, "weights"): "w13_weights",
    (W13, "metadata"): "w13_metadata",
    ("w2", "weights"): "w2_weights",
    ("w2", "metadata"): "w2_metadata",
}


# --- method selection (3.1) -------------------------------------------------------------------


def _turbomind_layer(layer: AwqMoeLayer) -> Check:
    """What the TurboMind AWQ MoE method can load: 4-bit with zero points, no bias, group
    32/64/128, a checkpoint that splits into whole groups on this rank."""
    if layer.bits != 4:
        return reject("weight_bits", f"only 4-bit AWQ, got {layer.bits}-bit")
    if not layer.zero_points:
        return reject("zero_points", "requires zero points")
    if layer.bias:
        return reject("bias", "MoE bias is not supported")
    for name, group in (("checkpoint", layer.checkpoint_group), ("prepared", layer.prepared_group)):
        if group not in TURBOMIND_GROUPS:
            return reject(
                "group_size", f"{name} group {group} not in {', '.join(map(str, TURBOMIND_GROUPS))}"
            )
    return layer.partition_check()


def _wna16_layer(layer: AwqMoeLayer) -> Check:
    if layer.bits not in WNA16_BITS:
        return reject("weight_bits", f"MoeWNA16 serves 4- or 8-bit weights, got {layer.bits}")
    return layer.partition_check()


def _evaluation(check: Check, stage: str) -> Evaluation:
    ok, reason = check
    if ok:
        return Evaluation.passed()
    assert reason is not None
    return Evaluation.failed(reason, stage)


def select_method(
    layer: AwqMoeLayer, policy: ResolvedPolicy, hardware: Hardware, ns: NativeNamespace
) -> Selection:
    """TurboMind AWQ MoE (family gate, layer, ops) then MoeWNA16, every verdict kept."""

    def turbomind() -> Evaluation:
        gate = family_gate(hardware.capability, policy)
        if not gate.ok:
            assert gate.code and gate.message and gate.stage
            return Evaluation.failed(Reason(gate.code, gate.message), gate.stage)
        result = _evaluation(_turbomind_layer(layer), "capability")
        if not result.ok:
            return result
        missing = missing_ops(ns, METHOD_REQUIRED_OPS)
        if missing:
            return Evaluation.failed(missing_ops_reason("AWQ MoE", missing), "ops")
        return result

    return select(
        [
            (TURBOMIND, turbomind),
            (MOE_WNA16, lambda: _evaluation(_wna16_layer(layer), "capability")),
        ]
    )


# --- load-time decision ---------------------------------------------------------------------


@dataclass(frozen=True)
class MoePlan:
    """A load decision: the Decision plus what preparation and dispatch need."""

    decision: Decision
    layer: AwqMoeLayer
    route: LoadedRoute | None = None
    compact: bool = False
    w13_interleaved: bool = False


def _legacy_lane(
    batched: bool, legacy_compact: bool, ns: NativeNamespace, layer_id: int
) -> tuple[bool, str | None]:
    """Built when batched for this layer, legacy_compact and the monolithic op is present."""
    if not batched:
        return False, f"batched GEMM is off for layer {layer_id}"
    if not legacy_compact:
        return False, f"{key('legacy_compact')} is off"
    missing = missing_ops(ns, (SINGLE_TOKEN_OP,))
    if missing:
        return False, missing_ops_reason("legacy single-token", missing).message
    return True, None


def decide_awq_moe(
    spec: Mapping[str, Any] | AwqMoeLayer,
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    ns: NativeNamespace,
) -> MoePlan:
    """Select the method and resolve every load-time route fact; raises SelectionError when
    nothing can load the layer or an explicit request cannot be served."""
    layer = spec if isinstance(spec, AwqMoeLayer) else AwqMoeLayer.for_rank(spec, engine.tp)
    cc = hardware.capability
    selection = select_method(layer, policy, hardware, ns)
    if selection.chosen is None:
        raise SelectionError(
            "no_moe_method",
            f"no AWQ MoE method can load {layer.prefix}: {selection.reasons_text()}",
            selection.verdicts,
        )
    fallbacks: list[Fallback] = []
    if selection.fallback:
        first = selection.verdicts[0]
        fallbacks.append(Fallback("sm70_turbomind.awq_moe", True, False, first.message or ""))
    load = MethodLoad(layer, policy, cc, ns, selection, fallbacks)
    return METHOD_PLANS[selection.chosen](load)


class MethodLoad(NamedTuple):
    """What a method's load decision reads."""

    layer: AwqMoeLayer
    policy: ResolvedPolicy
    capability: int
    ns: NativeNamespace
    selection: Selection
    fallbacks: list[Fallback]


def _wna16_plan(load: MethodLoad) -> MoePlan:
    """MoeWNA16 is the engine's own method: no layout and no route facts of this family."""
    decision = Decision(MOE_WNA16, load.selection, load.capability, None, {}, tuple(load.fallbacks))
    return MoePlan(decision, load.layer)


def _turbomind_plan(load: MethodLoad) -> MoePlan:
    """The TurboMind method resolves every load-time route fact of the layer."""
    layer, policy, cc, ns, selection, fallbacks = load
    s = policy.section("sm70_awq_moe")
    try:
        batched = layer_batched(s.batched, layer.layer_id, s.layer_allowlist, s.layer_denylist)
        legacy, legacy_reason = _legacy_lane(batched, s.legacy_compact, ns, layer.layer_id)
        compact_shape_ok = st.compact_shape(layer)[0]
        compact = resolve_compact_metadata(
            s.compact_metadata,
            policy.is_explicit(key("compact_metadata")),
            ns.has_op(PREPARE_COMPACT_OP),
            compact_shape_ok,
            requested_by=requested_by(policy, key("compact_metadata")),
        )
        if compact.fallback:
            fallbacks.append(Fallback(key("compact_metadata"), True, False, compact.fallback))
        qpn = admit_qpn_m1(
            s.qpn_m1,
            policy.is_explicit(key("qpn_m1")),
            st.qpn_m1_contract(layer, legacy),
            _qpn_native(cc, ns),
            requested_by=requested_by(policy, key("qpn_m1")),
        )
        grouped_contract = st.grouped_contract(layer)
        grouped = bool(s.active_grouped_decode) and grouped_contract[0]
        indexed = admit_indexed_prefill(
            s.indexed_prefill,
            policy.is_explicit(key("indexed_prefill")),
            st.indexed_prefill_contract(layer, batched),
            missing_ops(ns, (INDEXED_W13_OP, PERMUTE_METADATA_OP)),
            requested_by=requested_by(policy, key("indexed_prefill")),
        )
        if indexed.fallback:
            fallbacks.append(Fallback(key("indexed_prefill"), True, False, indexed.fallback))
        chunk = resolve_w2_chunk_tokens(s.w2_chunk_tokens, indexed.value, ns.has_op(CHUNKED_W2_OP))
    except SelectionError as exc:
        raise SelectionError(exc.code, exc.message, selection.verdicts) from None

    route = LoadedRoute(
        capability=cc,
        batched=batched,
        legacy_lane=legacy,
        legacy_lane_reason=legacy_reason,
        qpn_m1=qpn,
        grouped_decode=grouped,
        indexed_prefill=bool(indexed.value),
        chunk_tokens=chunk,
        strict_w13=bool(s.strict_w13),
        exact_w2=bool(s.exact_w2),
        active_exact_w2=bool(s.active_exact_w2),
        token_cap=int(s.max_batched_tokens),
        hidden=layer.hidden,
        w2_n=layer.w2_n,
        experts=layer.num_experts,
    )
    flags = {
        "batched": batched,
        "legacy_lane": legacy,
        "w13_interleaved": legacy,
        "qpn_m1": qpn,
        "grouped_decode": grouped,
        "qwen38_contract": grouped_contract[0],
        "indexed_prefill": route.indexed_prefill,
        "w2_chunk_tokens": chunk,
        "compact_metadata": bool(compact.value),
        "prepare_op": PREPARE_COMPACT_OP if compact.value else PREPARE_OP,
        "token_cap": route.token_cap,
    }
    decision = Decision(
        TURBOMIND, selection, cc, metadata_layout(bool(compact.value)), flags, tuple(fallbacks)
    )
    return MoePlan(decision, layer, route, bool(compact.value), w13_interleaved=legacy)


# Each method's load decision, by the name the selection records.
METHOD_PLANS: Mapping[str, Callable[[MethodLoad], MoePlan]] = {
    TURBOMIND: _turbomind_plan,
    MOE_WNA16: _wna16_plan,
}


def _qpn_native(capability: int, ns: NativeNamespace) -> Check:
    ok, reason = st.QpnM1.check_ops(ns)
    if not ok:
        return (ok, reason)
    return st.QpnM1.is_supported(capability)


# --- preparation and dispatch ---------------------------------------------------------------


def prepare_banks(
    ns: NativeNamespace,
    layer: AwqMoeLayer,
    checkpoint: MoeCheckpoint,
    compact: bool,
    w13_interleaved: bool,
) -> st.PreparedBanks:
    """Prepare every expert of W13 (interleaved when the legacy lane is built) then of W2,
    one call per expert, stacked into resident (E, ...) banks."""
    op = PREPARE_COMPACT_OP if compact else PREPARE_OP
    out: dict[str, tuple[Any, Any]] = {}
    for bank in BANKS:
        source = checkpoint.bank(bank)
        experts = layer.num_experts
        if len(source) != experts:
            raise ValueError(f"{bank} checkpoint has {len(source)} experts, the layer {experts}")
        scalars = {
            "group_size": layer.checkpoint_group,
            "interleave_gated_silu": w13_interleaved and bank == W13,
        }
        shared = source.shared()
        if shared is not None:
            qweight, scales, qzeros = shared
            words, meta = ns.call_repeated(
                op, experts, kernel=qweight, scaling_factors=scales, zeros=qzeros, **scalars
            )
            out[bank] = _bank_of(words, meta, experts, broadcast=True)
            continue
        first: Any = None
        for e, (qweight, scales, qzeros) in enumerate(
            zip(source.qweight, source.scales, source.qzeros, strict=True)
        ):
            words, meta = ns.call(
                op, kernel=qweight, scaling_factors=scales, zeros=qzeros, **scalars
            )
            if first is None:
                first = (words, meta)
                banks = _bank_of(words, meta, experts, broadcast=False)
            elif words.shape != first[0].shape or meta.shape != first[1].shape:
                raise ValueError(
                    f"{op} returned {tuple(words.shape)}/{tuple(meta.shape)} for "
                    f"expert {e} of {bank}, expert 0 gave "
                    f"{tuple(first[0].shape)}/{tuple(first[1].shape)}"
                )
            if words.device.type != "meta":
                banks[0][e].copy_(words)
                banks[1][e].copy_(meta)
        out[bank] = banks
    return st.PreparedBanks(out[W13][0], out[W13][1], out["w2"][0], out["w2"][1], w13_interleaved)


def _bank_of(words: Any, meta: Any, experts: int, *, broadcast: bool) -> tuple[Any, Any]:
    """Resident (E, ...) banks shaped after one expert's prepared tensors, that expert copied
    into every slot when `broadcast` (meta tensors hold no data: nothing is copied)."""

    banks = tuple(meta_tensors.empty((experts, *t.shape), t.dtype, t.device) for t in (words, meta))
    if broadcast and words.device.type != "meta":
        for bank, tensor in zip(banks, (words, meta), strict=True):
            bank.copy_(tensor.unsqueeze(0).expand_as(bank))
    return banks[0], banks[1]


def bank_bytes(prepared: PreparedLayer) -> dict[str, Any]:
    """Resident bytes: per tensor, `weights`, `metadata`, `total`, and the same per bank."""
    base = prepared.bytes_json()
    banks: dict[str, dict[str, int]] = {}
    for (bank, kind), name in RESIDENT.items():
        tensor = prepared.resident.get(name)
        entry = banks.setdefault(bank, {"weights": 0, "metadata": 0, "total": 0})
        if tensor is not None:
            entry[kind] += tensor_bytes(tensor)
            entry["total"] += tensor_bytes(tensor)
    weights = sum(b["weights"] for b in banks.values())
    metadata = sum(b["metadata"] for b in banks.values())
    return {**base, "weights": weights, "metadata": metadata, **banks}


def load_awq_moe(
    layer: Mapping[str, Any] | AwqMoeLayer,
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    ns: NativeNamespace,
    *,
    tensors: MoeCheckpoint | None = None,
) -> PreparedLayer:
    """Decide, prepare the banks (meta checkpoint when `tensors` is None) and return the
    loaded layer. `apply(x, topk_ids, topk_weights)` runs one call of M = x.shape[0] tokens;
    `state["route"](x, topk_ids, topk_weights)` explains it without running it."""
    plan = decide_awq_moe(layer, policy, hardware, engine, ns)
    if plan.route is None:
        return PreparedLayer(decision=plan.decision, state={"layer": plan.layer})
    loaded = plan.route
    checkpoint = tensors if tensors is not None else meta_checkpoint(plan.layer)
    banks = prepare_banks(ns, plan.layer, checkpoint, plan.compact, plan.w13_interleaved)
    dispatcher = st.MoeDispatcher(ns, plan.layer, banks, loaded.chunk_tokens)

    def route(x: Any, topk_ids: Any, topk_weights: Any) -> RouteChoice:
        return select_route(CallFacts.of(x, topk_ids, topk_weights), loaded, ns)

    state: dict[str, Any] = {
        "layer": plan.layer,
        "route": route,
        "loaded": loaded,
        "banks": banks,
        "last_route": None,
    }

    def apply(x: Any, topk_ids: Any = None, topk_weights: Any = None) -> Any:
        if topk_ids is None or topk_weights is None:
            raise TypeError("AWQ MoE apply needs the router's topk_ids and topk_weights")
        choice = route(x, topk_ids, topk_weights)
        # What the last call chose, with every stage verdict: the startup report and the
        # snapshot read it instead of selecting twice.
        state["last_route"] = choice
        return dispatcher.run(choice.plan, x, topk_ids, topk_weights)

    resident = {
        RESIDENT[(W13, "weights")]: banks.w13,
        RESIDENT[(W13, "metadata")]: banks.s13,
        RESIDENT[("w2", "weights")]: banks.w2,
        RESIDENT[("w2", "metadata")]: banks.s2,
    }
    return PreparedLayer(decision=plan.decision, resident=resident, apply=apply, state=state)


def select_awq_moe(
    layer: Mapping[str, Any] | AwqMoeLayer,
    policy: ResolvedPolicy,
    hardware: Hardware,
    engine: EngineConfig,
    ns: NativeNamespace,
) -> PreparedLayer:
    """The family's entry for `routectl.select`: the decision only, nothing prepared."""
    plan = decide_awq_moe(layer, policy, hardware, engine, ns)
    return PreparedLayer(decision=plan.decision, state={"layer": plan.layer})


__all__ = [
    "MOE_WNA16",
    "TURBOMIND",
    "MoePlan",
    "bank_bytes",
    "decide_awq_moe",
    "load_awq_moe",
    "prepare_banks",
    "select_awq_moe",
    "select_method",
]
