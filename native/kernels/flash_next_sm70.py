"""The Flash-Next batch routes' preparation and dispatch on SM70 (docs/contracts/flashnext.md
§2.4-9, §4, §5.2-5.4): what the loader does once a layer's routes are tagged, and the batch
calls a tagged layer makes at a token count.

Mechanism only: which routes are tagged and which token counts a route serves are decided in
`policies.flash_next`. Preparation packs with tensor operations (the GDN pair into one weight,
b/a zero-padded to 32 rows) and asks the native build for each tagged route's op; the HC
support query is the one native call it makes. Replay runs it on meta tensors, which stand
for the device weights (the reference never prepares its meta weights: its quirk 7, not
copied).

Torch-free at import: the tensors come from `native.meta_tensors` on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from native import meta_tensors
from native.ops_flash_next import DENSE_BATCH_OP, GDN_INPUT_BATCH_OP, HC_BATCH_SUPPORT_OP
from routectl.errors import SelectionError
from routectl.namespaces.native_ns import NativeNamespace

FP16 = "float16"
# §2.4-9 / §5.3: the packed GDN weight is in_proj_qkvz over in_proj_ba, b/a zero-padded to
# 32 rows; only the TP4 pair (4096 | 24, 2560) in fp16 can be packed.
GDN_PAD_ROWS = 32
GDN_QKVZ_ROWS = 4096
GDN_BA_ROWS = 24
GDN_PACKABLE_K = 2560


@dataclass(frozen=True)
class BatchWeights:
    """A layer's prepared batch routes: the dense out_proj weight (N, K) and the packed GDN
    weight (N_qkvz + 32, K), each None where its route is not tagged; `hc` whether the HC
    batch kernels are bound."""

    dense: Any | None
    gdn: Any | None
    hc: bool


def _check_packable(weight: Any, role: str, rows: int) -> None:
    n, k = weight.shape
    dtype = str(weight.dtype).removeprefix("torch.")
    if (n, k, dtype) != (rows, GDN_PACKABLE_K, FP16):
        raise SelectionError(
            "gdn_pack_unsupported",
            f"Unsupported packed GDN input weight: {role} ({n}, {k}) {dtype}, packing needs "
            f"({rows}, {GDN_PACKABLE_K}) {FP16}",
        )


def _pack_gdn(qkvz: Any, ba: Any) -> Any:
    """The packed GDN input weight: qkvz rows, then b/a zero-padded to `GDN_PAD_ROWS`."""
    _check_packable(qkvz, "in_proj_qkvz", GDN_QKVZ_ROWS)
    _check_packable(ba, "in_proj_ba", GDN_BA_ROWS)
    return meta_tensors.empty_beside((GDN_QKVZ_ROWS + GDN_PAD_ROWS, GDN_PACKABLE_K), FP16, qkvz)


def prepare_batch(
    ns: NativeNamespace,
    *,
    out_proj: Any,
    in_proj_qkvz: Any,
    in_proj_ba: Any,
    dense: bool,
    gdn: bool,
    hc: bool,
) -> BatchWeights:
    """§2.4-9 on the layer's FP16 weights for the tagged routes; a tagged route whose native
    support is missing fails the layer closed with the contract's message (§5.2-5.4)."""
    if dense and not ns.has_op(DENSE_BATCH_OP):
        raise SelectionError(
            "dense_batch_op_missing",
            f"Rebuild the SM70 extension for batched dense projections ({DENSE_BATCH_OP} "
            "is missing)",
        )
    packed = None
    if gdn:
        packed = _pack_gdn(in_proj_qkvz, in_proj_ba)
        if not ns.has_op(GDN_INPUT_BATCH_OP):
            raise SelectionError(
                "gdn_input_batch_op_missing",
                f"Rebuild the SM70 extension for batched GDN input ({GDN_INPUT_BATCH_OP} is "
                "missing)",
            )
    if hc:
        # The support query answers nonzero when the build carries the batched HC kernels.
        supported = ns.call(HC_BATCH_SUPPORT_OP) if ns.has_op(HC_BATCH_SUPPORT_OP) else None
        if not supported:
            state = "is missing" if supported is None else "answers 0"
            raise SelectionError(
                "hc_batch_unsupported",
                f"Rebuild the SM70 extension for batched HC ({HC_BATCH_SUPPORT_OP} {state})",
            )
    return BatchWeights(dense=out_proj if dense else None, gdn=packed, hc=hc)


def dispatch_batch(
    ns: NativeNamespace, weights: BatchWeights, m: int, *, dense: bool, gdn: bool
) -> None:
    """One forward step at M tokens through the batch routes the policy admits at M: the
    packed GDN input first (the layer's input projection), then the dense out_proj."""
    if gdn:
        if weights.gdn is None:
            raise ValueError("GDN batch dispatch on a layer without a packed GDN weight")
        _project(ns, GDN_INPUT_BATCH_OP, weights.gdn, m)
    if dense:
        if weights.dense is None:
            raise ValueError("dense batch dispatch on a layer without a prepared out_proj")
        _project(ns, DENSE_BATCH_OP, weights.dense, m)


def _project(ns: NativeNamespace, op: str, weight: Any, m: int) -> None:
    n, k = weight.shape
    x = meta_tensors.empty_beside((m, k), FP16, weight)
    out = meta_tensors.empty_beside((m, n), FP16, weight)
    ns.call(op, out=out, x=x, weight=weight)


__all__ = ["GDN_PAD_ROWS", "BatchWeights", "dispatch_batch", "prepare_batch"]
