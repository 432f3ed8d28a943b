"""The Triton QPN M1 kernels' logic on CPU: tests/triton_interpreter_cases.py in a child
pytest under Triton's interpreter (TRITON_INTERPRET=1 must be set before the kernels are
defined, so it cannot be turned on inside this process)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "triton_interpreter_cases.py"


def test_kernels_under_the_triton_interpreter() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(CASES)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "6 passed" in proc.stdout, proc.stdout[-2000:]
