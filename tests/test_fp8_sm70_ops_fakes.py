"""The Volta FP8 linears' declared ops (`native.ops_fp8`) as replay checks them: the row rule
every GEMM entry validates (the out rows are the activation rows: docs/contracts/fp8.md §4.5,
each entry writes one output row per activation row), on both sides, through the recording
namespace; and the prepare fake's dtypes, which are the contract's whatever torch's default
dtype is (an engine prepares weights under the model's default dtype, FP16 here).

The fakes' shapes against the contract on the default dtype are `tests/test_fakes_vs_ops.py`'s.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from native import ops_fp8
from native.catalogue import CATALOGUE
from native.kernels import fp8_sm70 as fp
from routectl.namespaces.ops import OpSpec
from routectl.replay.harness import RecordingNamespace

# The ops whose calls replay checks with the row rule (every entry that writes `out` from `x`).
ROW_CHECKED = (
    fp.FP8_GEMM_OP,
    fp.FP8_PREFILL_DISPATCH_OP,
    fp.FP8_PRESCALED_M1_OP,
    fp.FP8_PREFILL_PRESCALED_OP,
    fp.QPN8_GEMM_OP,
    fp.QPN8_GATED_PAIR_OP,
    fp.GROUPED_DISPATCH_OP,
)


def meta(shape: tuple[int, ...], dtype: torch.dtype = torch.float16) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device="meta")


def arguments(spec: OpSpec, out_rows: int, x_rows: int) -> dict[str, Any]:
    """A call of `spec` with `out_rows` output rows and `x_rows` activation rows (the grouped
    lane's x is (slots, groups, K))."""
    kwargs: dict[str, Any] = {}
    for name, kind, _optional in spec.arg_kinds:
        if name == "out":
            kwargs[name] = meta((out_rows, 256))
        elif name == "x":
            shape = (x_rows, 2, 512) if spec.name == fp.GROUPED_DISPATCH_OP else (x_rows, 512)
            kwargs[name] = meta(shape)
        elif kind == "tensor":
            kwargs[name] = meta((512, 256), torch.uint8)
        else:
            kwargs[name] = False if spec.arg(name).type == "bool" else 128
    return kwargs


@pytest.mark.parametrize("op", ROW_CHECKED)
def test_every_gemm_entry_refuses_an_out_of_other_rows_and_records_its_own(op: str) -> None:
    spec = ops_fp8.OPS[op]
    # The catalogue serves this module's declaration (no other ops module replaces it).
    assert CATALOGUE.ops[op] is spec
    ns = RecordingNamespace(CATALOGUE)
    for out_rows, x_rows in ((7, 8), (9, 8), (1, 2)):
        with pytest.raises(ValueError) as err:
            ns.call(op, **arguments(spec, out_rows, x_rows))
        assert str(err.value) == f"out has {out_rows} rows for {x_rows} activation rows"
    for rows in (1, 8, 8000):
        ns.call(op, **arguments(spec, rows, rows))
        assert ns.calls[-1]["op"] == op and ns.calls[-1]["plan"]["m"] == rows
    assert len(ns.calls) == 3


def test_the_row_rule_reads_x_and_else_input_and_needs_both_sides() -> None:
    # The rule as the catalogue declares it (`validate` gets the bound arguments): the rows
    # of `x`, or of `input` where an op names its activations so; nothing to compare without
    # an output or an activation.
    rule = ops_fp8.OPS[fp.FP8_GEMM_OP].validate
    assert rule is not None
    with pytest.raises(ValueError, match="out has 3 rows for 4 activation rows"):
        rule(out=meta((3, 8)), input=meta((4, 8)))
    # x wins over input where both are given.
    rule(out=meta((4, 8)), x=meta((4, 8)), input=meta((5, 8)))
    with pytest.raises(ValueError, match="out has 4 rows for 5 activation rows"):
        rule(out=meta((4, 8)), x=meta((5, 8)), input=meta((4, 8)))
    rule(out=None, x=meta((5, 8)))
    rule(out=meta((4, 8)))


# Shapes used by no other test, so the shared meta tensors of `native.meta_tensors` made under
# the default dtype cannot stand in for these.
@pytest.mark.parametrize(("n", "k"), [(1152, 640), (896, 1408)])
def test_the_prepare_fake_keeps_its_dtypes_under_a_half_default_dtype(n: int, k: int) -> None:
    fake = ops_fp8.OPS[fp.FP8_PREPARE_OP].fake
    assert fake is not None
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float16)
    try:
        out = fake(
            weight=meta((n, k), torch.float8_e4m3fn),
            weight_scale=meta((n // 128, k // 128), torch.float32),
            group_size=128,
            interleave_gated=False,
        )
    finally:
        torch.set_default_dtype(previous)
    # fp8.md §4.2 / fp8moe.md §4.2: codes (K, N) uint8, the FP32 scale raster, meta (2,) int64.
    assert [(tuple(t.shape), t.dtype) for t in out] == [
        ((k, n), torch.uint8),
        ((n // 128, k // 128), torch.float32),
        ((2,), torch.int64),
    ]
