"""The AWQ MoE route selector (docs/contracts/core.md §3.4): for one apply call of M tokens, the
ordered stages and every verdict, slot by slot, in the contract's order.

Slots: `lane` (zero output, QPN M1, legacy single token, decomposed single token, routed);
for the decomposed lane `w13`, `w2`, `reduce`; for the routed lane `permute`, `w13`, `w2`,
`reduce`. Each slot evaluates every candidate in order, chooses the first that can run and
keeps the later ones' verdicts marked not needed (`routectl.policy.selection.select`). Verdict names
are `<slot>.<stage label>`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from native import moe_stages as st
from policies.awq_moe_admission import (
    TOKEN_COUNT_CODE,
    CallFacts,
    active_exact_w2_call,
    chunked_w2_call,
    grouped_decode_call,
    indexed_prefill_call,
    qpn_m1_call,
    within_cap,
)
from routectl.errors import SelectionError
from routectl.namespaces.native_ns import NativeNamespace
from routectl.policy.selection import Evaluation, Gate, Selection, run_gates, select
from routectl.reasons import OK, Check, Reason, Verdict, reject


@dataclass(frozen=True)
class LoadedRoute:
    """What the per-call selector reads, fixed at load."""

    capability: int
    batched: bool
    legacy_lane: bool
    legacy_lane_reason: str | None
    qpn_m1: bool
    grouped_decode: bool
    indexed_prefill: bool
    chunk_tokens: int
    strict_w13: bool
    exact_w2: bool
    active_exact_w2: bool
    token_cap: int
    hidden: int
    w2_n: int
    experts: int


@dataclass(frozen=True)
class RouteChoice:
    m: int
    plan: st.StagePlan
    verdicts: tuple[Verdict, ...]

    @property
    def chosen(self) -> list[str]:
        return [v.name for v in self.verdicts if v.ok and not v.not_needed]

    def to_json(self) -> dict[str, Any]:
        return {
            "m": self.m,
            "chosen": self.chosen,
            "verdicts": [v.to_json() for v in self.verdicts],
        }


Candidate = tuple[str, Callable[[], Evaluation]]


def _candidate(name: str, gates: Sequence[Gate]) -> Candidate:
    return (name, lambda: run_gates(gates))


def _ops(stage: type[st.MoeStage], ns: NativeNamespace) -> Gate:
    return ("ops", lambda: stage.check_ops(ns))


def _check(condition: bool, code: str, message: str) -> Check:
    return OK if condition else reject(code, message)


def _tokens(m: int, wanted: str, ok: bool) -> Gate:
    return ("policy", lambda: _check(ok, TOKEN_COUNT_CODE, f"M = {m} is not {wanted}"))


def _legacy_lane(loaded: LoadedRoute) -> Gate:
    return (
        "policy",
        lambda: _check(
            loaded.legacy_lane,
            "legacy_lane_off",
            f"legacy single-token lane not built: {loaded.legacy_lane_reason}",
        ),
    )


def _batched_not_strict(loaded: LoadedRoute, m: int) -> Check:
    if not loaded.batched:
        return reject("not_batched", "batched GEMM is off for this layer")
    if loaded.strict_w13:
        return reject("policy", "disabled by sm70_awq_moe.strict_w13")
    if not within_cap(m, loaded.token_cap):
        return reject("token_cap", f"M = {m} above the batched decode cap {loaded.token_cap}")
    return OK


class _Slots:
    """Runs the slot selections of one call and collects their verdicts in order."""

    def __init__(self, m: int) -> None:
        self.m = m
        self.verdicts: list[Verdict] = []

    def pick(
        self, slot: str, candidates: Sequence[tuple[type[st.MoeStage], Sequence[Gate]]]
    ) -> type[st.MoeStage]:
        selection: Selection = select(
            [_candidate(f"{slot}.{stage.label}", gates) for stage, gates in candidates]
        )
        self.verdicts.extend(selection.verdicts)
        for (stage, _), verdict in zip(candidates, selection.verdicts, strict=True):
            if verdict.name == selection.chosen:
                return stage
        raise SelectionError(
            "no_moe_stage",
            f"no AWQ MoE stage can serve {slot} at M = {self.m}: {selection.reasons_text()}",
            tuple(self.verdicts),
        )


def select_route(call: CallFacts, loaded: LoadedRoute, ns: NativeNamespace) -> RouteChoice:
    """The stages one apply call runs and every verdict, slot by slot
    (docs/contracts/core.md §3.4)."""
    m = call.m
    slots = _Slots(m)
    decomposed_reduce_ops: Gate = ("ops", lambda: _any_ops(ns, st.WeightedReduce, st.Unpermute))
    lane = slots.pick(
        "lane",
        [
            (st.ZeroOutput, [_tokens(m, "0", m == 0)]),
            (
                st.QpnM1,
                [
                    _tokens(m, "1", m == 1),
                    _legacy_lane(loaded),
                    (
                        "policy",
                        lambda: _check(
                            loaded.qpn_m1, "not_admitted", "QPN M1 not admitted at load (opt-in)"
                        ),
                    ),
                    ("capability", lambda: st.QpnM1.is_supported(loaded.capability)),
                    _ops(st.QpnM1, ns),
                    ("call", lambda: qpn_m1_call(call)),
                ],
            ),
            (
                st.LegacySingleToken,
                [_tokens(m, "1", m == 1), _legacy_lane(loaded), _ops(st.LegacySingleToken, ns)],
            ),
            (
                st.SingleTokenDecomposed,
                [
                    _tokens(m, "1", m == 1),
                    (
                        "policy",
                        lambda: _check(
                            not loaded.batched or loaded.strict_w13,
                            "policy",
                            "batched GEMM on and strict_w13 off",
                        ),
                    ),
                    _ops(st.SingleTokenDecomposed, ns),
                    decomposed_reduce_ops,
                ],
            ),
            (st.Routed, [_tokens(m, "at least 1", m >= 1)]),
        ],
    )
    if lane is st.ZeroOutput:
        return RouteChoice(m, st.StagePlan("zero"), tuple(slots.verdicts))
    if lane is st.QpnM1:
        return RouteChoice(m, st.StagePlan("qpn_m1"), tuple(slots.verdicts))
    if lane is st.LegacySingleToken:
        return RouteChoice(m, st.StagePlan("legacy"), tuple(slots.verdicts))
    if lane is st.SingleTokenDecomposed:
        w13 = slots.pick("w13", [(st.SingleTokenDenseW13, [_ops(st.SingleTokenDenseW13, ns)])])
        w2 = slots.pick("w2", [(st.SingleTokenDenseW2, [_ops(st.SingleTokenDenseW2, ns)])])
        reduce = slots.pick(
            "reduce",
            [
                (st.WeightedReduce, [_ops(st.WeightedReduce, ns)]),
                (st.Unpermute, [_ops(st.Unpermute, ns)]),
            ],
        )
        return RouteChoice(
            m, st.StagePlan("decomposed", None, w13, w2, reduce), tuple(slots.verdicts)
        )
    return _routed(call, loaded, ns, slots)


def _any_ops(ns: NativeNamespace, *stages: type[st.MoeStage]) -> Check:
    checks = [stage.check_ops(ns) for stage in stages]
    if any(ok for ok, _ in checks):
        return OK
    return checks[-1]


def _routed(
    call: CallFacts, loaded: LoadedRoute, ns: NativeNamespace, slots: _Slots
) -> RouteChoice:
    m, top_k = call.m, call.top_k
    indexed = indexed_prefill_call(loaded.indexed_prefill, call, loaded.hidden)
    grouped = grouped_decode_call(
        loaded.grouped_decode,
        loaded.batched,
        m,
        top_k,
        loaded.token_cap,
        loaded.strict_w13,
        loaded.exact_w2,
        loaded.active_exact_w2,
    )
    indexed_gate: Gate = ("policy", lambda: indexed)
    permute = slots.pick(
        "permute",
        [
            (st.PermuteMetadata, [indexed_gate, _ops(st.IndexedPrefillW13, ns)]),
            (st.Permute, [_ops(st.Permute, ns)]),
        ],
    )
    w13 = slots.pick(
        "w13",
        [
            (st.IndexedPrefillW13, [indexed_gate, _ops(st.IndexedPrefillW13, ns)]),
            (st.ActiveGrouped, [("policy", lambda: grouped), _ops(st.ActiveGrouped, ns)]),
            (
                st.PerExpertDispatch,
                [
                    ("policy", lambda: _batched_not_strict(loaded, m)),
                    _ops(st.PerExpertDispatch, ns),
                ],
            ),
            (st.DenseStage, [_ops(st.DenseStage, ns)]),
        ],
    )

    def active_w2() -> Check:
        if grouped[0]:
            return OK
        ok, reason = active_exact_w2_call(loaded.active_exact_w2, m, top_k)
        if ok:
            return OK
        assert reason is not None and grouped[1] is not None
        return (
            False,
            Reason(
                grouped[1].code,
                f"grouped decode: {grouped[1].message}; active exact W2: {reason.message}",
            ),
        )

    def per_expert_w2() -> Check:
        ok, reason = _batched_not_strict(loaded, m)
        if not ok:
            return (ok, reason)
        return _check(not loaded.exact_w2, "policy", "disabled by sm70_awq_moe.exact_w2")

    w2 = slots.pick(
        "w2",
        [
            (
                st.ChunkedW2,
                [
                    (
                        "policy",
                        lambda: chunked_w2_call(
                            w13 is st.IndexedPrefillW13,
                            loaded.chunk_tokens,
                            m,
                            top_k,
                            loaded.w2_n,
                            loaded.experts,
                        ),
                    ),
                    _ops(st.ChunkedW2, ns),
                ],
            ),
            (st.ActiveGrouped, [("policy", active_w2), _ops(st.ActiveGrouped, ns)]),
            (st.PerExpertDispatch, [("policy", per_expert_w2), _ops(st.PerExpertDispatch, ns)]),
            (st.DenseStage, [_ops(st.DenseStage, ns)]),
        ],
    )
    chunked = w2 is st.ChunkedW2
    reduce = slots.pick(
        "reduce",
        [
            (
                st.ChunkedW2,
                [
                    (
                        "policy",
                        lambda: _check(chunked, "not_chunked", "W2 is not the chunked W2 stage"),
                    )
                ],
            ),
            (st.Unpermute, [_ops(st.Unpermute, ns)]),
        ],
    )
    plan = st.StagePlan("routed", permute, w13, w2, None if reduce is st.ChunkedW2 else reduce)
    return RouteChoice(m, plan, tuple(slots.verdicts))
