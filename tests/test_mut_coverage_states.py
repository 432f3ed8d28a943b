"""Decision coverage on a hand-made category (`routectl.review.coverage`; docs/coverage.md):
every site state at once and every figure, line and document field derived from them.

test_coverage.py proves the project's own categories pass and plants one failure at a time in
the AWQ category; these tests give one small category a site in each state (reached,
uncovered, unreachable, recorded-only, stale, undeclared; a variable at its default and set),
a status row and a row the category does not list, and compare whole results: each site's
state and first row (rows by id; a status row resolves no policy), the figures per state and
kind, the percent, the JSON document, the text (failing sites first, by state then kind), the
Markdown table, the strict and `--fail-under` failure line at both sides of its bounds, and
the review's one-line delta. Written for issue 28's mutation run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from policies import PROJECT
from routectl.category import Category
from routectl.review.coverage import (
    CategoryCoverage,
    Coverage,
    category_coverage,
    compute_coverage,
    coverage_document,
    delta_line,
    failure_line,
    reached_delta,
    reached_sites,
    render_coverage_json,
    render_markdown,
    render_text,
    variable_keys,
)
from routectl.review.snapshot import SnapshotError
from routectl.rows import RowSpec
from routectl.sites import DecisionSites, Site, recorded_only, unreachable

AWQ_SPECS = {s.id: s for s in PROJECT.category("sm70-awq-linear").rows()}
# Real AWQ row specs, for their policies: the base row leaves sm70_awq.enabled at its
# default, edge:turbo_off sets it through VLLM_SM70_AWQ_TURBOMIND; the status row is a cell
# the category does not model.
STATUS = "27b_dflash2_nvfp4/float16/tp2/none/c1/q4096"
BASE = "35b_a3b_awq/float16/tp2/none/c1/q4096"
OFF = "edge:turbo_off"
FIELD = "sm70_awq.enabled"

CHOSEN = Site("chosen", "K1")
REASON = Site("reason", "K2", "too_small")
UNCOVERED = Site("op", "never_op")
UNREACHABLE = Site("fallback", "f.x")
RECORDED = Site("chosen", "K3")
STALE = Site("op", "op_a")
DEFAULT = Site("default", FIELD)
SET = Site("set", FIELD)
UNDECLARED = (Site("op", "op_b"), Site("rejected", "K2"))  # sorted
DECLARED = DecisionSites(
    (CHOSEN, REASON, UNCOVERED, UNREACHABLE, RECORDED, STALE, DEFAULT, SET),
    {
        UNREACHABLE: unreachable("no row can"),
        RECORDED: recorded_only("proved elsewhere", "tests/test_x.py::test_y"),
        STALE: unreachable("planted"),
    },
)


class Toy(Category):
    """A category of given specs and sites; routes walked by routectl's generic shapes."""

    basis = "hand-made"

    def __init__(self, name: str, specs: Sequence[RowSpec], sites: DecisionSites | None) -> None:
        self.name = name
        self._specs = specs
        self._sites = sites

    def rows(self) -> Sequence[RowSpec]:
        return self._specs

    def decision_sites(self) -> DecisionSites | None:
        return self._sites


TOY = Toy("toy", [AWQ_SPECS[i] for i in (STATUS, BASE, OFF)], DECLARED)
BARE = Toy("bare", [], None)
ROWS: list[dict[str, Any]] = [
    {
        "id": OFF,
        "route": {
            "kernel": "K1",
            "verdicts": [
                {"name": "K2", "ok": False, "code": "too_small"},
                {"name": "K1", "ok": True},
            ],
            "prepare": [{"op": "op_b", "plan": {}}],
        },
    },
    {"id": STATUS, "route": {"status": "not_applicable"}},
    {
        "id": BASE,
        "route": {
            "kernel": "K1",
            "verdicts": [{"name": "K1", "ok": True}],
            "dispatch": [{"op": "op_a", "plan": {}}],
        },
    },
]


@pytest.fixture(scope="module")
def coverage() -> Coverage:
    return compute_coverage(PROJECT, [TOY, BARE], {"toy": ROWS, "bare": [ROWS[0]]})


def test_reached_sites_keep_the_first_row_by_id_and_resolve_no_status_row() -> None:
    assert variable_keys(DECLARED.sites) == (FIELD,)
    assert reached_sites(PROJECT, TOY, ROWS, (FIELD,)) == {
        CHOSEN: BASE,  # BASE sorts before OFF, which reaches it too
        STALE: BASE,
        DEFAULT: BASE,  # the status row (first by id) resolves no policy
        REASON: OFF,
        Site("rejected", "K2"): OFF,
        Site("op", "op_b"): OFF,
        SET: OFF,
    }
    # Without variables asked, only what the routes record.
    assert reached_sites(PROJECT, TOY, ROWS) == {
        CHOSEN: BASE,
        STALE: BASE,
        REASON: OFF,
        Site("rejected", "K2"): OFF,
        Site("op", "op_b"): OFF,
    }


def test_each_site_gets_its_state_row_and_declaration(coverage: Coverage) -> None:
    toy, bare = coverage.categories
    got = [(s.site, s.state, s.row, s.reason, s.test, s.declared_as) for s in toy.sites]
    assert got == [
        (CHOSEN, "reached", BASE, "", "", ""),
        (REASON, "reached", OFF, "", "", ""),
        (UNCOVERED, "uncovered", None, "", "", ""),
        (UNREACHABLE, "unreachable", None, "no row can", "", "unreachable"),
        (
            RECORDED,
            "recorded-only",
            None,
            "proved elsewhere",
            "tests/test_x.py::test_y",
            "recorded-only",
        ),
        (STALE, "stale", BASE, "planted", "", "unreachable"),
        (DEFAULT, "reached", BASE, "", "", ""),
        (SET, "reached", OFF, "", "", ""),
        (UNDECLARED[0], "undeclared", OFF, "", "", ""),
        (UNDECLARED[1], "undeclared", OFF, "", "", ""),
    ]
    assert (toy.name, toy.declares, toy.rows) == ("toy", True, 3)
    assert (toy.declared, toy.covered) == (8, 6)
    assert [s.site for s in toy.failures] == [UNCOVERED, STALE, *UNDECLARED]
    assert not toy.ok
    assert (bare.name, bare.declares, bare.rows, bare.sites) == ("bare", False, 1, ())
    assert not bare.ok  # declaring nothing fails strict
    assert (coverage.declared, coverage.covered, coverage.percent) == (8, 6, 75.0)
    assert not coverage.strict_ok
    assert [coverage.count(s) for s in ("reached", "stale", "undeclared")] == [4, 1, 2]


def test_a_category_passes_strict_with_every_site_covered() -> None:
    refused = {"verdicts": [{"name": "K2", "ok": False, "code": "too_small"}]}
    rows = [{"id": OFF, "route": refused}, {"id": STATUS, "route": {}}]
    rejected = Site("rejected", "K2")
    sites = DecisionSites((REASON, rejected, UNREACHABLE, SET), {UNREACHABLE: unreachable("why")})
    result = category_coverage(PROJECT, Toy("ok", TOY.rows(), sites), rows)
    assert [(s.site, s.state, s.row) for s in result.sites] == [
        (REASON, "reached", OFF),
        (rejected, "reached", OFF),
        (UNREACHABLE, "unreachable", None),
        (SET, "reached", OFF),
    ]
    assert result.ok and result.failures == ()
    whole = Coverage((result,))
    assert whole.strict_ok and whole.percent == 100.0
    assert Coverage(()).percent == 100.0 and Coverage(()).strict_ok
    # Nothing failing: the category's figures and nothing after them.
    assert (
        "ok: 4 sites, 3 reached, 1 unreachable, 0 recorded-only" in render_text(whole).splitlines()
    )


def test_the_document_counts_every_state_and_kind(coverage: Coverage) -> None:
    document = coverage_document(coverage)
    figures = {
        "declared": 8,
        "reached": 4,
        "unreachable": 1,
        "recorded_only": 1,
        "uncovered": 1,
        "undeclared": 2,
        "stale": 1,
    }
    zero = dict.fromkeys(figures, 0)

    def state(site: Site, s: str, row: str | None, reason: str | None = None,
              test: str | None = None) -> dict[str, Any]:  # fmt: skip
        code = site.code or None
        return {"site": site.key, "kind": site.kind, "subject": site.subject, "code": code,
                "state": s, "row": row, "reason": reason, "test": test}  # fmt: skip

    assert document == {
        "schema_version": 1,
        "ok": False,
        "percent": 75.0,
        "totals": figures,
        "categories": [
            {
                "name": "toy",
                "declares": True,
                "rows": 3,
                **figures,
                "by_kind": {
                    "reason": {"declared": 1, "reached": 1},
                    "chosen": {"declared": 2, "reached": 1},
                    "rejected": {"declared": 0, "reached": 0},
                    "fallback": {"declared": 1, "reached": 0},
                    "default": {"declared": 1, "reached": 1},
                    "set": {"declared": 1, "reached": 1},
                    "op": {"declared": 2, "reached": 0},
                },
                # Failing first (uncovered, undeclared, stale), then declared, then reached;
                # within a state by kind (KINDS order), then site.
                "sites": [
                    state(UNCOVERED, "uncovered", None),
                    state(UNDECLARED[1], "undeclared", OFF),
                    state(UNDECLARED[0], "undeclared", OFF),
                    state(STALE, "stale", BASE, "planted"),
                    state(UNREACHABLE, "unreachable", None, "no row can"),
                    state(
                        RECORDED,
                        "recorded-only",
                        None,
                        "proved elsewhere",
                        "tests/test_x.py::test_y",
                    ),
                    state(REASON, "reached", OFF),
                    state(CHOSEN, "reached", BASE),
                    state(DEFAULT, "reached", BASE),
                    state(SET, "reached", OFF),
                ],
            },
            {"name": "bare", "declares": False, "rows": 1, **zero, "by_kind": {}, "sites": []},
        ],
    }
    text = render_coverage_json(document)
    assert text.startswith("{") and '"percent": 75.0' in text
    with pytest.raises(SnapshotError, match="violates its schema"):
        render_coverage_json({**document, "schema_version": 2})


def test_percent_is_rounded_to_two_places() -> None:
    sites = DecisionSites((REASON, UNCOVERED, Site("op", "x")))
    result = compute_coverage(PROJECT, [Toy("third", [], sites)], {"third": ROWS[:1]})
    assert result.percent == pytest.approx(100 / 3)
    assert coverage_document(result)["percent"] == 33.33


def test_text_lists_failing_sites_first_then_figures(coverage: Coverage) -> None:
    failing = [
        "toy:",
        "  uncovered     op never_op  (no row reaches it)",
        f"  undeclared    rejected K2  (reached by {OFF}, not declared)",
        f"  undeclared    op op_b  (reached by {OFF}, not declared)",
        f"  stale         op op_a  (declared unreachable but reached by {BASE})",
    ]
    summary = [
        "toy: 8 sites, 4 reached, 1 unreachable, 1 recorded-only; 1 uncovered, 2 undeclared, "
        "1 stale",
    ]
    listed = [
        "  unreachable   fallback f.x  (unreachable: no row can)",
        "  recorded-only chosen K3  (recorded-only (tests/test_x.py::test_y): proved elsewhere)",
        f"  reached       reason K2 too_small  (reached by {OFF})",
        f"  reached       chosen K1  (reached by {BASE})",
        f"  reached       default {FIELD}  (reached by {BASE})",
        f"  reached       set {FIELD}  (reached by {OFF})",
    ]
    total = (
        "coverage: 6 of 8 declared sites covered (75.0%): 4 reached, 1 unreachable, "
        "1 recorded-only, 1 uncovered"
    )
    bare = "bare: declares no decision sites"
    assert render_text(coverage) == "\n".join([*failing, *summary, bare, total, ""])
    assert render_text(coverage, verbose=True) == "\n".join(
        [*failing, *summary, *listed, bare, total, ""]
    )


def test_markdown_tables_the_figures_and_lists_the_failures(coverage: Coverage) -> None:
    assert render_markdown(coverage) == "\n".join(
        [
            "| category | declared | reached | unreachable | recorded-only | uncovered |",
            "|---|---:|---:|---:|---:|---:|",
            "| toy | 8 | 4 | 1 | 1 | 1 |",
            "| bare | 0 | 0 | 0 | 0 | 0 |",
            "| **total** | 8 | 4 | 1 | 1 | 1 |",
            "",
            "- toy: uncovered `op:never_op`",
            "- toy: undeclared `rejected:K2`",
            "- toy: undeclared `op:op_b`",
            "- toy: stale `op:op_a`",
            "",
        ]
    )


def test_the_failure_line_at_both_sides_of_its_bounds(coverage: Coverage) -> None:
    strict = (
        "coverage FAILED: 5 failing: toy: op never_op (uncovered); toy: op op_a (stale); "
        "toy: op op_b (undeclared); ..."
    )
    assert failure_line(coverage, strict=True, fail_under=None) == strict
    assert failure_line(coverage, strict=True, fail_under=75.5) == (
        f"{strict}; 75.0% covered, under 75.5%"
    )
    assert failure_line(coverage, strict=False, fail_under=75.0) is None  # not under
    assert failure_line(coverage, strict=False, fail_under=75.01) == (
        "coverage FAILED: 75.0% covered, under 75.01%"
    )
    assert failure_line(coverage, strict=False, fail_under=None) is None
    # Exactly MAX_NAMED named: no "...".
    three = Coverage((CategoryCoverage("c", True, 0, coverage.categories[0].failures[:3]),))
    assert failure_line(three, strict=True, fail_under=None) == (
        "coverage FAILED: 3 failing: c: op never_op (uncovered); c: op op_a (stale); "
        "c: op op_b (undeclared)"
    )


def _route(*ops: str) -> dict[str, Any]:
    return {"dispatch": [{"op": op, "plan": {}} for op in ops]}


def test_reached_delta_counts_only_what_no_unmoved_row_reaches() -> None:
    baseline = [{"id": "a", "route": _route("x", "y")}, {"id": "b", "route": _route("z")}]
    fresh = [{"id": "a", "route": _route("x", "w", "z")}, {"id": "b", "route": _route("z")}]
    # a gained w and z (z is reached by b, unmoved: not gained) and lost y.
    assert reached_delta(TOY, baseline, fresh, ["a"]) == ([Site("op", "w")], [Site("op", "y")])
    assert reached_delta(TOY, baseline, fresh, []) == ([], [])
    same = [{"id": "a", "route": _route("y", "x")}, *baseline[1:]]
    assert reached_delta(TOY, baseline, same, ["a"]) == ([], [])
    # An added row (only in fresh) and a removed one (only in the baseline).
    added = [*fresh, {"id": "c", "route": _route("v", "u")}]
    assert reached_delta(TOY, baseline, added, ["a", "c"]) == (
        [Site("op", "u"), Site("op", "v"), Site("op", "w")],
        [Site("op", "y")],
    )
    # A removed row loses what no other row reaches (z is still reached by a).
    assert reached_delta(TOY, baseline, fresh[:1], ["b"]) == ([], [])
    gone = [{"id": "a", "route": _route("x")}, {"id": "b", "route": _route("q")}]
    assert reached_delta(TOY, gone, gone[:1], ["b"]) == ([], [Site("op", "q")])


def test_delta_line() -> None:
    w, y = Site("op", "w"), Site("reason", "K", "c")
    assert delta_line({}) is None
    assert delta_line({"toy": ([], [])}) is None
    assert delta_line({"toy": ([w], [])}) == "coverage: +1 site reached (op w), -0"
    assert (
        delta_line({"toy": ([], [y])})
        == "coverage: +0 sites reached, -1 (reason K c no longer reached)"
    )
    several = [Site("op", f"o{i}") for i in range(5)]
    # Exactly MAX_NAMED gained: all named, no "+0 more".
    assert delta_line({"toy": (several[:3], [])}) == (
        "coverage: +3 sites reached (op o0, op o1, op o2), -0"
    )
    assert delta_line({"toy": (several, [y]), "other": ([], [])}) == (
        "coverage: +5 sites reached (op o0, op o1, op o2, +2 more), "
        "-1 (reason K c no longer reached)"
    )
    # Sites of more than one category name their category.
    assert delta_line({"toy": ([w], []), "cat2": (several[:3], [y])}) == (
        "coverage: +4 sites reached (toy: op w, cat2: op o0, cat2: op o1, +1 more), "
        "-1 (cat2: reason K c no longer reached)"
    )
