"""`routectl list`: what each category covers and how many rows it has, as JSON and text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from routectl.category import Category
from routectl.io.jsonwrite import dumps
from routectl.io.schemas import SCHEMA_VERSION

PROBE_PREFIX = "edge:"


def category_summary(category: Category, *, with_rows: bool) -> dict[str, Any]:
    """One category for `list --format json`: what it covers and how many rows it has."""
    ids = sorted(spec.id for spec in category.rows())
    probes = [i.removeprefix(PROBE_PREFIX) for i in ids if i.startswith(PROBE_PREFIX)]
    summary: dict[str, Any] = {
        "name": category.name,
        # A category may leave its description out (empty); the list then shows none.
        "description": category.description or None,
        "rows": len(ids),
        "matrix_rows": len(ids) - len(probes),
        "probes": probes,
    }
    if with_rows:
        summary["ids"] = ids
    return summary


def list_json(summaries: Sequence[dict[str, Any]]) -> str:
    return dumps({"schema_version": SCHEMA_VERSION, "categories": list(summaries)})


def list_text(summaries: Sequence[dict[str, Any]]) -> str:
    """One line per category (name, counts, description), then its qualified ids if listed."""
    width = max((len(s["name"]) for s in summaries), default=0)
    lines: list[str] = []
    for s in summaries:
        counts = f"{s['rows']:,} rows ({s['matrix_rows']:,} + {len(s['probes'])} probes)"
        description = f"  {s['description']}" if s["description"] else ""
        lines.append(f"{s['name']:<{width}}  {counts}{description}")
        lines.extend(f"  {s['name']}:{row_id}" for row_id in s.get("ids", ()))
    return "".join(f"{line}\n" for line in lines)
