"""The Flash-Next batch routes' preparation and dispatch (`native.kernels.flash_next_sm70`)
called directly, not through a category row: the prepared weights whole for every tagged
subset, each fail-closed error with its code and the contract's message (flashnext.md
§5.2-5.4), and what a dispatch hands the native build (FP16 activations and outputs beside the
prepared weight, §2.4-9), seen by an in-memory namespace that keeps its calls' arguments.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch

from native.catalogue import CATALOGUE
from native.kernels.flash_next_sm70 import BatchWeights, dispatch_batch, prepare_batch
from native.ops_flash_next import DENSE_BATCH_OP, GDN_INPUT_BATCH_OP, HC_BATCH_SUPPORT_OP
from routectl.errors import SelectionError
from routectl.namespaces.native_ns import InMemoryNamespace
from routectl.replay.harness import RecordingNamespace

SHAPES = {"out_proj": (2560, 1536), "in_proj_qkvz": (4096, 2560), "in_proj_ba": (24, 2560)}


def fp16(shape: tuple[int, ...], dtype: torch.dtype = torch.float16) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype, device="meta")


def weights(**changed: tuple[tuple[int, ...], torch.dtype]) -> dict[str, torch.Tensor]:
    out = {k: fp16(v) for k, v in SHAPES.items()}
    out.update({k: fp16(*v) for k, v in changed.items()})
    return out


@pytest.mark.parametrize(("dense", "gdn", "hc"), list(itertools.product((False, True), repeat=3)))
def test_the_prepared_weights_hold_exactly_the_tagged_routes(
    dense: bool, gdn: bool, hc: bool
) -> None:
    layer = weights()
    ns = RecordingNamespace(CATALOGUE)
    prepared = prepare_batch(ns, **layer, dense=dense, gdn=gdn, hc=hc)
    assert prepared.dense is (layer["out_proj"] if dense else None)
    assert prepared.hc is hc
    if gdn:
        # The packed pair: 4096 qkvz rows over b/a padded to 32, K 2560, FP16 on the layer's
        # device.
        assert prepared.gdn is not None
        packed = prepared.gdn
        assert (tuple(packed.shape), packed.dtype, packed.device.type) == (
            (4128, 2560),
            torch.float16,
            "meta",
        )
    else:
        assert prepared.gdn is None
    # The HC support query is the only native call preparation makes.
    assert ns.calls == ([{"op": HC_BATCH_SUPPORT_OP, "plan": {}}] if hc else [])


@pytest.mark.parametrize(
    ("role", "changed", "message"),
    [
        (
            "in_proj_qkvz",
            ((8192, 2560), torch.float16),
            "Unsupported packed GDN input weight: in_proj_qkvz (8192, 2560) float16, packing "
            "needs (4096, 2560) float16",
        ),
        (
            "in_proj_qkvz",
            ((4096, 2560), torch.bfloat16),
            "Unsupported packed GDN input weight: in_proj_qkvz (4096, 2560) bfloat16, packing "
            "needs (4096, 2560) float16",
        ),
        (
            "in_proj_ba",
            ((24, 3072), torch.float16),
            "Unsupported packed GDN input weight: in_proj_ba (24, 3072) float16, packing "
            "needs (24, 2560) float16",
        ),
        (
            "in_proj_ba",
            ((32, 2560), torch.float16),
            "Unsupported packed GDN input weight: in_proj_ba (32, 2560) float16, packing "
            "needs (24, 2560) float16",
        ),
    ],
)
def test_packing_refuses_other_weights_with_the_whole_message(
    role: str, changed: tuple[tuple[int, ...], torch.dtype], message: str
) -> None:
    ns = RecordingNamespace(CATALOGUE)
    with pytest.raises(SelectionError) as err:
        prepare_batch(ns, **weights(**{role: changed}), dense=False, gdn=True, hc=False)
    assert (err.value.code, err.value.message) == ("gdn_pack_unsupported", message)


@pytest.mark.parametrize(
    ("removed", "tags", "code", "message"),
    [
        (
            DENSE_BATCH_OP,
            {"dense": True},
            "dense_batch_op_missing",
            "Rebuild the SM70 extension for batched dense projections "
            "(qwen38_dense_batch_sm70_out is missing)",
        ),
        (
            GDN_INPUT_BATCH_OP,
            {"gdn": True},
            "gdn_input_batch_op_missing",
            "Rebuild the SM70 extension for batched GDN input (qwen38_gdn_input_batch_sm70_out "
            "is missing)",
        ),
        (
            HC_BATCH_SUPPORT_OP,
            {"hc": True},
            "hc_batch_unsupported",
            "Rebuild the SM70 extension for batched HC (supports_sm70_qwen38_hc_batch is missing)",
        ),
    ],
)
def test_a_tagged_route_without_its_native_support_fails_closed(
    removed: str, tags: dict[str, bool], code: str, message: str
) -> None:
    flags = {"dense": False, "gdn": False, "hc": False, **tags}
    ns = RecordingNamespace(CATALOGUE, remove=(removed,))
    with pytest.raises(SelectionError) as err:
        prepare_batch(ns, **weights(), dense=flags["dense"], gdn=flags["gdn"], hc=flags["hc"])
    assert (err.value.code, err.value.message) == (code, message)
    # The same build serves every other route: the missing op fails only its own.
    others = {k: not v for k, v in flags.items()}
    prepare_batch(ns, **weights(), dense=others["dense"], gdn=others["gdn"], hc=others["hc"])


def test_an_hc_query_answering_zero_names_the_answer() -> None:
    ns = RecordingNamespace(CATALOGUE, abi={HC_BATCH_SUPPORT_OP: 0})
    with pytest.raises(SelectionError) as err:
        prepare_batch(ns, **weights(), dense=False, gdn=False, hc=True)
    assert (err.value.code, err.value.message) == (
        "hc_batch_unsupported",
        "Rebuild the SM70 extension for batched HC (supports_sm70_qwen38_hc_batch answers 0)",
    )


class Kept:
    """The arguments of each call an in-memory build received."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def impl(self, op: str) -> Any:
        def call(**kwargs: Any) -> None:
            self.calls.append((op, kwargs))

        return call


@pytest.mark.parametrize("m", [2, 5, 16])
def test_a_dispatch_hands_fp16_activations_and_outputs_beside_the_weight(m: int) -> None:
    kept = Kept()
    ops = (DENSE_BATCH_OP, GDN_INPUT_BATCH_OP)
    ns = InMemoryNamespace(ops, impls={op: kept.impl(op) for op in ops})
    dense, packed = fp16((2560, 1536)), fp16((4128, 2560))
    dispatch_batch(ns, BatchWeights(dense=dense, gdn=packed, hc=False), m, dense=True, gdn=True)
    seen = [
        (op, {k: (tuple(v.shape), v.dtype) for k, v in kwargs.items()}) for op, kwargs in kept.calls
    ]
    # The GDN input first (the layer's input projection), then out_proj.
    assert seen == [
        (
            GDN_INPUT_BATCH_OP,
            {
                "out": ((m, 4128), torch.float16),
                "x": ((m, 2560), torch.float16),
                "weight": ((4128, 2560), torch.float16),
            },
        ),
        (
            DENSE_BATCH_OP,
            {
                "out": ((m, 2560), torch.float16),
                "x": ((m, 1536), torch.float16),
                "weight": ((2560, 1536), torch.float16),
            },
        ),
    ]
    assert kept.calls[0][1]["weight"] is packed and kept.calls[1][1]["weight"] is dense


@pytest.mark.parametrize(
    ("prepared", "flags", "message"),
    [
        (
            BatchWeights(dense=fp16((2560, 1536)), gdn=None, hc=False),
            {"dense": False, "gdn": True},
            "GDN batch dispatch on a layer without a packed GDN weight",
        ),
        (
            BatchWeights(dense=None, gdn=fp16((4128, 2560)), hc=False),
            {"dense": True, "gdn": False},
            "dense batch dispatch on a layer without a prepared out_proj",
        ),
    ],
)
def test_dispatching_an_unprepared_route_is_refused_before_any_call(
    prepared: BatchWeights, flags: dict[str, bool], message: str
) -> None:
    ns = RecordingNamespace(CATALOGUE)
    with pytest.raises(ValueError) as err:
        dispatch_batch(ns, prepared, 4, **flags)
    assert str(err.value) == message
    assert ns.calls == []
