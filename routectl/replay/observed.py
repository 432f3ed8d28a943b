"""The observation record: what one engine session saw its layers run, as one JSON file.

The header says what the session declares it is (the category and, when known, the row id it
runs as, or the model scope; its workload, capability, the resolved policy's hash, the native
build's catalogue ops and ABI revisions, its rank); `entries` holds one item per (layer, native
op, scalar plan, token count M, captured in a CUDA graph or eager) with how many calls it
saw. M is None for the calls made while the layer was loaded (its prepare calls); the plan of
a call at M carries `m`, as snapshot rows record dispatch plans, so a record's plans and a
row's compare as they are. The format is `routectl/schemas/observed.schema.json`.

Writing is deterministic (entries sorted, the one serialiser) and atomic (a temp file beside
the target, then `os.replace`). Reading refuses, with one InputError line, anything that is not
a record of this version: bad JSON, a schema violation, an op outside the project's catalogue.
This module never imports torch: `routectl parity` reads records without it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from routectl.errors import InputError
from routectl.io.jsonread import parse_json, read_bytes, shorten
from routectl.io.jsonwrite import dumps_bytes
from routectl.io.output import write_new_synced
from routectl.io.schemas import SCHEMA_VERSION, schema_violation

SCHEMA_NAME = "observed"
WHAT = "observation record"

# (layer name, M or None, captured, op, the plan's sorted items): one entry's identity.
EntryKey = tuple[str, int | None, bool, str, tuple[tuple[str, Any], ...]]


@dataclass(frozen=True)
class Target:
    """The snapshot row a session declares it runs as: its category, and the row id when the
    engine knows it (else the model scope, or nothing: parity finds the row by the rest of
    the header)."""

    category: str | None = None
    row: str | None = None
    model: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"category": self.category, "row": self.row, "model": self.model}


@dataclass(frozen=True)
class NativeBuild:
    """The native namespace a session ran against: the catalogue ops it has and each ABI
    getter's revision (None: the build reports none)."""

    name: str
    ops: tuple[str, ...]
    abi: tuple[tuple[str, int | None], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ops": sorted(self.ops),
            "abi": [{"getter": g, "revision": r} for g, r in sorted(self.abi)],
        }


@dataclass(frozen=True)
class Header:
    routectl: str
    project: str
    target: Target
    workload: Mapping[str, Any]  # EngineConfig.to_json()
    capability: int
    policy_hash: str
    native: NativeBuild
    rank: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "routectl": self.routectl,
            "project": self.project,
            "target": self.target.to_json(),
            "workload": dict(self.workload),
            "capability": self.capability,
            "policy_hash": self.policy_hash,
            "native": self.native.to_json(),
            "rank": self.rank,
        }


@dataclass
class ObservationRecord:
    header: Header
    counts: dict[EntryKey, int] = field(default_factory=dict)

    def entries(self) -> list[dict[str, Any]]:
        return [entry_json(key, count) for key, count in sorted(self.counts.items(), key=_order)]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            **self.header.to_json(),
            "entries": self.entries(),
        }


def _order(item: tuple[EntryKey, int]) -> tuple[Any, ...]:
    (layer, m, captured, op, plan), _ = item
    return (layer, -1 if m is None else m, captured, op, repr(plan))


def entry_json(key: EntryKey, count: int) -> dict[str, Any]:
    layer, m, captured, op, plan = key
    return {
        "layer": layer,
        "m": m,
        "captured": captured,
        "op": op,
        "plan": dict(plan),
        "count": count,
    }


def entry_key(entry: Mapping[str, Any]) -> EntryKey:
    return (
        entry["layer"],
        entry["m"],
        entry["captured"],
        entry["op"],
        tuple(sorted(entry["plan"].items())),
    )


def write_record(path: Path, record: ObservationRecord) -> None:
    """`record` as deterministic JSON, written atomically (never a partial file)."""
    data = dumps_bytes(record.to_json())
    path = Path(path)
    temp = path.with_name(f".{path.name}.routectl-{os.getpid()}-{os.urandom(6).hex()}.tmp")
    try:
        write_new_synced(temp, data)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class ParsedRecord:
    """A record read back: its source, header fields as JSON, entries as JSON."""

    source: str
    header: Mapping[str, Any]
    entries: list[dict[str, Any]]

    @property
    def target(self) -> Mapping[str, Any]:
        return self.header["target"]


def parse_record(data: Any, source: str, known_ops: Iterable[str]) -> ParsedRecord:
    """A parsed document checked as a record of this version whose ops are all `known_ops`
    (the project's catalogue); InputError (one line) otherwise."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: not an {WHAT} (a JSON object)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise InputError(
            f"{source}: {WHAT} schema_version {shorten(version)} is not {SCHEMA_VERSION}"
        )
    problem = schema_violation(SCHEMA_NAME, data)
    if problem is not None:
        raise InputError(f"{source}: {problem}")
    known = set(known_ops)
    for where, op in (
        *((f"entries[{i}].op", e["op"]) for i, e in enumerate(data["entries"])),
        *((f"native.ops[{i}]", op) for i, op in enumerate(data["native"]["ops"])),
    ):
        if op not in known:
            raise InputError(f"{source}: {where}: op {shorten(op)} is not in the native catalogue")
    header = {k: v for k, v in data.items() if k != "entries"}
    return ParsedRecord(source, header, data["entries"])


def read_record(path: Path, known_ops: Iterable[str]) -> ParsedRecord:
    source = f"{WHAT} {path}"
    return parse_record(parse_json(read_bytes(path, WHAT), source), source, known_ops)
