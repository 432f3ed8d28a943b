"""How fast is the main job? Prints ratios measured in one run.

1. `python -c "import torch"` versus `routectl check` on every shipped category, each check
   timed between two torch imports (its ratio is to their mean), in these states:
   - `no cache`, `no cache --jobs 1`: `--no-cache`, every row replayed (the default jobs,
     one replay process per CPU; `--jobs 1`, this process only);
   - `empty cache`, `empty cache --jobs 1`: `.routectl_cache/` removed first: every row
     replayed and the cache written (targets 1.25x and 1.45x);
   - `unchanged`: the cache filled by the run before, nothing changed (target 0.35x; the
     run imports no torch);
   - `module touched`: one byte added to a policy module first (removed after the run):
     the categories whose key covers it are replayed (the MoE category alone: each key holds
     its category's import closure, docs/cache.md; target 1.3x);
   - `empty cache, six` and `empty cache --jobs 1, six`: the empty-cache states on exactly
     the six categories of `b5bc212` (`-c` for each; issue 34's targets 1.25x and 1.45x).
   Rows per second and the time per 1,000 rows of the replaying states are printed too;
   the project's bytecode is compiled first. Each ratio ends with one `ratio` line: its
   median, every paired run, the target and whether the median meets it, and the load
   average over the runs. `--state` picks states (repeatable); `--baseline-tree DIR` times
   the same states in another checkout too (DIR/.routectl_cache; PYTHONPATH=DIR), each of
   its checks right after this tree's, between the same torch imports, and prints the
   paired ratios of both trees.
2. `import routectl`, the engine's start-up import (target: at most 50 ms), as
   `python -X importtime` reports it: the median of the runs.
3. A synthetic 100,000-row snapshot, each step timed: generated, made canonical, validated,
   written, read back, validated again and compared with a copy where 1% of the rows
   changed (target: at most 10 s on a 2-core runner). The compare steps include
   grouping the changes (signatures and row-id patterns), as `routectl check` does.

Run from the repository root:
`python benchmarks/check_speed.py [--rows N] [--repeat R] [--only check|import|synthetic]
[--state NAME] [--baseline-tree DIR]`. Issue 34's empty-cache figure:
`python benchmarks/check_speed.py --only check --repeat 7 --state "empty cache, six"
--state "empty cache --jobs 1, six"`.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from policies.variables import VARIABLE_PREFIX  # noqa: E402 - after the path is set

# The CLI's collector thresholds (routectl.cli.GC_THRESHOLDS), repeated: importing the CLI
# here would import click and the commands into the timed process.
GC_THRESHOLDS = (1_000_000, 30, 30)


# The CPU seconds (user + system, its children included) of each `timed` run, in order: on
# a loaded machine they vary far less than the wall times (not a target: the targets are
# wall-time ratios).
CPU_SECONDS: list[float] = []


def timed(argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> float:
    """The wall time of one run of `argv` (its CPU time appended to CPU_SECONDS)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall


def compile_bytecode(env: dict[str, str], tree: Path = ROOT) -> None:
    """Bytecode for the project's packages, as an installed package has it (pip compiles at
    install): a checkout run with PYTHONDONTWRITEBYTECODE would otherwise compile every
    module from source on every run, which torch, installed, never does."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "routectl", "policies", "native"],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


CACHE = ROOT / ".routectl_cache"
# The module `module touched` adds one byte to: one only the MoE category's replay imports
# (its key alone covers it, docs/cache.md).
TOUCHED = Path("policies") / "awq_moe_admission.py"
# The six categories of b5bc212, which issue 34's empty-cache targets are stated for.
SIX = (
    "sm70-nvfp4-linear",
    "sm70-awq-linear",
    "sm75-linear",
    "sm70-awq-moe",
    "sm70-dflash2-policy",
    "sm70-fp8-linear",
)
_SIX_ARGS = [arg for name in SIX for arg in ("-c", name)]
# state -> (extra arguments of `routectl check`, target ratio)
STATES: dict[str, tuple[list[str], float | None]] = {
    "no cache": (["--no-cache"], None),
    "no cache --jobs 1": (["--no-cache", "--jobs", "1"], None),
    "empty cache": ([], 1.25),
    "empty cache --jobs 1": (["--jobs", "1"], 1.45),
    "unchanged": ([], 0.35),
    "module touched": ([], 1.3),
    "empty cache, six": (_SIX_ARGS, 1.25),
    "empty cache --jobs 1, six": ([*_SIX_ARGS, "--jobs", "1"], 1.45),
}


def tree_env(tree: Path, env: dict[str, str]) -> dict[str, str]:
    """`env` with the tree's packages first on the path (its routectl, policies, native)."""
    return {**env, "PYTHONPATH": os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])}


def check_in_state(state: str, env: dict[str, str], tree: Path = ROOT) -> float:
    """One `routectl check` of `tree` in `state` (prepared here, undone after)."""
    extra, _ = STATES[state]
    if state.startswith("empty cache"):
        shutil.rmtree(tree / CACHE.name, ignore_errors=True)
    else:
        # An earlier state of the same round may have left the cache holding fewer
        # categories (the `six` states) or a touched module's rows: fill it, untimed, so
        # `unchanged` finds every category and `module touched` replays only its own.
        fill = [sys.executable, "-m", "routectl", "check"]
        subprocess.run(fill, cwd=tree, env=tree_env(tree, env), capture_output=True)
    touched = tree / TOUCHED
    original = touched.read_bytes()
    if state == "module touched":
        touched.write_bytes(original + b"\n")
    try:
        argv = [sys.executable, "-m", "routectl", "check", *extra]
        return timed(argv, tree_env(tree, env), tree)
    finally:
        if state == "module touched":
            touched.write_bytes(original)


Series = dict[tuple[Path, str], list[float]]


def paired(
    repeat: int, env: dict[str, str], states: list[str], trees: list[Path]
) -> tuple[list[float], Series, Series, Series]:
    """Every torch import, and per (tree, state) each check's time, its ratio to the mean of
    the torch imports right before and after it (on a shared 2-core machine the import alone
    varies by a third from minute to minute) and the same ratio of CPU seconds. With several
    trees, each state's checks run back to back, one per tree, between the same two imports
    (their order alternates from round to round), so the trees are compared on the same
    load."""
    torch_times: list[float] = []
    check_times: Series = {(t, n): [] for t in trees for n in states}
    ratios: Series = {(t, n): [] for t in trees for n in states}
    cpu_ratios: Series = {(t, n): [] for t in trees for n in states}
    for tree in trees:
        # Filled and current: `unchanged` then finds every category.
        subprocess.run(
            [sys.executable, "-m", "routectl", "check"],
            cwd=tree,
            env=tree_env(tree, env),
            capture_output=True,
        )
    for round_ in range(repeat):
        before = timed([sys.executable, "-c", "import torch"], env)
        cpu_before = CPU_SECONDS[-1]
        torch_times.append(before)
        for name in states:
            order = trees if round_ % 2 == 0 else trees[::-1]
            times = {}
            cpu = {}
            for tree in order:
                times[tree] = check_in_state(name, env, tree)
                cpu[tree] = CPU_SECONDS[-1]
            after = timed([sys.executable, "-c", "import torch"], env)
            cpu_after = CPU_SECONDS[-1]
            torch_times.append(after)
            for tree, c in times.items():
                check_times[(tree, name)].append(c)
                ratios[(tree, name)].append(c / ((before + after) / 2))
                cpu_ratios[(tree, name)].append(cpu[tree] / ((cpu_before + cpu_after) / 2))
            before, cpu_before = after, cpu_after
    return torch_times, check_times, ratios, cpu_ratios


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def synthetic_rows(count: int) -> list[dict]:
    """Rows shaped like real linear routes: a verdict list, flags, bytes and five calls."""
    rows = []
    for i in range(count):
        m_calls = [
            {
                "op": "nvfp4_qpn2_tm_dispatch_sm70_out",
                "plan": {"m": m, "split_k": 16, "nacc": 2, "gated": False, "prefill_min_m": 1024},
            }
            for m in (1, 8, 32, 64, 1024)
        ]
        rows.append(
            {
                "id": f"m{i // 1000}/float16/tp{2 + i % 3}/none/c{i % 1000}/q8192",
                "route": {
                    "kernel": "Qpn2NvFp4LinearKernel",
                    "verdicts": [
                        {
                            "name": "Qpn2NvFp4LinearKernel",
                            "ok": True,
                            "code": None,
                            "message": None,
                            "not_needed": False,
                        }
                    ],
                    "capability": 70,
                    "prepared_layout": "nvfp4_qpn2",
                    "flags": {"shared_weight": True, "compact_scales": bool(i % 2)},
                    "fallbacks": [],
                    "bytes": {"tensors": {"codes": 10 * i}, "total": 10 * i, "scratch": {}},
                    "prepare": [],
                    "dispatch": m_calls,
                    "fallback": False,
                    "status": None,
                },
            }
        )
    rows.sort(key=lambda r: r["id"])
    return rows


def compare_and_group(old: list[dict], new: list[dict]) -> Any:
    """The comparison as `routectl check` makes it: by id, then the change groups with their
    row patterns."""
    from routectl.review.compare import compare_rows
    from routectl.review.groups import group_changes

    result = compare_rows(old, new)
    for group in group_changes("synthetic", result, {}, {}):
        _ = group.patterns
    return result


def import_ms(repeat: int, env: dict[str, str]) -> float:
    """Median of `import routectl` as `python -X importtime` reports it (cumulative, ms)."""
    figures = []
    for _ in range(repeat):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import routectl"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stderr
        line = next(x for x in err.splitlines() if x.rstrip().endswith("| routectl"))
        figures.append(int(line.split("|")[1]) / 1000)
    return sorted(figures)[len(figures) // 2]


STEPS = (
    "generate",
    "canonical rows",
    "validate",
    "write",
    "read",
    "read: validate",
    "compare identical",
    "compare",
)


def synthetic(count: int) -> dict[str, float]:
    """Each step's seconds (as STEPS lists them), the changed rows found, and the mean time
    of one changed row's field diff in compare."""
    from routectl.review.compare import field_changes
    from routectl.review.snapshot import (
        build_snapshot,
        parse_snapshot,
        plain_rows,
        read_json,
        write_snapshot,
    )

    times: dict[str, float] = {}
    # As `routectl` itself runs (routectl.cli.main): at the default thresholds the collector
    # walks the rows again and again while they are built.
    gc.set_threshold(*GC_THRESHOLDS)

    def step(name: str, work):  # noqa: ANN001, ANN202 - a benchmark's helper
        start = time.perf_counter()
        result = work()
        times[name] = time.perf_counter() - start
        return result

    rows = step("generate", lambda: synthetic_rows(count))
    # build_snapshot(rows) in two steps: plain JSON rows, then ids and the schema.
    plain = step("canonical rows", lambda: plain_rows(rows))
    snap = step(
        "validate",
        lambda: build_snapshot("synthetic", "benchmark rows", plain, plain=True),
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.json"
        step("write", lambda: write_snapshot(path, snap))
        data = step("read", lambda: read_json(path, "snapshot"))
        retained = step(
            "read: validate",
            lambda: parse_snapshot(data, source=str(path)),
        )
    fresh = copy.deepcopy(rows)
    start = time.perf_counter()
    assert not compare_and_group(retained.rows, fresh).changed
    times["compare identical"] = time.perf_counter() - start
    for row in fresh[::100]:
        row["route"]["dispatch"][0]["plan"]["split_k"] = 8
    result = step("compare", lambda: compare_and_group(retained.rows, fresh))
    times["changed"] = len(result.changed)
    baseline = {r["id"]: r for r in retained.rows}
    pairs = [(baseline[r["id"]], r) for r in fresh if r["id"] in result.changed]
    start = time.perf_counter()
    for old, new in pairs:
        field_changes(old, new)
    times["field diff ms"] = (time.perf_counter() - start) / max(1, len(pairs)) * 1e3
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--only",
        choices=("check", "import", "synthetic"),
        action="append",
        help="run only these parts (repeatable; default: all)",
    )
    parser.add_argument(
        "--state", choices=tuple(STATES), action="append", help="check states to time (repeatable)"
    )
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        help="another checkout whose checks are timed beside this tree's, paired",
    )
    args = parser.parse_args()
    parts = set(args.only or ("check", "import", "synthetic"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(VARIABLE_PREFIX)}
    compile_bytecode(env)
    if args.baseline_tree:
        compile_bytecode(env, args.baseline_tree)
    summary: dict[str, object] = {}
    print(f"CPUs available: {len(os.sched_getaffinity(0))}; bytecode compiled")
    if "check" in parts:
        states = args.state or list(STATES)
        trees = [ROOT, *([args.baseline_tree.resolve()] if args.baseline_tree else [])]
        load_before = os.getloadavg()[0]
        torch_s, check_s, ratio, cpu_ratio = paired(args.repeat, env, states, trees)
        load_after = os.getloadavg()[0]
        listing = subprocess.run(
            [sys.executable, "-m", "routectl", "list"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        counts = {line.split()[0]: int(line.split()[1]) for line in listing.splitlines() if line}
        print(
            f"import torch:   {min(torch_s):6.2f} s best, {median(torch_s):6.2f} s median "
            f"(of {len(torch_s)}); load average {load_before:.1f} before, {load_after:.1f} after"
        )
        for tree in trees:
            label = "" if tree == ROOT else f" [{tree}]"
            for name in states:
                rows = (
                    sum(counts[c] for c in SIX) if name.endswith(", six") else sum(counts.values())
                )
                best = min(check_s[(tree, name)])
                per = "" if name == "unchanged" else f", {best / rows * 1000:.3f} s per 1,000 rows"
                print(f"routectl check ({name}){label}: {best:6.2f} s best, {rows} rows{per}")
        for tree in trees:
            label = "" if tree == ROOT else f" [{tree}]"
            for name in states:
                values = ratio[(tree, name)]
                target = STATES[name][1]
                verdict = (
                    ""
                    if target is None
                    else f"; target <= {target}: {'met' if median(values) <= target else 'NOT met'}"
                )
                print(
                    f"ratio {name}{label}: {median(values):.2f} (median of {len(values)} paired "
                    f"runs: {', '.join(f'{r:.2f}' for r in values)}{verdict}; load "
                    f"{load_before:.1f}-{load_after:.1f})"
                )
        for tree in trees:
            label = "" if tree == ROOT else f" [{tree}]"
            for name in states:
                values = cpu_ratio[(tree, name)]
                print(
                    f"cpu ratio {name}{label}: {median(values):.2f} (CPU seconds, processes "
                    f"and children, to the torch imports'; {', '.join(f'{r:.2f}' for r in values)})"
                )
        summary.update(
            torch_s=round(median(torch_s), 3),
            check_s={n: round(min(check_s[(ROOT, n)]), 3) for n in states},
            ratio={n: round(median(ratio[(ROOT, n)]), 3) for n in states},
            ratios={n: [round(r, 3) for r in ratio[(ROOT, n)]] for n in states},
            cpu_ratio={n: round(median(cpu_ratio[(ROOT, n)]), 3) for n in states},
            rows=sum(counts.values()),
            load=[round(load_before, 2), round(load_after, 2)],
        )
    if "import" in parts:
        ms = import_ms(max(args.repeat, 5), env)
        print(
            f"import routectl: {ms:.1f} ms (-X importtime, median of {max(args.repeat, 5)}; "
            f"target <= 50 ms)"
        )
        summary["import_routectl_ms"] = round(ms, 1)
    if "synthetic" in parts:
        times = synthetic(args.rows)
        total = sum(times[k] for k in STEPS)
        print(f"synthetic {args.rows:,} rows: {total:.1f} s (target <= 10 s)")
        for name in STEPS:
            print(f"  {name:<15} {times[name]:6.2f} s")
        print(
            f"  {int(times['changed'])} changed rows found; field diff of a changed row "
            f"{times['field diff ms']:.2f} ms"
        )
        summary.update(
            synthetic_rows=args.rows,
            synthetic_s=round(total, 1),
            synthetic_steps={k: round(times[k], 2) for k in STEPS},
            field_diff_ms=round(times["field diff ms"], 3),
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
