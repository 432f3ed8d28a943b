"""The Triton QPN M1 kernels' logic on CPU: tests/triton_interpreter_cases.py in a child
pytest under Triton's interpreter (TRITON_INTERPRET=1 must be set before the kernels are
defined, so it cannot be turned on inside this process)."""

from __future__ import annotations

from pathlib import Path

from tests.interpreter_child import run_under_interpreter

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "triton_interpreter_cases.py"


def test_kernels_under_the_triton_interpreter() -> None:
    run_under_interpreter(CASES, 6)
