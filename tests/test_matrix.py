"""The route matrix: layout, labels, legend, probes and change marks (library), the terminal
view of every category (width, colour), and the self-contained HTML report parsed with a real
HTML parser (structure, every row, legend, changes, escaping, determinism)."""

from __future__ import annotations

import html.parser
import json
import re
from pathlib import Path
from typing import Any

import pytest

from routectl.errors import InputError
from routectl.io.terminal import DEFAULT_WIDTH, MIN_WIDTH, Painter, text_width
from routectl.review.matrix import Label, build_matrix, deciding_reason, layout, parse_dimensions
from routectl.review.matrix_html import render_html, script_json
from routectl.review.matrix_text import render_matrix_text
from tests import families
from tests.fixtures.toy import invoke, ok

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "snapshots"


def verdict(
    name: str, ok_: bool, code: str | None = None, message: str | None = None
) -> dict[str, Any]:
    return {"name": name, "ok": ok_, "code": code, "message": message, "not_needed": False}


def kernel_route(
    kernel: str, *, refused: tuple[str, str, str] | None = None, total: int = 100
) -> dict[str, Any]:
    verdicts = [verdict(*refused[:1], False, refused[1], refused[2])] if refused else []
    verdicts.append(verdict(kernel, True))
    return {
        "kernel": kernel,
        "status": None,
        "verdicts": verdicts,
        "bytes": {"total": total, "tensors": {}, "scratch": {}},
        "prepared_layout": "lay",
        "dispatch": [],
        "prepare": [],
    }


def status_route(code: str, message: str = "no route here") -> dict[str, Any]:
    return {"kernel": None, "status": {"code": code, "message": message}, "verdicts": []}


def rid(
    model: str, kv: str = "float16", tp: int = 2, spec: str = "none", c: int = 1, q: int = 4096
) -> str:
    return f"{model}/{kv}/tp{tp}/{spec}/c{c}/q{q}"


def grid_rows() -> list[dict[str, Any]]:
    rows = []
    for kv in ("float16", "fp8_e4m3"):
        for tp in (2, 4):
            for c in (1, 8):
                kernel = "FastKernel" if tp == 4 else "SlowKernel"
                rows.append({"id": rid("m1", kv, tp, "none", c), "route": kernel_route(kernel)})
                rows.append(
                    {"id": rid("m2", kv, tp, "none", c), "route": status_route("not_applicable")}
                )
    rows.append(
        {
            "id": "edge:odd_shape",
            "route": kernel_route(
                "SlowKernel", refused=("FastKernel", "k_misaligned", "K % 128 != 0")
            ),
        }
    )
    rows.append(
        {
            "id": "edge:broken",
            "route": {"error": {"code": "missing_ops", "message": "no ops"}, "verdicts": []},
        }
    )
    return rows


# --- layout and labels ---------------------------------------------------------------------


def test_default_layout_and_dimension_parsing():
    assert layout(None, None) == (("model", "tp", "spec"), ("kv", "c", "q"))
    assert parse_dimensions("model x tp", ()) == ("model", "tp")
    assert parse_dimensions("concurrency,budget", ()) == ("c", "q")
    # Dimensions named on neither side join the rows: each cell stays one row.
    assert layout("model", "kv") == (("model", "tp", "spec", "c", "q"), ("kv",))
    assert layout(None, "tp,c") == (("model", "spec", "kv", "q"), ("tp", "c"))
    for bad in ("gpu", "model,model"):
        with pytest.raises(InputError):
            parse_dimensions(bad, ())
    with pytest.raises(InputError, match="both rows and columns"):
        layout("model,kv", "kv")


def test_grid_symbols_legend_and_probes():
    matrix = build_matrix(
        "cat", grid_rows(), rows_dims=("model", "tp", "spec"), cols_dims=("kv", "c", "q")
    )
    assert matrix.row_keys == (
        ("m1", "2", "none"),
        ("m1", "4", "none"),
        ("m2", "2", "none"),
        ("m2", "4", "none"),
    )
    assert matrix.col_keys == (
        ("float16", "1", "4096"),
        ("float16", "8", "4096"),
        ("fp8_e4m3", "1", "4096"),
        ("fp8_e4m3", "8", "4096"),
    )
    # Kernels upper-case, statuses lower-case, errors digits; sorted by kind then text.
    assert [(e.symbol, e.label.text, e.cells) for e in matrix.legend] == [
        ("A", "FastKernel", 4),
        ("B", "SlowKernel", 5),
        ("a", "status not_applicable", 8),
        ("1", "error missing_ops", 1),
    ]
    assert [p.id for p in matrix.probes] == ["edge:odd_shape", "edge:broken"]
    assert matrix.probes[0].reason == "over FastKernel [k_misaligned] K % 128 != 0"
    assert matrix.probes[1].reason == "[missing_ops] no ops"


def test_text_view_lines():
    matrix = build_matrix(
        "cat", grid_rows(), rows_dims=("model", "tp", "spec"), cols_dims=("kv", "c", "q")
    )
    text = render_matrix_text(matrix)
    assert text.splitlines()[:8] == [
        "cat: kernel per row; 18 rows (16 in the grid, 2 edge probes)",
        "               kv: float16    fp8_e4m3",
        "                c: 1    8     1    8",
        "model tp  spec  q: 4k   4k    4k   4k",
        "m1    tp2 none     B    B     B    B",
        "m1    tp4 none     A    A     A    A",
        "m2    tp2 none     a    a     a    a",
        "m2    tp4 none     a    a     a    a",
    ]
    assert "  edge:odd_shape  B  over FastKernel [k_misaligned] K % 128 != 0" in text
    assert "  1  error missing_ops  (1 row)" in text
    assert "\x1b[" not in text


def test_moe_label_is_the_kernel_with_its_m1_stages():
    route = kernel_route("MoeKernel")
    route["stages"] = [
        {"m": 0, "chosen": ["lane.zero"], "rejected": []},
        {
            "m": 1,
            "chosen": ["lane.single"],
            "rejected": [verdict("lane.fast", False, "not_admitted", "opt-in")],
        },
    ]
    matrix = build_matrix("moe", [{"id": rid("m"), "route": route}])
    assert [e.label.text for e in matrix.legend] == ["MoeKernel, M=1 lane.single"]
    assert deciding_reason(route) == "M=1 over lane.fast [not_admitted] opt-in"


def test_multi_layer_routes_name_each_layer_when_they_differ():
    same = {"layers": {"qkv": kernel_route("K1"), "o": kernel_route("K1")}}
    mixed = {"layers": {"qkv": kernel_route("K1"), "o": status_route("dequant_fallback")}}
    matrix = build_matrix(
        "fp8", [{"id": rid("a"), "route": same}, {"id": rid("b"), "route": mixed}]
    )
    assert sorted(e.label.text for e in matrix.legend) == [
        "K1",
        "qkv K1; o status dequant_fallback",
    ]


def test_field_view_shows_values():
    rows = [
        {"id": rid("m", c=1), "route": kernel_route("K", total=1234567)},
        {"id": rid("m", c=8), "route": kernel_route("K", total=7)},
        {"id": rid("n"), "route": status_route("not_applicable")},
    ]
    matrix = build_matrix("cat", rows, field_path="bytes.total")
    assert [(e.symbol, e.label.text) for e in matrix.legend] == [
        ("A", "bytes.total 1,234,567"),
        ("B", "bytes.total 7"),
        ("a", "status not_applicable"),
    ]


def test_category_hook_labels_rows():
    def hook(route: Any) -> tuple[str, str] | None:
        return ("qualified", "value") if route.get("ok") else None

    matrix = build_matrix(
        "cat",
        [{"id": rid("m"), "route": {"ok": True}}, {"id": rid("n"), "route": status_route("x")}],
        hook=hook,
    )
    assert [e.label for e in matrix.legend] == [
        Label("qualified", "value"),
        Label("status x", "status"),
    ]


def against_a_baseline() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The grid rows and a baseline they differ from in each way: a row added, a label
    changed, other fields moved, an edge probe removed."""
    rows = grid_rows()
    baseline = [dict(r) for r in rows if r["id"] != rid("m1", "float16", 2, "none", 8)]
    moved = next(r for r in baseline if r["id"] == rid("m1", "fp8_e4m3", 2, "none", 1))
    moved["route"] = kernel_route("FastKernel")
    plan = next(r for r in baseline if r["id"] == rid("m1", "fp8_e4m3", 4, "none", 8))
    plan["route"] = kernel_route("FastKernel", total=5)
    baseline.append({"id": "edge:gone", "route": status_route("not_applicable")})
    return rows, baseline


def test_baseline_marks_changed_added_and_removed_rows():
    current, baseline = against_a_baseline()
    matrix = build_matrix("cat", current, baseline=baseline)
    marks = {c.id: c.change for c in (*matrix.grid.values(), *matrix.probes) if c.change}
    assert marks == {
        rid("m1", "float16", 2, "none", 8): "added",
        rid("m1", "fp8_e4m3", 2, "none", 1): "changed",
        rid("m1", "fp8_e4m3", 4, "none", 8): "changed",
        "edge:gone": "removed",
    }
    text = render_matrix_text(matrix)
    assert "changes against the baseline (4 rows):" in text
    assert "  A -> B: 1 row" in text
    assert "  A unchanged, other fields moved: 1 row" in text
    assert "m1    tp2 none     B    B+    B*   B" in text


# --- the real project: terminal --------------------------------------------------------------


@pytest.fixture(scope="module")
def matrix_text() -> str:
    result = ok(invoke(["matrix", "--color", "never"], cwd=ROOT))
    assert result.code == 0, result.stderr
    return result.stdout


def test_every_category_fits_100_columns_in_one_table(matrix_text):
    lines = matrix_text.splitlines()
    assert max(len(line) for line in lines) <= 100
    names = [json.loads(p.read_text())["category"] for p in sorted(SNAPSHOTS.glob("*.json"))]
    titles = [line for line in lines if re.match(r"^[a-z0-9-]+: [a-z ]+ per row;", line)]
    assert sorted(t.split(":")[0] for t in titles) == sorted(names)
    # A policy category selects no kernel: its title says what its cells show.
    shows = {t.split(":")[0]: t.split(": ")[1].split(" per row")[0] for t in titles}
    # (Each family's module in tests/families/ states what its category's cells show,
    # `MATRIX_SHOWS`, where it is not a kernel.)
    assert shows == {name: "kernel" for name in names} | families.table("MATRIX_SHOWS")
    # One header block per category: the linear grids are not split.
    assert sum(1 for line in lines if line.lstrip().startswith("kv: ")) == len(names)


@pytest.mark.parametrize(
    "columns,terminal,width",
    [
        (None, None, 100),  # a file, a pipe, a CI log: the same lines everywhere
        (None, 132, 132),  # a terminal's own width
        ("80", 132, 80),  # COLUMNS wins over the terminal
        (" 120 ", None, 120),
        ("40", None, 60),  # never narrower than MIN_WIDTH
        (None, 20, 60),
        ("wide", None, 100),  # not a whole number: ignored
        ("-5", 90, 90),
        ("", None, 100),
    ],
)
def test_text_width_of_files_terminals_and_columns(columns, terminal, width):
    environ = {} if columns is None else {"COLUMNS": columns}
    assert (DEFAULT_WIDTH, MIN_WIDTH) == (100, 60)
    assert text_width(environ, terminal) == width


TITLE = r"^[a-z0-9-]+: [a-z ]+ per row;"


@pytest.fixture(scope="module")
def full_matrix_text() -> str:
    result = ok(invoke(["matrix", "--no-collapse", "--color", "never"], cwd=ROOT))
    assert result.code == 0, result.stderr
    return result.stdout


def test_the_matrix_fits_the_width_columns_asks_for(full_matrix_text):
    """COLUMNS=60: every line fits, the wide (uncollapsed) grids are cut into blocks of
    whole column groups (each with its headers and every row), and no cell is lost."""
    matrix_text = full_matrix_text
    result = ok(
        invoke(["matrix", "--no-collapse", "--color", "never"], environ={"COLUMNS": "60"}, cwd=ROOT)
    )
    assert result.code == 0, result.stderr
    narrow = result.stdout.splitlines()
    assert max(len(line) for line in narrow) <= 60
    assert max(len(line) for line in matrix_text.splitlines()) > 60
    # One header block per kv value in the linear grids (three kv values), instead of one.
    kv_headers = [line.split() for line in narrow if line.lstrip().startswith("kv: ")]
    assert ["kv:", "float16"] in kv_headers
    assert ["kv:", "fp8_e4m3"] in kv_headers
    assert ["kv:", "fp8_e5m2"] in kv_headers

    # The same cells: per row label, the symbols of its blocks joined equal the wide row.
    def cells(lines: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for line in lines:
            if re.match(r"^[0-9a-z_]+ +tp[0-9]+ ", line):
                model, tp, spec, *symbols = line.split()
                label = f"{model}/{tp}/{spec}"
                out[label] = out.get(label, "") + "".join(symbols)
        return out

    def section(text: str, category: str) -> list[str]:
        lines = text.splitlines()
        start = next(n for n, line in enumerate(lines) if line.startswith(f"{category}: "))
        end = next(
            (n for n in range(start + 1, len(lines)) if re.match(TITLE, lines[n])), len(lines)
        )
        return lines[start + 1 : end]

    for category in ("sm70-awq-linear", "sm70-nvfp4-linear", "sm75-linear"):
        wide = cells(section(matrix_text, category))
        assert len(wide) >= 12 and all(len(symbols) >= 9 for symbols in wide.values())
        assert cells(section(result.stdout, category)) == wide


def test_real_moe_grid_shows_the_m1_route(matrix_text):
    assert "TurboMindAwqMoE, M=1 lane.legacy_single_token" in matrix_text
    assert "edge:qpn_m1_on" in matrix_text


def test_colour_follows_the_flag_and_no_color():
    plain = ok(
        invoke(
            ["matrix", "-c", "sm70-awq-linear", "--color", "always"],
            cwd=ROOT,
            environ={"NO_COLOR": "1"},
        )
    )
    assert "\x1b[" in plain.stdout  # an explicit flag wins over NO_COLOR
    auto = ok(invoke(["matrix", "-c", "sm70-awq-linear"], cwd=ROOT, environ={"NO_COLOR": "1"}))
    assert "\x1b[" not in auto.stdout
    assert Painter(True)("A", color=32) == "\x1b[32mA\x1b[0m"


def test_field_option_and_bad_dimensions():
    result = ok(
        invoke(
            ["matrix", "-c", "sm70-awq-linear", "--field", "prepared_layout", "--color", "never"],
            cwd=ROOT,
        )
    )
    assert result.code == 0
    assert "sm70-awq-linear: prepared_layout per row;" in result.stdout
    bad = ok(invoke(["matrix", "--rows", "gpu"], cwd=ROOT))
    assert bad.code == 2
    assert bad.stderr == (
        "error: unknown matrix dimension 'gpu': choose from model, kv, tp, spec, c, q\n"
    )


def test_baseline_file_marks_the_changed_cell(tmp_path):
    data = json.loads((SNAPSHOTS / "sm70-awq-linear.json").read_text())
    target = "35b_a3b_awq/float16/tp4/none/c8/q8192"
    row = next(r for r in data["rows"] if r["id"] == target)
    row["route"]["kernel"] = "TritonAwqLinearKernel"
    baseline = tmp_path / "sm70-awq-linear.json"
    baseline.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    result = ok(invoke(["matrix", "--baseline", baseline, "--color", "never"], cwd=ROOT))
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "changes against the baseline (1 row):" in lines
    assert "  A -> B: 1 row" in lines
    assert f"    {target}" in lines
    marked = [line for line in lines if "*" in line and line.startswith("35b_a3b_awq")]
    assert len(marked) == 1 and marked[0].startswith("35b_a3b_awq           tp4 none")


# --- HTML ----------------------------------------------------------------------------------


class Page(html.parser.HTMLParser):
    """What the tests look for in the report: cells, legends, links, scripts, sources."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict[str, str | None]] = []
        self.sections: list[str] = []
        self.legend_rows = 0
        self.urls: list[str] = []
        self.scripts: list[str] = []
        self.group_links: list[dict[str, str | None]] = []
        self._table: list[str] = []
        self._script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        for key in ("src", "href"):
            if found.get(key) and not str(found[key]).startswith("#"):
                self.urls.append(str(found[key]))
        if tag == "section" and (found.get("class") == "category"):
            self.sections.append(str(found["id"]))
        if tag == "table":
            self._table.append(str(found.get("class")))
        if tag == "tr" and self._table and self._table[-1] == "legend":
            self.legend_rows += 1
        if tag == "td" and "data-row" in found:
            self.cells.append(found)
        if tag == "a" and "data-group" in found:
            self.group_links.append(found)
        if tag == "script":
            self._script = True
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._table:
            self._table.pop()
        if tag == "script":
            self._script = False

    def handle_data(self, data: str) -> None:
        if self._script:
            self.scripts[-1] += data


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


@pytest.fixture(scope="module")
def real_report(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("report") / "routes.html"
    # Uncollapsed: every row has its own cell (the collapsed page: test_invariances.py).
    result = ok(invoke(["report", "--html", out, "--no-collapse"], cwd=ROOT))
    assert result.code == 0, result.stderr
    return out.read_text()


def test_report_holds_every_row_and_legend_and_no_url(real_report):
    page = parse(real_report)
    retained = {}
    for path in sorted(SNAPSHOTS.glob("*.json")):
        data = json.loads(path.read_text())
        retained[data["category"]] = [r["id"] for r in data["rows"]]
    assert sorted(page.sections) == sorted(f"cat-{n}" for n in retained)
    rows = json.loads(page.scripts[0])["rows"]
    assert sorted(r["id"] for r in rows) == sorted(
        f"{name}:{i}" for name, ids in retained.items() for i in ids
    )
    assert len(page.cells) == sum(len(ids) for ids in retained.values())
    assert page.legend_rows >= 2 * len(retained)  # a header and at least one entry each
    assert page.urls == []
    assert "http://" not in real_report and "https://" not in real_report
    assert "@import" not in real_report and "url(" not in real_report


def test_report_marks_changes_and_lists_groups_linking_to_cells(tmp_path):
    data = json.loads((SNAPSHOTS / "sm70-awq-linear.json").read_text())
    target = "35b_a3b_awq/float16/tp4/none/c8/q8192"
    row = next(r for r in data["rows"] if r["id"] == target)
    row["route"]["kernel"] = "TritonAwqLinearKernel"
    baseline = tmp_path / "sm70-awq-linear.json"
    baseline.write_text(json.dumps(data))
    out = tmp_path / "r.html"
    result = ok(invoke(["report", "--html", out, "--baseline", baseline], cwd=ROOT))
    assert result.code == 0, result.stderr
    page = parse(out.read_text())
    changed = [c for c in page.cells if "changed" in str(c.get("class"))]
    assert [c["title"] for c in changed] == [f"{target}: TurboMindAwqLinearKernel (changed)"]
    assert len(page.group_links) == 1
    assert (
        ">sm70-awq-linear: changed 1 row: route.kernel: &quot;TritonAwqLinearKernel&quot; "
        "-&gt; &quot;TurboMindAwqLinearKernel&quot;</a>"
    ) in out.read_text()
    link = page.group_links[0]
    assert link["href"] == f"#{changed[0]['id']}"
    assert changed[0]["data-groups"] == link["data-group"]


def test_script_data_cannot_break_out_and_text_is_escaped():
    hostile = "</script><script>alert(1)</script><!-- & \u2028"
    route = status_route("not_applicable", hostile)
    rows = [{"id": rid("m"), "route": route}, {"id": "edge:x", "route": route}]
    text = render_html([build_matrix("cat", rows)], title="t <b>", subtitle="s & s")
    assert text.count("</script>") == 2  # the data element's and the code's own
    assert "<script>alert" not in text
    assert "<b>" not in text and "t &lt;b&gt;" in text
    page = parse(text)
    data = json.loads(page.scripts[0])
    assert data["rows"][0]["route"]["status"]["message"] == hostile
    assert "\\u003c/script\\u003e" in script_json({"m": "</script>"})


def reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(v) for v in value]
    return value


def test_report_bytes_are_deterministic():
    """The same rows give the same bytes, whatever order the routes' keys were built in."""
    rows = grid_rows()
    first = render_html([build_matrix("cat", rows, baseline=rows[1:])], title="t", subtitle="s")
    again = render_html(
        [build_matrix("cat", reversed_keys(rows), baseline=reversed_keys(rows[1:]))],
        title="t",
        subtitle="s",
    )
    assert first == again


def test_transitions_are_listed_as_row_patterns(tmp_path):
    data = json.loads((SNAPSHOTS / "sm70-awq-linear.json").read_text())
    for row in data["rows"]:
        if row["id"].startswith("35b_a3b_awq/float16/tp4/"):
            row["route"]["kernel"] = "TritonAwqLinearKernel"
    baseline = tmp_path / "sm70-awq-linear.json"
    baseline.write_text(json.dumps(data))
    result = ok(invoke(["matrix", "--baseline", baseline, "--color", "never"], cwd=ROOT))
    assert result.stdout.splitlines()[-3:] == [
        "changes against the baseline (18 rows):",
        "  A -> B: 18 rows",
        "    35b_a3b_awq/float16/tp4/{dflash,mtp,none}/c{1,4,8}/q{4096,8192}",
    ]


def test_report_refuses_a_missing_folder(tmp_path):
    result = ok(invoke(["report", "--html", tmp_path / "no" / "r.html"], cwd=ROOT))
    assert result.code == 2
    assert result.stderr.startswith("error: ")


def test_readme_matrix_excerpt_is_the_program_output():
    """The matrix excerpt of docs/commands.md is real output: each `...`-separated block is a
    run of consecutive lines of `routectl matrix -c sm70-awq-linear`."""
    readme = (ROOT / "docs" / "commands.md").read_text()
    section = readme.split("## `routectl matrix` and `routectl report --html`")[1]
    excerpt = section.split("```text\n")[1].split("```")[0]
    result = ok(invoke(["matrix", "-c", "sm70-awq-linear", "--color", "never"], cwd=ROOT))
    output = result.stdout
    blocks = [b.strip("\n") for b in excerpt.split("...\n")]
    assert len(blocks) == 3
    for block in blocks:
        assert block + "\n" in output, block


def test_policy_category_cells_show_qualification_and_guards():
    """A DFlash2 policy row selects no kernel: its cell is the verifier qualification, the
    options on and the GDN guards admitted (docs/contracts/dflash2.md §4.5: 18 qualified TP4 rows
    admit all four guards, 18 TP2 rows all but the combined split)."""
    result = ok(invoke(["matrix", "-c", "sm70-dflash2-policy", "--color", "never"], cwd=ROOT))
    assert result.code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "  F  qualified; 18/18 on; guards admitted: verify, norm, split  (18 rows)" in lines
    assert any(
        line.startswith(
            "  G  qualified; 18/18 on; guards admitted: verify, norm, split, combined_split  ("
        )
        for line in lines
    )
    assert (
        "  c  not qualified (spec_method_not_dflash); 0/18 on; guards admitted: none  (72 rows)"
    ) in lines
    assert (
        "  edge:fused_gdn_verify_0           A  fused_gdn_verify off "
        "(alias:VLLM_SM70_DFLASH2_FUSED_GDN_VERI…"
    ) in lines


def test_the_change_groups_are_a_folded_panel_after_the_grids():
    rows = grid_rows()
    page = render_html([build_matrix("cat", rows, baseline=rows[1:])], title="t", subtitle="s")
    panel = page.index('<details id="changes"><summary>Change groups: ')
    # After every grid, so a long list never pushes them down the page.
    assert page.rindex('<table class="grid">') < panel
    assert page.index("</details>", panel) < page.index("</main>")
