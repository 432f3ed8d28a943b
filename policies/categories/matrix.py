"""The standard route matrix (docs/contracts/core.md §5.1): model x kv x tp x spec x concurrency x
budget, and the model facts of each scope the engine double carries
(docs/contracts/dflash2.md §4.1)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.variables import BLOCK_FP8
from routectl.rows import Probe, RowSpec
from routectl.workload import EngineConfig, ModelFacts

KV_DTYPES = ("float16", "fp8_e4m3", "fp8_e5m2")
TP_SIZES = (2, 4)
SPEC_METHODS = ("none", "mtp", "dflash")
CONCURRENCY = (1, 4, 8)
BUDGETS = (4096, 8192)
SPEC_TOKENS = {"none": 0, "mtp": 4, "dflash": 7}
DFLASH_SELECTOR_TOP_K = 16

# What the engine double knows of each model scope's config (docs/contracts/dflash2.md §4.1); scopes
# without an entry are unknown models.
_QWEN3_5 = "Qwen3_5ForConditionalGeneration"
MODEL_FACTS: Mapping[str, ModelFacts] = {
    "27b_dflash2_nvfp4": ModelFacts((_QWEN3_5,), "float16", 5120, 24, 4, 256),
    # language_model_only: the Flash-Next decode contract (docs/contracts/flashnext.md §2.1).
    "flash_next_mtp4_nvfp4": ModelFacts(
        ("Qwen4ExpForConditionalGeneration",),
        "float16",
        2560,
        24,
        4,
        256,
        language_model_only=True,
    ),
    "35b_a3b_awq": ModelFacts((_QWEN3_5,), "float16", 2048, 24, 4, 256),
    # The two block-FP8 scopes (issue 16); the hidden size 2048 leaves 35b_a3b_fp8
    # unqualified for the DFlash2 verifier.
    "27b_fp8": ModelFacts((_QWEN3_5,), "float16", 5120, 24, 4, 256, BLOCK_FP8),
    "35b_a3b_fp8": ModelFacts((_QWEN3_5,), "float16", 2048, 24, 4, 256, BLOCK_FP8),
}

# Why the KV cache dtype never changes a route: no policy field, qualification rule or kernel
# capability reads EngineConfig.kv_dtype (the categories' invariances state it).
KV_NEVER_READ = "no policy field, qualification rule or kernel reads the KV cache dtype"

NOT_APPLICABLE = "not_applicable"
NOT_MODELLED = "not_modelled"


def engine(
    kv: str, tp: int, spec: str, concurrency: int, budget: int, model: str | None = None
) -> EngineConfig:
    """The engine double of one matrix cell: PP 1, no DBO, ubatch 0, the model's facts."""
    return EngineConfig(
        tp=tp,
        pp=1,
        spec_method=spec,
        spec_tokens=SPEC_TOKENS[spec],
        selector_top_k=DFLASH_SELECTOR_TOP_K if spec == "dflash" else 0,
        max_num_seqs=concurrency,
        max_num_batched_tokens=budget,
        dbo=False,
        ubatch=0,
        kv_dtype=kv,
        model=MODEL_FACTS.get(model) if model is not None else None,
    )


def row_id(model: str, kv: str, tp: int, spec: str, concurrency: int, budget: int) -> str:
    return f"{model}/{kv}/tp{tp}/{spec}/c{concurrency}/q{budget}"


@dataclass(frozen=True)
class ModelScope:
    """One model of a category: its layer per TP size, or why the category has no route."""

    id: str
    layer: Callable[[int], Mapping[str, Any]] | None = None
    status: tuple[str, str] | None = None


def matrix_rows(models: Sequence[ModelScope], capability: int) -> list[RowSpec]:
    rows: list[RowSpec] = []
    for model, kv, tp, spec, c, q in itertools.product(
        models, KV_DTYPES, TP_SIZES, SPEC_METHODS, CONCURRENCY, BUDGETS
    ):
        rows.append(
            RowSpec(
                id=row_id(model.id, kv, tp, spec, c, q),
                model=model.id,
                engine=engine(kv, tp, spec, c, q, model.id),
                capability=capability,
                layer=model.layer(tp) if model.layer else {},
                status=model.status,
            )
        )
    return rows


def with_probes(
    rows: list[RowSpec], probes: Sequence[Probe], bases: Mapping[str, RowSpec] | None = None
) -> list[RowSpec]:
    """Matrix rows plus each probe applied to its base row (bases may add off-matrix rows)."""
    by_id = {r.id: r for r in rows}
    by_id.update(bases or {})
    return [*rows, *(p.apply(by_id[p.base]) for p in probes)]
