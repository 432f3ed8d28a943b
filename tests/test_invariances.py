"""Declared invariances (docs/invariances.md): each category's statements proved by
construction through the real policy code, the generic verifier on hand-made rows, a planted
change in a scratch copy of the project that makes the KV dtype move one NVFP4 route (check
fails naming the invariance and the two rows; the cached rerun too), and the collapsed
matrix."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from policies import PROJECT
from policies.categories.matrix import (
    BUDGETS,
    CONCURRENCY,
    KV_DTYPES,
    SPEC_METHODS,
    TP_SIZES,
    engine,
    row_id,
)
from policies.variables import VARIABLE_PREFIX
from routectl.io.schemas import schema_violation
from routectl.replay.harness import replay_row
from routectl.review.invariances import verify_category, verify_invariance
from routectl.review.matrix import build_matrix
from routectl.review.matrix_text import render_matrix_text
from routectl.rows import Invariance, RowSpec
from tests import families
from tests.fixtures.toy import invoke, ok
from tests.project_files import copy_project

ROOT = Path(__file__).resolve().parents[1]
NVFP4 = "sm70-nvfp4-linear"

# What each category's rows never depend on, written from the policy code in each family's
# expectations module (tests/families/, `INVARIANCES`; the test proves each below by replaying
# rows that differ only there), as (dimensions, fields) with fields under `route` (None: the
# whole route; `*`: every layer).
PROVED: Mapping[str, Sequence[tuple[tuple[str, ...], tuple[str, ...] | None]]] = families.table(
    "INVARIANCES"
)

# Matrix values, and one value outside the matrix each (the statements hold beyond the grid:
# another KV dtype the engine accepts, another concurrency, a larger budget).
VALUES: Mapping[str, tuple[Any, ...]] = {
    "kv": (*KV_DTYPES, "bfloat16"),
    "tp": TP_SIZES,
    "spec": SPEC_METHODS,
    "c": (*CONCURRENCY, 2),
    "q": (*BUDGETS, 16384),
}


def declared_form(inv: Invariance) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    fields = tuple(f.removeprefix("route.") for f in inv.fields)
    return inv.dimensions, None if inv.fields == ("route",) else fields


def test_each_category_declares_what_the_policy_code_bears_out():
    assert {c.name for c in PROJECT.categories} == set(PROVED)
    for category in PROJECT.categories:
        declared = [declared_form(inv) for inv in category.invariances()]
        assert declared == list(PROVED[category.name]), category.name
        for inv in category.invariances():
            assert inv.why, inv.name  # each says what makes it true


def pick(route: Mapping[str, Any], fields: tuple[str, ...] | None) -> Any:
    """The route's values at `fields` (written apart from routectl's own walk)."""
    if fields is None:
        return route

    def at(value: Any, parts: list[str]) -> Any:
        if not parts:
            return value
        head, *rest = parts
        if head == "*":
            return {k: at(v, rest) for k, v in value.items()} if isinstance(value, dict) else None
        return at(value[head], rest) if isinstance(value, dict) and head in value else "absent"

    return {f: at(route, f.split(".")) for f in fields}


def variant(base: RowSpec, values: Mapping[str, Any]) -> RowSpec:
    """The base matrix row with some dimensions set otherwise: the engine double rebuilt
    the way the matrix builds it."""
    dims = dict(zip(("model", "kv", "tp", "spec", "c", "q"), _split(base.id), strict=True))
    dims.update(values)
    return dataclasses.replace(
        base,
        id=row_id(dims["model"], dims["kv"], dims["tp"], dims["spec"], dims["c"], dims["q"]),
        engine=engine(dims["kv"], dims["tp"], dims["spec"], dims["c"], dims["q"], dims["model"]),
    )


def _split(matrix_id: str) -> tuple[Any, ...]:
    model, kv, tp, spec, c, q = matrix_id.split("/")
    return model, kv, int(tp[2:]), spec, int(c[1:]), int(q[1:])


CASES = [
    pytest.param(name, dims, fields, id=f"{name}:{'+'.join(dims)}")
    for name, proved in PROVED.items()
    for dims, fields in proved
]


@pytest.mark.parametrize(("name", "dims", "fields"), CASES)
def test_the_declared_dimensions_never_change_the_fields(name, dims, fields):
    """By construction: from one base row per combination of the other dimensions (every
    model the category routes), rows that change one declared dimension at a time, over its
    matrix values and one value outside the matrix, and one row that changes them all, replay
    through the category's own route to the same values at the fields."""
    category = PROJECT.category(name)
    first = {d: VALUES[d][0] for d in dims}
    bases = [
        spec
        for spec in category.rows()
        if spec.status is None
        and not spec.id.startswith("edge:")
        and all(
            v == first[d]
            for d, v in zip(("kv", "tp", "spec", "c", "q"), _split(spec.id)[1:], strict=True)
            if d in dims
        )
    ]
    assert bases, name
    for base in bases:
        expected = pick(replay_row(PROJECT, category, base)[0]["route"], fields)
        changes = [{d: v} for d in dims for v in VALUES[d][1:]]
        changes.append({d: VALUES[d][-1] for d in dims})  # every declared dimension at once
        for change in changes:
            row = variant(base, change)
            got = pick(replay_row(PROJECT, category, row)[0]["route"], fields)
            assert got == expected, (base.id, change)


def test_a_dimension_left_out_does_change_the_route():
    """The declarations are not everything: speculation moves an NVFP4 kernel (dflash takes
    QPN2) and the TP size its bytes (the layer is split by TP)."""
    category = PROJECT.category(NVFP4)
    specs = {s.id: s for s in category.rows()}

    def route(row: str) -> Mapping[str, Any]:
        return replay_row(PROJECT, category, specs[f"27b_dflash2_nvfp4/float16/{row}/c1/q4096"])[0][
            "route"
        ]

    assert route("tp2/none")["bytes"] != route("tp4/none")["bytes"]
    # The rows the proof above builds do reach the policy: speculation moves the kernel,
    # concurrency the QPN4 verdict (a field the invariances leave out).
    base = specs["27b_dflash2_nvfp4/float16/tp2/none/c1/q4096"]

    def built(**change: Any) -> Mapping[str, Any]:
        return replay_row(PROJECT, category, variant(base, change))[0]["route"]

    assert built()["kernel"] != built(spec="dflash")["kernel"]
    assert built()["verdicts"] != built(c=4)["verdicts"]
    assert built()["kernel"] == built(c=4)["kernel"]


# --- the verifier on hand-made rows ---------------------------------------------------------


def grid_row(kv: str, c: int, route: Mapping[str, Any], tp: int = 2) -> dict[str, Any]:
    return {"id": f"m/{kv}/tp{tp}/none/c{c}/q4096", "route": dict(route)}


def test_the_first_breaking_pair_differs_in_one_dimension_where_one_does():
    inv = Invariance("kv_c", ("kv", "c"), ("route.kernel",))
    rows = [
        grid_row("float16", 1, {"kernel": "A"}),
        grid_row("float16", 4, {"kernel": "A"}),
        grid_row("fp8_e4m3", 1, {"kernel": "A"}),
        grid_row("fp8_e4m3", 4, {"kernel": "B"}),
        grid_row("float16", 1, {"kernel": "A"}, tp=4),
        grid_row("fp8_e4m3", 4, {"kernel": "C"}, tp=4),
        {"id": "edge:probe", "route": {"kernel": "Z"}},  # probes are no grid cells
    ]
    found = verify_invariance("cat", inv, rows, [r["id"] for r in rows])
    assert found is not None
    # float16/c1 and fp8_e4m3/c4 differ in two dimensions; float16/c4 vs fp8_e4m3/c4 in one.
    assert found.rows == ("m/float16/tp2/none/c4/q4096", "m/fp8_e4m3/tp2/none/c4/q4096")
    assert (found.change.path, found.change.old, found.change.new) == ("route.kernel", "A", "B")
    assert found.classes == 2  # tp2 and tp4 both disagree
    assert "m/float16/tp4/none/c1/q4096" in found.involved
    assert verify_invariance("cat", inv, rows[:3] + rows[6:], [r["id"] for r in rows]) is None


@pytest.mark.parametrize(
    ("a", "b"),
    [({"kernel": "A"}, {}), ({"kernel": 1}, {"kernel": 1.0}), ({"kernel": 1}, {"kernel": True})],
    ids=["absent", "int-float", "int-bool"],
)
def test_values_are_compared_as_json(a, b):
    """An absent field is not null, and 1, 1.0 and true are three values (as in the files)."""
    inv = Invariance("kv", ("kv",), ("route.kernel",))
    rows = [grid_row("float16", 1, a), grid_row("fp8_e4m3", 1, b)]
    assert verify_invariance("cat", inv, rows) is not None


def test_a_star_field_compares_each_layer_and_fields_elsewhere_are_free():
    inv = Invariance("kv", ("kv",), ("route.layers.*.kernel",))
    same = [
        grid_row("float16", 1, {"layers": {"a": {"kernel": "K", "bytes": 1}}}),
        grid_row("fp8_e4m3", 1, {"layers": {"a": {"kernel": "K", "bytes": 2}}}),
    ]
    assert verify_invariance("cat", inv, same) is None
    moved = [same[0], grid_row("fp8_e4m3", 1, {"layers": {"a": {"kernel": "L", "bytes": 1}}})]
    found = verify_invariance("cat", inv, moved)
    assert found is not None and found.change.path == "route.layers.a.kernel"
    assert inv.covers("route.layers.a.kernel") and not inv.covers("route.layers.a.bytes")
    assert Invariance("d", ("kv",), ("route.dispatch",)).covers("route.dispatch[M=8,0].plan.m")
    assert not Invariance("d", ("kv",), ("route.dispatch",)).covers("route.dispatches")


def test_a_false_declaration_is_refuted_on_the_retained_rows():
    """A test-only variant of the real category states that speculation never changes the
    kernel: the retained rows refute it with the first pair, none and dflash."""
    real = PROJECT.category(NVFP4)
    wrong = dataclasses.replace(
        real, declared_invariances=(Invariance("spec_kernel", ("spec",), ("route.kernel",)),)
    )
    rows = json.loads((ROOT / "snapshots" / f"{NVFP4}.json").read_text())["rows"]
    assert verify_category(real, rows) == ()
    (found,) = verify_category(wrong, rows)
    assert found.rows == (
        "27b_dflash2_nvfp4/float16/tp2/none/c1/q4096",
        "27b_dflash2_nvfp4/float16/tp2/dflash/c1/q4096",
    )
    assert found.change.new == "Qpn2NvFp4LinearKernel"
    assert found.classes == 36  # every kv x tp x c x q class of the NVFP4 model


# --- a planted change in a scratch copy -------------------------------------------------------

MOVED = "27b_dflash2_nvfp4/fp8_e5m2/tp2/dflash/c8/q4096"
PARTNER = "27b_dflash2_nvfp4/float16/tp2/dflash/c8/q4096"
QPN2_GATE = '("policy", lambda: _qpn2_policy(policy)),'
# The QPN2 policy gate refuses one cell of the grid by its KV dtype (and TP, c and q).
PLANTED = (
    '("policy", lambda: reject("qpn2_disabled", QPN2_CORE) if (engine.kv_dtype, engine.tp, '
    'engine.max_num_seqs, engine.max_num_batched_tokens) == ("fp8_e5m2", 2, 8, 4096) '
    "else _qpn2_policy(policy)),"
)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_project(tmp_path_factory.mktemp("invariance") / "project")
    source = root / "policies" / "linear_nvfp4.py"
    text = source.read_text()
    assert text.count(QPN2_GATE) == 1, "the gate this test plants a change in moved"
    source.write_text(text.replace(QPN2_GATE, PLANTED))
    return root


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(VARIABLE_PREFIX)}
    env.update({"PYTHONPATH": str(root), "NO_COLOR": "1", "COLUMNS": "100"})
    env.pop("CI", None)
    env.pop("ROUTECTL_NO_CACHE", None)
    return subprocess.run(
        [sys.executable, "-m", "routectl", *args],
        cwd=root,
        env=env,
        text=True,
        capture_output=True,
        timeout=600,
    )


def test_a_kv_dtype_that_moves_one_nvfp4_route_fails_check_naming_the_invariance(planted, tmp_path):
    report = tmp_path / "report.json"
    done = run(planted, "check", "-c", NVFP4, "--report", str(report))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{NVFP4}: FAILED: 342 rows, 1 changed")
    assert lines[0].endswith("2 broken invariances")
    for name in ("kv_never_changes_a_route", "linear_route_ignores_kv_c_q"):
        (line,) = [x for x in lines if x.startswith(f"  broken invariance {name} (")]
        assert f"{NVFP4}:{PARTNER} and {NVFP4}:{MOVED} differ" in line, line
    assert (
        "  broken invariance linear_route_ignores_kv_c_q (kv, c and q never change" in done.stdout
    )
    # The change group names the invariances its change breaks.
    assert (
        "  changed 1 row, breaks invariances kv_never_changes_a_route, "
        "linear_route_ignores_kv_c_q (unexpected)"
    ) in lines
    assert "next: a declared invariance is broken" in done.stderr
    assert (
        lines[-1] == "FAILED: 1 unexpected, 0 missing, 2 broken invariances (1 category, 342 rows)"
    )

    data = json.loads(report.read_text())
    assert schema_violation("report", data) is None
    broken = data["categories"][NVFP4]["invariances"]
    assert [b["invariance"] for b in broken] == [
        "kv_never_changes_a_route",
        "linear_route_ignores_kv_c_q",
    ]
    assert broken[1]["rows"] == [f"{NVFP4}:{PARTNER}", f"{NVFP4}:{MOVED}"]
    assert broken[1]["dimensions"] == ["kv", "c", "q"]
    # The change shown first: the kernel (a changed value, the least deep).
    assert broken[1]["change"] == {
        "path": "route.kernel",
        "kind": "changed",
        "old": "Qpn2NvFp4LinearKernel",
        "new": "TurboMindNvFp4LinearKernel",
    }
    (group,) = data["categories"][NVFP4]["groups"]
    assert group["breaks"] == ["kv_never_changes_a_route", "linear_route_ignores_kv_c_q"]

    # The rerun reads every row from the replay cache: the invariances are verified on them.
    again = run(planted, "check", "-c", NVFP4, "--format", "github")
    assert again.returncode == 1
    assert (
        f"::error title=routectl check::invariance linear_route_ignores_kv_c_q broken (kv, c and "
        f"q never change route.kernel, route.prepared_layout, route.fallbacks or "
        f"route.dispatch): {NVFP4}:{PARTNER} and {NVFP4}:{MOVED} differ: "
    ) in again.stdout


def test_accept_all_does_not_accept_a_broken_invariance(planted):
    retained = planted / "snapshots" / f"{NVFP4}.json"
    before = retained.read_bytes()
    done = run(planted, "check", "-c", NVFP4, "--update", "--accept-all", "-q")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "retained snapshots not updated: a declared invariance is broken" in done.stderr
    assert retained.read_bytes() == before


def test_the_planted_change_keeps_the_matrix_whole(planted):
    """Where a declared invariance would merge different cells, the grid keeps its
    dimensions and says why."""
    done = run(planted, "matrix", "-c", NVFP4, "--color", "never")
    assert done.returncode == 0, done.stderr
    assert "kv: float16" in done.stdout and "kv: *" not in done.stdout
    assert "not collapsed by invariance linear_route_ignores_kv_c_q" in done.stdout.replace(
        "\n  ", " "
    )


# --- the collapsed matrix --------------------------------------------------------------------


def test_the_collapsed_nvfp4_matrix_fits_80_columns():
    result = ok(
        invoke(["matrix", "-c", NVFP4, "--color", "never"], environ={"COLUMNS": "80"}, cwd=ROOT)
    )
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    # One column: every kv, c and q value in one cell; 18 model x tp x spec rows.
    assert [line.split() for line in lines if line.strip().endswith(": *")] == [
        ["kv:", "*"],
        ["c:", "*"],
        ["model", "tp", "spec", "q:", "*"],
    ]
    grid = [line.split() for line in lines if re.match(r"^[0-9a-z_]+ +tp[0-9] ", line)]
    assert len(grid) == 18 and all(len(cells) == 4 for cells in grid)
    assert ["27b_dflash2_nvfp4", "tp2", "dflash", "A"] in grid
    assert ["27b_dflash2_nvfp4", "tp2", "none", "C"] in grid
    note = " ".join(lines[1:6])
    assert "kv, c, q collapsed" in note and "linear_route_ignores_kv_c_q" in note
    # The legend still counts rows.
    assert "  A  Qpn2NvFp4LinearKernel  (45 rows)" in lines


def test_the_full_grid_is_one_option_away():
    """--no-collapse: every row, and at 80 columns the grid no longer fits in one block."""
    result = ok(
        invoke(
            ["matrix", "-c", NVFP4, "--no-collapse", "--color", "never"],
            environ={"COLUMNS": "80"},
            cwd=ROOT,
        )
    )
    assert "collapsed" not in result.stdout
    headers = [
        line.split() for line in result.stdout.splitlines() if line.lstrip().startswith("kv: ")
    ]
    assert headers[0][:2] == ["kv:", "float16"] and len(headers) > 1  # cut into blocks


def test_a_field_collapses_only_by_the_invariances_that_declare_it():
    """`--field bytes.total`: only the whole-route statement over kv declares it (the TP
    size and c and q are not declared for the bytes of an NVFP4 route)."""
    result = ok(
        invoke(["matrix", "-c", NVFP4, "--field", "bytes.total", "--color", "never"], cwd=ROOT)
    )
    lines = result.stdout.splitlines()
    assert lines[1].startswith("kv collapsed:")
    assert any(line.split() == ["c:", "1", "4", "8"] for line in lines)


def test_collapsed_cells_show_a_change_of_any_row_they_stand_for():
    inv = Invariance("kv", ("kv",), ("route.kernel",))
    old = [grid_row(kv, 1, {"kernel": "A"}) for kv in ("float16", "fp8_e4m3")]
    new = [old[0], grid_row("fp8_e4m3", 1, {"kernel": "A", "bytes": 2})]
    matrix = build_matrix("cat", new, baseline=old, collapse=(inv,))
    assert matrix.collapsed == ("kv",)
    (cell,) = matrix.grid.values()
    assert cell.change == "changed" and cell.id == "m/fp8_e4m3/tp2/none/c1/q4096"
    assert matrix.grid_rows == 2
    text = render_matrix_text(matrix)
    assert "kv collapsed" in text and "2 rows (2 in the grid, 0 edge probes)" in text


def test_the_collapsed_report_says_so(tmp_path):
    out = tmp_path / "routes.html"
    result = ok(invoke(["report", "--html", out, "-c", NVFP4], cwd=ROOT))
    assert result.code == 0, result.stderr
    page = out.read_text()
    assert '<p class="note">kv, c, q collapsed' in page
    assert "linear_route_ignores_kv_c_q: kv, c and q never change route.kernel" in page
    # 18 grid cells and 18 probes, each with its row's details.
    rows = json.loads(page.split('id="routectl-data">')[1].split("</script>")[0])["rows"]
    assert len(rows) == 36
