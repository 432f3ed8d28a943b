"""The reference ops as torch custom ops: registration, opcheck, tracing, argument rejection."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import native.reference
import native.reference.ops
from native.awq_schemas import (
    GROUP_SIZE,
    PINNED_SCHEMAS,
    PREPARE_COMPACT_OP,
    PREPARE_OP,
    QPN_M1_OP,
    REFERENCE_NAMESPACE,
    W2_K,
    W2_N,
    W13_K,
    W13_N,
)
from native.reference import ArgumentError
from native.reference.packing import QpnBanks, pack_checkpoint, pack_qpn_banks, random_expert

OPS = getattr(torch.ops, REFERENCE_NAMESPACE)
QPN = getattr(OPS, QPN_M1_OP)
ARG_NAMES = ("out", "intermediate", "input", "w13", "s13", "w2", "s2", "ids", "topk")
SEED_IDS = [511, 0, 257, 1, 511, 1, 0, 257, 0, 511]


@pytest.fixture(scope="module", params=[False, True], ids=["4-byte", "3-byte"])
def banks(request: pytest.FixtureRequest) -> QpnBanks:
    gen = torch.Generator().manual_seed(7)
    experts = (0, 1, 257, 511)
    return pack_qpn_banks(
        {e: random_expert(W13_K, W13_N, GROUP_SIZE, gen) for e in experts},
        {e: random_expert(W2_K, W2_N, GROUP_SIZE, gen) for e in experts},
        compact=request.param,
    )


def qpn_args(banks: QpnBanks, **overrides: Any) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(11)
    args: dict[str, Any] = {
        "out": torch.empty((1, 2560), dtype=torch.float16),
        "intermediate": torch.empty((10, 160), dtype=torch.float16),
        "input": torch.randn((1, 2560), generator=gen).half(),
        "w13": banks.w13,
        "s13": banks.s13,
        "w2": banks.w2,
        "s2": banks.s2,
        "ids": torch.tensor([SEED_IDS], dtype=torch.int32),
        "topk": torch.rand((1, 10), generator=gen),
    }
    args.update(overrides)
    return args


def call_qpn(args: dict[str, Any]) -> None:
    QPN(*(args[name] for name in ARG_NAMES))


def small_checkpoint(seed: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ck = pack_checkpoint(random_expert(64, 64, 32, torch.Generator().manual_seed(seed)))
    return ck.qweight, ck.scales, ck.qzeros


def test_ops_registered_with_pinned_schemas() -> None:
    assert native.reference.REFERENCE_OPS == (QPN_M1_OP, PREPARE_OP, PREPARE_COMPACT_OP)
    for name, schema in PINNED_SCHEMAS.items():
        registered = str(getattr(OPS, name).default._schema)
        assert registered == f"{REFERENCE_NAMESPACE}::{schema}"


def test_registration_is_idempotent() -> None:
    importlib.reload(native.reference.ops)
    importlib.reload(native.reference)
    for name, schema in PINNED_SCHEMAS.items():
        assert native.reference.ops.registered_schema(name) == schema
    qweight, scales, qzeros = small_checkpoint()
    words, meta = OPS.awq_sm70_prepare(qweight, scales, qzeros, 32, False)
    assert words.shape == (64, 8) and meta.shape == (2, 64)


def test_opcheck_qpn_m1(banks: QpnBanks) -> None:
    args = qpn_args(banks)
    utils = ["test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"]
    # test_schema compares every argument before and after the call (seconds on the 400 MB
    # banks); the metadata layout does not change the schema, so one layout runs it.
    if not banks.compact:
        utils.insert(0, "test_schema")
    torch.library.opcheck(
        QPN.default, tuple(args[name] for name in ARG_NAMES), test_utils=tuple(utils)
    )


@pytest.mark.parametrize("op_name", [PREPARE_OP, PREPARE_COMPACT_OP])
@pytest.mark.parametrize("interleave", [False, True])
def test_opcheck_prepare(op_name: str, interleave: bool) -> None:
    op = getattr(OPS, op_name).default
    torch.library.opcheck(op, (*small_checkpoint(), 32, interleave))


def test_compile_fullgraph_traces_through_the_fake(banks: QpnBanks) -> None:
    def run(
        out: torch.Tensor,
        intermediate: torch.Tensor,
        x: torch.Tensor,
        w13: torch.Tensor,
        s13: torch.Tensor,
        w2: torch.Tensor,
        s2: torch.Tensor,
        ids: torch.Tensor,
        topk: torch.Tensor,
    ) -> torch.Tensor:
        QPN(out, intermediate, x, w13, s13, w2, s2, ids, topk)
        return out.float() + 1

    compiled_args = qpn_args(banks)
    eager_args = qpn_args(banks)
    result = torch.compile(run, fullgraph=True, backend="eager")(
        *(compiled_args[name] for name in ARG_NAMES)
    )
    expected = run(*(eager_args[name] for name in ARG_NAMES))
    assert torch.equal(result, expected)
    assert torch.equal(compiled_args["intermediate"], eager_args["intermediate"])


def test_meta_tensors_use_the_fake_and_layout_shapes() -> None:
    qweight, scales, qzeros = (t.to("meta") for t in small_checkpoint())
    for op_name, meta_shape, meta_dtype in [
        (PREPARE_OP, (2, 64), torch.int32),
        (PREPARE_COMPACT_OP, (2, 64, 3), torch.uint8),
    ]:
        words, meta = getattr(OPS, op_name)(qweight, scales, qzeros, 32, True)
        assert (words.device.type, words.shape, words.dtype) == ("meta", (64, 8), torch.int32)
        assert (meta.shape, meta.dtype) == (meta_shape, meta_dtype)


def _misaligned_input() -> torch.Tensor:
    return torch.zeros(2561 + 8, dtype=torch.float16)[1:2561].view(1, 2560)


def _other_layout(banks: QpnBanks) -> torch.Tensor:
    if banks.compact:
        return torch.empty((512, 5, 2560), dtype=torch.int32)
    return torch.empty((512, 5, 2560, 3), dtype=torch.uint8)


# (case id, overrides from banks, rejected argument, violated rule, needs storage)
REJECTIONS: list[
    tuple[str, Callable[[QpnBanks, dict[str, Any]], dict[str, Any]], str, str, bool]
] = [
    ("out-aliases-input", lambda b, a: {"out": a["input"]}, "out", "overlap", True),
    (
        "intermediate-overlaps-out",
        lambda b, a: {"intermediate": a["out"].view(-1)[:1600].view(10, 160)},
        "out",
        "overlap",
        True,
    ),
    ("misaligned-input", lambda b, a: {"input": _misaligned_input()}, "input", "alignment", True),
    ("int64-ids", lambda b, a: {"ids": a["ids"].long()}, "ids", "dtype", False),
    ("fp16-router-weights", lambda b, a: {"topk": a["topk"].half()}, "topk", "dtype", False),
    (
        "intermediate-shape",
        lambda b, a: {"intermediate": torch.empty((10, 161), dtype=torch.float16)},
        "intermediate",
        "shape",
        False,
    ),
    (
        "ids-shape",
        lambda b, a: {"ids": torch.zeros((1, 9), dtype=torch.int32)},
        "ids",
        "shape",
        False,
    ),
    (
        "w13-shape",
        lambda b, a: {"w13": torch.empty((1, 2560, 40), dtype=torch.int32)},
        "w13",
        "shape",
        False,
    ),
    ("s2-shape", lambda b, a: {"s2": b.s2[:4]}, "s2", "shape", False),
    ("mixed-metadata-layouts", lambda b, a: {"s2": _other_layout(b)}, "s2", "layout", False),
    (
        "s13-dtype",
        lambda b, a: {"s13": b.s13.view(torch.float16) if not b.compact else b.s13.to(torch.int8)},
        "s13",
        "dtype",
        False,
    ),
    (
        "non-contiguous-input",
        lambda b, a: {"input": torch.zeros((1, 5120), dtype=torch.float16)[:, ::2]},
        "input",
        "contiguity",
        False,
    ),
    (
        "non-contiguous-intermediate",
        lambda b, a: {"intermediate": torch.empty((160, 10), dtype=torch.float16).t()},
        "intermediate",
        "contiguity",
        False,
    ),
    (
        "w13-on-another-device",
        lambda b, a: {"w13": torch.empty((512, 2560, 40), dtype=torch.int32, device="meta")},
        "w13",
        "device",
        False,
    ),
]


@pytest.mark.parametrize(
    ("make", "argument", "rule", "_storage"),
    [r[1:] for r in REJECTIONS],
    ids=[r[0] for r in REJECTIONS],
)
def test_qpn_rejections(
    banks: QpnBanks, make: Callable[..., dict[str, Any]], argument: str, rule: str, _storage: bool
) -> None:
    args = qpn_args(banks)
    args.update(make(banks, args))
    with pytest.raises(RuntimeError, match=f"'{argument}' violates the {rule} rule") as info:
        call_qpn(args)
    assert isinstance(info.value, ArgumentError)
    assert (info.value.argument, info.value.rule) == (argument, rule)


@pytest.mark.parametrize(
    ("make", "argument", "rule", "storage"),
    [r[1:] for r in REJECTIONS if r[0] != "w13-on-another-device"],
    ids=[r[0] for r in REJECTIONS if r[0] != "w13-on-another-device"],
)
def test_fake_shares_checks_but_skips_storage_checks(
    banks: QpnBanks,
    make: Callable[..., dict[str, Any]],
    argument: str,
    rule: str,
    storage: bool,
) -> None:
    args = qpn_args(banks)
    args.update(make(banks, args))
    mode = FakeTensorMode()
    fakes = {name: mode.from_tensor(t) for name, t in args.items()}
    with mode:
        if storage:
            call_qpn(fakes)  # alignment and overlap cannot be judged without storage
        else:
            with pytest.raises(ArgumentError, match=f"'{argument}' violates the {rule} rule"):
                call_qpn(fakes)


@pytest.mark.parametrize("op_name", [PREPARE_OP, PREPARE_COMPACT_OP])
@pytest.mark.parametrize(
    ("change", "argument", "rule"),
    [
        (lambda q, s, z, g: (q.float(), s, z, g), "kernel", "dtype"),
        (lambda q, s, z, g: (q, s[:1], z, g), "scaling_factors", "shape"),
        (lambda q, s, z, g: (q, s.float(), z, g), "scaling_factors", "dtype"),
        (lambda q, s, z, g: (q, s, z.long(), g), "zeros", "dtype"),
        (lambda q, s, z, g: (q, s, z, 0), "group_size", "value"),
        (lambda q, s, z, g: (q, s, z, 48), "kernel", "shape"),
        (lambda q, s, z, g: (q.t().contiguous().t(), s, z, g), "kernel", "contiguity"),
    ],
    ids=[
        "kernel-dtype",
        "scales-shape",
        "scales-dtype",
        "zeros-dtype",
        "group-zero",
        "group-not-dividing-k",
        "kernel-non-contiguous",
    ],
)
def test_prepare_rejections(
    op_name: str, change: Callable[..., tuple[Any, ...]], argument: str, rule: str
) -> None:
    qweight, scales, qzeros, group = change(*small_checkpoint(), 32)
    with pytest.raises(ArgumentError, match=f"'{argument}' violates the {rule} rule"):
        getattr(OPS, op_name)(qweight, scales, qzeros, group, False)
