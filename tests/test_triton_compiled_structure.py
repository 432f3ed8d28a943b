"""What the compiled QPN M1 kernels promise that no output shows, read from their PTX for
compute capability 9.0 (compiled here, no GPU; tests/qpn_ptx_targets.py, in a child):

- W13 lets W2 launch early exactly once when W2 is launched with programmatic dependent
  launch, before its own wait with `w13_trigger_first`, after it without; never without
  PDL. A lost trigger costs only time (W2 then starts when W13 completes); a trigger moved
  before the wait is what makes the default config unsafe after a late router.
- Both kernels read what the kernel before them writes (W13 the input, W2 the
  intermediate) only after their grid-dependency wait, in 16-byte loads (a quarter of the
  load instructions).
- W2 with the recheck reads the ids before its wait through L2 only and again after it,
  through L2 only, and none without the recheck (an L1 copy of the early read would be a
  stale id the recheck cannot see). The late-writer tests on the GPU cannot tell: the
  second read bypasses L1 whatever the first did.
- The recheck's redo is conditional (one more branch than the forced redo, both chain sets
  compiled: a redo taken always gives the same bits, 2 us later) and loads the activations
  again (kept from the fast chains, they stay live through them and ptxas issues each load
  just before its use).

The counts are compared between variants, not pinned, so a new Triton that schedules
differently fails only where a rule breaks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from native.reference import triton_qpn

ROOT = Path(__file__).resolve().parents[1]
W2_WAITS = ("w2-widen", "w2-predecode", "w2-decode-after-wait")

Lines = dict[str, list[int]]


def structure(kernels: Path, cache: Path) -> dict[str, Lines]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=str(ROOT), TRITON_CACHE_DIR=str(cache))
    child = subprocess.run(
        [sys.executable, "-m", "tests.qpn_ptx_targets", str(kernels), "90", "structure"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    found: dict[str, Lines] = json.loads(child.stdout.splitlines()[-1])
    return found


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Lines]:
    return structure(Path(triton_qpn.__file__), tmp_path_factory.mktemp("triton-cache"))


def trigger_problems(found: dict[str, Lines]) -> list[str]:
    problems = []
    for name, lines in found.items():
        if not name.startswith("w13 "):
            continue
        pdl, wait, first = (part.endswith("True") for part in name.split()[1:])
        triggers, waits = lines["trigger"], lines["wait"]
        if not pdl:
            if triggers:
                problems.append(f"{name}: triggers without PDL")
            continue
        if len(triggers) != 1:
            problems.append(f"{name}: {len(triggers)} triggers, not 1")
            continue
        if wait and first and not triggers[0] < waits[0]:
            problems.append(f"{name}: the trigger is not before the wait")
        if wait and not first and not triggers[0] > waits[-1]:
            problems.append(f"{name}: the trigger is not after the wait")
    return problems


def wait_problems(found: dict[str, Lines]) -> list[str]:
    problems = []
    for name, lines in found.items():
        waits, loads = lines["wait"], lines["load.v4"]
        if name.startswith("w13 ") and "wait=False" in name:
            continue
        if not waits:
            problems.append(f"{name}: no wait")
        elif not loads:
            problems.append(f"{name}: no 16-byte activation loads")
        elif min(loads) < max(waits):
            problems.append(f"{name}: an activation load before the wait")
    return problems


def recheck_problems(found: dict[str, Lines]) -> list[str]:
    problems = []
    for wait in W2_WAITS:
        fast, recheck, redo = (found[f"{wait} {mode}"] for mode in ("fast", "recheck", "redo"))
        if fast["load.cg"]:
            problems.append(f"{wait}: loads through L2 only without the recheck")
        for mode, lines in (("recheck", recheck), ("redo", redo)):
            if not lines["wait"]:
                problems.append(f"{wait} {mode}: no wait")
                continue
            first_wait, last_wait = lines["wait"][0], lines["wait"][-1]
            if not any(line < first_wait for line in lines["load.cg"]):
                problems.append(f"{wait} {mode}: the ids before the wait not through L2 only")
            if not any(line > last_wait for line in lines["load.cg"]):
                problems.append(f"{wait} {mode}: the ids after the wait not through L2 only")
            if len(lines["load.v4"]) != 2 * len(fast["load.v4"]):
                problems.append(f"{wait} {mode}: the redo does not load the activations again")
        if len(recheck["branch"]) != len(redo["branch"]) + 1:
            problems.append(f"{wait}: the redo is not conditional")
        chains = len(recheck["fma"])
        if not (len(fast["fma"]) < chains and len(redo["fma"]) < chains):
            problems.append(f"{wait}: the recheck does not hold both the fast and redo chains")
    return problems


def test_w13_triggers_once_in_its_place(compiled: dict[str, Lines]) -> None:
    assert trigger_problems(compiled) == []


def test_what_the_kernel_before_writes_is_read_after_the_wait(
    compiled: dict[str, Lines],
) -> None:
    assert wait_problems(compiled) == []


def test_the_recheck_reads_through_l2_and_redoes_only_on_a_change(
    compiled: dict[str, Lines],
) -> None:
    assert recheck_problems(compiled) == []


def test_the_rules_see_a_lost_trigger_and_a_cached_id(tmp_path: Path) -> None:
    """The rules fail on two realistic edits (the mutation run's `_w13_kernel__2` and
    `_w2_kernel__133`), compiled from a copy of the module."""
    source = Path(triton_qpn.__file__).read_text()
    edits = {
        "if PDL and (TRIGGER_FIRST or not WAIT):": "if PDL and (TRIGGER_FIRST and not WAIT):",
        'cache_modifier=".cg" if RECHECK else ""\n    )': 'cache_modifier=""\n    )',
    }
    for old, new in edits.items():
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    edited = tmp_path / "triton_qpn_edited.py"
    edited.write_text(source)
    found = structure(edited, tmp_path / "cache")
    assert trigger_problems(found) == [
        "w13 pdl=True wait=True trigger-first=True: 0 triggers, not 1",
        "w13 pdl=True wait=False trigger-first=False: 0 triggers, not 1",
    ]
    assert recheck_problems(found) == [
        f"{wait} {mode}: the ids before the wait not through L2 only"
        for wait in W2_WAITS
        for mode in ("recheck", "redo")
    ]
