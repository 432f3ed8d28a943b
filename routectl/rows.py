"""Row specifications: matrix rows and edge probes declared as data."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from routectl.workload import EngineConfig

# The first slot also takes `-` and the spec slot digits: the attention category's ids
# (`decode-h256g6-none-eager/float16/tp1/dflash2/c1/q4`) name a stage, head, GQA, mask and
# capture there, and a speculative method of its own (docs/contracts/attention.md §6.1). Every
# id of the earlier grammar is still one of this grammar.
# Full-match, as the schemas' patterns are: `$` alone also matches before a final newline in
# Python (not in ECMA-262 or jsonschema-rs), so "$(?!\n)" closes every pattern.
ROW_ID = re.compile(
    r"^(?:(edge:[a-z0-9_]+|[a-z0-9_-]+/[a-z0-9_]+/tp[0-9]+/[a-z0-9]+/c[0-9]+/q[0-9]+))$(?!\n)"
)


@dataclass(frozen=True)
class NativeChanges:
    """How a row's native namespace differs from a full build."""

    remove: tuple[str, ...] = ()
    abi: tuple[tuple[str, int], ...] = ()  # (getter op, revision)


@dataclass(frozen=True)
class RowSpec:
    id: str
    model: str
    engine: EngineConfig
    capability: int
    layer: Mapping[str, Any] = field(default_factory=dict)  # family-specific layer description
    variables: tuple[tuple[str, str], ...] = ()  # the row's own environment overlay
    config: Mapping[str, Any] = field(default_factory=dict)  # typed KernelConfig values
    native: NativeChanges = NativeChanges()
    # Engine-double facts beyond the configuration (e.g. workspace availability).
    engine_facts: Mapping[str, Any] = field(default_factory=dict)
    # Set for cells a category does not model: (code, message).
    status: tuple[str, str] | None = None


@dataclass(frozen=True)
class Probe:
    """An edge probe: a named change of a base row, declared as data."""

    name: str
    base: str  # base row id
    variables: Mapping[str, str] = field(default_factory=dict)
    layer: Mapping[str, Any] = field(default_factory=dict)
    engine: Mapping[str, Any] = field(default_factory=dict)  # EngineConfig field overrides
    engine_facts: Mapping[str, Any] = field(default_factory=dict)
    capability: int | None = None
    remove_ops: tuple[str, ...] = ()
    abi: Mapping[str, int] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    doc: str = ""

    @property
    def id(self) -> str:
        return f"edge:{self.name}"

    def apply(self, base: RowSpec) -> RowSpec:
        variables = dict(base.variables)
        variables.update(self.variables)
        abi = dict(base.native.abi)
        abi.update(self.abi)
        return replace(
            base,
            id=self.id,
            engine=replace(base.engine, **self.engine) if self.engine else base.engine,
            capability=self.capability if self.capability is not None else base.capability,
            layer={**base.layer, **self.layer},
            variables=tuple(sorted(variables.items())),
            config={**base.config, **self.config},
            native=NativeChanges(
                tuple(sorted({*base.native.remove, *self.remove_ops})), tuple(sorted(abi.items()))
            ),
            engine_facts={**base.engine_facts, **self.engine_facts},
        )
