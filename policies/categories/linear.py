"""Linear-layer categories: one layer per row, loaded through the family's loader on meta
tensors, then dispatched at the category's token counts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from native import meta_tensors
from native.layers import AwqLayer, Fp8Layer, Nvfp4Layer
from policies.categories.matrix import ModelScope, matrix_rows, with_probes
from routectl.category import Category
from routectl.policy.loaded import PreparedLayer
from routectl.replay.harness import ReplayContext, replay_calls, route_from_prepared
from routectl.rows import Invariance, Probe, RowSpec
from routectl.sites import DecisionSites

LAYER_PREFIX = "model.layers.0."

# Layer description keys every row carries: kind (family), role, k, n, and group for AWQ;
# anything under "override" replaces a field of the built layer (probes of odd shapes).
_BUILDERS: Mapping[str, Callable[[Mapping[str, Any]], Any]] = {
    "nvfp4": lambda d: Nvfp4Layer.of(LAYER_PREFIX + d["role"], d["k"], d["n"]),
    "fp8": lambda d: Fp8Layer.of(LAYER_PREFIX + d["role"], d["k"], d["n"]),
    "awq": lambda d: AwqLayer.of(LAYER_PREFIX + d["role"], d["k"], d["n"], d["group"]),
}


def build_layer(description: Mapping[str, Any]) -> Any:
    layer = _BUILDERS[description["kind"]](description)
    overrides = description.get("override")
    return replace(layer, **dict(overrides)) if overrides else layer


def layer(kind: str, role: str, k: int, n: int, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "role": role, "k": k, "n": n, **extra}


Loader = Callable[..., PreparedLayer]


@dataclass(frozen=True)
class LinearCategory(Category):
    name: str
    basis: str
    capability: int
    models: tuple[ModelScope, ...]
    probes: tuple[Probe, ...]
    loaders: Mapping[str, Loader]  # layer kind -> family loader
    token_counts: tuple[int, ...]
    gated_call_m: int | None = None  # one fused gate/up call at this M for gated layers
    probe_bases: Mapping[str, RowSpec] | None = None
    description: str = ""  # one line, for `routectl list`
    # What the matrix dimensions never change (`Category.invariances`).
    declared_invariances: tuple[Invariance, ...] = ()
    # The category's declared decision sites (`routectl coverage`); None: none declared.
    sites: Callable[[], DecisionSites] | None = None

    @cached_property
    def _rows(self) -> tuple[RowSpec, ...]:
        return tuple(
            with_probes(matrix_rows(self.models, self.capability), self.probes, self.probe_bases)
        )

    def rows(self) -> Sequence[RowSpec]:
        return self._rows

    def invariances(self) -> Sequence[Invariance]:
        return self.declared_invariances

    def decision_sites(self) -> DecisionSites | None:
        return None if self.sites is None else self.sites()

    def route(self, ctx: ReplayContext) -> dict[str, Any]:
        description = ctx.row.layer
        built = build_layer(description)
        loader = self.loaders[description["kind"]]
        namespace = ctx.namespace
        mark = namespace.mark()
        prepared = loader(
            built,
            ctx.policy,
            ctx.hardware,
            ctx.row.engine,
            namespace,
            tensors=built.checkpoint_tensors("meta"),
            workspace=ctx.row.engine_facts.get("workspace_elements"),
        )
        prepare_calls = namespace.since(mark)

        def make_input(m: int) -> Any:
            return meta_tensors.empty((m, built.input_size), built.act_dtype, "meta")

        dispatch = replay_calls(
            ctx, prepared, self.token_counts, make_input, gated_m=self.gated_call_m
        )
        return route_from_prepared(prepared, prepare_calls, dispatch)
