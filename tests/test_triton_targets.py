"""The QPN M1 kernels compiled for GPUs older than compute capability 9.0 hold no
grid-dependency (`griddepcontrol`) and no bulk-copy (`cp.async.bulk`) instruction, which
exist from 9.0 on (ptxas rejects them below), and compiled for 9.0 they hold both: every
such instruction in native/reference/triton_qpn.py is behind
`tl.target_info.cuda_capability_geq(9, 0)`, and a wrong guard (one true on every target)
shows only when compiling for an older one, which the H200 tests never do.

No GPU needed: tests/qpn_ptx_targets.py compiles in a child (why a child: its docstring),
through the ptxas bundled with Triton."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from native.reference import triton_qpn

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("w13", "w2-widen", "w2-predecode", "w2-decode-after-wait")


def compiled_for(capabilities: tuple[int, ...], cache: Path) -> dict[int, dict[str, Any]]:
    """tests/qpn_ptx_targets.py's findings for each capability, the children run together.
    Each has its own empty Triton cache: the cache key holds the compile target but not the
    active driver's, which the capability checks read, so a kernel compiled elsewhere for
    the same target with another driver active (none, on this machine) could be reused."""
    children = {}
    for capability in capabilities:
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        env.update(PYTHONPATH=str(ROOT), TRITON_CACHE_DIR=str(cache / str(capability)))
        children[capability] = subprocess.Popen(
            [sys.executable, "-m", "tests.qpn_ptx_targets", triton_qpn.__file__, str(capability)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    found = {}
    for capability, child in children.items():
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-3000:]
        found[capability] = json.loads(out.splitlines()[-1])
    return found


def test_grid_dependency_and_bulk_copies_only_from_capability_9(tmp_path: Path) -> None:
    found = compiled_for((70, 80, 90), tmp_path)
    for capability in (70, 80):
        for variant in VARIANTS:
            assert found[capability][variant] == {
                "error": None,
                "griddepcontrol.wait": 0,
                "griddepcontrol.launch_dependents": 0,
                "cp.async.bulk": 0,
            }, (capability, variant)
    # On 9.0 each variant waits and triggers (W13 before its wait, W2 for the next kernel),
    # and W13's L2 prefetches are bulk prefetches: the 70/80 checks above can fail.
    for variant in VARIANTS:
        sm90 = found[90][variant]
        assert sm90["error"] is None, sm90
        assert sm90["griddepcontrol.wait"] > 0 and sm90["griddepcontrol.launch_dependents"] > 0
    assert found[90]["w13"]["cp.async.bulk"] > 0
