"""The snapshot category base: what routectl asks of every category, with defaults for what a
category may leave out.

A category names its rows and replays one of them into a route; everything else routectl asks
of it (a description for `routectl list`, whole-model figures for `explain`, its own matrix
label, reason and subject, its own explain lines, the JSON Schema of its own route shape) has
a default here, so routectl calls the method and never looks a hook up by name. A category
that owns a route shape says so in two places: `explain_lines` (how `routectl explain` prints
the keys it adds) and `route_schema` (the shape's JSON Schema, which routectl composes with
its generic snapshot schema).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from routectl.rows import Invariance, RowSpec
from routectl.sites import DecisionSites, Site, route_sites

Route = Mapping[str, Any]


class Category:
    """Base class of a snapshot category. Subclasses set `name` and `basis` (class attributes
    or dataclass fields) and implement `rows` and `route`."""

    name: str
    # What the rows prove and do not prove (the snapshot's `basis`).
    basis: str
    # One line for `routectl list` and shell completion; empty: none shown.
    description: str = ""
    # What a matrix cell shows when `matrix_label` gives no label (a policy category selects
    # no kernel: it says what it shows instead).
    matrix_subject: str = "kernel"
    # Speculative methods this category's rows use beyond routectl's own (`SPEC_METHODS`): its
    # rows' engines are built with `EngineConfig(declared_methods=...)` naming them.
    spec_methods: tuple[str, ...] = ()

    def rows(self) -> Sequence[RowSpec]:
        """Every row of the category (matrix rows, then edge probes), ids unique."""
        raise NotImplementedError(f"category {self.name!r} declares no rows")

    def route(self, ctx: Any) -> dict[str, Any]:
        """Replay one row (`ctx` is the replay harness's ReplayContext) into its route; a
        fail-closed load raises SelectionError, which the harness turns into an error row."""
        raise NotImplementedError(f"category {self.name!r} replays no route")

    def model_totals(self, row: RowSpec, route: Route) -> Mapping[str, int] | None:
        """Whole-model figures derived from one row (`explain`): `{"layers": N, figure:
        value, ...}`, each figure summed over the model's N layers of the row's kind; None:
        the category has none."""
        return None

    def matrix_label(self, route: Route) -> tuple[str, str] | None:
        """(label, kind) of a route's matrix cell; None: the generic label (kernel, status,
        error, stages or layers) from the route's shape."""
        return None

    def matrix_reason(self, route: Route) -> str | None:
        """The one line that decided an edge probe in the matrix; None: the generic one."""
        return None

    def explain_lines(self, route: dict[str, Any]) -> list[str]:
        """`routectl explain` lines for the route keys this category adds to the generic
        shapes, popping each key it renders from `route` (keys left over are printed as
        JSON). The default renders none."""
        return []

    def route_schema(self) -> Mapping[str, Any] | None:
        """The JSON Schema of the route shape this category owns, if it adds one to the
        generic shapes (selected, error, status): `{"route": SCHEMA, "$defs": {...}}`, where
        SCHEMA and the `$defs` may `$ref` routectl's `#/$defs/...` (verdict, bytes, call,
        ...). routectl composes every category's fragment into the snapshot schema it
        validates the project's snapshots with (`Project.snapshot_schema`). None: none."""
        return None

    # --- declared invariances (routectl.review.invariances verifies them) -----------------

    def invariances(self) -> Sequence[Invariance]:
        """The matrix dimensions this category states never change some row fields (data:
        `routectl.rows.Invariance`). `routectl check` verifies each on every run and the
        route matrix collapses them; the default declares none."""
        return ()

    # --- decision coverage (`routectl coverage`, docs/coverage.md) -------------------------
    # Kept as one block: the category's declared decision sites and what one route reaches.

    def decision_sites(self) -> DecisionSites | None:
        """Every decision site this category's rows should reach (candidates with the reason
        codes each can return, fallbacks, variables, qualification rules, native ops) and the
        sites declared unreachable or recorded-only; None: the category declares none."""
        return None

    def reached_sites(self, route: Route) -> set[Site]:
        """The sites one replayed route reaches. The default walks routectl's generic shapes
        (`routectl.sites.route_sites`); a category whose own route shape records rules adds
        them. Variables are not read from routes: routectl resolves each row's policy."""
        return route_sites(route)


__all__ = ["Category", "Route"]
