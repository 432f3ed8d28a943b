"""Empty tensors for replay and for the fakes: one shared object per (shape, dtype) on the
meta device, a fresh allocation on any other.

Replay builds about 46,000 empty tensors for every shipped row (activations, checkpoint
banks, prepared outputs, what the fakes return), and `torch.empty` costs 3-6 us each: a
tenth of `routectl check` beyond the torch import. A meta tensor has no storage and no
values; nothing on these paths changes a tensor's metadata in place (in-place ops on meta
only check shapes), and no decision reads a tensor's identity. So equal (shape, dtype) share
one object, as `native.moe_layer.meta_checkpoint` already lets one set of tensors stand for
every expert of a bank. Real devices (the engine, the reference ops, CUDA) always get their
own allocation.

Torch-free at import: torch is imported on the first call.
"""

from __future__ import annotations

from typing import Any

_SHARED: dict[tuple[tuple[int, ...], Any], Any] = {}


def empty(shape: tuple[int, ...], dtype: Any, device: Any) -> Any:
    """An uninitialised tensor: `dtype` a torch dtype or its name ("float16"), `device` a
    torch device or its name."""
    import torch

    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    if getattr(device, "type", device) != "meta":
        return torch.empty(shape, dtype=dtype, device=device)
    key = (tuple(shape), dtype)
    tensor = _SHARED.get(key)
    if tensor is None:
        tensor = _SHARED[key] = torch.empty(key[0], dtype=dtype, device="meta")
    return tensor
