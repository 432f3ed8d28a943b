"""How fast is the main job? Prints ratios measured in one run.

1. `python -c "import torch"` versus `routectl check` on every shipped category (targets:
   check <= 1.3x the torch import with the default jobs, <= 1.5x with `--jobs 1`), and rows
   per second: the default (one replay process per CPU) and `--jobs 1` (this process only),
   after compiling the project's bytecode.
2. `import routectl`, the engine's start-up import (target: at most 50 ms), as
   `python -X importtime` reports it: the median of the runs.
3. A synthetic 100,000-row snapshot, each step timed: generated, made canonical, validated,
   written, read back, validated again and compared with a copy where 1% of the rows
   changed (target: at most 15 s on a 2-core runner). The compare steps include
   grouping the changes (signatures and row-id patterns), as `routectl check` does.

Run from the repository root:
`python benchmarks/check_speed.py [--rows N] [--repeat R] [--only check|import|synthetic]`.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
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


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def compile_bytecode(env: dict[str, str]) -> None:
    """Bytecode for the project's packages, as an installed package has it (pip compiles at
    install): a checkout run with PYTHONDONTWRITEBYTECODE would otherwise compile every
    module from source on every run, which torch, installed, never does."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "routectl", "policies", "native"],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def paired(
    repeat: int, env: dict[str, str], variants: dict[str, list[str]]
) -> tuple[float, dict[str, float], dict[str, float]]:
    """Best torch import, and per variant of `routectl check` its best time and the median
    ratio of back-to-back runs: on a shared 2-core machine the torch import alone varies by
    a third from run to run, so each check is compared with an import timed right before."""
    torch_times: list[float] = []
    check_times: dict[str, list[float]] = {name: [] for name in variants}
    ratios: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeat):
        t = timed([sys.executable, "-c", "import torch"], env)
        torch_times.append(t)
        for name, extra in variants.items():
            c = timed([sys.executable, "-m", "routectl", "check", *extra], env)
            check_times[name].append(c)
            ratios[name].append(c / t)
    return (
        min(torch_times),
        {n: min(v) for n, v in check_times.items()},
        {n: sorted(v)[len(v) // 2] for n, v in ratios.items()},
    )


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
    args = parser.parse_args()
    parts = set(args.only or ("check", "import", "synthetic"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(VARIABLE_PREFIX)}
    compile_bytecode(env)
    summary: dict[str, object] = {}
    print(f"CPUs available: {len(os.sched_getaffinity(0))}; bytecode compiled")
    if "check" in parts:
        variants = {"default": [], "--jobs 1": ["--jobs", "1"]}
        targets = {"default": 1.3, "--jobs 1": 1.5}
        torch_s, check_s, ratio = paired(args.repeat, env, variants)
        listing = subprocess.run(
            [sys.executable, "-m", "routectl", "list"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        rows = sum(int(line.split()[1]) for line in listing.splitlines() if line.strip())
        print(f"import torch:   {torch_s:6.2f} s (best of {args.repeat})")
        for name in variants:
            print(
                f"routectl check ({name}): {check_s[name]:6.2f} s (best of {args.repeat}), "
                f"{rows} rows, {rows / check_s[name]:,.0f} rows/s; ratio {ratio[name]:.2f} "
                f"(median of {args.repeat} back-to-back pairs; target <= {targets[name]})"
            )
        summary.update(
            torch_s=round(torch_s, 3),
            check_s={n: round(v, 3) for n, v in check_s.items()},
            ratio={n: round(v, 3) for n, v in ratio.items()},
            rows=rows,
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
        print(f"synthetic {args.rows:,} rows: {total:.1f} s (target <= 15 s)")
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
