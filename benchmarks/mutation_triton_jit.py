"""Mutation runs of the Triton kernels' jit bodies (native/reference/triton_qpn.py), which
mutmut skips (it leaves `@triton.jit` functions alone): see benchmarks/mutation/triton.md.

The mutants are line patches in benchmarks/mutation/triton-jit/patches.json (mutmut 3.8.1's
operators applied to the jit functions with the decorator hidden, numbered as mutmut numbers
them: `_w2_kernel__405` is that function's 405th mutant); each is the module with its one
statement replaced. Four commands:

  gpu KEYS OUT WORKERS DEADLINE   on the device: each mutant of KEYS (lines `key stage`) in a
                                  child process of its own, WORKERS at once, none started
                                  after DEADLINE seconds; one JSON line a mutant in OUT
  one FILE TEST...                the child: tests/test_triton_gpu.py's GPU tests with
                                  native.reference.triton_qpn replaced by the mutant FILE
  diff FILE CASE...               on the device: the mutant FILE on the compiled reduced
                                  CASES, each element against the reference (why one lives)
  interp KEY TEST[,TEST...]       here, no GPU: the mutant under TRITON_INTERPRET=1 in the
                                  tests of tests/test_mut_triton_interp.py named, then in
                                  any pytest node ids among them (in-process)
  structure KEYS OUT              here, no GPU: each mutant of KEYS (a key a line) compiled
                                  for capability 9.0 and judged by the PTX rules of
                                  tests/test_triton_compiled_structure.py, two at once; one
                                  JSON line a mutant in OUT ("error": it does not compile)
  patches OUT [FUNCTION...]       here: every jit mutant (of the FUNCTIONs named, or of all)
                                  as line patches into OUT (JSON), generated again with
                                  mutmut's operators; the keys the stored patches.json has
                                  must come out equal (checked), so the numbering is mutmut's

A child's exit status 1 is a killed mutant, 0 a survivor; a child still running after its
limit counts as detected ("timeout"). The original runs first and must pass. A stage may
chain others ("s1b+s1c": the second only for a survivor of the first); the stage "diff"
runs the diff command on all the reduced cases and keeps its whole output.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "native" / "reference" / "triton_qpn.py"
PATCHES = ROOT / "benchmarks" / "mutation" / "triton-jit" / "patches.json"
GPU_FILE = "tests/test_triton_gpu.py::"
REDUCED = GPU_FILE + "test_reduced_geometries_compiled_equal_the_reference"
# The first four reduced cases kill most mutants; a survivor of them runs the other four.
FIRST = ("pairs", "packed-unpaired-widen", "no-predecode", "prefetch-speculate")
OTHERS = ("chains-recheck", "packed", "packed-unpaired-widen-fast", "weights-late")
STAGES = {
    "s1b": [f"{REDUCED}[{n}]" for n in FIRST] + [GPU_FILE + "test_crafted_roundings_compiled"],
    "s1c": [f"{REDUCED}[{n}]" for n in OTHERS],
    "s1": [f"{REDUCED}[{n}]" for n in OTHERS + FIRST]
    + [GPU_FILE + "test_crafted_roundings_compiled"],
    "s2": [
        GPU_FILE + "test_launch_configs_equal_the_op",
        GPU_FILE + "test_step_after_a_router_that_writes_the_ids_late",
        GPU_FILE + "test_w2_after_a_kernel_that_writes_the_intermediate_late",
        GPU_FILE + "test_random_equal_cpu_op_and_within_oracle_bounds",
        GPU_FILE + "test_w2_recheck_after_a_late_write_that_changes_every_id",
    ],
    # The recheck at sixteen routes alone (the redo decision's mutants).
    "late16": [GPU_FILE + "test_w2_recheck_after_a_late_write_that_changes_every_id"],
}
REDUCED_NAMES = sorted(FIRST + OTHERS)
CHILD_LIMIT_S = float(os.environ.get("JITMUT_CHILD_LIMIT_S", "150"))  # s2 under load needs more


def mutant_source(key: str) -> str:
    """The module's text with mutant `key`'s patch applied (the last lines first, so the
    earlier line numbers stay right)."""
    lines = MODULE.read_text().splitlines(keepends=True)
    patches = json.loads(PATCHES.read_text())[key]
    for start, stop, new in sorted(patches, key=lambda p: -p[0]):
        lines[start:stop] = [new] if new else []
    return "".join(lines)


def load_as_module(path: str) -> None:
    """Make the file at `path` the module native.reference.triton_qpn for every later import."""
    import native.reference as package

    spec = importlib.util.spec_from_file_location("native.reference.triton_qpn", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["native.reference.triton_qpn"] = module
    spec.loader.exec_module(module)
    package.triton_qpn = module  # type: ignore[attr-defined]


def one(path: str, tests: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    if path != "-":
        load_as_module(path)
    import pytest

    return int(pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-m", "gpu", *tests]))


def diff(path: str, cases: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    if path != "-":
        load_as_module(path)
    import torch

    from tests import test_triton_gpu as t

    for case, weights in ((case, weights) for case in cases for weights in ("drawn", "balanced")):
        out, inter, want_out, want_inter, spill = t.reduced_step(case, weights)
        line: dict[str, object] = {"case": case, "weights": weights, "spilled": spill}
        for name, got, want in (("out", out, want_out), ("inter", inter, want_inter)):
            wrong = torch.nonzero(~((got == want) | (got.isnan() & want.isnan())))
            line[name] = len(wrong)
            line[name + "_first"] = [
                (tuple(at.tolist()), float(got[tuple(at)]), float(want[tuple(at)]))
                for at in wrong[:4]
            ]
        print(json.dumps(line), flush=True)
    return 0


def gpu(keys_file: str, out_file: str, workers: int, deadline: float) -> None:
    start = time.time()
    work = ROOT / "build" / "triton-jit-mutants"
    work.mkdir(parents=True, exist_ok=True)
    jobs = [line.split() for line in Path(keys_file).read_text().splitlines() if line.strip()]
    lock = threading.Lock()
    env = dict(os.environ, PYTHONPATH=str(ROOT))

    def run(key: str, stage: str) -> None:
        if time.time() - start > deadline:
            return
        path = "-"
        if key != "ORIGINAL":
            path = str(work / f"{key}.py")
            Path(path).write_text(mutant_source(key))
        began = time.time()
        record: dict[str, object] = {"key": key}
        for part in stage.split("+"):
            record["stage"] = part
            command = ["diff", path, *REDUCED_NAMES] if part == "diff" else ["one", path]
            tests = [] if part == "diff" else STAGES[part]
            try:
                child = subprocess.run(
                    [sys.executable, __file__, *command, *tests],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=CHILD_LIMIT_S,
                )
                record["rc"] = child.returncode
                tail = child.stdout + child.stderr
            except subprocess.TimeoutExpired:
                record["rc"], tail = "timeout", ""
            if part == "diff":
                record["output"] = tail[-4000:]
            elif key == "ORIGINAL" or record["rc"] not in (0, 1):
                record["tail"] = tail[-300:]
            if record["rc"] != 0:
                break
        record["s"] = round(time.time() - began, 1)
        with lock, open(out_file, "a") as out:
            out.write(json.dumps(record) + "\n")

    # The original alone first: it must pass, and it fills Triton's cache with the kernels
    # that a mutant of another function leaves unchanged.
    run("ORIGINAL", "s1")
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda job: run(job[0], job[1] if len(job) > 1 else "s1b"), jobs))
    print(f"done in {time.time() - start:.0f} s")


def interp(key: str, cases: list[str]) -> None:
    """The mutant `key` under the interpreter, in this process: each name of a test function
    of tests/test_mut_triton_interp.py called alone (a line each), then any pytest node ids
    (a `.py` path or `path::test`, such as tests/triton_order_cases.py) in one pytest run."""
    os.environ["TRITON_INTERPRET"] = "1"
    sys.path.insert(0, str(ROOT))
    if key != "ORIGINAL":
        path = ROOT / "build" / "triton-jit-mutants" / f"{key}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(mutant_source(key))
        load_as_module(str(path))
    from tests import test_mut_triton_interp as cases_module

    node_ids = [case for case in cases if ".py" in case]
    for case in (case for case in cases if ".py" not in case):
        began = time.time()
        try:
            getattr(cases_module, case)()
            result = "pass"
        except Exception as error:  # a mutant may fail in any way: each is a kill
            result = f"FAIL {type(error).__name__} {str(error)[:150]}".replace("\n", " ")
        line = {"key": key, "case": case, "result": result, "s": round(time.time() - began, 1)}
        print(json.dumps(line), flush=True)
        if result != "pass":
            return  # killed: the rest would say no more
    if node_ids:
        import pytest

        began = time.time()
        rc = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "--rootdir", str(ROOT), *node_ids])
        result = "pass" if rc == 0 else f"FAIL pytest exit {int(rc)}"
        seconds = round(time.time() - began, 1)
        line = {"key": key, "case": " ".join(node_ids), "result": result, "s": seconds}
        print(json.dumps(line), flush=True)


def generate(functions: set[str]) -> dict[str, list[tuple[int, int, str]]]:
    """Every mutant of the jit functions as line patches: mutmut 3.8.1's operators applied to
    the module with its `@triton.jit` lines made comments (mutmut leaves decorated functions
    alone), numbered per function in mutmut's order (its trampoline's `_N`)."""
    import difflib

    import libcst as cst
    from mutmut.mutation.file_mutation import create_mutations, deep_replace

    source = MODULE.read_text()
    # A comment of the same line keeps every line number and makes each function plain.
    hidden = source.replace("@triton.jit\n", "#triton.jit\n")
    jit = set(re.findall(r"@triton\.jit\ndef (\w+)", source))
    module, mutations, _, _ = create_mutations(str(MODULE), hidden)
    lines = hidden.splitlines(keepends=True)
    counts: dict[str, int] = {}
    out: dict[str, list[tuple[int, int, str]]] = {}
    for mutation in mutations:
        function = mutation.contained_by_top_level_function
        if not isinstance(function, cst.FunctionDef):
            continue
        name = function.name.value
        counts[name] = counts.get(name, 0) + 1
        if name not in jit or (functions and name not in functions):
            continue
        before = module.code_for_node(function)
        at = hidden.index(before)
        first = hidden.count("\n", 0, at)
        mutated = deep_replace(function, mutation.original_node, mutation.mutated_node)
        after = module.code_for_node(mutated)  # type: ignore[arg-type]
        old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
        assert lines[first : first + len(old)] == old
        patch = []
        matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                patch.append((first + i1, first + i2, "".join(new[j1:j2])))
        out[f"{name}__{counts[name]}"] = patch
    return out


def patches(out_file: str, functions: set[str]) -> int:
    made = generate(functions)
    stored = json.loads(PATCHES.read_text())
    wrong = [k for k in stored if k in made and [list(p) for p in made[k]] != stored[k]]
    asked = [k for k in stored if not functions or k.rsplit("__", 1)[0] in functions]
    missing = [k for k in asked if k not in made]
    if wrong or missing:
        example = (wrong + missing)[:3]
        print(f"not mutmut's numbering: {len(wrong)} differ, {len(missing)} missing: {example}")
        return 1
    # One mutant a line, so that a change of the module shows as the lines it moves.
    rows = (f"{json.dumps(key)}: {json.dumps(made[key])}" for key in sorted(made))
    Path(out_file).write_text("{\n" + ",\n".join(rows) + "\n}\n")
    print(f"{len(made)} mutants; {len([k for k in stored if k in made])} equal the stored patches")
    return 0


def structure(keys_file: str, out_file: str) -> None:
    sys.path.insert(0, str(ROOT))
    from tests import test_triton_compiled_structure as rules

    keys = Path(keys_file).read_text().split()
    work = ROOT / "build" / "triton-jit-mutants" / "structure"

    def judge(key: str) -> dict[str, object]:
        folder = work / key
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "triton_qpn.py"
        path.write_text(mutant_source(key))
        try:
            found = rules.structure(path, folder / "cache")
        except AssertionError as error:  # the child failed: the mutant does not compile
            return {"key": key, "status": "error", "detail": str(error)[-300:]}
        problems = [
            problem
            for rule in (rules.trigger_problems, rules.wait_problems, rules.recheck_problems)
            for problem in rule(found)
        ]
        return {"key": key, "status": "killed" if problems else "survived", "problems": problems}

    with ThreadPoolExecutor(2) as pool, open(out_file, "a") as out:
        for record in pool.map(judge, keys):
            print(record["key"], record["status"], flush=True)
            out.write(json.dumps(record) + "\n")
            out.flush()


def main(argv: list[str]) -> int:
    command, *rest = argv or ["help"]
    if command == "one":
        return one(rest[0], rest[1:])
    if command == "diff":
        return diff(rest[0], rest[1:])
    if command == "gpu":
        gpu(rest[0], rest[1], int(rest[2]), float(rest[3]))
        return 0
    if command == "structure":
        structure(rest[0], rest[1])
        return 0
    if command == "patches":
        return patches(rest[0], set(rest[1:]))
    if command == "interp":
        interp(rest[0], rest[1].split(","))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
