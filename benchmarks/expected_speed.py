"""How long does `routectl check --expected-changes` take with a large stated file? Prints
the seconds of one check run (target: at most 10 s with 50,000 stated entries on a 2-core
runner).

A copy of this project (its pyproject.toml and retained snapshots; `policies` imported from
this checkout) where one row in ten of every category moved (its kernel field renamed), and
an expected-changes file of N stated entries: one per moved row stating that change (its
row id), the rest stating fields under the ids of every row in turn (one in three as a glob
of its q dimension), each with a field path of its own (`route.kernel` or
`route.verdicts[*].message` forms): the compile of each pattern and each stated field's
matcher is what the run pays for. The check fails (entries that cover no change are
missing items); its exit code is not the measure.

Run from the repository root:
`python benchmarks/expected_speed.py [--entries N] [--repeat R]`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def moved_copy(target: Path) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """The project copied into `target` with one row in ten moved; (category, id, old
    kernel) of each moved row, and (category, id) of every row."""
    shutil.copy(ROOT / "pyproject.toml", target / "pyproject.toml")
    shutil.copytree(ROOT / "snapshots", target / "snapshots")
    moved = []
    every = []
    for path in sorted((target / "snapshots").glob("*.json")):
        document = json.loads(path.read_text())
        for index, row in enumerate(document["rows"]):
            every.append((document["category"], row["id"]))
            route = row.get("route", {})
            if index % 10 == 0 and isinstance(route.get("kernel"), str):
                moved.append((document["category"], row["id"], route["kernel"]))
                route["kernel"] = "Renamed" + route["kernel"]
        path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    return moved, every


def stated_file(
    path: Path, moved: list[tuple[str, str, str]], every: list[tuple[str, str]], entries: int
) -> None:
    changes = []
    for category, row_id, kernel in moved:
        # The check replays the code, so the fresh kernel is the old name: moved back.
        changes.append(
            {
                "rows": f"{category}:{row_id}",
                "fields": {"route.kernel": ["Renamed" + kernel, kernel]},
                "reason": "r",
            }
        )
    n = 0
    while len(changes) < entries:
        category, row_id = every[n % len(every)]
        glob = n % 3 == 0 and "/" in row_id
        rows = f"{category}:{row_id.rsplit('/', 1)[0]}/q*" if glob else f"{category}:{row_id}"
        field = f"route.verdicts[*].message_{n}" if n % 2 else f"route.extra_{n}"
        changes.append({"rows": rows, "fields": {field: [None, str(n)]}, "reason": f"r{n}"})
        n += 1
    path.write_text(json.dumps({"schema_version": 2, "changes": changes}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="routectl-expected-speed-") as temp:
        project = Path(temp)
        moved, every = moved_copy(project)
        expected = project / "expected.json"
        stated_file(expected, moved, every, args.entries)
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "routectl", "check", "-q", "--expected-changes", expected],
                cwd=project,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            times.append(time.perf_counter() - start)
            if done.returncode not in (0, 1):
                raise SystemExit(f"check failed ({done.returncode}): {done.stderr[-2000:]}")
        print(
            f"{args.entries:,} stated entries ({len(moved):,} moved rows): "
            f"check {min(times):.2f} s (best of {len(times)}; target <= 10 s)"
        )


if __name__ == "__main__":
    main()
