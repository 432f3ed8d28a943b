"""Admissions and resolutions of the AWQ MoE routes (docs/contracts/core.md §3.1, §3.5), as pure
functions.

Load-time functions take resolved policy values, whether each was explicit, and the layer
contract / native availability as checks; they return the outcome (and, for defaults that
cannot be served, the fallback reason) or raise `SelectionError` for an explicit request
that cannot be served (an error row). Per-call functions take torch-free facts of the call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from native.awq_layout import qpn_m1_arguments
from native.awq_schemas import PREPARE_COMPACT_OP, TOP_K
from native.ops_moe import CHUNKED_W2_OP
from policies.variables import field, use_turbomind
from routectl.errors import SelectionError
from routectl.policy.resolve import ResolvedPolicy
from routectl.reasons import OK, Check, reject

SECTION = "sm70_awq_moe"
GROUPED_TOKENS = (2, 8)  # grouped decode serves 2 <= M <= 8
INDEXED_MIN_TOKENS = 128
ACTIVE_EXACT_W2_MAX_SLOTS = 128
QWEN38_TOP_K = TOP_K
FAMILY_CAPABILITIES = (70, 75)  # 70 <= capability < 75
# The codes `family_gate` can return (declared for `routectl coverage`).
FAMILY_GATE_CODES = ("moe_disabled", "backend_override", "turbomind_off", "capability")

QPN_M1_CONTRACT_MESSAGE = "AWQ QPN M1 requires native-g32 TP4 E512 C1"
QPN_M1_NATIVE_MESSAGE = "AWQ QPN M1 requires a native build with CUDA arch 7.0"
NO_COMPACT_OP = "no compact prepare op"
UNSUPPORTED_SHAPE = "unsupported layer shape"
# The reason code of a stage meant for other token counts.
TOKEN_COUNT_CODE = "token_count"


def key(name: str) -> str:
    return f"{SECTION}.{name}"


def variable(field_key: str) -> str:
    name = field(field_key).variable
    assert name is not None, field_key
    return name


def requested_by(policy: ResolvedPolicy, field_key: str, value: Any = 1) -> str:
    """How a request was made, for messages: the typed field or the variable."""
    if policy.source(field_key) == "explicit":
        return f"{field(field_key).config_path}={policy.value(field_key)!r}"
    return f"{variable(field_key)}={value}"


# --- family gate (3.1) ---------------------------------------------------------------------


@dataclass(frozen=True)
class Gate:
    """The family gate's verdict with its selection stage (policy or capability)."""

    ok: bool
    code: str | None = None
    message: str | None = None
    stage: str | None = None


def family_gate(capability: int, policy: ResolvedPolicy) -> Gate:
    """TurboMind AWQ MoE exists only when 70 <= capability < 75,
    use_turbomind(sm70_turbomind.awq_moe) and not sm70_awq_moe.disable."""
    values = dict(policy.values)
    if policy.value(key("disable")):
        return Gate(
            False,
            "moe_disabled",
            f"disabled by {_source_text(policy, key('disable'))}; MoeWNA16 serves the layer",
            "policy",
        )
    if not use_turbomind(policy.value("sm70_turbomind.awq_moe"), values):
        backend = policy.value("sm70_turbomind.quant_backend")
        if backend == "marlin":
            return Gate(
                False,
                "backend_override",
                "disabled by the legacy quantization backend override "
                f"({_source_text(policy, 'sm70_turbomind.quant_backend')} = marlin)",
                "policy",
            )
        return Gate(
            False,
            "turbomind_off",
            f"TurboMind AWQ MoE provider off ({_source_text(policy, 'sm70_turbomind.awq_moe')})",
            "policy",
        )
    low, high = FAMILY_CAPABILITIES
    if not low <= capability < high:
        return Gate(
            False,
            "capability",
            f"requires {low} <= capability < {high} (Volta), got capability {capability}",
            "capability",
        )
    return Gate(True)


def _source_text(policy: ResolvedPolicy, field_key: str) -> str:
    source = policy.source(field_key)
    if source == "explicit":
        return field(field_key).config_path
    if source.startswith("alias:"):
        return source.removeprefix("alias:")
    return f"the default of {field(field_key).config_path}"


# --- per-layer batched GEMM ---------------------------------------------------------------


def layer_in_list(layer_id: int, entries: Sequence[str]) -> bool:
    """Whether `layer_id` is named by an entry ("7") or a range ("3-9", inclusive)."""
    for entry in entries:
        lo, sep, hi = entry.partition("-")
        if (sep and int(lo) <= layer_id <= int(hi)) or (not sep and int(lo) == layer_id):
            return True
    return False


def layer_batched(
    batched: bool, layer_id: int, allowlist: Sequence[str], denylist: Sequence[str]
) -> bool:
    """batched and (no allowlist or id in it) and id not in the denylist."""
    return (
        bool(batched)
        and (not allowlist or layer_in_list(layer_id, allowlist))
        and not layer_in_list(layer_id, denylist)
    )


# --- compact metadata -----------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """A load-time resolution: the effective value and, for an unserved default, why."""

    value: Any
    fallback: str | None = None


def resolve_compact_metadata(
    requested: bool,
    explicit: bool,
    native_available: bool,
    shape_ok: bool,
    *,
    requested_by: str | None = None,
) -> Outcome:
    """3-byte metadata (True) or 4-byte (False); an explicit request that cannot be served
    raises, a default one falls back to 4-byte with a reason."""
    if not requested:
        return Outcome(False)
    if native_available and shape_ok:
        return Outcome(True)
    who = requested_by or f"{variable(key('compact_metadata'))}=1"
    if explicit and not native_available:
        raise SelectionError(
            "compact_metadata_native_missing",
            f"{who} requires an SM70 build with {PREPARE_COMPACT_OP}.",
        )
    if explicit:
        raise SelectionError(
            "compact_metadata_shape",
            f"{who} currently requires the exact Qwen3.8 TP4 E512 native-g32 W13/W2 shapes.",
        )
    return Outcome(False, NO_COMPACT_OP if not native_available else UNSUPPORTED_SHAPE)


# --- QPN M1 -------------------------------------------------------------------------------


def admit_qpn_m1(
    requested: bool,
    explicit: bool,
    contract: Check,
    native: Check,
    *,
    requested_by: str | None = None,
) -> bool:
    """Load admission: requested and the QPN M1 contract and the native op (+ SM70)."""
    if not requested:
        return False
    for (ok, reason), core, code in (
        (contract, QPN_M1_CONTRACT_MESSAGE, "qpn_m1_contract"),
        (native, QPN_M1_NATIVE_MESSAGE, "qpn_m1_native_missing"),
    ):
        if not ok:
            if explicit:
                who = requested_by or f"{variable(key('qpn_m1'))}=1"
                raise SelectionError(code, f"{core} ({who}: {reason})")
            return False
    return True


@dataclass(frozen=True)
class TensorFacts:
    """What admission reads of a call input: shape, element type, contiguity."""

    shape: tuple[int, ...]
    dtype: str
    contiguous: bool = True

    @classmethod
    def of(cls, tensor: Any) -> TensorFacts:
        return cls(
            tuple(int(d) for d in tensor.shape),
            str(tensor.dtype).removeprefix("torch."),
            bool(tensor.is_contiguous()),
        )

    def describe(self) -> str:
        layout = "contiguous" if self.contiguous else "non-contiguous"
        return f"{self.dtype} {self.shape} {layout}"


@dataclass(frozen=True)
class CallFacts:
    """One apply call: activations, router ids and router weights."""

    x: TensorFacts
    ids: TensorFacts
    weights: TensorFacts

    @property
    def m(self) -> int:
        return self.x.shape[0]

    @property
    def top_k(self) -> int:
        return self.ids.shape[1] if len(self.ids.shape) > 1 else 0

    @classmethod
    def of(cls, x: Any, ids: Any, weights: Any) -> CallFacts:
        return cls(TensorFacts.of(x), TensorFacts.of(ids), TensorFacts.of(weights))


def qpn_m1_call(call: CallFacts) -> Check:
    """x (1, 2560) fp16, ids (1, 10) int32, router weights (1, 10) fp32, all contiguous."""
    specs = qpn_m1_arguments(compact=False)
    wrong = []
    for name, facts in (("input", call.x), ("ids", call.ids), ("topk", call.weights)):
        spec = specs[name]
        if facts.shape != spec.shape or facts.dtype != spec.dtype or not facts.contiguous:
            wrong.append(f"{name} {facts.describe()} (needs {spec.dtype} {spec.shape} contiguous)")
    if wrong:
        return reject("call_inputs", "QPN M1 call inputs: " + ", ".join(wrong))
    return OK


# --- grouped decode ---------------------------------------------------------------------------


def within_cap(m: int, cap: int) -> bool:
    """The batched decode token cap: <= 0 is unbounded."""
    return cap <= 0 or m <= cap


def grouped_decode_call(
    loaded: bool,
    batched: bool,
    m: int,
    top_k: int,
    cap: int,
    strict_w13: bool,
    exact_w2: bool,
    active_exact_w2: bool,
) -> Check:
    """Per call: admitted at load, batched, 2 <= M <= 8, top-k 10, within the cap, and none
    of strict_w13, exact_w2, active_exact_w2. No op check: never fails a load."""
    lo, hi = GROUPED_TOKENS
    if not loaded:
        return reject("not_admitted", "grouped decode not admitted at load")
    if not batched:
        return reject("not_batched", "batched GEMM is off for this layer")
    if not lo <= m <= hi:
        return reject(TOKEN_COUNT_CODE, f"M = {m} outside {lo}..{hi}")
    if top_k != QWEN38_TOP_K:
        return reject("top_k", f"top-k {top_k} (needs {QWEN38_TOP_K})")
    if not within_cap(m, cap):
        return reject("token_cap", f"M = {m} above the batched decode cap {cap}")
    for flag, name in (
        (strict_w13, "strict_w13"),
        (exact_w2, "exact_w2"),
        (active_exact_w2, "active_exact_w2"),
    ):
        if flag:
            return reject("policy", f"disabled by {key(name)}")
    return OK


# --- indexed prefill ------------------------------------------------------------------------


def admit_indexed_prefill(
    requested: bool,
    explicit: bool,
    contract: Check,
    missing: Sequence[str],
    *,
    requested_by: str | None = None,
) -> Outcome:
    """Load admission. Off silently on layers outside the contract (explicit or not); with
    its ops missing a default falls back to the materialized input, an explicit request
    raises."""
    if not requested or not contract[0]:
        return Outcome(False)
    if missing:
        names = ", ".join(missing)
        if explicit:
            who = requested_by or f"{variable(key('indexed_prefill'))}=1"
            raise SelectionError(
                "indexed_prefill_native_missing",
                f"{who}: the explicit indexed prefill route requires native operators [{names}]",
            )
        return Outcome(
            False,
            f"missing native indexed prefill operators: [{names}]; using "
            "the materialized-input route",
        )
    return Outcome(True)


def indexed_prefill_call(admitted: bool, call: CallFacts, hidden: int) -> Check:
    """Per call: admitted, M >= 128, x (M, hidden) fp16 contiguous, ids (M, 10)."""
    m = call.m
    if not admitted:
        return reject("not_admitted", "indexed prefill not admitted at load")
    if m < INDEXED_MIN_TOKENS:
        return reject(TOKEN_COUNT_CODE, f"M = {m} below {INDEXED_MIN_TOKENS}")
    x = call.x
    if len(x.shape) != 2 or x.shape[1] != hidden or x.dtype != "float16" or not x.contiguous:
        return reject(
            "call_inputs", f"input {x.describe()} (needs float16 (M, {hidden}) contiguous)"
        )
    if call.ids.shape != (m, QWEN38_TOP_K):
        return reject("top_k", f"ids {call.ids.shape} (needs ({m}, {QWEN38_TOP_K}))")
    return OK


# --- chunked W2 -------------------------------------------------------------------------------


def resolve_w2_chunk_tokens(value: int, indexed_admitted: bool, op_available: bool) -> int:
    """The stored chunk: the value when indexed prefill is admitted and the op is present,
    else 0; a value > 0 with indexed prefill admitted but the op missing fails the load."""
    if value <= 0 or not indexed_admitted:
        return 0
    if not op_available:
        raise SelectionError(
            "chunked_w2_native_missing",
            f"{key('w2_chunk_tokens')}={value} requires the native op {CHUNKED_W2_OP}",
        )
    return value


def chunk_scratch_bytes(chunk: int, top_k: int, w2_n: int, experts: int) -> int:
    return chunk * top_k * (2 * w2_n + 8) + (3 * experts + 1) * 4


def full_scratch_bytes(m: int, top_k: int, w2_n: int) -> int:
    return m * top_k * w2_n * 2


def chunked_w2_call(
    indexed_w13: bool, chunk: int, m: int, top_k: int, w2_n: int, experts: int
) -> Check:
    """Per call: indexed W13, 0 < chunk < M, and the chunk scratch smaller than the full
    sorted output."""
    if chunk <= 0:
        return reject("not_admitted", "no W2 chunk stored at load")
    if not indexed_w13:
        return reject("not_indexed", "W13 is not the indexed prefill on this call")
    if chunk >= m:
        return reject(TOKEN_COUNT_CODE, f"chunk {chunk} >= M = {m}")
    chunked = chunk_scratch_bytes(chunk, top_k, w2_n, experts)
    full = full_scratch_bytes(m, top_k, w2_n)
    if chunked >= full:
        return reject("scratch", f"chunk scratch {chunked} B is not below the full {full} B")
    return OK


def active_exact_w2_call(active_exact_w2: bool, m: int, top_k: int) -> Check:
    if not active_exact_w2:
        return reject("policy", f"{key('active_exact_w2')} is off")
    if m * top_k > ACTIVE_EXACT_W2_MAX_SLOTS:
        return reject(TOKEN_COUNT_CODE, f"M*top_k = {m * top_k} above {ACTIVE_EXACT_W2_MAX_SLOTS}")
    return OK
