"""Row specifications: matrix rows and edge probes declared as data."""

from __future__ import annotations

import functools
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


# --- declared invariances ------------------------------------------------------------------

# The dimensions of a matrix row id (`model/kv/tpN/spec/cN/qN`), in id order.
MATRIX_DIMENSIONS = ("model", "kv", "tp", "spec", "c", "q")


@dataclass(frozen=True)
class Invariance:
    """A category's statement that some matrix dimensions never change some row fields:
    any two matrix rows that differ only in `dimensions` have equal values at every path of
    `fields` (dotted, from the row: `route.kernel`; `*` stands for every key of a mapping or
    item of a list, `route.layers.*.kernel`). `routectl check` verifies it on every run; the
    route matrix collapses the dimensions it declares. `why` says what makes it true."""

    name: str
    dimensions: tuple[str, ...]
    fields: tuple[str, ...]
    why: str = ""

    def __post_init__(self) -> None:
        unknown = [d for d in self.dimensions if d not in MATRIX_DIMENSIONS]
        if unknown or not self.dimensions or not self.fields:
            raise ValueError(
                f"invariance {self.name!r} needs dimensions among {MATRIX_DIMENSIONS} and at "
                f"least one field (got dimensions {self.dimensions}, fields {self.fields})"
            )

    def covers(self, path: str) -> bool:
        """Whether a change path (`route.dispatch[M=8,0].plan.m`, as the review spells it)
        lies at or below one of the declared fields (`*`: one key or list item)."""
        return any(_field_pattern(f).match(path) for f in self.fields)

    @property
    def statement(self) -> str:
        """`kv, c and q never change route.kernel or route.dispatch`."""
        verb = "changes" if len(self.dimensions) == 1 else "change"
        return f"{_listed(self.dimensions, 'and')} never {verb} {_listed(self.fields, 'or')}"


# One key or item of a change path, as `format_path` and `change_path` spell it: `.name`, a
# JSON-quoted key `["a]b"]` (its text may hold `]`, `.` or an escaped quote), or a bracketed
# index or item key `[0]`, `[M=8,0]`.
_ONE_PART = r'(?:\.[^.\[]+|\["(?:[^"\\]|\\.)*"\]|\[[^\]]*\])'


@functools.cache
def _field_pattern(declared: str) -> re.Pattern[str]:
    parts = declared.split(".")
    text = re.escape(parts[0])
    for part in parts[1:]:
        text += _ONE_PART if part == "*" else r"\." + re.escape(part)
    return re.compile(text + r"(?=$|[.\[])")


def _listed(items: tuple[str, ...], word: str) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {word} {items[-1]}"
