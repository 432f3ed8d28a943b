"""How fast is the main job? Prints ratios measured in one run.

1. `python -c "import torch"` versus `routectl check` on every shipped category (target:
   check <= 1.5x the torch import), and rows per second: the default (one replay process per
   CPU) and `--jobs 1` (this process only), after compiling the project's bytecode.
2. A synthetic 100,000-row snapshot generated, validated, written, read back, compared with
   an identical copy and with a copy where 1% of the rows changed (target: under 60 s on a
   2-core runner). Each compare step includes grouping the changes (signatures and row-id
   patterns), as `routectl check` does.

Run from the repository root: `python benchmarks/check_speed.py [--rows N] [--repeat R]`.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from policies.variables import VARIABLE_PREFIX  # noqa: E402 - after the path is set


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def compile_bytecode(env: dict[str, str]) -> None:
    """Bytecode for the project's packages, as an installed package has it (pip compiles at
    install): a checkout run with PYTHONDONTWRITEBYTECODE would otherwise compile every
    module from source on every run, which torch, installed, never does."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", "routectl", "policies", "native"],
                   cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)


def paired(repeat: int, env: dict[str, str], variants: dict[str, list[str]]
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
    return (min(torch_times), {n: min(v) for n, v in check_times.items()},
            {n: sorted(v)[len(v) // 2] for n, v in ratios.items()})


def synthetic_rows(count: int) -> list[dict]:
    """Rows shaped like real linear routes: a verdict list, flags, bytes and five calls."""
    rows = []
    for i in range(count):
        m_calls = [{"op": "nvfp4_qpn2_tm_dispatch_sm70_out",
                    "plan": {"m": m, "split_k": 16, "nacc": 2, "gated": False,
                             "prefill_min_m": 1024}} for m in (1, 8, 32, 64, 1024)]
        rows.append({"id": f"m{i // 1000}/float16/tp{2 + i % 3}/none/c{i % 1000}/q8192",
                     "route": {
                         "kernel": "Qpn2NvFp4LinearKernel",
                         "verdicts": [{"name": "Qpn2NvFp4LinearKernel", "ok": True,
                                       "code": None, "message": None, "not_needed": False}],
                         "capability": 70, "prepared_layout": "nvfp4_qpn2",
                         "flags": {"shared_weight": True, "compact_scales": bool(i % 2)},
                         "fallbacks": [], "bytes": {"tensors": {"codes": 10 * i},
                                                    "total": 10 * i, "scratch": {}},
                         "prepare": [], "dispatch": m_calls, "fallback": False,
                         "status": None}})
    rows.sort(key=lambda r: r["id"])
    return rows


def compare_and_group(old: list[dict], new: list[dict]) -> int:
    """The comparison as `routectl check` makes it: by id, then the change groups with their
    row patterns; the number of changed rows."""
    from routectl.compare import compare_rows
    from routectl.groups import group_changes

    result = compare_rows(old, new)
    for group in group_changes("synthetic", result, {}, {}):
        _ = group.patterns
    return len(result.changed)


def synthetic(count: int) -> dict[str, float]:
    from routectl.snapshot import build_snapshot, read_snapshot, write_snapshot

    snapshot_dir = ROOT / "snapshots"
    times: dict[str, float] = {}
    start = time.perf_counter()
    rows = synthetic_rows(count)
    times["generate"] = time.perf_counter() - start
    start = time.perf_counter()
    snap = build_snapshot("synthetic", "benchmark rows", rows, snapshot_dir=snapshot_dir)
    times["validate"] = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synthetic.json"
        start = time.perf_counter()
        write_snapshot(path, snap, snapshot_dir=snapshot_dir)
        times["write"] = time.perf_counter() - start
        start = time.perf_counter()
        retained = read_snapshot(path, snapshot_dir=snapshot_dir)
        times["read+validate"] = time.perf_counter() - start
    fresh = copy.deepcopy(rows)
    start = time.perf_counter()
    assert compare_and_group(retained.rows, fresh) == 0
    times["compare identical"] = time.perf_counter() - start
    for row in fresh[:: 100]:
        row["route"]["dispatch"][0]["plan"]["split_k"] = 8
    start = time.perf_counter()
    times["changed"] = compare_and_group(retained.rows, fresh)
    times["compare"] = time.perf_counter() - start
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(VARIABLE_PREFIX)}
    compile_bytecode(env)
    variants = {"default": [], "--jobs 1": ["--jobs", "1"]}
    torch_s, check_s, ratio = paired(args.repeat, env, variants)
    listing = subprocess.run([sys.executable, "-m", "routectl", "list"], cwd=ROOT, env=env,
                             check=True, capture_output=True, text=True).stdout
    rows = sum(int(line.split()[1]) for line in listing.splitlines() if line.strip())
    print(f"CPUs available: {len(os.sched_getaffinity(0))}; bytecode compiled")
    print(f"import torch:   {torch_s:6.2f} s (best of {args.repeat})")
    for name in variants:
        print(f"routectl check ({name}): {check_s[name]:6.2f} s (best of {args.repeat}), "
              f"{rows} rows, {rows / check_s[name]:,.0f} rows/s; ratio {ratio[name]:.2f} "
              f"(median of {args.repeat} back-to-back pairs; target <= 1.5)")
    times = synthetic(args.rows)
    total = sum(v for k, v in times.items() if k != "changed")
    detail = ", ".join(f"{k} {v:.1f} s" for k, v in times.items() if k != "changed")
    print(f"synthetic {args.rows:,} rows: {total:.1f} s (target < 60 s): {detail}; "
          f"{int(times['changed'])} changed rows found")
    print(json.dumps({"torch_s": round(torch_s, 3),
                      "check_s": {n: round(v, 3) for n, v in check_s.items()},
                      "ratio": {n: round(v, 3) for n, v in ratio.items()}, "rows": rows,
                      "synthetic_rows": args.rows, "synthetic_s": round(total, 1)}))


if __name__ == "__main__":
    main()
