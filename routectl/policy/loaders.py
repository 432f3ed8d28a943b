"""What an engine needs of a kernel family beyond selection: its loader (select + prepare the
layer's weights through the injected namespace) and how to replay that layer on meta tensors
(checkpoint tensors and the arguments of one apply call of M tokens).

The project names one `LayerLoader` per family (`Project.loaders`); `routectl.engine.startup` loads
through it and the startup report replays through it, so both run the family's own code.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from routectl.errors import InputError
from routectl.policy.loaded import PreparedLayer

# (layer, policy, hardware, engine, namespace, *, tensors=None[, workspace=None]) -> loaded.
LoadFn = Callable[..., PreparedLayer]


@dataclass(frozen=True)
class LayerLoader:
    load: LoadFn
    # layer -> its checkpoint tensors on the meta device (None: the loader builds its own).
    meta_tensors: Callable[[Any], Any]
    # (layer, loaded layer, M) -> the meta arguments of one apply call of M tokens.
    call_inputs: Callable[[Any, PreparedLayer, int], tuple[Any, ...]]
    # loaded layer -> what its last apply call chose: {"stages": [...], "rejected": [verdict
    # JSON, ...]}; None for families whose kernel serves every call the same way.
    last_call: Callable[[PreparedLayer], Mapping[str, Any] | None] | None = None
    # Whether `load` takes `workspace=` (FP16 elements the engine can lend the layer).
    takes_workspace: bool = False
    # (layer, loaded layer) -> what its calls read besides its decision (its shape and
    # loaded state, without the name or index an engine gives each copy): the family's
    # promise that two layers with equal call shapes and equal decisions dispatch every call
    # alike, so the startup report replays the calls of one of them (MoE models repeat one
    # layer 40-48 times). None (or a None shape): every layer's calls are replayed.
    call_shape: Callable[[Any, PreparedLayer], Hashable | None] | None = None

    def load_kwargs(self, family: str, tensors: Any, workspace: int | None) -> dict[str, Any]:
        """The keyword arguments of `load`: `workspace` only where the family takes one."""
        kwargs: dict[str, Any] = {"tensors": tensors}
        if workspace is not None:
            if not self.takes_workspace:
                raise InputError(f"kernel family {family!r} takes no workspace")
            kwargs["workspace"] = workspace
        return kwargs
