"""Replay's empty tensors: on the meta device one object per (shape, dtype), stands for every
request; on a real device each request gets its own memory (the engine and the reference ops
write into what they are given)."""

from __future__ import annotations

import torch

from native import meta_tensors


def test_meta_requests_of_one_shape_and_dtype_share_one_tensor():
    a = meta_tensors.empty((3, 4), "float16", "meta")
    b = meta_tensors.empty((3, 4), torch.float16, torch.device("meta"))
    c = meta_tensors.empty(torch.Size([3, 4]), "float16", torch.device("meta"))
    assert a is b and b is c and meta_tensors.empty((3, 4), "float16", "meta") is a
    assert tuple(a.shape) == (3, 4)
    assert a.dtype == torch.float16
    assert a.device.type == "meta"


def test_meta_requests_differing_in_shape_or_dtype_get_their_own_tensor():
    base = meta_tensors.empty((5, 6), "int32", "meta")
    other_shape = meta_tensors.empty((6, 5), "int32", "meta")
    other_dtype = meta_tensors.empty((5, 6), "float32", "meta")
    assert base is not other_shape and base is not other_dtype
    assert tuple(other_shape.shape) == (6, 5) and other_shape.dtype == torch.int32
    assert tuple(other_dtype.shape) == (5, 6) and other_dtype.dtype == torch.float32


def test_cpu_requests_are_separate_allocations():
    a = meta_tensors.empty((2, 8), "float16", "cpu")
    b = meta_tensors.empty((2, 8), torch.float16, torch.device("cpu"))
    assert a is not b
    a.fill_(1.0)
    b.fill_(2.0)
    assert torch.all(a == 1.0) and torch.all(b == 2.0)
    assert a.dtype == torch.float16 and tuple(a.shape) == (2, 8) and a.device.type == "cpu"


def test_symbolic_sizes_are_allocated_not_shared():
    # torch's fake tensors under dynamic shapes (opcheck) carry SymInt sizes, which cannot
    # key a table: such a request is a plain torch.empty, on any device.
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        real = torch.empty((4, 6), dtype=torch.int32)
        fake = mode.from_tensor(real, symbolic_context=None)
        sym = mode.shape_env.create_unbacked_symint()
        shape = (sym, fake.shape[1])
        for device in ("meta", "cpu"):
            a = meta_tensors.empty(shape, "int32", device)
            b = meta_tensors.empty(shape, "int32", device)
            assert a is not b
            assert a.dtype == torch.int32 and a.shape[1] == 6


def test_beside_a_tensor_means_on_its_device():
    meta_like = torch.empty((1,), device="meta")
    cpu_like = torch.empty((1,))
    shared = meta_tensors.empty_beside((2, 3), "float16", meta_like)
    assert shared is meta_tensors.empty((2, 3), "float16", "meta")
    own = meta_tensors.empty_beside((2, 3), "float16", cpu_like)
    assert own.device.type == "cpu" and own is not meta_tensors.empty_beside(
        (2, 3), "float16", cpu_like
    )
