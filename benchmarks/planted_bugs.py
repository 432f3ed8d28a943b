"""Plant realistic single bugs one at a time in a scratch copy of the tree and see whether
`routectl check` or the test files that name the mutated module catch each (issue 28's
held-out audit, run as a habit: benchmarks/MUTATION.md records each run).

Each bug is (name, file, text, replacement, stem): the text must occur exactly once; the test
files run are those under tests/ whose source contains `stem`, `-x`, after `routectl check`.
`tests/test_doorway.py` is left out: it lists files through git, and the scratch copy made by
`git archive` is no repository (there it errors for every bug, which would read as a catch).

    rm -rf /tmp/plant && mkdir /tmp/plant && git archive HEAD | tar -x -C /tmp/plant
    python benchmarks/planted_bugs.py /tmp/plant /tmp/plant.jsonl

One JSON object a line: the bug, `check_rc`, `tests_rc`, the first failure, `caught`, seconds.
A rerun skips the bugs already in the file. Long (minutes a bug on 2 cores): not in `.ci/run`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

# (name, file, text, replacement, stem), in the classes issue 28 names.
BUGS: list[tuple[str, str, str, str, str]] = [
    (
        "fp8moe-flags-swap",
        "policies/fp8_moe.py",
        '"compact_native_unpermute": self.native_unpermute,\n'
        '            "compact_decomposed": self.decomposed,',
        '"compact_native_unpermute": self.decomposed,\n'
        '            "compact_decomposed": self.native_unpermute,',
        "fp8_moe",
    ),
    (
        "fp8moe-w13-order",
        "policies/fp8_moe.py",
        '(("compact", fm.ST_COMPACT_W13_OP), ("indexed", fm.ST_INDEXED_W13_OP))',
        '(("indexed", fm.ST_INDEXED_W13_OP), ("compact", fm.ST_COMPACT_W13_OP))',
        "fp8_moe",
    ),
    (
        "attn-context-bound",
        "native/kernels/v100_attention.py",
        "if not 0 < inputs.table_width * page <= MAX_CONTEXT:",
        "if not 0 < inputs.table_width * page < MAX_CONTEXT:",
        "v100_attention",
    ),
    (
        "attn-group-rows",
        "native/kernels/v100_attention.py",
        "(groups > 1 and rows == groups * 8)",
        "(groups > 1 and rows <= groups * 8)",
        "v100_attention",
    ),
    (
        "md-escape-pipe",
        "routectl/review/markdown.py",
        r'MARKUP = re.compile(r"([\\`*_\[\]<>|~!#&])")',
        r'MARKUP = re.compile(r"([\\`*_\[\]<>~!#&])")',
        "markdown",
    ),
    (
        "html-attr-quote",
        "routectl/review/matrix_html.py",
        "return html.escape(html_text(str(value)), quote=True)",
        "return html.escape(html_text(str(value)), quote=False)",
        "matrix_html",
    ),
    (
        "rows-field-prefix",
        "routectl/rows.py",
        r'return re.compile(text + r"(?=$|[.\[])")',
        r"return re.compile(text)",
        "rows",
    ),
    (
        "triton-silu-div",
        "native/reference/triton_qpn.py",
        "silu = tl.math.div_rn(gate, 1.0 + e32)",
        "silu = (gate / (1.0 + e32))",
        "triton",
    ),
    (
        "triton-reduce-fma",
        "native/reference/triton_qpn.py",
        "out = tl.fma(weights[r], routes[r], out)",
        "out = out + weights[r] * routes[r]",
        "triton",
    ),
    (
        "jsonwrite-unsorted",
        "routectl/io/jsonwrite.py",
        "_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE",
        "_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE",
        "jsonwrite",
    ),
    (
        "flashnext-precision-spec",
        "policies/flash_next.py",
        'else engine.spec_method == "mtp"',
        'else engine.spec_method != "none"',
        "flash_next",
    ),
    (
        "fp8moe-st-reduce-slots",
        "policies/fp8_moe.py",
        "                num_tokens=1,\n                total_slots=slots,\n"
        "            )\n        else:",
        "                num_tokens=1,\n                total_slots=layer.experts,\n"
        "            )\n        else:",
        "fp8_moe",
    ),
]
BUGS += [
    (
        "fn-dense-limit",
        "policies/flash_next.py",
        "return cap70 and 2 <= m <= limit",
        "return cap70 and 2 <= m < limit",
        "flash_next",
    ),
    (
        "fn-gdn-low",
        "policies/flash_next.py",
        "return cap70 and low <= m <= high",
        "return cap70 and low < m <= high",
        "flash_next",
    ),
    (
        "fn-reduced-min",
        "policies/flash_next.py",
        "and m < REDUCED_PRECISION_MIN_M:",
        "and m <= REDUCED_PRECISION_MIN_M:",
        "flash_next",
    ),
    (
        "expected-prefix",
        "routectl/review/expected.py",
        "and self.regex.fullmatch(change.path) is not None",
        "and self.regex.match(change.path) is not None",
        "expected",
    ),
    (
        "fake-fp8-transposed",
        "native/ops_fp8.py",
        'empty_beside((k, n), "uint8", weight),',
        'empty_beside((n, k), "uint8", weight),',
        "fp8",
    ),
    (
        "fake-qpn2-scale-dtype",
        "native/ops_linear.py",
        'return empty_beside((padded_n, weight_scale.shape[1]), "float8_e4m3fn", weight_scale)',
        'return empty_beside((padded_n, weight_scale.shape[1]), "uint8", weight_scale)',
        "qpn2",
    ),
    (
        "fake-tm-compact-transposed",
        "native/ops_linear.py",
        'empty_beside((padded_n, groups), "uint8", weight)',
        'empty_beside((groups, padded_n), "uint8", weight)',
        "nvfp4",
    ),
    (
        "attn-var-default",
        "policies/v100_attention_variables.py",
        '("prefill_split_kv_min_q", "PREFILL_SPLIT_KV_MIN_Q", INT, int, 1,',
        '("prefill_split_kv_min_q", "PREFILL_SPLIT_KV_MIN_Q", INT, int, 0,',
        "v100_attention",
    ),
    (
        "attn-var-parser",
        "policies/v100_attention_variables.py",
        '("fp8_prefill_bridge", "FP8_PREFILL_BRIDGE", NE0,',
        '("fp8_prefill_bridge", "FP8_PREFILL_BRIDGE", EQ1,',
        "v100_attention",
    ),
]


def plant(tree: Path, out: Path) -> None:
    done: set[str] = set()
    if out.exists():
        done = {json.loads(line)["bug"] for line in out.read_text().splitlines() if line.strip()}
    env = {**os.environ, "PYTHONPATH": str(tree)}
    for name, rel, old, new, stem in BUGS:
        if name in done:
            continue
        path = tree / rel
        text = path.read_text()
        rec: dict[str, object] = {"bug": name, "file": rel}
        if text.count(old) != 1:
            rec.update(result="not planted", why=f"{text.count(old)} matches")
            _append(out, rec)
            continue
        path.write_text(text.replace(old, new))
        t0 = time.time()
        try:
            check = _run([sys.executable, "-m", "routectl", "check"], tree, env)
            rec["check_rc"] = check.returncode
            if check.returncode:
                rec["check_tail"] = (check.stdout + check.stderr).strip().splitlines()[-3:]
            files = sorted(
                str(p.relative_to(tree))
                for p in (tree / "tests").glob("test_*.py")
                if stem in p.read_text() and p.name != "test_doorway.py"
            )
            rec["files"] = len(files)
            tests = _run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *files],
                tree,
                env,
            )
            rec["tests_rc"] = tests.returncode
            failed = [ln for ln in tests.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
            rec["tests_tail"] = failed[:2] or tests.stdout.strip().splitlines()[-1:]
        finally:
            path.write_text(text)  # the tree is left as it was, whatever happened
        rec["caught"] = bool(rec.get("check_rc")) or bool(rec.get("tests_rc"))
        rec["s"] = round(time.time() - t0)
        _append(out, rec)


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["nice", "-n", "10", *cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=3600
    )


def _append(out: Path, rec: dict[str, object]) -> None:
    with out.open("a") as f:
        f.write(json.dumps(rec) + "\n")
    print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    plant(Path(sys.argv[1]), Path(sys.argv[2]))
