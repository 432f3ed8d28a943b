"""AWQ MoE route stages (docs/contracts/core.md §3.4): one capability class per stage with its
required ops and structured reasons, the per-feature layer contracts of docs/contracts/core.md §3.3
as pure functions, and the dispatcher that runs a chosen stage plan through the injected namespace.

Torch-free at import: the dispatcher imports torch when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from native import meta_tensors
from native import ops_moe as ops
from native.awq_schemas import GROUP_SIZE, HIDDEN, NUM_EXPERTS, QPN_M1_OP, TOP_K, W2_K, W13_N
from native.moe_layer import AwqMoeLayer
from routectl.namespaces.native_ns import NativeNamespace, require_ops
from routectl.reasons import OK, Check, reject

# The Qwen3.8 contract is a TP4 rank's geometry (awq_schemas holds the per-rank values).
QWEN38_TP = 4
QWEN38_INTERMEDIATE = W2_K
QPN_M1_CAPABILITY = 70


# --- layer contracts (docs/contracts/core.md §3.3) ------------------------------------------------


def _contract(code: str, what: str, checks: list[tuple[str, Any, Any]]) -> Check:
    """OK when every (name, actual, expected) agrees; else one reason naming each mismatch."""
    wrong = [
        f"{name} {actual} (needs {expected})"
        for name, actual, expected in checks
        if actual != expected
    ]
    if not wrong:
        return OK
    return reject(code, f"{what} contract not met: " + ", ".join(wrong))


def _grouped_checks(layer: AwqMoeLayer) -> list[tuple[str, Any, Any]]:
    return [
        ("TP", layer.tp, QWEN38_TP),
        ("experts", layer.num_experts, NUM_EXPERTS),
        ("prepared group", layer.prepared_group, GROUP_SIZE),
        ("hidden", layer.hidden, HIDDEN),
        ("W13 K", layer.w13_k, HIDDEN),
        ("W13 N", layer.w13_n, W13_N),
        ("W2 K", layer.w2_k, W2_K),
        ("W2 N", layer.w2_n, HIDDEN),
    ]


def grouped_contract(layer: AwqMoeLayer) -> Check:
    """Grouped decode: TP 4, E 512, prepared group 32, hidden = W13 K = 2560, W13 N 320,
    W2 K 160, W2 N 2560 (top-k is checked per call)."""
    return _contract("grouped_contract", "grouped decode", _grouped_checks(layer))


def qpn_m1_contract(layer: AwqMoeLayer, legacy_lane: bool) -> Check:
    """QPN M1: the grouped contract, checkpoint group 32 and the legacy lane built."""
    return _contract(
        "qpn_m1_contract",
        "QPN M1",
        [
            *_grouped_checks(layer),
            ("checkpoint group", layer.checkpoint_group, GROUP_SIZE),
            ("legacy single-token lane built", legacy_lane, True),
        ],
    )


def indexed_prefill_contract(layer: AwqMoeLayer, batched: bool) -> Check:
    """Indexed prefill: batched, TP 4, E 512, prepared = checkpoint group = 32, top-k 10,
    hidden 2560, intermediate 160, W13 2560/320."""
    return _contract(
        "indexed_prefill_contract",
        "indexed prefill",
        [
            ("batched GEMM", batched, True),
            ("TP", layer.tp, QWEN38_TP),
            ("experts", layer.num_experts, NUM_EXPERTS),
            ("checkpoint group", layer.checkpoint_group, GROUP_SIZE),
            ("prepared group", layer.prepared_group, GROUP_SIZE),
            ("top-k", layer.top_k, TOP_K),
            ("hidden", layer.hidden, HIDDEN),
            ("intermediate", layer.intermediate, QWEN38_INTERMEDIATE),
            ("W13 K", layer.w13_k, HIDDEN),
            ("W13 N", layer.w13_n, W13_N),
        ],
    )


def compact_shape(layer: AwqMoeLayer) -> Check:
    """Compact metadata: group 32, W13 qweight (512, 2560, 40), W2 qweight (512, 160, 320)
    (a shape-only rule: no TP or top-k check)."""
    return _contract(
        "compact_shape",
        "compact metadata",
        [
            ("group", layer.prepared_group, GROUP_SIZE),
            ("W13 qweight", layer.qweight_shape("w13"), (NUM_EXPERTS, HIDDEN, W13_N // 8)),
            ("W2 qweight", layer.qweight_shape("w2"), (NUM_EXPERTS, W2_K, HIDDEN // 8)),
        ],
    )


# --- stages ------------------------------------------------------------------------------


class MoeStage:
    """A route stage: `name` (catalogue entry), `label` (verdict name within its slot),
    `op` (the op it launches), `required_ops` (from the catalogue's stage table)."""

    name: ClassVar[str] = ""
    label: ClassVar[str] = ""
    op: ClassVar[str] = ""  # empty: launches nothing
    required_ops: ClassVar[tuple[str, ...]] = ()
    ops_label: ClassVar[str] = "AWQ MoE"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = f"awq_moe.{cls.label}"
        cls.required_ops = ops.STAGES[cls.name]

    @classmethod
    def is_supported(cls, capability: int) -> Check:
        return OK

    @classmethod
    def check_ops(cls, ns: NativeNamespace) -> Check:
        return require_ops(ns, cls.required_ops, cls.ops_label)

    @classmethod
    def can_run(cls, capability: int, ns: NativeNamespace) -> Check:
        ok, reason = cls.is_supported(capability)
        if not ok:
            return (ok, reason)
        return cls.check_ops(ns)


class ZeroOutput(MoeStage):
    label = "zero_output"


class QpnM1(MoeStage):
    label = "qpn_m1"
    op = QPN_M1_OP
    ops_label = "QPN M1"

    @classmethod
    def is_supported(cls, capability: int) -> Check:
        if capability == QPN_M1_CAPABILITY:
            return OK
        return reject(
            "capability",
            f"the QPN M1 op requires compute capability exactly 7.0, got capability {capability}",
        )


class LegacySingleToken(MoeStage):
    label = "legacy_single_token"
    op = ops.SINGLE_TOKEN_OP


class SingleTokenDenseW13(MoeStage):
    label = "single_token_dense_w13"
    op = ops.SINGLE_TOKEN_DENSE_W13_OP


class SingleTokenDenseW2(MoeStage):
    label = "single_token_dense_w2"
    op = ops.SINGLE_TOKEN_DENSE_STAGE_OP


class WeightedReduce(MoeStage):
    label = "weighted_reduce"
    op = ops.WEIGHTED_REDUCE_OP


class Permute(MoeStage):
    label = "permute"
    op = ops.PERMUTE_OP


class PermuteMetadata(MoeStage):
    label = "permute_metadata"
    op = ops.PERMUTE_METADATA_OP


class IndexedPrefillW13(MoeStage):
    label = "indexed_prefill_w13"
    op = ops.INDEXED_W13_OP
    ops_label = "indexed prefill"


class ActiveGrouped(MoeStage):
    label = "active_grouped"
    op = ops.ACTIVE_DENSE_STAGE_OP


class PerExpertDispatch(MoeStage):
    label = "per_expert_dispatch"
    op = ops.PER_EXPERT_DISPATCH_OP


class DenseStage(MoeStage):
    label = "dense_stage"
    op = ops.DENSE_STAGE_OP


class ChunkedW2(MoeStage):
    label = "chunked_w2"
    op = ops.CHUNKED_W2_OP
    ops_label = "chunked W2"


class Unpermute(MoeStage):
    label = "unpermute"
    op = ops.UNPERMUTE_OP


class SingleTokenDecomposed(MoeStage):
    """The decomposed single-token lane: its W13, W2 and reduce stages are picked after it;
    it needs the two single-token GEMM ops (and a reduce, checked by the selector)."""

    label = "single_token_decomposed"


class Routed(MoeStage):
    """The routed lane (permute, W13, SiLU, W2, reduce): each stage carries its own ops."""

    label = "routed"


class PrepareCompact(MoeStage):
    """Not a dispatch stage: the 3-byte metadata preparation."""

    label = "prepare_compact"
    op = ops.PREPARE_COMPACT_OP


# Lanes in docs/contracts/core.md §3.4 order (the legacy lane holds QPN M1 then the monolithic op).
LANE_STAGES: tuple[type[MoeStage], ...] = (
    ZeroOutput,
    QpnM1,
    LegacySingleToken,
    SingleTokenDecomposed,
    Routed,
)
MOE_STAGE_CLASSES: tuple[type[MoeStage], ...] = (
    ZeroOutput,
    QpnM1,
    LegacySingleToken,
    SingleTokenDenseW13,
    SingleTokenDenseW2,
    WeightedReduce,
    Permute,
    PermuteMetadata,
    IndexedPrefillW13,
    ActiveGrouped,
    PerExpertDispatch,
    DenseStage,
    ChunkedW2,
    Unpermute,
    SingleTokenDecomposed,
    Routed,
    PrepareCompact,
)


# --- dispatch ----------------------------------------------------------------------------


@dataclass(frozen=True)
class StagePlan:
    """What one apply call runs. `lane` is ZeroOutput, QpnM1 or LegacySingleToken for whole
    calls, else None with the decomposed or routed stages filled in (reduce None = the W2
    stage reduces: chunked W2)."""

    lane: str  # "zero", "qpn_m1", "legacy", "decomposed", "routed"
    permute: type[MoeStage] | None = None
    w13: type[MoeStage] | None = None
    w2: type[MoeStage] | None = None
    reduce: type[MoeStage] | None = None

    def stages(self) -> tuple[type[MoeStage], ...]:
        lanes = {"zero": ZeroOutput, "qpn_m1": QpnM1, "legacy": LegacySingleToken}
        if self.lane in lanes:
            return (lanes[self.lane],)
        return tuple(s for s in (self.permute, self.w13, self.w2, self.reduce) if s)


@dataclass(frozen=True)
class PreparedBanks:
    """The resident prepared banks: words (E, K, N/8) int32 and metadata per bank."""

    w13: Any
    s13: Any
    w2: Any
    s2: Any
    w13_interleaved: bool


def _torch() -> Any:
    import torch

    return torch


# Meta tensors have shapes and no values: where a result's shape is known, building it
# directly is the meta result (torch's elementwise meta path imports its Python
# decompositions, seconds of one-off cost).
def _is_meta(t: Any) -> bool:
    return t.device.type == "meta"


def _identity_index(n: int, like: Any) -> Any:
    """0..n-1 as int32 (the single-token routes' rows are already in token order)."""
    torch = _torch()
    if _is_meta(like):
        return torch.empty((n,), dtype=torch.int32, device=like.device)
    return torch.arange(n, dtype=torch.int32, device=like.device)


class MoeDispatcher:
    """Runs stage plans for one loaded layer through the namespace given at load time."""

    def __init__(
        self, ns: NativeNamespace, layer: AwqMoeLayer, banks: PreparedBanks, chunk_tokens: int
    ) -> None:
        self.ns = ns
        self.layer = layer
        self.banks = banks
        self.chunk_tokens = chunk_tokens

    def _zeros(self, shape: tuple[int, ...], like: Any) -> Any:
        """Zeros shaped `shape` with `like`'s dtype (on meta: an empty tensor, no values)."""
        if _is_meta(like):
            return meta_tensors.empty(shape, like.dtype, like.device)
        return _torch().zeros(shape, dtype=like.dtype, device=like.device)

    def _bank_args(self, bank: str) -> dict[str, Any]:
        layer = self.layer
        weights, scales = (
            (self.banks.w13, self.banks.s13) if bank == "w13" else (self.banks.w2, self.banks.s2)
        )
        k, n = layer.dims(bank)
        return {
            "weights": weights,
            "scales": scales,
            "k": k,
            "n": n,
            "group_size": layer.prepared_group,
        }

    def activation(self, gate_up: Any) -> Any:
        """SiLU(gate) * up per routed row, on the W13 layout the banks were prepared in."""
        torch = _torch()
        if _is_meta(gate_up):
            return meta_tensors.empty_beside(
                (gate_up.shape[0], gate_up.shape[1] // 2), "float16", gate_up
            )
        if self.banks.w13_interleaved:
            gate, up = gate_up[:, 0::2], gate_up[:, 1::2]
        else:
            half = gate_up.shape[1] // 2
            gate, up = gate_up[:, :half], gate_up[:, half:]
        return (torch.nn.functional.silu(gate.float()).to(gate_up.dtype) * up).contiguous()

    def run(self, plan: StagePlan, x: Any, topk_ids: Any, topk_weights: Any) -> Any:
        if plan.lane == "zero":
            return self._zeros((x.shape[0], self.layer.hidden), x)
        if plan.lane == "qpn_m1":
            return self._qpn_m1(x, topk_ids, topk_weights)
        if plan.lane == "legacy":
            return self._legacy(x, topk_ids, topk_weights)
        if plan.lane == "decomposed":
            return self._decomposed(plan, x, topk_ids, topk_weights)
        return self._routed(plan, x, topk_ids, topk_weights)

    def _qpn_m1(self, x: Any, ids: Any, weights: Any) -> Any:
        layer, b = self.layer, self.banks
        out = meta_tensors.empty_beside((1, layer.hidden), "float16", x)
        intermediate = meta_tensors.empty_beside((layer.top_k, layer.intermediate), "float16", x)
        self.ns.call(
            QpnM1.op,
            out=out,
            intermediate=intermediate,
            input=x,
            w13=b.w13,
            s13=b.s13,
            w2=b.w2,
            s2=b.s2,
            ids=ids,
            topk=weights,
        )
        return out

    def _legacy(self, x: Any, ids: Any, weights: Any) -> Any:
        layer, b = self.layer, self.banks
        slots = layer.top_k
        out = meta_tensors.empty_beside((1, layer.hidden), "float16", x)
        self.ns.call(
            LegacySingleToken.op,
            out=out,
            input=x,
            topk_weights=weights,
            topk_ids=ids,
            w13=b.w13,
            s13=b.s13,
            w2=b.w2,
            s2=b.s2,
            intermediate=meta_tensors.empty_beside((slots, layer.intermediate), "float16", x),
            scratch=meta_tensors.empty_beside((slots, layer.hidden), "float16", x),
            num_tokens=1,
            total_slots=slots,
            w13_k=layer.w13_k,
            w13_n=layer.w13_n,
            w2_k=layer.w2_k,
            w2_n=layer.w2_n,
            group_size=layer.prepared_group,
            hidden_logical_size=layer.hidden,
        )
        return out

    def _decomposed(self, plan: StagePlan, x: Any, ids: Any, weights: Any) -> Any:
        layer = self.layer
        slots = layer.top_k
        gate_up = meta_tensors.empty_beside((slots, layer.w13_n), "float16", x)
        self.ns.call(
            SingleTokenDenseW13.op,
            out=gate_up,
            input=x,
            topk_ids=ids,
            num_tokens=1,
            total_slots=slots,
            **self._bank_args("w13"),
        )
        act = self.activation(gate_up)
        down = meta_tensors.empty_beside((slots, layer.hidden), "float16", x)
        self.ns.call(
            SingleTokenDenseW2.op,
            out=down,
            input=act,
            topk_ids=ids,
            num_tokens=1,
            total_slots=slots,
            **self._bank_args("w2"),
        )
        if plan.reduce is WeightedReduce:
            out = meta_tensors.empty_beside((1, layer.hidden), "float16", x)
            self.ns.call(
                WeightedReduce.op,
                out=out,
                input=down,
                topk_weights=weights,
                num_tokens=1,
                total_slots=slots,
            )
            return out
        out = self._zeros((1, layer.hidden), x)
        self.ns.call(
            Unpermute.op,
            permuted_hidden_states=down,
            topk_weights=weights,
            inv_permuted_idx=_identity_index(slots, x),
            expert_first_token_offset=None,
            topk=layer.top_k,
            hidden_states=out,
        )
        return out

    def _routed(self, plan: StagePlan, x: Any, ids: Any, weights: Any) -> Any:
        layer = self.layer
        m = x.shape[0]
        top_k = ids.shape[1]
        slots = m * top_k
        e = layer.num_experts
        out = self._zeros((m, layer.hidden), x)
        offsets = meta_tensors.empty_beside((e + 1,), "int64", x)
        permuted_idx = meta_tensors.empty_beside((slots,), "int32", x)
        inv_idx = meta_tensors.empty_beside((slots,), "int32", x)
        common = {"num_tokens": m, "total_slots": slots}
        if plan.permute is PermuteMetadata:
            rows = meta_tensors.empty_beside((slots,), "int32", x)
            self.ns.call(
                PermuteMetadata.op,
                topk_ids=ids,
                input_row_indices=rows,
                expert_offsets=offsets,
                permuted_idx=permuted_idx,
                inv_permuted_idx=inv_idx,
                num_experts=e,
                **common,
            )
            a = x
        else:
            rows = None
            a = meta_tensors.empty_beside((slots, layer.hidden), "float16", x)
            self.ns.call(
                Permute.op,
                input=x,
                topk_ids=ids,
                permuted_input=a,
                expert_offsets=offsets,
                permuted_idx=permuted_idx,
                inv_permuted_idx=inv_idx,
                num_experts=e,
                **common,
            )
        gate_up = meta_tensors.empty_beside((slots, layer.w13_n), "float16", x)
        self._stage(plan.w13, "w13", gate_up, a, offsets, permuted_idx, rows, common)
        act = self.activation(gate_up)
        if plan.w2 is ChunkedW2:
            chunk = self.chunk_tokens
            self.ns.call(
                ChunkedW2.op,
                out=out,
                sorted_output=meta_tensors.empty_beside(
                    (min(m, chunk) * top_k, layer.hidden), "float16", x
                ),
                intermediate=act,
                expert_offsets=offsets,
                permuted_idx=permuted_idx,
                topk_weights=weights,
                chunk_scratch=meta_tensors.empty_beside((3 * e + 1,), "int32", x),
                num_experts=e,
                top_k=top_k,
                hidden_logical_size=layer.hidden,
                chunk_tokens=chunk,
                **common,
                **self._bank_args("w2"),
            )
            return out
        down = meta_tensors.empty_beside((slots, layer.hidden), "float16", x)
        self._stage(plan.w2, "w2", down, act, offsets, permuted_idx, None, common)
        self.ns.call(
            Unpermute.op,
            permuted_hidden_states=down,
            topk_weights=weights,
            inv_permuted_idx=inv_idx,
            expert_first_token_offset=offsets,
            topk=top_k,
            hidden_states=out,
        )
        return out

    def _stage(
        self,
        stage: type[MoeStage] | None,
        bank: str,
        out: Any,
        a: Any,
        offsets: Any,
        permuted_idx: Any,
        rows: Any,
        common: dict[str, int],
    ) -> None:
        args = {"out": out, "input": a, **common, **self._bank_args(bank)}
        e = self.layer.num_experts
        if stage is IndexedPrefillW13:
            self.ns.call(
                stage.op, input_row_indices=rows, expert_offsets=offsets, num_experts=e, **args
            )
        elif stage is ActiveGrouped:
            slots = common["total_slots"]
            self.ns.call(
                stage.op,
                permuted_experts_id=permuted_idx,
                active_expert_offsets=meta_tensors.empty_beside((slots + 1,), "int32", a),
                active_expert_ids=meta_tensors.empty_beside((slots,), "int32", a),
                **args,
            )
        elif stage is PerExpertDispatch:
            self.ns.call(stage.op, expert_offsets=offsets, num_experts=e, gated_silu=False, **args)
        elif stage is DenseStage:
            self.ns.call(
                stage.op,
                expert_offsets=offsets,
                dense_expert_ids=meta_tensors.empty_beside((e,), "int32", a),
                num_experts=e,
                **args,
            )
        else:
            raise ValueError(f"{stage} is not a {bank} stage")
