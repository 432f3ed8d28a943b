"""The `--profile` option of `routectl explain` and `routectl config`: a deployment profile
(`routectl.engine.profile`) judged against one snapshot row, without an engine."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click


def profile_option() -> Any:
    return click.option(
        "--profile",
        "profile_path",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="Check a deployment profile (routectl/schemas/profile.schema.json) against the "
        "row: exit 1 when its selection does not meet it.",
    )


def profile_verdict(
    profile_path: Path, qualified_id: str, layer: str, route: Mapping[str, Any]
) -> tuple[dict[str, Any], str]:
    """A profile judged against one row's route (the row's layer named as the engine names
    it): the JSON verdict and its text."""
    from routectl.engine.profile import check_route, load_profile

    profile = load_profile(profile_path)
    judged, mismatches = check_route(profile, layer, route)
    document = {
        "source": profile.source,
        "row": qualified_id,
        "layer": layer,
        "requirements": [r.to_json() for r in judged],
        "mismatches": mismatches,
    }
    met = "met" if not mismatches else "NOT met"
    lines = [f"deployment profile {profile.source} against {qualified_id} ({layer}): {met}"]
    lines.extend(
        f"  required {r.required} ({r.pattern}), selected {r.selected}: "
        f"{'ok' if r.ok else 'MISMATCH'}"
        for r in judged
    )
    lines.extend(f"  mismatch: {m}" for m in mismatches)
    return document, "\n".join(lines) + "\n"


def row_layer_name(category: str, spec: Any) -> str:
    """The name an engine gives a row's layer: its prefix, else `<category>#0`."""
    prefix = spec.layer.get("prefix") if isinstance(spec.layer, Mapping) else None
    return str(prefix) if prefix else f"{category}#0"
