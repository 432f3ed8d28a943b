"""The JSON Schemas of the route shapes this project's categories own, one file each beside
this module (`<category module>.route.schema.json`): routectl composes them with its generic
snapshot schema (`routectl.category.Category.route_schema`)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@functools.cache
def route_fragment(module: str) -> dict[str, Any]:
    """The fragment of the category module `module` (its last dotted name): read once."""
    name = module.rsplit(".", 1)[-1]
    data: dict[str, Any] = json.loads((HERE / f"{name}.route.schema.json").read_text())
    return data


__all__ = ["route_fragment"]
