"""Numerics that show order and rounding (docs/contracts/core.md §6).

- The CPU reference arithmetic (`native.reference.numerics`, what the reference op runs) on
  tests/qpn_order_data.py's inputs gives the FP16 bits of the contract's order, which every
  other summation order and the unfused router sum would change.
- The Triton kernels give the same bits under Triton's interpreter (tests/triton_order_cases.py,
  in a child with TRITON_INTERPRET=1).
- A source rule pins the correctly rounded operations the contract needs where the interpreter
  cannot tell them apart (its `/` is IEEE division, so `/` and `div_rn` agree there): in the
  kernels no true division at all, SiLU's division by `tl.math.div_rn`, `tl.exp` only of an
  FP64 argument, `tl.fma` only on the compiled path, and no `tl.sum` but the exact selection.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.interpreter_child import run_under_interpreter
from tests.qpn_order_data import GATE, GATE_OTHER_ORDERS, crafted, out_literals
from tests.qpn_triton_helpers import expected_step

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "native" / "reference" / "triton_qpn.py"


def test_the_crafted_data_tells_the_orders_apart() -> None:
    assert GATE not in GATE_OTHER_ORDERS.values()
    literals = out_literals()
    chain = literals.pop("fma chain")
    assert chain == 0.85107421875
    assert chain not in literals.values(), literals


@pytest.mark.parametrize("compact", [False, True], ids=["4-byte", "3-byte"])
def test_the_cpu_reference_arithmetic_keeps_the_contracts_order(compact: bool) -> None:
    x, topk, ids, banks = crafted()
    out, intermediate = expected_step(x, *banks[compact], ids, topk)
    assert intermediate[:, 0].tolist() == [16.0] * 10
    assert intermediate[:, 1].tolist() == [GATE] * 10
    assert out[0, 0].item() == out_literals()["fma chain"]
    assert out[0, 1].item() == 22.09375


def _jit_functions() -> list[ast.FunctionDef]:
    tree = ast.parse(KERNELS.read_text(encoding="utf-8"))
    return [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d) in ("triton.jit", "jit") for d in node.decorator_list)
    ]


def _calls(fn: ast.FunctionDef, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(fn) if isinstance(n, ast.Call) and ast.unparse(n.func) == name]


def test_the_kernels_use_only_correctly_rounded_operations() -> None:
    functions = _jit_functions()
    assert {f.name for f in functions} >= {"_w13_kernel", "_w2_kernel", "_combine", "_decode"}
    divisions = [
        (f.name, n.lineno)
        for f in functions
        for n in ast.walk(f)
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)
    ]
    assert divisions == []  # `/` is approximate when compiled
    w13 = next(f for f in functions if f.name == "_w13_kernel")
    (div,) = _calls(w13, "tl.math.div_rn")
    assert ast.unparse(div.args[1]) == "1.0 + e32"  # silu = g / (1 + exp(-g)), IEEE division
    exps = [c for f in functions for c in _calls(f, "tl.exp")]
    assert exps and all(
        ast.unparse(c.args[0]).endswith(".to(tl.float64))")
        or ast.unparse(c.args[0]).endswith("to(tl.float64)")
        for c in exps
    )
    for f in functions:
        for name in (
            "tl.math.exp",
            "tl.math.exp2",
            "tl.exp2",
            "tl.math.fast_dividef",
            "tl.math.fast_expf",
            "tl.math.div_rz",
            "tl.math.div_rd",
            "tl.math.div_ru",
        ):
            assert _calls(f, name) == [], (f.name, name)
    combine = next(f for f in functions if f.name == "_combine")
    (guard,) = [n for n in ast.walk(combine) if isinstance(n, ast.If)]
    assert ast.unparse(guard.test) == "HW_FMA"
    assert _calls(ast.Module(body=guard.body, type_ignores=[]), "tl.fma")  # type: ignore[arg-type]
    assert not _calls(ast.Module(body=guard.orelse, type_ignores=[]), "tl.fma")  # type: ignore[arg-type]
    fmas = [(f.name, c.lineno) for f in functions for c in _calls(f, "tl.fma")]
    assert [name for name, _ in fmas] == ["_combine"]
    sums = [(f.name, ast.unparse(c.args[0])) for f in functions for c in _calls(f, "tl.sum")]
    # A sum of one value and -0.0s (a selection) is exact whatever its order.
    assert sums == [("_pick", "tl.where(axis_index == which, values, -0.0)")]


def test_kernels_show_the_order_under_the_triton_interpreter() -> None:
    run_under_interpreter(ROOT / "tests" / "triton_order_cases.py", 4)
