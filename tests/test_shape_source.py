"""One source of prepared-bank shapes: the replay's catalogue fakes and the reference ops'
registered fakes agree, for both metadata layouts and both MoE banks."""

from __future__ import annotations

import pytest
import torch

import native.reference  # noqa: F401 - registers the routectl:: reference ops
from native.awq_layout import checkpoint_shapes
from native.catalogue import CATALOGUE


@pytest.mark.parametrize("op", ["awq_sm70_prepare", "awq_sm70_prepare_compact"])
@pytest.mark.parametrize("k, n", [(2560, 320), (160, 2560), (2048, 384)])
def test_catalogue_fake_equals_the_reference_fake(op, k, n):
    group = 32
    qweight, qzeros, scales = (
        torch.empty(shape, dtype=dtype, device="meta")
        for shape, dtype in zip(
            checkpoint_shapes(k, n, group), (torch.int32, torch.int32, torch.float16), strict=True
        )
    )
    args = {
        "kernel": qweight,
        "scaling_factors": scales,
        "zeros": qzeros,
        "group_size": group,
        "interleave_gated_silu": False,
    }
    replayed = CATALOGUE.ops[op].fake(**args)
    registered = getattr(torch.ops.routectl, op)(**args)
    assert [(tuple(t.shape), t.dtype) for t in replayed] == [
        (tuple(t.shape), t.dtype) for t in registered
    ]
