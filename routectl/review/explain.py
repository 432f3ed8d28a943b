"""`routectl explain`'s document and text: why one row routes where it does (its inputs, its
policy with sources, every candidate's verdict, the kernel, layout, bytes, fallbacks and the
native calls), found by a bare or qualified row id."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from routectl.category import Category
from routectl.errors import InputError
from routectl.io.jsonread import shorten
from routectl.policy.resolve import ResolvedPolicy
from routectl.policy.text import policy_document, value_lines
from routectl.project import Project
from routectl.reasons import reason_text
from routectl.replay.harness import find_row, replay_row
from routectl.review.compare import split_id
from routectl.review.snapshot import plain_rows
from routectl.rows import RowSpec
from routectl.suggest import closest


def explain(
    project: Project, row_id: str, category_name: str | None = None, *, all_policy: bool = False
) -> dict[str, Any]:
    """The explain document of one row, replayed now."""
    category, spec = resolve_row(project, row_id, category_name)
    row, policy = replay_row(project, category, spec)
    sections = None if all_policy else project.policy_sections(category)
    return explain_document(category, spec, plain_rows([row])[0], policy, sections)


def resolve_row(
    project: Project, row_id: str, category_name: str | None
) -> tuple[Category, RowSpec]:
    names = [c.name for c in project.categories]
    qualifier, bare = split_id(row_id, names)
    if category_name is not None:
        category = project.category(category_name)
        if qualifier is not None and qualifier != category.name:
            raise InputError(f"{row_id} is qualified by {qualifier}, but -c names {category.name}")
        return category, find_row(category, bare)
    if qualifier is not None:
        category = project.category(qualifier)
        return category, find_row(category, bare)
    holders = [(c, s) for c in project.categories for s in c.rows() if s.id == bare]
    if not holders:
        every = {s.id: c.name for c in project.categories for s in c.rows()}
        close = closest(bare, every, n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise InputError(
            f"unknown row id {shorten(bare)}: no category has it{hint} "
            f"(routectl list --rows shows every id)"
        )
    if len(holders) > 1:
        raise InputError(
            f"row id {shorten(bare)} is in several categories "
            f"({', '.join(c.name for c, _ in holders)}): pass -c CATEGORY or "
            f"qualify it as CATEGORY:{bare}"
        )
    return holders[0]


def explain_document(
    category: Category,
    spec: RowSpec,
    row: dict[str, Any],
    policy: ResolvedPolicy | None,
    sections: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The explain document of one replayed row; `sections`: the policy sections shown
    (None: every section)."""
    return {
        "category": category.name,
        "id": f"{category.name}:{spec.id}",
        "inputs": {
            "model": spec.model,
            "capability": spec.capability,
            "engine": spec.engine.to_json(),
            "variables": dict(spec.variables),
            "native": {"remove": list(spec.native.remove), "abi": dict(spec.native.abi)},
        },
        "policy": None if policy is None else policy_document(policy, sections),
        "route": row["route"],
        # Whole-model figures a category can derive from a row (e.g. MoE bytes over every
        # MoE layer of the model): None where the category has none.
        "model_totals": category.model_totals(spec, row["route"]),
    }


def _count(value: Any) -> str:
    """Byte counts, with thousands separators wherever explain prints them."""
    return (
        f"{value:,}"
        if isinstance(value, int) and not isinstance(value, bool)
        else json.dumps(value)
    )


def _byte_lines(sizes: Mapping[str, Any], prefix: str = "") -> list[str]:
    lines: list[str] = []
    for name, size in sizes.items():
        if isinstance(size, Mapping):
            lines.extend(_byte_lines(size, f"{prefix}{name} "))
        else:
            lines.append(f"  {prefix}{name}: {_count(size)}")
    return lines


def _no_dispatch_reason(
    route: Mapping[str, Any], error: Mapping[str, Any] | None, status: Mapping[str, Any] | None
) -> str:
    """Why a row recorded no native call."""
    if error is not None:
        return "the layer fails closed at load: nothing is prepared or dispatched"
    if status is not None and not route.get("kernel"):
        return f"no kernel serves this row ({status['message']})"
    kernel = route.get("kernel")
    if kernel:
        return f"{kernel} makes no call to a catalogued native op at the replayed token counts"
    return "no kernel was chosen"


def _plan_text(call: Mapping[str, Any]) -> str:
    plan = call.get("plan", {})
    return "  ".join([str(call.get("op")), *(f"{k}={json.dumps(v)}" for k, v in plan.items())])


def _verdict_lines(verdicts: Sequence[Mapping[str, Any]], kernel: Any) -> list[str]:
    if not verdicts:
        return ["candidates: none"]
    width = max(len(str(v["name"])) for v in verdicts)
    lines = ["candidates (priority order):"]
    for v in verdicts:
        if not v["ok"]:
            state_text = f"rejected  {reason_text(v['code'], v['message'])}"
        elif v["name"] == kernel:
            state_text = "chosen"
        else:
            state_text = "ok, not needed" if v["not_needed"] else "ok"
        lines.append(f"  {v['name']:<{width}}  {state_text}")
    return lines


def explain_text(document: Mapping[str, Any], category: Category) -> str:
    """The explain document as text: the generic route shapes here, the keys `category` adds
    by its own `explain_lines`, any key left over as JSON."""
    inputs = document["inputs"]
    engine = inputs["engine"]
    lines = [
        f"row {document['id']}",
        f"model {inputs['model']}, capability {inputs['capability']}",
        "engine " + " ".join(f"{k}={json.dumps(v)}" for k, v in engine.items()),
    ]
    if inputs["variables"]:
        lines.append("variables " + " ".join(f"{k}={v}" for k, v in inputs["variables"].items()))
    native = inputs["native"]
    if native["remove"] or native["abi"]:
        abi = ", ".join(f"{op}={rev}" for op, rev in native["abi"].items()) or "default"
        lines.append(
            f"native build: removed {', '.join(native['remove']) or 'none'}; ABI revisions {abi}"
        )
    policy = document["policy"]
    if policy is not None:
        scope = (
            "every section"
            if policy["sections"] is None
            else f"sections {', '.join(policy['sections'])} and engine-wide; --all-policy "
            f"shows every section"
        )
        lines.append(f"policy (value, source; {scope}):")
        lines.extend(value_lines(policy["values"]))
        lines.extend(f"  warning: {w}" for w in policy["warnings"])
    route = dict(document["route"])
    status = route.pop("status", None)
    error = route.pop("error", None)
    no_dispatch = _no_dispatch_reason(route, error, status)
    if error is not None:
        lines.append(f"error {reason_text(error['code'], error['message'])}")
    if "verdicts" in route:
        lines.extend(_verdict_lines(route.pop("verdicts"), route.get("kernel")))
    if "kernel" in route:
        lines.append(f"kernel: {route.pop('kernel') or 'none'}")
    if status is not None:
        lines.append(f"status {reason_text(status['code'], status['message'])}")
    if "prepared_layout" in route:
        lines.append(f"prepared layout: {route.pop('prepared_layout') or 'none'}")
    for key in ("capability", "fallback"):
        if key in route:
            lines.append(f"{key}: {json.dumps(route.pop(key))}")
    if "flags" in route:
        flags = route.pop("flags")
        lines.append(
            "flags: " + (", ".join(f"{k}={json.dumps(v)}" for k, v in flags.items()) or "none")
        )
    if "fallbacks" in route:
        fallbacks = route.pop("fallbacks")
        lines.append("fallbacks:" + ("" if fallbacks else " none"))
        lines.extend(
            f"  {f['field']}: requested {json.dumps(f['requested'])}, effective "
            f"{json.dumps(f['effective'])} ({f['reason']})"
            for f in fallbacks
        )
    if "bytes" in route:
        sizes = dict(route.pop("bytes"))
        lines.append(f"bytes: total {_count(sizes.pop('total', '?'))}")
        lines.extend(
            _byte_lines({"tensor": sizes.pop("tensors", {}), "scratch": sizes.pop("scratch", {})})
        )
        lines.extend(_byte_lines(sizes))
    for key in ("prepare", "dispatch"):
        calls = route.pop(key, [])
        if calls:
            lines.append(f"{key}:")
            lines.extend(f"  {_plan_text(call)}" for call in calls)
        elif key == "dispatch":
            lines.append(f"dispatch: none ({no_dispatch})")
        else:
            lines.append("prepare: none")
    lines.extend(category.explain_lines(route))
    # Route keys neither this renderer nor the category renders still show.
    lines.extend(f"{k}: {json.dumps(v, sort_keys=True)}" for k, v in route.items())
    totals = document.get("model_totals")
    if totals:
        rest = {k: v for k, v in totals.items() if k != "layers"}
        lines.append(
            f"model totals per rank over {totals['layers']} layers: "
            + ", ".join(f"{k} {v:,}" for k, v in rest.items())
        )
    return "\n".join(lines) + "\n"
