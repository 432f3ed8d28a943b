"""The grouped (bmm) layers of the Volta FP8 linear kernel (`native.kernels.fp8_sm70`,
`_prepare_grouped`), which the seventh session left unrun (benchmarks/mutation/
kernels-attention-rest.md): what each group is prepared from, what stays resident, and every
native call an apply makes, compared whole.

docs/contracts/fp8.md §3.3 (grouped wo_a: each group of 1024 rows prepared on its own with
fp8_qpn8_prepare_sm70 and dispatched per group with the (32, 2, F) tuning), §3.6 (grouped
TurboMind: each group prepared with fp8_sm70_prepare, not gated; the grouped decode lane at
M = 1 is a single fp8_moe_gemm_sm70_per_expert_dispatch_out call over the strided pointers),
§4.2 (groups x (K x N/groups) codes), §4.3 (M = 0 launches nothing; per group otherwise),
§5 items 8 and 10 (FP16 activations, input ending in [groups, K]).

The namespace double returns a distinct tensor from every prepare call and fills every
dispatch's `out` with a value of its own, so a group prepared from the wrong slice, a
resident entry naming the wrong tensor or an output block written from the wrong call is
seen; real CPU tensors carry values so each slice can be compared with what it must be.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from native.kernels import fp8_sm70 as fs
from native.layers import BlockFp8Layer
from routectl.errors import ActivationError
from routectl.namespaces.native_ns import InMemoryNamespace
from tests.test_mutation_fp8 import PP2, options, wo_a

K, N, GROUPS = 4096, 2048, 2
ROWS = N // GROUPS  # 1024 rows a group (§3.3)
SCALE_ROWS = ROWS // fs.BLOCK  # 8 scale rows a group
PP2_TUNING = {"split_k": 32, "chains": 2, "prefetch": False}
TM_OPS = (fs.FP8_PREPARE_OP, fs.FP8_GEMM_OP)
DECODE_OPS = (fs.GROUPED_DISPATCH_OP, fs.STRIDED_PTRS_OP)


@dataclasses.dataclass
class Double:
    """The namespace double's record: every call, in order, with its keyword arguments, and
    the objects each prepare call returned."""

    ns: InMemoryNamespace
    calls: list[tuple[str, dict[str, Any]]]
    returned: dict[str, list[Any]]

    def ops(self, since: int = 0) -> list[str]:
        return [op for op, _ in self.calls[since:]]

    def of(self, op: str) -> list[dict[str, Any]]:
        return [kw for name, kw in self.calls if name == op]


def double(*ops: str) -> Double:
    calls: list[tuple[str, dict[str, Any]]] = []
    returned: dict[str, list[Any]] = {}

    def impl(op: str) -> Any:
        def call(**kwargs: Any) -> Any:
            calls.append((op, kwargs))
            result: Any = None
            if op == fs.QPN8_PREPARE_OP:
                result = torch.empty((ROWS, K), dtype=torch.uint8)
            elif op == fs.FP8_PREPARE_OP:
                # packed codes, scales, meta: two new objects per group
                result = (torch.empty((ROWS, K), dtype=torch.uint8), torch.empty((1,)), None)
            elif op == fs.STRIDED_PTRS_OP:
                result = torch.empty((2 * GROUPS,), dtype=torch.int64)
            elif "out" in kwargs:
                # each dispatch writes its own marker: the n-th dispatch call fills n
                kwargs["out"].fill_(float(sum(1 for _, kw in calls if "out" in kw)))
            returned.setdefault(op, []).append(result)
            return result

        return call

    ns = InMemoryNamespace(ops, impls={op: impl(op) for op in ops})
    return Double(ns, calls, returned)


def checkpoint() -> dict[str, Any]:
    # Real values, so each group's slice can be told from the others: row r of the weight
    # holds r % 251, scale row j holds j.
    weight = (torch.arange(N, dtype=torch.int64) % 251).to(torch.uint8)[:, None].expand(N, K)
    scales = torch.arange(N // fs.BLOCK, dtype=torch.float32)[:, None].expand(-1, K // fs.BLOCK)
    return {"weight": weight.contiguous(), "weight_scale_inv": scales.contiguous()}


def prepare(
    built: BlockFp8Layer, opts: fs.Fp8Sm70Options, *ops: str
) -> tuple[Double, fs.Fp8Layout, fs.Prepared, dict[str, Any]]:
    d = double(*ops)
    ws = fs.Fp8Workspaces()
    layout = fs.plan_turbomind(built, opts, d.ns, ws)
    tensors = checkpoint()
    prepared = fs.prepare_turbomind(built, tensors, d.ns, layout, ws)
    return d, layout, prepared, tensors


def qpn8_grouped() -> tuple[Double, fs.Fp8Layout, fs.Prepared, dict[str, Any]]:
    return prepare(wo_a(), PP2, *fs.QPN8_LAYOUT_OPS, *TM_OPS)


def turbomind_grouped(
    decode: bool = True,
) -> tuple[Double, fs.Fp8Layout, fs.Prepared, dict[str, Any]]:
    # §3.6: the decode lane needs grouped_bmm_decode and both of its ops.
    return prepare(wo_a(), options(grouped_bmm_decode=decode), *TM_OPS, *DECODE_OPS)


def apply(prepared: fs.Prepared, x: torch.Tensor) -> torch.Tensor:
    # every grouped layer has a plain apply (no gated entry: §3.6, not gated)
    assert prepared.apply is not None and prepared.apply_gated is None
    out: torch.Tensor = prepared.apply(x)
    return out


def x_of(m: int, *lead: int, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    # Activations whose group g holds g + 1 everywhere, so x[..., g, :] is recognisable.
    x = torch.empty((*lead, m, GROUPS, K), dtype=dtype)
    for g in range(GROUPS):
        x[..., g, :] = g + 1
    return x


def assert_group_slices(calls: list[dict[str, Any]], tensors: dict[str, Any]) -> None:
    # Group g gets rows [g*1024, (g+1)*1024) of the weight and scale rows [g*8, (g+1)*8).
    assert len(calls) == GROUPS
    for g, call in enumerate(calls):
        assert torch.equal(call["weight"], tensors["weight"][g * ROWS : (g + 1) * ROWS])
        assert tuple(call["weight"].shape) == (ROWS, K)
        expected_scales = tensors["weight_scale_inv"][g * SCALE_ROWS : (g + 1) * SCALE_ROWS]
        assert torch.equal(call["weight_scale"], expected_scales)
        assert tuple(call["weight_scale"].shape) == (SCALE_ROWS, K // fs.BLOCK)


# --- grouped wo_a, QPN8 (§3.3) ---------------------------------------------------------------


def test_the_qpn8_grouped_wo_a_prepares_each_group_from_its_own_rows() -> None:
    d, layout, prepared, tensors = qpn8_grouped()
    assert (layout.name, layout.groups, layout.qpn8) == ("fp8_qpn8_bmm", GROUPS, True)
    # Two QPN8 prepares, nothing of TurboMind (the QPN8 layout holds no TurboMind copy).
    assert d.ops() == [fs.QPN8_PREPARE_OP, fs.QPN8_PREPARE_OP]
    calls = d.of(fs.QPN8_PREPARE_OP)
    assert [sorted(c) for c in calls] == [["weight", "weight_scale"]] * GROUPS
    assert_group_slices(calls, tensors)
    # Resident: each group's codes (what its prepare returned) and its FP32 scale rows.
    codes = d.returned[fs.QPN8_PREPARE_OP]
    assert sorted(prepared.resident) == [
        "group0_qpn8_codes",
        "group0_weight_scale_inv",
        "group1_qpn8_codes",
        "group1_weight_scale_inv",
    ]
    for g in range(GROUPS):
        assert prepared.resident[f"group{g}_qpn8_codes"] is codes[g]
        assert prepared.resident[f"group{g}_weight_scale_inv"] is calls[g]["weight_scale"]


@pytest.mark.parametrize("m", [1, 4, 9])
def test_each_qpn8_group_dispatches_its_codes_scales_and_slice_with_the_pp2_tuning(
    m: int,
) -> None:
    # §3.3 / §4.3: one fp8_qpn8_dispatch_sm70_out per group, at every M (the decode lane is
    # TurboMind's only), with the bound workspace, (32, 2, F) and gated false.
    d, _, prepared, _ = qpn8_grouped()
    start = len(d.calls)
    out = apply(prepared, x_of(m))
    assert d.ops(start) == [fs.QPN8_DISPATCH_OP] * GROUPS
    dispatches = d.of(fs.QPN8_DISPATCH_OP)
    codes = d.returned[fs.QPN8_PREPARE_OP]
    handles = {call["workspace"] for call in dispatches}
    assert len(handles) == 1 and isinstance(handles.pop(), int)
    for g, call in enumerate(dispatches):
        assert sorted(call) == sorted(
            ["out", "x", "weight", "weight_scale", "workspace", "gated", *PP2_TUNING]
        )
        assert {k: call[k] for k in PP2_TUNING} == PP2_TUNING
        assert call["gated"] is False
        assert call["weight"] is codes[g]
        assert call["weight_scale"] is prepared.resident[f"group{g}_weight_scale_inv"]
        # the group's activations, contiguous, and an (M, rows) output of its own
        assert tuple(call["x"].shape) == (m, K) and call["x"].is_contiguous()
        assert torch.equal(call["x"], torch.full((m, K), g + 1.0, dtype=torch.float16))
        assert tuple(call["out"].shape) == (m, ROWS)
        # the group's output block is what its dispatch wrote (the n-th call writes n)
        assert torch.equal(out[:, g, :], torch.full((m, ROWS), g + 1.0, dtype=torch.float16))
    assert (tuple(out.shape), out.dtype) == ((m, GROUPS, ROWS), torch.float16)


# --- grouped TurboMind and its decode lane (§3.6) ---------------------------------------------


def test_the_turbomind_groups_are_prepared_ungated_and_the_decode_pointers_cover_them() -> None:
    d, layout, prepared, tensors = turbomind_grouped()
    assert (layout.name, layout.groups, layout.grouped_decode) == (
        "fp8_sm70_bmm",
        GROUPS,
        True,
    )
    assert d.ops() == [fs.FP8_PREPARE_OP, fs.FP8_PREPARE_OP, fs.STRIDED_PTRS_OP]
    calls = d.of(fs.FP8_PREPARE_OP)
    assert_group_slices(calls, tensors)
    for call in calls:
        assert {k: call[k] for k in ("group_size", "interleave_gated")} == {
            "group_size": 128,
            "interleave_gated": False,
        }
    packed = d.returned[fs.FP8_PREPARE_OP]
    # The strided pointers: every group's codes, then every group's scales, in group order.
    (ptr_call,) = d.of(fs.STRIDED_PTRS_OP)
    assert list(ptr_call) == ["tensors"]
    assert [id(t) for t in ptr_call["tensors"]] == [
        id(packed[0][0]),
        id(packed[1][0]),
        id(packed[0][1]),
        id(packed[1][1]),
    ]
    assert sorted(prepared.resident) == [
        "group0_fp8_codes",
        "group0_fp8_scales",
        "group1_fp8_codes",
        "group1_fp8_scales",
        "strided_ptrs",
    ]
    for g in range(GROUPS):
        assert prepared.resident[f"group{g}_fp8_codes"] is packed[g][0]
        assert prepared.resident[f"group{g}_fp8_scales"] is packed[g][1]
    assert prepared.resident["strided_ptrs"] is d.returned[fs.STRIDED_PTRS_OP][0]


def test_without_the_decode_lane_no_pointers_are_built() -> None:
    d, layout, prepared, _ = turbomind_grouped(decode=False)
    assert layout.grouped_decode is False
    assert d.ops() == [fs.FP8_PREPARE_OP, fs.FP8_PREPARE_OP]
    assert "strided_ptrs" not in prepared.resident
    # ... and M = 1 then runs per group.
    start = len(d.calls)
    apply(prepared, x_of(1))
    assert d.ops(start) == [fs.FP8_GEMM_OP] * GROUPS


@pytest.mark.parametrize("lead", [(), (3,)])
def test_the_decode_lane_is_one_per_expert_dispatch_at_m_1(lead: tuple[int, ...]) -> None:
    # §3.6: at M = 1 (the tokens before [groups, K] multiply to 1) a single call over the
    # pointers, with the TurboMind group and leading dimensions; the output keeps the input's
    # leading shape with rows per group last.
    d, _, prepared, _ = turbomind_grouped()
    m = 1
    x = x_of(m, *((1,) if lead else ()))
    start = len(d.calls)
    out = apply(prepared, x)
    assert d.ops(start) == [fs.GROUPED_DISPATCH_OP]
    (call,) = d.of(fs.GROUPED_DISPATCH_OP)
    assert sorted(call) == ["group_size", "k_ld", "out", "ptrs", "q_ld", "x"]
    assert (call["group_size"], call["k_ld"], call["q_ld"]) == (128, K, ROWS)
    assert call["ptrs"] is prepared.resident["strided_ptrs"]
    assert tuple(call["x"].shape) == (1, GROUPS, K) and call["x"].is_contiguous()
    assert torch.equal(call["x"], x.reshape(1, GROUPS, K))
    assert tuple(call["out"].shape) == (1, GROUPS, ROWS)
    assert tuple(out.shape) == (*x.shape[:-1], ROWS)
    # the output is the buffer the dispatch wrote (its first call writes 1)
    assert torch.equal(out.reshape(1, GROUPS, ROWS), torch.ones((1, GROUPS, ROWS)).half())


@pytest.mark.parametrize("m", [2, 8])
def test_above_m_1_each_turbomind_group_is_its_own_gemm(m: int) -> None:
    d, _, prepared, _ = turbomind_grouped()
    start = len(d.calls)
    out = apply(prepared, x_of(m))
    assert d.ops(start) == [fs.FP8_GEMM_OP] * GROUPS
    packed = d.returned[fs.FP8_PREPARE_OP]
    for g, call in enumerate(d.of(fs.FP8_GEMM_OP)):
        assert sorted(call) == sorted(
            ["out", "x", "weight", "weight_scale", "group_size", "k_ld", "q_ld", "gated"]
        )
        assert (call["group_size"], call["k_ld"], call["q_ld"], call["gated"]) == (
            128,
            K,
            ROWS,
            False,
        )
        assert call["weight"] is packed[g][0]
        assert call["weight_scale"] is packed[g][1]
        assert torch.equal(call["x"], torch.full((m, K), g + 1.0, dtype=torch.float16))
        assert tuple(call["out"].shape) == (m, ROWS)
        assert torch.equal(out[:, g, :], torch.full((m, ROWS), g + 1.0, dtype=torch.float16))
    assert tuple(out.shape) == (m, GROUPS, ROWS)


def test_m_0_launches_nothing_and_keeps_the_leading_shape() -> None:
    for d, _, prepared, _ in (qpn8_grouped(), turbomind_grouped()):
        start = len(d.calls)
        out = apply(prepared, x_of(0, 2))
        assert d.ops(start) == []
        assert tuple(out.shape) == (2, 0, GROUPS, ROWS)


def test_grouped_turbomind_refuses_other_than_fp16_by_its_own_name() -> None:
    # §5 item 8: the TurboMind grouped layer names TurboMind (the QPN8 one names QPN8, with a
    # full stop); a wrong shape is item 10's message.
    _, _, prepared, _ = turbomind_grouped()
    with pytest.raises(ActivationError) as info:
        apply(prepared, x_of(1, dtype=torch.bfloat16))
    assert str(info.value) == "SM70 TurboMind FP8 requires float16 activations, got bfloat16"
    _, _, qpn8, _ = qpn8_grouped()
    with pytest.raises(ActivationError) as info:
        apply(qpn8, x_of(1, dtype=torch.bfloat16))
    assert str(info.value) == "SM70 FP8 QPN8 requires float16 activations, got bfloat16."
    with pytest.raises(ValueError) as shape:
        apply(prepared, torch.empty((1, 4, K // 2), dtype=torch.float16))
    assert str(shape.value) == f"grouped activations must end in [2, {K}], got [1, 4, 2048]"
