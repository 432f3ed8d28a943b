"""The strict start-up contract: a deployment profile (`routectl/schemas/profile.schema.json`)
names, per layer-name pattern (a glob, e.g. `model.layers.*.mlp.experts`), the kernel class
the matching layers must select, or "no fallback" (no load-time fallback of any policy
field). `routectl.start(..., profile=...)` keeps it; `EngineSession.verify_profile()` refuses
the start-up, one `ContractError` (code `contract_mismatch`) naming every mismatch, once the
engine has loaded its layers; the startup report carries each requirement against the
selection. `routectl explain ROW --profile` and `routectl config --profile` check a profile
against a snapshot row without an engine (`check_route`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from routectl.errors import InputError, SelectionError
from routectl.io.jsonread import read_json_file
from routectl.io.schemas import schema_violation

SCHEMA_NAME = "profile"
NO_FALLBACK = "no fallback"
CONTRACT_MISMATCH = "contract_mismatch"


class ContractError(SelectionError):
    """The selection does not meet the deployment profile: every mismatch in one message."""

    def __init__(self, mismatches: Sequence[str]) -> None:
        super().__init__(
            CONTRACT_MISMATCH,
            f"the selection does not meet the deployment profile: {'; '.join(mismatches)}",
        )
        self.mismatches = tuple(mismatches)


@dataclass(frozen=True)
class Profile:
    source: str
    routes: tuple[tuple[str, tuple[str, ...]], ...]  # (layer pattern, requirements)


def parse_profile(data: Any, source: str) -> Profile:
    problem = schema_violation(SCHEMA_NAME, data)
    if problem is not None:
        raise InputError(f"deployment profile {source}: {problem}")
    routes = tuple(
        (pattern, (value,) if isinstance(value, str) else tuple(value))
        for pattern, value in sorted(data["routes"].items())
    )
    return Profile(source, routes)


def load_profile(value: Profile | Mapping[str, Any] | Path | str) -> Profile:
    """A profile from a Profile, a parsed document or a JSON file's path."""
    if isinstance(value, Profile):
        return value
    if isinstance(value, Mapping):
        return parse_profile(dict(value), "(mapping)")
    path = Path(value)
    return parse_profile(read_json_file(path, "deployment profile"), str(path))


@dataclass(frozen=True)
class Requirement:
    """One requirement of the profile judged for one layer: what it requires, what was
    selected, and whether that meets it."""

    pattern: str
    layer: str
    required: str
    selected: str
    ok: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "layer": self.layer,
            "required": self.required,
            "selected": self.selected,
            "ok": self.ok,
        }

    def mismatch(self) -> str:
        return f"{self.layer}: requires {self.required}, selected {self.selected}"


def _judge(
    pattern: str, layer: str, required: str, kernel: str | None, fallbacks: Sequence[str]
) -> Requirement:
    if required == NO_FALLBACK:
        selected = f"fallback of {', '.join(fallbacks)}" if fallbacks else NO_FALLBACK
        return Requirement(pattern, layer, required, selected, not fallbacks)
    return Requirement(pattern, layer, required, kernel or "no kernel", kernel == required)


def check_layers(
    profile: Profile, layers: Iterable[tuple[str, str | None, Sequence[str]]]
) -> tuple[list[Requirement], list[str]]:
    """Every requirement judged for each (layer name, selected kernel, fallback fields) it
    matches, and the mismatches (a pattern matching no layer is one)."""
    layers = list(layers)
    judged: list[Requirement] = []
    mismatches: list[str] = []
    for pattern, requirements in profile.routes:
        matched = [layer for layer in layers if fnmatch.fnmatchcase(layer[0], pattern)]
        if not matched:
            mismatches.append(f"{pattern}: matches no loaded layer")
        for name, kernel, fallbacks in matched:
            for required in requirements:
                verdict = _judge(pattern, name, required, kernel, fallbacks)
                judged.append(verdict)
                if not verdict.ok:
                    mismatches.append(verdict.mismatch())
    return judged, mismatches


def check_route(
    profile: Profile, layer: str, route: Mapping[str, Any]
) -> tuple[list[Requirement], list[str]]:
    """A snapshot row's route (its `kernel`, `fallbacks`; an error row selects no kernel)
    checked as the one layer `layer`."""
    fallbacks = [f["field"] for f in route.get("fallbacks", ())]
    return check_layers(profile, [(layer, route.get("kernel"), fallbacks)])
