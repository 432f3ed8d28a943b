"""Argument validation of the pinned AWQ ops, shared by the reference ops' fakes and CPU
implementations (`native.reference`) and the replay's catalogue validators (imported when a
call is checked: it imports torch; importing it registers no op).

Dtype, shape, device, contiguity and layout checks run everywhere; alignment and overlap need
real storage and run only on tensors that have it (never meta or fake tensors).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch._subclasses.fake_tensor import is_fake

from native.awq_layout import (
    CHECKPOINT_SCALES_DTYPE,
    CODES_PER_WORD,
    THREE_BYTE,
    WORDS_DTYPE,
    checkpoint_shapes,
    layout_of_metadata_dtype,
    prepared_shapes,
    qpn_m1_arguments,
)
from native.awq_schemas import QPN_M1_OP

QPN_M1_OUTPUTS = ("out", "intermediate")


class ArgumentError(RuntimeError):
    """A reference op rejected an argument. A RuntimeError, as the engine's op raises."""

    def __init__(self, op: str, argument: str, rule: str, detail: str) -> None:
        super().__init__(f"{op}: argument '{argument}' violates the {rule} rule: {detail}")
        self.op = op
        self.argument = argument
        self.rule = rule


def has_storage(t: torch.Tensor) -> bool:
    return t.device.type != "meta" and not is_fake(t)


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _check_tensor(
    op: str,
    name: str,
    t: object,
    dtype: str,
    shape: tuple[int, ...] | None,
    device: torch.device,
) -> None:
    if not isinstance(t, torch.Tensor):
        raise ArgumentError(op, name, "type", f"expected a Tensor, got {type(t).__name__}")
    if t.device != device:
        raise ArgumentError(op, name, "device", f"is on {t.device}, the input is on {device}")
    if _dtype_name(t) != dtype:
        raise ArgumentError(op, name, "dtype", f"expected {dtype}, got {_dtype_name(t)}")
    if shape is not None and (t.dim() != len(shape) or tuple(t.shape) != shape):
        raise ArgumentError(op, name, "shape", f"expected {shape}, got {tuple(t.shape)}")
    if not t.is_contiguous():
        raise ArgumentError(op, name, "contiguity", f"strides {t.stride()} are not contiguous")


def _byte_range(t: torch.Tensor) -> tuple[int, int]:
    start = t.data_ptr()
    return start, start + t.numel() * t.element_size()


def check_qpn_m1(
    out: torch.Tensor,
    intermediate: torch.Tensor,
    input: torch.Tensor,
    w13: torch.Tensor,
    s13: torch.Tensor,
    w2: torch.Tensor,
    s2: torch.Tensor,
    ids: torch.Tensor,
    topk: torch.Tensor,
    *,
    storage: bool,
) -> bool:
    """Validate one QPN M1 call; returns True for 3-byte metadata, False for 4-byte.

    `storage` enables the alignment and overlap checks (the CPU implementation); tensors
    without real storage are skipped even then.
    """
    op = QPN_M1_OP
    args: Mapping[str, torch.Tensor] = {
        "out": out,
        "intermediate": intermediate,
        "input": input,
        "w13": w13,
        "s13": s13,
        "w2": w2,
        "s2": s2,
        "ids": ids,
        "topk": topk,
    }
    if not isinstance(input, torch.Tensor):
        raise ArgumentError(op, "input", "type", f"expected a Tensor, got {type(input).__name__}")
    if not isinstance(s13, torch.Tensor):
        raise ArgumentError(op, "s13", "type", f"expected a Tensor, got {type(s13).__name__}")
    # The metadata layout is chosen by s13's element type; s2 must then agree with it.
    layout = layout_of_metadata_dtype(_dtype_name(s13))
    if layout is None:
        raise ArgumentError(
            op,
            "s13",
            "dtype",
            f"expected int32 (4-byte) or uint8 (3-byte) metadata, got {_dtype_name(s13)}",
        )
    compact = layout == THREE_BYTE
    if isinstance(s2, torch.Tensor) and layout_of_metadata_dtype(_dtype_name(s2)) != layout:
        raise ArgumentError(
            op,
            "s2",
            "layout",
            f"s13 selects {layout} metadata but s2 is {_dtype_name(s2)}",
        )
    specs = qpn_m1_arguments(compact)
    for name, spec in specs.items():
        _check_tensor(op, name, args[name], spec.dtype, spec.shape, input.device)
    if not storage:
        return compact
    for name, spec in specs.items():
        t = args[name]
        if has_storage(t) and t.data_ptr() % spec.alignment != 0:
            raise ArgumentError(
                op,
                name,
                "alignment",
                f"data pointer {t.data_ptr():#x} is not {spec.alignment}-byte aligned",
            )
    for out_name in QPN_M1_OUTPUTS:
        target = args[out_name]
        if not has_storage(target):
            continue
        lo, hi = _byte_range(target)
        for other_name, other in args.items():
            if other_name == out_name or not has_storage(other):
                continue
            other_lo, other_hi = _byte_range(other)
            if lo < other_hi and other_lo < hi:
                raise ArgumentError(op, out_name, "overlap", f"overlaps '{other_name}'")
    return compact


def check_prepare(
    op: str,
    kernel: torch.Tensor,
    scaling_factors: torch.Tensor,
    zeros: torch.Tensor,
    group_size: int,
) -> tuple[int, int]:
    """Validate one expert's AWQ checkpoint tensors for a prepare op; returns (K, N)."""
    if not isinstance(kernel, torch.Tensor):
        raise ArgumentError(op, "kernel", "type", f"expected a Tensor, got {type(kernel).__name__}")
    if kernel.dim() != 2:
        raise ArgumentError(op, "kernel", "shape", f"expected (K, N/8), got {tuple(kernel.shape)}")
    if group_size <= 0:
        raise ArgumentError(op, "group_size", "value", f"must be positive, got {group_size}")
    k, n = kernel.shape[0], kernel.shape[1] * CODES_PER_WORD
    try:
        qweight_shape, qzeros_shape, scales_shape = checkpoint_shapes(k, n, group_size)
        prepared_shapes(k, n, group_size, compact=False)
    except ValueError as exc:
        raise ArgumentError(op, "kernel", "shape", str(exc)) from exc
    device = kernel.device
    _check_tensor(op, "kernel", kernel, WORDS_DTYPE, qweight_shape, device)
    _check_tensor(
        op, "scaling_factors", scaling_factors, CHECKPOINT_SCALES_DTYPE, scales_shape, device
    )
    _check_tensor(op, "zeros", zeros, WORDS_DTYPE, qzeros_shape, device)
    return k, n
