"""Decision coverage: which declared decision sites the replayed rows of the working tree reach
(`routectl coverage`), and the one line `check` and `diff` print when a change adds or removes
reached sites.

A category declares its sites (`Category.decision_sites`); the rows are the fresh rows the
check pipeline replays (through the replay cache), each route walked by the category
(`Category.reached_sites`) and each row's own policy resolved for the variable sites. A site
is then reached (the first row id that reaches it is kept), declared unreachable or
recorded-only, or uncovered. Two more states are failures of the declarations themselves: a
site some row reaches that the category does not declare (`undeclared`: a reason code a
candidate returns without declaring it) and a site declared unreachable or recorded-only that
a row reaches (`stale`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from routectl.category import Category
from routectl.io.schemas import schema_violation
from routectl.project import Project
from routectl.replay.harness import PolicyMemo
from routectl.review.snapshot import Row, SnapshotError, dump_json
from routectl.rows import RowSpec
from routectl.sites import KINDS, VARIABLE_KINDS, Site

COVERAGE_SCHEMA_VERSION = 1
# Site states in the order text output lists them: what fails first.
FAILING_STATES = ("uncovered", "undeclared", "stale")
STATES = (*FAILING_STATES, "unreachable", "recorded-only", "reached")
# How many sites one line names before "+N more".
MAX_NAMED = 3


@dataclass(frozen=True)
class SiteState:
    site: Site
    state: str
    row: str | None = None  # the first row (by id) that reaches it
    reason: str = ""  # an unreachable or recorded-only declaration's reason
    test: str = ""  # a recorded-only declaration's test
    declared_as: str = ""  # a stale site's declaration (unreachable or recorded-only)


@dataclass(frozen=True)
class CategoryCoverage:
    name: str
    declares: bool  # False: the category declares no sites
    rows: int
    sites: tuple[SiteState, ...]

    def count(self, state: str) -> int:
        return sum(1 for s in self.sites if s.state == state)

    @property
    def declared(self) -> int:
        return sum(1 for s in self.sites if s.state != "undeclared")

    @property
    def covered(self) -> int:
        return sum(1 for s in self.sites if s.state in ("reached", "unreachable", "recorded-only"))

    @property
    def failures(self) -> tuple[SiteState, ...]:
        return tuple(s for s in self.sites if s.state in FAILING_STATES)

    @property
    def ok(self) -> bool:
        return self.declares and not self.failures


@dataclass(frozen=True)
class Coverage:
    categories: tuple[CategoryCoverage, ...]

    @property
    def declared(self) -> int:
        return sum(c.declared for c in self.categories)

    @property
    def covered(self) -> int:
        return sum(c.covered for c in self.categories)

    @property
    def percent(self) -> float:
        """Covered (reached or declared) sites per hundred declared; 100 with none declared."""
        return 100.0 * self.covered / self.declared if self.declared else 100.0

    def count(self, state: str) -> int:
        return sum(c.count(state) for c in self.categories)

    @property
    def strict_ok(self) -> bool:
        return all(c.ok for c in self.categories)


def variable_keys(sites: Iterable[Site]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s.subject for s in sites if s.kind in VARIABLE_KINDS))


def reached_sites(
    project: Project,
    category: Category,
    rows: Sequence[Row],
    variables: Sequence[str] = (),
    *,
    policies: PolicyMemo | None = None,
) -> dict[Site, str]:
    """Site -> the first row id (rows in id order) that reaches it: the route's sites as the
    category reads them, and for each of `variables` (field keys) whether the row's own
    resolved policy leaves it at its default or sets it. A row the category does not model
    (a status row) resolves no policy, as replay does not."""
    specs: Mapping[str, RowSpec] = {s.id: s for s in category.rows()} if variables else {}
    memo = policies or PolicyMemo(project)
    first: dict[Site, str] = {}
    for row in sorted(rows, key=lambda r: r["id"]):
        row_id = row["id"]
        for site in category.reached_sites(row["route"]):
            first.setdefault(site, row_id)
        spec = specs.get(row_id)
        if spec is None or spec.status is not None:
            continue
        policy = memo.resolve(spec)
        for key in variables:
            kind = "default" if policy.source(key) == "default" else "set"
            first.setdefault(Site(kind, key), row_id)
    return first


def category_coverage(
    project: Project, category: Category, rows: Sequence[Row]
) -> CategoryCoverage:
    declared = category.decision_sites()
    if declared is None:
        return CategoryCoverage(category.name, False, len(rows), ())
    first = reached_sites(project, category, rows, variable_keys(declared.sites))
    states: list[SiteState] = []
    for site in declared.sites:
        row = first.get(site)
        declaration = declared.declarations.get(site)
        if declaration is not None:
            state = "stale" if row is not None else declaration.state
            states.append(
                SiteState(site, state, row, declaration.reason, declaration.test, declaration.state)
            )
        else:
            states.append(SiteState(site, "reached" if row is not None else "uncovered", row))
    known = set(declared.sites)
    for site in sorted(set(first) - known):
        states.append(SiteState(site, "undeclared", first[site]))
    return CategoryCoverage(category.name, True, len(rows), tuple(states))


def compute_coverage(
    project: Project, categories: Sequence[Category], rows: Mapping[str, Sequence[Row]]
) -> Coverage:
    """The coverage of `categories`, each from its replayed `rows` (by category name)."""
    return Coverage(tuple(category_coverage(project, c, rows[c.name]) for c in categories))


def failure_line(coverage: Coverage, *, strict: bool, fail_under: float | None) -> str | None:
    """The one line `routectl coverage` ends a failed check with (naming the first failing
    sites); None when it passes."""
    failed: list[str] = []
    if strict and not coverage.strict_ok:
        named = [
            f"{c.name}: {s.site.text()} ({s.state})"
            for c in coverage.categories
            for s in c.failures
        ]
        named += [
            f"{c.name}: declares no decision sites" for c in coverage.categories if not c.declares
        ]
        shown = "; ".join(named[:MAX_NAMED]) + ("; ..." if len(named) > MAX_NAMED else "")
        failed.append(f"{len(named)} failing: {shown}")
    if fail_under is not None and coverage.percent < fail_under:
        failed.append(f"{coverage.percent:.1f}% covered, under {fail_under:g}%")
    return "coverage FAILED: " + "; ".join(failed) if failed else None


# --- the review line -------------------------------------------------------------------------


def _sites_of(category: Category, rows: Iterable[Row]) -> set[Site]:
    out: set[Site] = set()
    for row in rows:
        out |= category.reached_sites(row["route"])
    return out


def reached_delta(
    category: Category,
    baseline: Sequence[Row],
    fresh: Sequence[Row],
    moved: Iterable[str],
) -> tuple[list[Site], list[Site]]:
    """(sites reached now and not before, sites reached before and not now) of one
    category, from the rows a comparison moved (`moved`: added, removed or changed ids); the
    rows it did not move are walked only when a moved row gains or loses a site. Only what
    routes record counts here: a variable set by a row's overlay is `coverage`'s alone."""
    moved = set(moved)
    if not moved:
        return [], []
    old = _sites_of(category, (r for r in baseline if r["id"] in moved))
    new = _sites_of(category, (r for r in fresh if r["id"] in moved))
    if old == new:
        return [], []
    common = _sites_of(category, (r for r in fresh if r["id"] not in moved))
    gained = sorted(new - old - common)
    lost = sorted(old - new - common)
    return gained, lost


def _named(sites: Sequence[tuple[str, Site]], more_than_one: bool) -> str:
    shown = [f"{cat}: {s.text()}" if more_than_one else s.text() for cat, s in sites[:MAX_NAMED]]
    extra = f", +{len(sites) - MAX_NAMED} more" if len(sites) > MAX_NAMED else ""
    return ", ".join(shown) + extra


def delta_line(deltas: Mapping[str, tuple[Sequence[Site], Sequence[Site]]]) -> str | None:
    """`coverage: +2 sites reached (...), -1 (... no longer reached)`; None when no category
    gained or lost a reached site."""
    gained = [(c, s) for c, (g, _) in deltas.items() for s in g]
    lost = [(c, s) for c, (_, lo) in deltas.items() for s in lo]
    if not gained and not lost:
        return None
    several = len({c for c, _ in (*gained, *lost)}) > 1
    noun = "site" if len(gained) == 1 else "sites"
    text = f"coverage: +{len(gained)} {noun} reached"
    if gained:
        text += f" ({_named(gained, several)})"
    text += f", -{len(lost)}"
    if lost:
        text += f" ({_named(lost, several)} no longer reached)"
    return text


# --- documents -------------------------------------------------------------------------------


def _state_json(s: SiteState) -> dict[str, Any]:
    return {
        "site": s.site.key,
        "kind": s.site.kind,
        "subject": s.site.subject,
        "code": s.site.code or None,
        "state": s.state,
        "row": s.row,
        "reason": s.reason or None,
        "test": s.test or None,
    }


def _figures(c: CategoryCoverage) -> dict[str, int]:
    return {
        "declared": c.declared,
        "reached": c.count("reached"),
        "unreachable": c.count("unreachable"),
        "recorded_only": c.count("recorded-only"),
        "uncovered": c.count("uncovered"),
        "undeclared": c.count("undeclared"),
        "stale": c.count("stale"),
    }


def coverage_document(coverage: Coverage) -> dict[str, Any]:
    """The JSON document of `routectl coverage --format json` (coverage.schema.json)."""
    return {
        "schema_version": COVERAGE_SCHEMA_VERSION,
        "ok": coverage.strict_ok,
        "percent": round(coverage.percent, 2),
        "totals": {
            "declared": coverage.declared,
            **{
                k: sum(_figures(c)[k] for c in coverage.categories)
                for k in (
                    "reached",
                    "unreachable",
                    "recorded_only",
                    "uncovered",
                    "undeclared",
                    "stale",
                )
            },
        },
        "categories": [
            {
                "name": c.name,
                "declares": c.declares,
                "rows": c.rows,
                **_figures(c),
                "by_kind": {
                    kind: {
                        "declared": sum(
                            1 for s in c.sites if s.site.kind == kind and s.state != "undeclared"
                        ),
                        "reached": sum(
                            1 for s in c.sites if s.site.kind == kind and s.state == "reached"
                        ),
                    }
                    for kind in KINDS
                    if any(s.site.kind == kind for s in c.sites)
                },
                "sites": [_state_json(s) for s in _ordered(c.sites)],
            }
            for c in coverage.categories
        ],
    }


def _ordered(sites: Iterable[SiteState]) -> list[SiteState]:
    kinds = list(KINDS)
    return sorted(sites, key=lambda s: (STATES.index(s.state), kinds.index(s.site.kind), s.site))


def _summary(c: CategoryCoverage) -> str:
    if not c.declares:
        return f"{c.name}: declares no decision sites"
    f = _figures(c)
    text = (
        f"{c.name}: {f['declared']} sites, {f['reached']} reached, {f['unreachable']} "
        f"unreachable, {f['recorded_only']} recorded-only"
    )
    bad = [f"{f[k]} {k}" for k in ("uncovered", "undeclared", "stale") if f[k]]
    return text + (f"; {', '.join(bad)}" if bad else "")


def _site_line(s: SiteState) -> str:
    where = {
        "uncovered": "no row reaches it",
        "undeclared": f"reached by {s.row}, not declared",
        "stale": f"declared {s.declared_as} but reached by {s.row}",
        "unreachable": f"unreachable: {s.reason}",
        "recorded-only": f"recorded-only ({s.test}): {s.reason}",
        "reached": f"reached by {s.row}",
    }[s.state]
    return f"  {s.state:<13} {s.site.text()}  ({where})"


def render_text(coverage: Coverage, *, verbose: bool = False) -> str:
    """Uncovered (and otherwise failing) sites first, then each category's figures; `verbose`
    also lists every declared and reached site."""
    lines: list[str] = []
    for c in coverage.categories:
        failing = _ordered(c.failures)
        if failing:
            lines.append(f"{c.name}:")
            lines.extend(_site_line(s) for s in failing)
    for c in coverage.categories:
        lines.append(_summary(c))
        if verbose:
            lines.extend(
                _site_line(s) for s in _ordered(s for s in c.sites if s.state not in FAILING_STATES)
            )
    lines.append(
        f"coverage: {coverage.covered} of {coverage.declared} declared sites covered "
        f"({coverage.percent:.1f}%): {coverage.count('reached')} reached, "
        f"{coverage.count('unreachable')} unreachable, {coverage.count('recorded-only')} "
        f"recorded-only, {coverage.count('uncovered')} uncovered"
    )
    return "\n".join(lines) + "\n"


def render_markdown(coverage: Coverage) -> str:
    """A table of the per-category figures and a list of the failing sites."""
    lines = [
        "| category | declared | reached | unreachable | recorded-only | uncovered |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in coverage.categories:
        f = _figures(c)
        lines.append(
            f"| {c.name} | {f['declared']} | {f['reached']} | {f['unreachable']} | "
            f"{f['recorded_only']} | {f['uncovered']} |"
        )
    lines.append(
        f"| **total** | {coverage.declared} | {coverage.count('reached')} | "
        f"{coverage.count('unreachable')} | {coverage.count('recorded-only')} | "
        f"{coverage.count('uncovered')} |"
    )
    failing = [(c.name, s) for c in coverage.categories for s in _ordered(c.failures)]
    if failing:
        lines.append("")
        lines.extend(f"- {name}: {s.state} `{s.site.key}`" for name, s in failing)
    return "\n".join(lines) + "\n"


def render_coverage_json(document: dict[str, Any]) -> str:
    """The document as JSON text, checked against coverage.schema.json first."""
    problem = schema_violation("coverage", document)
    if problem is not None:
        raise SnapshotError(f"the coverage document violates its schema: {problem}")
    return dump_json(document)
