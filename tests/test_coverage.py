"""Decision coverage (`routectl coverage`, docs/coverage.md): the project passes strictly, the
declarations cannot rot (a removed probe, an added code, an undeclared or stale site each
fail naming the site), the review line of check and diff, and the guards that hold every
declared code to the code that returns it."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from native.kernels import awq_dense, fp8_sm70, nvfp4_sm70, turing
from native.kernels.common import LinearKernel
from native.layers import BlockFp8Layer
from policies import PROJECT, qualification
from policies.linear_fp8_sm70 import load_fp8_sm70
from routectl.io.schemas import schema_violation
from routectl.policy.selection import UndeclaredReason, evaluate_kernel
from routectl.reasons import OK, Check, reject
from routectl.replay.harness import RecordingNamespace, replay_category
from routectl.review.coverage import (
    category_coverage,
    compute_coverage,
    coverage_document,
    delta_line,
    failure_line,
    reached_delta,
    render_markdown,
    render_text,
)
from routectl.sites import DecisionSites, Site, recorded_only, route_sites, unreachable
from routectl.workload import EngineConfig, Hardware
from tests.fixtures.toy import invoke, ok

ROOT = Path(__file__).resolve().parents[1]
AWQ = "sm70-awq-linear"
TURBOMIND_AWQ = awq_dense.TurboMindAwqLinearKernel.name
MISSING_OPS = Site("reason", TURBOMIND_AWQ, "missing_native_ops")


@pytest.fixture(scope="module")
def awq_rows() -> list[dict[str, Any]]:
    return replay_category(PROJECT, PROJECT.category(AWQ))


def coverage_of(category: Any, rows: list[dict[str, Any]] | None = None) -> Any:
    rows = replay_category(PROJECT, category) if rows is None else rows
    return compute_coverage(PROJECT, [category], {category.name: rows})


# --- the project --------------------------------------------------------------------------


def test_the_project_passes_strictly_with_every_figure_in_the_json_document():
    result = ok(invoke(["coverage", "--strict", "--format", "json", "--no-cache"], cwd=ROOT))
    assert result.code == 0, result.stderr
    document = json.loads(result.stdout)
    assert schema_violation("coverage", document) is None
    assert document["ok"] is True and document["percent"] == 100
    names = [c["name"] for c in document["categories"]]
    assert names == [c.name for c in PROJECT.categories]
    for category in document["categories"]:
        assert category["declares"] and category["declared"] > 0
        assert category["uncovered"] == category["undeclared"] == category["stale"] == 0
        assert category["declared"] == (
            category["reached"] + category["unreachable"] + category["recorded_only"]
        )
        for site in category["sites"]:
            if site["state"] in ("unreachable", "recorded-only"):
                assert site["reason"] and site["row"] is None
            if site["state"] == "reached":
                assert site["row"] is not None
    totals = document["totals"]
    assert totals["declared"] == sum(c["declared"] for c in document["categories"])
    # docs/coverage.md shows the figures of this very run.
    shown = [
        line
        for line in (ROOT / "docs" / "coverage.md").read_text().splitlines()
        if line.startswith("| sm7") or line.startswith("| **total**")
    ]
    rows = [(c["name"], c) for c in document["categories"]] + [("**total**", totals)]
    assert shown == [
        f"| {name} | {f['declared']} | {f['reached']} | {f['unreachable']} | "
        f"{f['recorded_only']} | {f['uncovered']} |"
        for name, f in rows
    ]


def test_text_lists_uncovered_sites_first_and_every_category_figure(awq_rows):
    category = PROJECT.category(AWQ)
    without = [r for r in awq_rows if r["id"] != "edge:native_missing"]
    text = render_text(coverage_of(category, without))
    lines = text.splitlines()
    assert lines[0] == f"{AWQ}:"
    assert lines[1].split() == [
        "uncovered",
        "reason",
        TURBOMIND_AWQ,
        "missing_native_ops",
        "(no",
        "row",
        "reaches",
        "it)",
    ]
    assert lines[2].startswith(f"{AWQ}: 49 sites, 22 reached, 1 unreachable, 25 recorded-only")
    assert lines[2].endswith("; 1 uncovered")
    markdown = render_markdown(coverage_of(category, without))
    assert f"| {AWQ} | 49 | 22 | 1 | 25 | 1 |" in markdown
    assert f"- {AWQ}: uncovered `reason:{TURBOMIND_AWQ}:missing_native_ops`" in markdown


def test_bad_options_are_input_errors():
    result = invoke(["coverage", "--fail-under", "101"], cwd=ROOT)
    assert result.code == 2 and result.stderr.count("\n") == 1
    result = invoke(["coverage", "-c", "sm70-awq-lineer"], cwd=ROOT)
    assert result.code == 2 and "did you mean" in result.stderr


# --- the declarations cannot rot ------------------------------------------------------------


def test_removing_the_awq_native_missing_probe_fails_strict_naming_the_pair(awq_rows):
    category = PROJECT.category(AWQ)
    assert coverage_of(category, awq_rows).strict_ok
    probes = tuple(p for p in category.probes if p.name != "native_missing")
    assert len(probes) == len(category.probes) - 1
    without = dataclasses.replace(category, probes=probes)
    coverage = coverage_of(without)
    assert not coverage.strict_ok
    (failure,) = coverage.categories[0].failures
    assert (failure.site, failure.state) == (MISSING_OPS, "uncovered")
    assert failure_line(coverage, strict=True, fail_under=None) == (
        f"coverage FAILED: 1 failing: {AWQ}: reason {TURBOMIND_AWQ} missing_native_ops (uncovered)"
    )


def test_a_reason_code_no_row_reaches_fails_strict_naming_the_pair(awq_rows):
    category = PROJECT.category(AWQ)

    class Planted(awq_dense.TurboMindAwqLinearKernel):
        reason_codes = (*awq_dense.TurboMindAwqLinearKernel.reason_codes, "planted_code")

    def planted() -> DecisionSites:
        declared = category.decision_sites()
        site = Site("reason", Planted.name, "planted_code")
        return DecisionSites((*declared.sites, site), declared.declarations)

    assert Planted.name == "Planted"  # the class names its own sites
    coverage = coverage_of(dataclasses.replace(category, sites=planted), awq_rows)
    (failure,) = coverage.categories[0].failures
    assert (failure.site.subject, failure.site.code, failure.state) == (
        "Planted",
        "planted_code",
        "uncovered",
    )
    assert "reason Planted planted_code (uncovered)" in str(
        failure_line(coverage, strict=True, fail_under=None)
    )
    # --fail-under judges the share covered: 49 of 50.
    assert failure_line(coverage, strict=False, fail_under=98) is None
    assert failure_line(coverage, strict=False, fail_under=98.5) == (
        "coverage FAILED: 98.0% covered, under 98.5%"
    )


def test_a_reached_site_the_category_does_not_declare_fails_as_undeclared(awq_rows):
    category = PROJECT.category(AWQ)

    def forgetful() -> DecisionSites:
        declared = category.decision_sites()
        return DecisionSites(tuple(s for s in declared.sites if s != MISSING_OPS), {})

    result = category_coverage(PROJECT, dataclasses.replace(category, sites=forgetful), awq_rows)
    undeclared = [s for s in result.sites if s.state == "undeclared"]
    assert [(s.site, s.row) for s in undeclared] == [(MISSING_OPS, "edge:native_missing")]


def test_a_declaration_on_a_reached_site_is_stale(awq_rows):
    category = PROJECT.category(AWQ)

    def stale() -> DecisionSites:
        declared = category.decision_sites()
        return DecisionSites(
            declared.sites, {**declared.declarations, MISSING_OPS: unreachable("planted")}
        )

    result = category_coverage(PROJECT, dataclasses.replace(category, sites=stale), awq_rows)
    (failure,) = result.failures
    assert (failure.site, failure.state, failure.row) == (
        MISSING_OPS,
        "stale",
        "edge:native_missing",
    )


def test_a_declaration_needs_a_declared_site_a_reason_and_a_test():
    site = Site("chosen", "K")
    with pytest.raises(ValueError, match="not a declared site"):
        DecisionSites((), {site: unreachable("why")})
    with pytest.raises(ValueError, match="needs a reason"):
        DecisionSites((site,), {site: unreachable(" ")})
    with pytest.raises(ValueError, match="names its test"):
        DecisionSites((site,), {site: recorded_only("why", "tests/test_x.py")})


def test_a_category_without_declarations_fails_strict_only():
    toy = dataclasses.replace(PROJECT.category(AWQ), sites=None)
    coverage = compute_coverage(PROJECT, [toy], {AWQ: []})
    assert not coverage.strict_ok and coverage.percent == 100
    assert failure_line(coverage, strict=True, fail_under=None) == (
        f"coverage FAILED: 1 failing: {AWQ}: declares no decision sites"
    )
    assert failure_line(coverage, strict=False, fail_under=100) is None


def _recorded_only() -> Iterator[tuple[str, Site, str]]:
    for category in PROJECT.categories:
        declared = category.decision_sites()
        assert declared is not None, category.name
        for site, declaration in declared.declarations.items():
            if declaration.state == "recorded-only":
                yield category.name, site, declaration.test


def _test_source(test: str) -> str:
    path, _, name = test.partition("::")
    tree = ast.parse((ROOT / path).read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            source = (ROOT / path).read_text()
            parts = [ast.get_source_segment(source, d) or "" for d in node.decorator_list]
            # A parametrized test's table may be a module-level name its decorator passes.
            named = {
                n.id for d in node.decorator_list for n in ast.walk(d) if isinstance(n, ast.Name)
            }
            parts += [
                ast.get_source_segment(source, a) or ""
                for a in tree.body
                if isinstance(a, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id in named for t in a.targets)
            ]
            return "\n".join([*parts, ast.get_source_segment(source, node) or ""])
    raise AssertionError(f"{test} does not exist")


def test_every_recorded_only_site_names_a_test_that_exists_and_names_its_code():
    silent = []
    seen = 0
    for category, site, test in _recorded_only():
        source = _test_source(test)
        if site.kind == "reason" and site.code not in source:
            silent.append(f"{category}: {test} never names {site.code}")
        seen += 1
    assert silent == [] and seen > 100


def test_block_qpn8_refused_by_the_build_is_a_recorded_fallback():
    # Requested by sm70_fp8.block_qpn8 and refused for a missing op, QPN8 leaves the layer to
    # TurboMind and the decision records the fallback on the requesting field.
    layer = BlockFp8Layer.of("model.layers.0.qkv_proj", 5120, 3584, tp=4)
    config = {"sm70_fp8": {"block_qpn8": True}}
    policy = PROJECT.resolve(config, {}, Hardware(70), EngineConfig(), emit_warnings=False)
    ns = RecordingNamespace(PROJECT.catalogue, remove=(fp8_sm70.BLOCK_QPN8_OPS[-1],))
    decision = load_fp8_sm70(layer, policy, Hardware(70), EngineConfig(), ns).decision
    assert decision.kernel == fp8_sm70.TurboMindFp8LinearKernel.name
    assert [(f.field, f.requested, f.effective) for f in decision.fallbacks] == [
        ("sm70_fp8.block_qpn8", True, False)
    ]
    assert decision.selection.verdicts[0].code == "missing_native_ops"


# --- each returned code is declared ---------------------------------------------------------

DECLARING = [
    *nvfp4_sm70.NVFP4_SM70_KERNELS,
    *awq_dense.AWQ_DENSE_KERNELS,
    *turing.TURING_KERNELS,
    *fp8_sm70.FP8_SM70_KERNELS,
]


def _literal_codes(function: Any) -> set[str]:
    """The string literals a function passes first to reject() or Reason()."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("reject", "Reason"):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                out.add(first.value)
    return out


@pytest.mark.parametrize("kernel", DECLARING, ids=[k.name for k in DECLARING])
def test_every_code_a_kernel_class_spells_is_declared(kernel):
    declared = {*kernel.reason_codes, *getattr(kernel, "policy_codes", ())}
    for name in ("is_supported", "can_implement", "policy_check"):
        own = kernel.__dict__.get(name)
        if own is not None:
            assert _literal_codes(own.__func__) <= declared, (kernel.name, name)


@pytest.mark.parametrize(
    "rule, codes",
    [
        (qualification.nvfp4_workload_qualified, qualification.NVFP4_WORKLOAD_CODES),
        (qualification.dflash2_verifier_qualified, qualification.DFLASH2_VERIFIER_CODES),
        (qualification.qpn2_role_qualified, qualification.QPN2_ROLE_CODES),
        (qualification.qpn4_workload_qualified, qualification.QPN4_WORKLOAD_CODES),
        (qualification.qpn4_layer_qualified, qualification.QPN4_LAYER_CODES),
        (qualification.awq_exact_dense_role_qualified, qualification.AWQ_EXACT_DENSE_ROLE_CODES),
        (qualification.fp8_pp2_tp4_contract, qualification.FP8_PP2_TP4_CODES),
    ],
)
def test_every_code_a_qualification_rule_spells_is_declared(rule, codes):
    spelled = _literal_codes(rule)
    assert spelled and spelled <= set(codes)


class Declaring(LinearKernel):
    reason_codes = ("declared",)
    answer: Check = OK

    @classmethod
    def is_supported(cls, capability: int) -> Check:
        return OK

    @classmethod
    def can_implement(cls, layer: Any, ns: Any) -> Check:
        return cls.answer


def test_selection_refuses_a_code_its_class_does_not_declare():
    declared = type("Declared", (Declaring,), {"answer": reject("declared", "no")})
    assert evaluate_kernel(declared, 70, None, None).reason.code == "declared"
    other = type("Other", (Declaring,), {"answer": reject("undeclared", "no")})
    with pytest.raises(UndeclaredReason, match="Other returned reason code 'undeclared'"):
        evaluate_kernel(other, 70, None, None)
    silent = type("Silent", (Declaring,), {"reason_codes": None, "answer": reject("any", "x")})
    assert evaluate_kernel(silent, 70, None, None).reason.code == "any"


# --- what a route reaches, and the review line ----------------------------------------------


def test_route_sites_walk_verdicts_fallbacks_calls_and_nested_routes():
    route = {
        "kernel": "B",
        "verdicts": [
            {"name": "A", "ok": False, "code": "a_off"},
            {"name": "B", "ok": True, "code": None},
        ],
        "fallbacks": [{"field": "s.a"}],
        "dispatch": [{"op": "gemm"}],
        "layers": {"x": {"prepare": [{"op": "prep"}], "verdicts": []}},
    }
    assert route_sites(route) == {
        Site("chosen", "B"),
        Site("rejected", "A"),
        Site("reason", "A", "a_off"),
        Site("fallback", "s.a"),
        Site("op", "gemm"),
        Site("op", "prep"),
    }


def test_reached_delta_names_only_sites_no_unmoved_row_reaches(awq_rows):
    category = PROJECT.category(AWQ)
    without = [r for r in awq_rows if r["id"] != "edge:native_missing"]
    gained, lost = reached_delta(category, without, awq_rows, {"edge:native_missing"})
    assert (gained, lost) == ([MISSING_OPS], [])
    assert reached_delta(category, awq_rows, without, {"edge:native_missing"}) == (
        [],
        [MISSING_OPS],
    )
    # A moved row whose sites other rows also reach moves no site.
    assert reached_delta(category, awq_rows, awq_rows, {"edge:group64"}) == ([], [])
    assert delta_line({AWQ: ([], [MISSING_OPS])}) == (
        f"coverage: +0 sites reached, -1 (reason {TURBOMIND_AWQ} missing_native_ops no "
        "longer reached)"
    )
    two = delta_line({AWQ: ([Site("op", "x")], []), "other": ([], [Site("chosen", "K")])})
    assert two == (
        f"coverage: +1 site reached ({AWQ}: op x), -1 (other: chosen K no longer reached)"
    )
    assert delta_line({AWQ: ([], [])}) is None


def test_diff_prints_one_coverage_line_when_reached_sites_move(tmp_path, awq_rows):
    retained = json.loads((ROOT / "snapshots" / f"{AWQ}.json").read_text())
    retained["rows"] = [r for r in retained["rows"] if r["id"] != "edge:native_missing"]
    baseline = tmp_path / f"{AWQ}.json"
    baseline.write_text(json.dumps(retained, indent=2, sort_keys=True) + "\n")
    result = ok(invoke(["diff", "-c", AWQ, "--baseline", baseline, "--no-cache"], cwd=ROOT))
    assert result.code == 1
    lines = [line for line in result.stdout.splitlines() if line.startswith("coverage:")]
    assert lines == [f"coverage: +1 site reached (reason {TURBOMIND_AWQ} missing_native_ops), -0"]
    same = ok(invoke(["diff", "-c", AWQ, "--baseline", ROOT / "snapshots", "--no-cache"], cwd=ROOT))
    assert same.code == 0 and "coverage:" not in same.stdout


def test_the_json_document_keeps_its_schema(awq_rows):
    document = coverage_document(coverage_of(PROJECT.category(AWQ), awq_rows))
    assert schema_violation("coverage", document) is None
    (category,) = document["categories"]
    assert category["by_kind"]["reason"]["declared"] > category["by_kind"]["reason"]["reached"]
    broken = {**document, "percent": 101}
    assert schema_violation("coverage", broken) is not None
