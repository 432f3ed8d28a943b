"""Re-check mutmut's survivors against the retained snapshots, each mutant active from the
first import.

`mutmut run` forks every mutant from a process that has already imported the project and
run the selected tests, and runs only the tests its call map ties to the mutated function;
the comparison with the retained snapshots is not among them (it replays every category,
about two seconds a mutant). So two kinds of mutant survive there unseen: code that runs at
import or once behind a cache (category declarations, field tables: the parent already holds
their result), and changes that only the shipped rows show. This script runs each named
mutant again in a fresh child of a parent that has imported only third-party packages
(torch, pydantic, ...), so the project is imported with the mutant switched on, and compares
a fresh replay with the retained snapshots wherever the mutated function is reached: every
category through the library's `run_check` (what `routectl check` does in CI) when it runs at
import, a whole category when it builds that category's rows, else each row whose replay
calls it. The map is traced once per run, from the unmutated tree. A mutant no replay
reaches is recorded `unreached` (no row can show it; only tests can).

Results go to a JSON-lines file, one object per mutant: `status` (`killed`, `survived`,
`unreached`, `timeout`), `detail` (the categories whose rows moved, or the error) and the
seconds taken. A rerun skips the mutants already in the file, so a long run can stop and go
on. Run from the repository root after `python -m mutmut run` (it needs `mutants/`):

    python benchmarks/mutation_recheck.py --status survived --status timeout
    python benchmarks/mutation_recheck.py "policies.linear_fp8*"    # mutmut's names or globs
    python benchmarks/mutation_recheck.py --summary

With `--tests FILE ...` it runs those test files instead of the comparison (pytest, `-x`,
in the child, so module-level caches of the tests fill under the mutant too): the third
stage, for mutants whose rows do not move. Exit status 0 is `survived`, 1 or 2 (a failed
test, or a test module that no longer imports) `killed`; anything else is recorded as
`error`. Keep its results apart from the rows' (`--results`):

    python benchmarks/mutation_recheck.py --results mutants/tests.jsonl \
        --survivors-of mutants/recheck.jsonl --tests tests/test_awq_moe_category.py \
        "policies.awq_moe.x_load_awq_moe__mutmut_*"

`--map` adds, for each mutant, the tests mutmut's call map ties to its function
(`mutants/mutmut-stats.json`, from mutmut's last stats run): as `mutmut run` selects them,
but each run fresh. Tests written after that stats run are not in the map: name their files
with `--tests`.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, FrameType
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "mutants"
DEFAULT_RESULTS = MUTANTS / "recheck.jsonl"

# Imported once in the parent, so each child starts with them loaded; nothing of the
# project (routectl, policies, native) may be among them.
PRELOAD = (
    "torch",
    "pydantic",
    "click",
    "orjson",
    "jsonschema_rs",
    "deepdiff",
    "wcmatch.glob",
    "pytest",
    "hypothesis",
)
PROJECT_PACKAGES = ("routectl", "policies", "native")
EVERY_CATEGORY = "*"  # a function reached at import: it may change any category

# Re-checked first, in this order: the largest decision modules, then the rest of the
# decision code; everything else after, in mutmut's order.
PRIORITY = (
    "native.kernels.fp8_sm70.*",
    "policies.linear_*",
    "native.kernels.*",
    "policies.awq_moe*",
    "policies.qualification.*",
)

MUTANT_NAME = re.compile(r"^(?P<module>[\w.]+?)\.x(?P<sep>_|ǁ)(?P<rest>.+)__mutmut_\d+$")


@dataclass(frozen=True)
class Outcome:
    name: str
    status: str  # killed | survived | unreached | timeout
    detail: str | None
    seconds: float

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "seconds": round(self.seconds, 2),
        }


def function_of(name: str) -> tuple[str, str]:
    """(module, qualified function) of a mutmut mutant name: `pkg.mod.x_f__mutmut_3` is
    `f`, `pkg.mod.xǁCǁm__mutmut_3` is `C.m`."""
    match = MUTANT_NAME.match(name)
    if match is None:
        raise SystemExit(f"not a mutmut mutant name: {name!r}")
    rest = match.group("rest")
    qualname = rest.replace("ǁ", ".") if match.group("sep") == "ǁ" else rest
    return match.group("module"), qualname


Reach = dict[tuple[str, str], set[tuple[str, str]]]


def trace_reach() -> Reach:
    """Which replays call each project function (module, top qualified name), as labels:
    `(category, row id)` for a row's replay, `(category, "")` for building a category's
    declared rows, `(EVERY_CATEGORY, "")` for what runs while the project is imported.
    Traced in a child on the unmutated tree, so this process stays free of the project."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            os.close(read)
            os.chdir(ROOT)
            sys.path.insert(0, str(ROOT))
            reach = _trace_here()
            with os.fdopen(write, "w") as out:
                json.dump([[m, f, sorted(labels)] for (m, f), labels in reach.items()], out)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as inp:
        data = json.load(inp)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("tracing the replay failed")
    return {(m, f): {(c, r) for c, r in labels} for m, f, labels in data}


def _trace_here() -> Reach:
    codes: dict[tuple[str, str], set[CodeType]] = defaultdict(set)
    current = [(EVERY_CATEGORY, "")]

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            codes[current[0]].add(frame.f_code)

    sys.setprofile(hook)
    try:
        from policies import PROJECT
        from routectl.replay.harness import replay_row

        for category in PROJECT.categories:
            current[0] = (category.name, "")
            specs = category.rows()  # the declared rows, built once behind a cache
            for spec in specs:
                current[0] = (category.name, spec.id)
                replay_row(PROJECT, category, spec)
    finally:
        sys.setprofile(None)
    roots = tuple(str(ROOT / p) for p in PROJECT_PACKAGES)
    reach: Reach = defaultdict(set)
    for label, seen in codes.items():
        for code in seen:
            if not code.co_filename.startswith(roots):
                continue
            path = Path(code.co_filename)
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            module = module.removesuffix(".__init__")
            top = code.co_qualname.split(".<locals>")[0]
            reach[(module, top)].add(label)
    return reach


@dataclass(frozen=True)
class Plan:
    """What to compare under a mutant: whole categories (`EVERY_CATEGORY` for all), and
    single rows of others."""

    categories: frozenset[str]
    rows: tuple[tuple[str, str], ...]

    def to_json(self) -> list[Any]:
        return [sorted(self.categories), [list(r) for r in self.rows]]


def plan_for(name: str, reach: Reach) -> Plan | None:
    """The comparisons for a mutant; None when no replay reaches its function."""
    labels = reach.get(function_of(name))
    if not labels:
        return None
    if (EVERY_CATEGORY, "") in labels:
        return Plan(frozenset({EVERY_CATEGORY}), ())
    whole = frozenset(c for c, r in labels if not r)
    rows = tuple(sorted((c, r) for c, r in labels if r and c not in whole))
    return Plan(whole, rows)


def mutmut_names(statuses: Sequence[str]) -> list[str]:
    """Mutant names that `mutmut results --all true` lists with one of `statuses`."""
    return [name for name, status in mutmut_statuses().items() if status in statuses]


def by_priority(names: Sequence[str]) -> list[str]:
    def rank(name: str) -> int:
        return next(
            (i for i, p in enumerate(PRIORITY) if fnmatch.fnmatchcase(name, p)), len(PRIORITY)
        )

    return sorted(names, key=rank)


def read_results(path: Path) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            out[record["name"]] = record
    return out


def preload() -> None:
    for module in PRELOAD:
        importlib.import_module(module)
    leaked = [m for m in sys.modules if m.split(".")[0] in PROJECT_PACKAGES]
    if leaked:
        raise SystemExit(f"a preloaded package imported the project: {sorted(leaked)[:5]}")


def start(name: str, plan: Plan | Sequence[str]) -> tuple[int, Path]:
    """Fork a child that imports the project with the mutant on and compares what `plan`
    names with the retained snapshots, or runs the test files it names; it writes what it
    found to a file."""
    fd, path = tempfile.mkstemp(prefix="recheck-", suffix=".txt")
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 3
        try:
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.environ["MUTANT_UNDER_TEST"] = name
            code = _check_here(plan) if isinstance(plan, Plan) else _test_here(plan)
        except BaseException as exc:  # a crash under the mutant kills it too
            print(f"error: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            code = 2
        finally:
            os._exit(code)
    os.close(fd)
    return pid, Path(path)


def _check_here(plan: Plan) -> int:
    """Whole categories through the library's check (`run_check`, as `routectl check`);
    single rows replayed and compared by canonical text, as the check compares rows, and
    their category's declared row ids with the retained file's."""
    import orjson

    from policies import PROJECT
    from routectl.replay.harness import plain_row_text, replay_row, row_text
    from routectl.review.check import run_check
    from routectl.review.sources import SnapshotFiles

    moved: list[str] = []
    if plan.categories:
        names = () if EVERY_CATEGORY in plan.categories else tuple(sorted(plan.categories))
        retained = SnapshotFiles.retained(MUTANTS / "snapshots")
        result = run_check(PROJECT, names, baseline=retained)
        moved += [n for n, v in result.outcome.categories.items() if not v.ok]
        if result.outcome.stale:
            moved.append("stale categories")
    by_category: dict[str, list[str]] = defaultdict(list)
    for category_name, row_id in plan.rows:
        by_category[category_name].append(row_id)
    for category_name, ids in by_category.items():
        category = PROJECT.category(category_name)
        data = orjson.loads((MUTANTS / "snapshots" / f"{category_name}.json").read_bytes())
        retained_rows = {row["id"]: row for row in data["rows"]}
        specs = {spec.id: spec for spec in category.rows()}
        if set(specs) != set(retained_rows):
            moved.append(f"{category_name} (declared rows)")
            continue
        for row_id in ids:
            fresh = replay_row(PROJECT, category, specs[row_id])[0]
            if row_text(fresh) != plain_row_text(retained_rows[row_id]):
                moved.append(f"{category_name}:{row_id}")
                break
    if not moved:
        return 0
    print("rows moved in: " + ", ".join(moved), flush=True)
    return 1


def _test_here(files: Sequence[str]) -> int:
    """pytest on `files` from `mutants/` (its own pyproject: the same options as the
    repository's); the exit status says whether a test failed."""
    import pytest

    code = int(pytest.main([*files, "-x", "-q", "-p", "no:cacheprovider"]))
    print(f"pytest exit {code}", flush=True)
    return {0: 0, 1: 1, 2: 1}.get(code, 4)


def finish(name: str, path: Path, began: float, status: int | None) -> Outcome:
    text = path.read_text(errors="replace").strip().splitlines()
    path.unlink(missing_ok=True)
    seconds = time.monotonic() - began
    detail = text[-1] if text else None
    if status is None:
        return Outcome(name, "timeout", None, seconds)
    code = os.waitstatus_to_exitcode(status)
    verdict = {0: "survived", 4: "error"}.get(code, "killed")
    return Outcome(name, verdict, detail, seconds)


def mapped_tests(name: str, stats: Mapping[str, Any]) -> list[str]:
    """The test ids mutmut's call map ties to the mutant's function, in its order."""
    mangled = name.rpartition("__mutmut_")[0]
    return list(stats["tests_by_mangled_function_name"].get(mangled, ()))


def recheck(
    names: Sequence[str],
    jobs: int,
    timeout: float,
    results: Path,
    tests: Sequence[str] = (),
    use_map: bool = False,
) -> None:
    stats = json.loads((MUTANTS / "mutmut-stats.json").read_text()) if use_map else {}
    reach = {} if tests or use_map else trace_reach()
    os.chdir(MUTANTS)
    sys.path.insert(0, str(MUTANTS))
    preload()
    pending = list(names)
    running: dict[int, tuple[str, Path, float]] = {}
    with results.open("a") as out:
        while pending or running:
            while pending and len(running) < jobs:
                name = pending.pop(0)
                plan: Plan | Sequence[str] | None
                if use_map:
                    # a test in a file named whole would run twice
                    plan = [
                        *tests,
                        *(t for t in mapped_tests(name, stats) if t.split("::")[0] not in tests),
                    ]
                    if not plan:
                        record(out, Outcome(name, "unreached", "no tests", 0.0))
                        continue
                else:
                    plan = tests or plan_for(name, reach)
                if plan is None:
                    record(out, Outcome(name, "unreached", None, 0.0))
                    continue
                pid, path = start(name, plan)
                running[pid] = (name, path, time.monotonic())
            if not running:
                continue
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                now = time.monotonic()
                for child, (name, path, began) in list(running.items()):
                    if now - began > timeout:
                        os.kill(child, signal.SIGKILL)
                        os.waitpid(child, 0)
                        del running[child]
                        record(out, finish(name, path, began, None))
                select.select([], [], [], 0.02)
                continue
            name, path, began = running.pop(pid)
            record(out, finish(name, path, began, status))


def record(out: IO[str], outcome: Outcome) -> None:
    print(f"{outcome.status:9s} {outcome.seconds:5.1f}s {outcome.name} {outcome.detail or ''}")
    out.write(json.dumps(outcome.to_json(), sort_keys=True) + "\n")
    out.flush()


def summary(results: Path) -> None:
    """Per module, in Markdown: mutmut's counts, then what the re-check made of its
    survivors (timeouts and mutants without tests are re-checked too)."""
    records = read_results(results)
    stage1: dict[str, Counter[str]] = defaultdict(Counter)
    for name, status in mutmut_statuses().items():
        stage1[function_of(name)[0]][status] += 1
    stage2: dict[str, Counter[str]] = defaultdict(Counter)
    for name, record in records.items():
        stage2[function_of(name)[0]][str(record["status"])] += 1
    columns1 = ("killed", "survived", "timeout", "no tests", "not checked")
    columns2 = ("killed", "survived", "unreached", "timeout", "error")
    print(
        "| module | mutants | "
        + " | ".join(f"mutmut {c}" for c in columns1)
        + " | "
        + " | ".join(f"re-check {c}" for c in columns2)
        + " |"
    )
    print("|---" * (2 + len(columns1) + len(columns2)) + "|")
    total1: Counter[str] = Counter()
    total2: Counter[str] = Counter()
    for module in sorted(stage1):
        one, two = stage1[module], stage2[module]
        total1 += one
        total2 += two
        cells = [str(one[c]) for c in columns1] + [str(two[c]) for c in columns2]
        print(f"| {module} | {sum(one.values())} | " + " | ".join(cells) + " |")
    cells = [str(total1[c]) for c in columns1] + [str(total2[c]) for c in columns2]
    print(f"| **total** | {sum(total1.values())} | " + " | ".join(cells) + " |")


def mutmut_statuses() -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "mutmut", "results", "--all", "true"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    out = {}
    for line in proc.stdout.splitlines():
        name, sep, status = line.strip().partition(": ")
        if sep:
            out[name] = status.strip()
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutant names or fnmatch patterns")
    parser.add_argument(
        "--status", action="append", default=[], help="take mutmut's mutants with this status"
    )
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    parser.add_argument("--summary", action="store_true")
    parser.add_argument("--again", action="store_true", help="re-check those already done")
    parser.add_argument(
        "--survivors-of",
        action="append",
        type=Path,
        default=[],
        help="take the mutants this results file records survived or unreached",
    )
    parser.add_argument(
        "--tests",
        action="append",
        default=[],
        help="run this test file (repeatable) instead of comparing rows",
    )
    parser.add_argument(
        "--map",
        action="store_true",
        help="run the tests mutmut's call map ties to each mutant (with --tests, those too)",
    )
    args = parser.parse_args(argv)
    results = args.results.resolve()
    if args.summary:
        summary(results)
        return
    if not MUTANTS.is_dir():
        raise SystemExit("no mutants/ folder: run `python -m mutmut run` first")
    # mutmut's mutants with a status, or those another run left alive (the rows' survivors
    # for the tests stage), or every mutant; narrowed by the names or patterns given
    if args.status or args.survivors_of:
        listed = mutmut_names(args.status)
        for path in args.survivors_of:
            listed += [
                n
                for n, r in read_results(path.resolve()).items()
                if r["status"] in ("survived", "unreached")
            ]
    else:
        listed = list(mutmut_statuses())
    names = [
        n for n in listed if not args.names or any(fnmatch.fnmatchcase(n, p) for p in args.names)
    ]
    done = {} if args.again else read_results(results)
    todo = by_priority([n for n in dict.fromkeys(names) if n not in done])
    print(f"{len(todo)} mutants to re-check ({len(names) - len(todo)} already in {results})")
    recheck(todo, args.jobs, args.timeout, results, args.tests, args.map)
    summary(results)


if __name__ == "__main__":
    main()
