"""Empty tensors for replay and for the fakes: one shared object per (shape, dtype) on the
meta device, a fresh allocation on any other.

Replay builds about 46,000 empty tensors for every shipped row (activations, checkpoint
banks, prepared outputs, what the fakes return), and `torch.empty` costs 3-6 us each: a
tenth of `routectl check` beyond the torch import. A meta tensor has no storage and no
values; nothing on these paths changes a tensor's metadata in place (in-place ops on meta
only check shapes), and no decision reads a tensor's identity. So equal (shape, dtype) share
one object, as `native.moe_layer.meta_checkpoint` already lets one set of tensors stand for
every expert of a bank. Buffers whose identity means ownership (an invocation's scratch, a
bound workspace) are allocated apart: `native.kernels.common.owned_fp16`. Real devices (the
engine, the reference ops, CUDA) always get their own allocation.

Torch-free at import: torch is imported on the first call.
"""

from __future__ import annotations

from typing import Any

_SHARED: dict[tuple[Any, Any, Any], Any] = {}


def empty(shape: tuple[int, ...], dtype: Any, device: Any) -> Any:
    """An uninitialised tensor: `dtype` a torch dtype or its name ("float16"), `device` a
    torch device or its name."""
    # Looked up first as the caller spelled it (a shape tuple or torch.Size, a dtype or its
    # name, a device or "meta"): a repeated request costs one dict lookup, no torch call.
    # Only meta tensors are ever stored, so a real device always misses.
    key = (shape, dtype, device)
    try:
        tensor = _SHARED.get(key)
        symbolic = False
    except TypeError:  # symbolic sizes (torch's fake tensors under dynamic shapes)
        tensor, symbolic = None, True
    if tensor is not None:
        return tensor
    import torch

    torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if symbolic or getattr(device, "type", device) != "meta":
        return torch.empty(shape, dtype=torch_dtype, device=device)
    # Spelled another way before: the same (shape, dtype), the same tensor.
    canonical = (tuple(shape), torch_dtype, "meta")
    tensor = _SHARED.get(canonical)
    if tensor is None:
        tensor = _SHARED[canonical] = torch.empty(canonical[0], dtype=torch_dtype, device="meta")
    _SHARED[key] = tensor
    return tensor


def empty_beside(shape: tuple[int, ...], dtype: Any, like: Any) -> Any:
    """`empty` on `like`'s device: what a fake returns beside its inputs."""
    return empty(shape, dtype, like.device)
