"""The engine-configuration double and the hardware description: explicit inputs of every
decision (never read from the process)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SPEC_METHODS = ("none", "mtp", "dflash")
# Compute capabilities of every NVIDIA GPU generation shipped (major * 10 + minor): a
# capability outside this list describes no real device.
SHIPPED_CAPABILITIES = (
    50,
    52,
    53,
    60,
    61,
    62,
    70,
    72,
    75,
    80,
    86,
    87,
    89,
    90,
    100,
    101,
    103,
    110,
    120,
    121,
)
# KV-cache dtypes an engine accepts.
KV_DTYPES = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")


@dataclass(frozen=True)
class Hardware:
    """The GPU a decision is made for: its compute capability."""

    capability: int  # 70 = Volta V100, 72 = Xavier, 75 = Turing, 80+ = newer


@dataclass(frozen=True)
class ModelFacts:
    """What the engine knows of the served model (its config): each fact None (or no
    architectures) when unknown, and an unknown fact never qualifies a model."""

    architectures: tuple[str, ...] = ()
    dtype: str | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    quantization: str | None = None  # the checkpoint's quantization method, when known
    # A multimodal config's `language_model_only` (docs/contracts/flashnext.md §2.1): the
    # conditional-generation architecture decodes as a causal LM only when it is true.
    language_model_only: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "architectures": list(self.architectures)}


@dataclass(frozen=True)
class EngineConfig:
    """The engine configuration a decision depends on: parallelism, speculative decoding,
    concurrency, token budget, KV-cache dtype and (optionally) the served model's facts."""

    tp: int = 1
    pp: int = 1
    spec_method: str = "none"
    spec_tokens: int = 0
    selector_top_k: int = 0
    max_num_seqs: int = 1
    max_num_batched_tokens: int = 8192
    dbo: bool = False
    ubatch: int = 0
    kv_dtype: str = "float16"
    model: ModelFacts | None = None  # None: the model is unknown
    # Engine-wide batch invariance (docs/contracts/flashnext.md §1.3: an engine fact, no
    # policy field): every batch contract fails under it.
    batch_invariant: bool = False
    # The process-wide matmul precision flags the worker sets (docs/contracts/flashnext.md
    # §2.4-1, §4): fp16 reduced-precision reduction (None: the contract's default, on for
    # `mtp` only) and fp16 accumulation.
    reduced_precision_reduction: bool | None = None
    fp16_accumulation: bool = False
    # The speculative methods a category declares beyond SPEC_METHODS (`Category.spec_methods`:
    # the attention category's `dflash2`, `ddtree`). Not a fact of the engine: it never enters
    # equality, the JSON form or a hash.
    declared_methods: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        accepted = (*SPEC_METHODS, *self.declared_methods)
        if self.spec_method not in accepted:
            raise ValueError(f"speculative method must be one of {', '.join(accepted)}")

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["declared_methods"]
        out["model"] = self.model.to_json() if self.model is not None else None
        return out
