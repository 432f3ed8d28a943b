"""Running a cases file in a child pytest under Triton's interpreter.

TRITON_INTERPRET=1 must be set before a kernel is defined, so it cannot be turned on inside
the suite's own process: each interpreter test hands its cases file to a child instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_under_interpreter(cases: Path | str, passed: int, *, timeout: int = 900) -> None:
    """Run `cases` under the interpreter and assert that all `passed` of its tests passed
    (the count catches a cases file that silently collects fewer tests)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(cases)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert f"{passed} passed" in proc.stdout, proc.stdout[-2000:]
