"""Registration of the reference ops in torch.library namespace `routectl`.

Same names and pinned schemas as the engine's ops, a fake (shared validation, shapes from
`native.awq_layout`), a CPU and a CUDA implementation each. The CUDA QPN M1 op runs the Triton
kernels of `triton_qpn`, imported at its first call: Triton is optional (the `gpu` extra), and
without it only a CUDA call fails, with a message saying so. The prepare ops run the same
torch code on either device. Registering is idempotent per process: an op already defined
with the pinned schema is left alone.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from native.awq_layout import fake_prepare_outputs
from native.awq_schemas import (
    PINNED_SCHEMAS,
    PREPARE_COMPACT_OP,
    PREPARE_OP,
    QPN_M1_OP,
    REFERENCE_NAMESPACE,
)
from native.awq_validate import check_prepare, check_qpn_m1
from native.reference import numerics


def _qpn_m1_fake(
    out: torch.Tensor,
    intermediate: torch.Tensor,
    input: torch.Tensor,
    w13: torch.Tensor,
    s13: torch.Tensor,
    w2: torch.Tensor,
    s2: torch.Tensor,
    ids: torch.Tensor,
    topk: torch.Tensor,
) -> None:
    check_qpn_m1(out, intermediate, input, w13, s13, w2, s2, ids, topk, storage=False)


def _qpn_m1_cpu(
    out: torch.Tensor,
    intermediate: torch.Tensor,
    input: torch.Tensor,
    w13: torch.Tensor,
    s13: torch.Tensor,
    w2: torch.Tensor,
    s2: torch.Tensor,
    ids: torch.Tensor,
    topk: torch.Tensor,
) -> None:
    compact = check_qpn_m1(out, intermediate, input, w13, s13, w2, s2, ids, topk, storage=True)
    result, inter = numerics.qpn_m1(input, w13, s13, w2, s2, ids, topk, compact)
    intermediate.copy_(inter)
    out.copy_(result)


def _qpn_m1_cuda(
    out: torch.Tensor,
    intermediate: torch.Tensor,
    input: torch.Tensor,
    w13: torch.Tensor,
    s13: torch.Tensor,
    w2: torch.Tensor,
    s2: torch.Tensor,
    ids: torch.Tensor,
    topk: torch.Tensor,
) -> None:
    # Validation reads only tensor metadata: no device synchronisation, graph-capturable.
    compact = check_qpn_m1(out, intermediate, input, w13, s13, w2, s2, ids, topk, storage=True)
    try:
        from native.reference import triton_qpn
    except ImportError as exc:
        raise RuntimeError(
            f"{REFERENCE_NAMESPACE}::{QPN_M1_OP} on CUDA needs Triton (pip install "
            f"'routectl[gpu]'): {exc}"
        ) from exc
    # Triton launches on the current device: make it the tensors' own.
    with torch.accelerator.device_index(input.device.index):
        triton_qpn.launch_qpn_m1(
            out, intermediate, input, w13, s13, w2, s2, ids, topk, compact=compact
        )


_PrepareImpl = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, int, bool], list[torch.Tensor]]


def _prepare_impls(op: str, compact: bool) -> tuple[_PrepareImpl, _PrepareImpl, _PrepareImpl]:
    def fake(
        kernel: torch.Tensor,
        scaling_factors: torch.Tensor,
        zeros: torch.Tensor,
        group_size: int,
        interleave_gated_silu: bool,
    ) -> list[torch.Tensor]:
        check_prepare(op, kernel, scaling_factors, zeros, group_size)
        return fake_prepare_outputs(kernel, group_size, compact)

    def cpu(
        kernel: torch.Tensor,
        scaling_factors: torch.Tensor,
        zeros: torch.Tensor,
        group_size: int,
        interleave_gated_silu: bool,
    ) -> list[torch.Tensor]:
        check_prepare(op, kernel, scaling_factors, zeros, group_size)
        return numerics.prepare_expert(
            kernel, scaling_factors, zeros, group_size, interleave_gated_silu, compact
        )

    # numerics' prepare is plain torch on the inputs' device: the CUDA op is the same code.
    return fake, cpu, cpu


# name -> (fake, CPU implementation, CUDA implementation)
_IMPLS: dict[str, tuple[Callable[..., object], Callable[..., object], Callable[..., object]]] = {
    QPN_M1_OP: (_qpn_m1_fake, _qpn_m1_cpu, _qpn_m1_cuda),
    PREPARE_OP: _prepare_impls(PREPARE_OP, compact=False),
    PREPARE_COMPACT_OP: _prepare_impls(PREPARE_COMPACT_OP, compact=True),
}


def registered_schema(name: str) -> str | None:
    """The schema torch holds for routectl::name (without the namespace), or None."""
    try:
        packet = getattr(getattr(torch.ops, REFERENCE_NAMESPACE), name)
    except AttributeError:
        return None
    return str(packet.default._schema).removeprefix(f"{REFERENCE_NAMESPACE}::")


def _register(library: torch.library.Library) -> None:
    for name, schema in PINNED_SCHEMAS.items():
        existing = registered_schema(name)
        if existing == schema:
            continue
        if existing is not None:
            raise RuntimeError(
                f"{REFERENCE_NAMESPACE}::{name} is already defined with schema {existing!r}, "
                f"not the pinned {schema!r}"
            )
        fake, cpu, cuda = _IMPLS[name]
        library.define(schema)
        library.impl(name, cpu, "CPU")
        library.impl(name, cuda, "CUDA")
        torch.library.register_fake(f"{REFERENCE_NAMESPACE}::{name}", fake, lib=library)


# The Library must outlive this module's code: dropping it unregisters the ops. On
# importlib.reload the module dict survives, so reuse the one already held.
_LIBRARY: torch.library.Library = globals().get("_LIBRARY") or torch.library.Library(
    REFERENCE_NAMESPACE, "FRAGMENT"
)
_register(_LIBRARY)
