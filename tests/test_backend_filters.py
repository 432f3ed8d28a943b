"""The `linear_backend` and `disabled_kernels` filters, for every accepted backend: each
family's kept candidate list compared whole (names, order, and each candidate's verdict),
not only the kernel that wins. Expected lists are literals from docs/contracts/core.md §1.3
(`linear_backend` per family), §2.3 (AWQ dense) and docs/contracts/fp8.md §2.1 (the block-FP8
priority list and its backend narrowing).
"""

from __future__ import annotations

from typing import Any

import pytest

from native.catalogue import CATALOGUE
from native.layers import AwqLayer, BlockFp8Layer, Fp8Layer, Nvfp4Layer
from policies import PROJECT
from policies.linear_awq import select_awq_dense
from policies.linear_fp8_sm70 import fp8_options, select_fp8_sm70
from policies.linear_nvfp4 import select_nvfp4_sm70
from policies.linear_turing import load_turing_fp8, load_turing_nvfp4
from policies.variables import LINEAR_BACKENDS
from routectl.errors import SelectionError
from routectl.namespaces.native_ns import InMemoryNamespace
from routectl.policy.resolve import ResolvedPolicy
from routectl.policy.selection import Selection
from routectl.workload import EngineConfig, Hardware
from tests.policy_helpers import QUALIFIED

ENGINE = EngineConfig(tp=4)
EVERY_OP = InMemoryNamespace(tuple(CATALOGUE.ops))
# No native op: every SM70 kernel fails at its ops, so the block-FP8 selector evaluates its
# whole narrowed list and the verdicts name every kept candidate.
NO_OP = InMemoryNamespace(())
TURBOMIND_BACKENDS = ("auto", "turbomind")
OTHER_BACKENDS = tuple(b for b in LINEAR_BACKENDS if b not in TURBOMIND_BACKENDS)

QPN8_BLOCK = "QPN8Fp8BlockScaledMMLinearKernel"
TM_FP8 = "TurboMindFp8LinearKernel"
FP8_PRIORITY = (
    QPN8_BLOCK,
    TM_FP8,
    "FlashInferFp8DeepGEMMDynamicBlockScaledKernel",
    "DeepGemmFp8BlockScaledMMKernel",
    "CutlassFp8BlockScaledMMKernel",
    "MarlinFP8ScaledMMLinearKernel",
    "TritonFp8BlockScaledMMKernel",
)
# fp8.md §2.1: `auto` keeps the whole list, `turbomind` both SM70 kernels, a backend with a
# kernel in the list keeps that kernel alone; every other backend keeps nothing.
FP8_KEPT: dict[str, tuple[str, ...]] = {
    "auto": FP8_PRIORITY,
    "turbomind": (QPN8_BLOCK, TM_FP8),
    "deep_gemm": ("DeepGemmFp8BlockScaledMMKernel",),
    "cutlass": ("CutlassFp8BlockScaledMMKernel",),
    "marlin": ("MarlinFP8ScaledMMLinearKernel",),
    "triton": ("TritonFp8BlockScaledMMKernel",),
}
NOT_W8A16 = ("not_w8a16_consumer", "does not consume the SM70 W8A16 layout")
FP8_LAYER = BlockFp8Layer.of("model.layers.0.qkv_proj", 5120, 3584, tp=4)
AWQ_LAYER = AwqLayer.of("model.layers.0.mlp.down_proj", 5120, 4096, 128)
NVFP4_LAYER = Nvfp4Layer.of("model.layers.0.mlp.down_proj", 5120, 4096)
TURING_FP8_LAYER = Fp8Layer.of("model.layers.0.mlp.down_proj", 5120, 4096)


def policy(
    backend: str, disabled: tuple[str, ...] = (), engine: EngineConfig = ENGINE
) -> ResolvedPolicy:
    config: dict[str, Any] = {"linear_backend": backend}
    if disabled:
        config["disabled_kernels"] = list(disabled)
    return PROJECT.resolve(config, {}, Hardware(70), engine)


def verdicts(selection: Selection) -> list[tuple[str, bool, str | None, str | None]]:
    return [(v.name, v.ok, v.code, v.stage) for v in selection.verdicts]


def select_fp8(p: ResolvedPolicy, ns: InMemoryNamespace = NO_OP) -> Selection:
    return select_fp8_sm70(FP8_LAYER, p, fp8_options(p, ENGINE), Hardware(70), ns)


def test_every_backend_is_covered_by_these_tables() -> None:
    assert set(FP8_KEPT) <= set(LINEAR_BACKENDS)
    assert len(LINEAR_BACKENDS) == 16  # core.md §1.3 lists sixteen


@pytest.mark.parametrize("backend", LINEAR_BACKENDS)
def test_block_fp8_keeps_its_backends_kernels_in_priority_order(backend: str) -> None:
    kept = FP8_KEPT.get(backend, ())
    if not kept:
        with pytest.raises(SelectionError) as caught:
            select_fp8(policy(backend))
        assert caught.value.code == "backend_not_available"
        assert caught.value.message == (
            f"--linear-backend={backend} was requested but no '{backend}' kernel exists for "
            "this layer type."
        )
        return
    selection = select_fp8(policy(backend))
    assert selection.chosen is None
    assert [v.name for v in selection.verdicts] == list(kept)
    for v in selection.verdicts:
        if v.name in (QPN8_BLOCK, TM_FP8):
            assert v.ok is False and v.code != NOT_W8A16[0], v
        else:
            # The W8A16 rule refuses every foreign kernel, first (fp8.md §2.1, check 1).
            assert (v.ok, v.code, v.message, v.stage) == (False, *NOT_W8A16, "policy"), v


def test_block_fp8_stops_at_the_sm70_kernels_when_one_passes() -> None:
    # The foreign kernels after the SM70 ones are only evaluated when neither passes.
    assert verdicts(select_fp8(policy("auto"), EVERY_OP)) == [
        (QPN8_BLOCK, False, "block_qpn8_disabled", "policy"),
        (TM_FP8, True, None, None),
    ]
    assert verdicts(select_fp8(policy("turbomind"), EVERY_OP)) == verdicts(
        select_fp8(policy("auto"), EVERY_OP)
    )


def test_block_fp8_disabled_sm70_kernels_leave_the_foreign_list_to_be_refused() -> None:
    selection = select_fp8(policy("auto", (QPN8_BLOCK, TM_FP8)), EVERY_OP)
    assert selection.chosen is None
    assert [(v.name, v.code, v.stage) for v in selection.verdicts] == [
        (QPN8_BLOCK, "disabled_kernel", "disabled"),
        (TM_FP8, "disabled_kernel", "disabled"),
        *((name, NOT_W8A16[0], "policy") for name in FP8_PRIORITY[2:]),
    ]


AWQ_DEFAULT = [
    ("TurboMindAwqLinearKernel", True, None, None),
    ("TritonAwqLinearKernel", False, "turbomind_route_admitted", "policy"),
]
AWQ_TURBOMIND_DISABLED = [
    ("TurboMindAwqLinearKernel", False, "disabled_kernel", "disabled"),
    ("TritonAwqLinearKernel", True, None, None),
]
AWQ_FILTERED = [
    ("TurboMindAwqLinearKernel", False, "backend_not_selected", "policy"),
    ("TritonAwqLinearKernel", False, "backend_not_selected", "policy"),
]


@pytest.mark.parametrize("backend", LINEAR_BACKENDS)
def test_awq_dense_keeps_both_candidates_for_auto_or_turbomind_only(backend: str) -> None:
    kept = backend in TURBOMIND_BACKENDS
    plain = verdicts(select_awq_dense(AWQ_LAYER, policy(backend), Hardware(70), EVERY_OP))
    disabled = verdicts(
        select_awq_dense(
            AWQ_LAYER, policy(backend, ("TurboMindAwqLinearKernel",)), Hardware(70), EVERY_OP
        )
    )
    assert plain == (AWQ_DEFAULT if kept else AWQ_FILTERED)
    # The filter comes before the disabled gate: a filtered TurboMind is not "disabled".
    assert disabled == (AWQ_TURBOMIND_DISABLED if kept else AWQ_FILTERED)


NVFP4_CANDIDATES = [
    ("Qpn4NvFp4LinearKernel", False, "qpn4_concurrency", "qualification"),
    ("Qpn2NvFp4LinearKernel", True, None, None),
    ("TurboMindNvFp4LinearKernel", True, None, "not_needed"),
]


@pytest.mark.parametrize("backend", LINEAR_BACKENDS)
def test_sm70_nvfp4_ignores_the_linear_backend(backend: str) -> None:
    # core.md §1.3: SM70 CT NVFP4 weight-only does not look at it.
    selection = select_nvfp4_sm70(
        NVFP4_LAYER, policy(backend, engine=QUALIFIED), Hardware(70), QUALIFIED, EVERY_OP
    )
    got = [
        (v.name, v.ok, v.code, "not_needed" if v.not_needed else v.stage)
        for v in selection.verdicts
    ]
    assert got == NVFP4_CANDIDATES
    assert selection.chosen == "Qpn2NvFp4LinearKernel"


def _turing(load: Any, layer: Any, p: ResolvedPolicy) -> tuple[Any, ...]:
    decision = load(layer, p, Hardware(75), ENGINE, EVERY_OP).decision
    return (decision.kernel, decision.status, verdicts(decision.selection))


@pytest.mark.parametrize("backend", LINEAR_BACKENDS)
@pytest.mark.parametrize(
    ("load", "layer", "kernel"),
    [
        (load_turing_nvfp4, NVFP4_LAYER, "TuringQpn2NvFp4LinearKernel"),
        (load_turing_fp8, TURING_FP8_LAYER, "TuringQpn8Fp8LinearKernel"),
    ],
    ids=["nvfp4", "fp8"],
)
def test_turing_keeps_its_kernel_for_auto_or_turbomind_only(
    backend: str, load: Any, layer: Any, kernel: str
) -> None:
    got = _turing(load, layer, policy(backend))
    if backend in TURBOMIND_BACKENDS:
        assert got == (kernel, None, [(kernel, True, None, None)])
    else:
        message = (
            f"linear_backend={backend} selects another backend; Turing QPN kernels serve only "
            "auto or turbomind"
        )
        # Not an error: kernel null with the reason, the one candidate refused at policy.
        assert got == (
            None,
            ("backend_not_selected", message),
            [(kernel, False, "backend_not_selected", "policy")],
        )
    disabled = _turing(load, layer, policy(backend, (kernel,)))
    if backend in TURBOMIND_BACKENDS:
        assert disabled[0] is None and disabled[1] is not None
        assert disabled[1][0] == "upstream_kernel"
        assert disabled[2] == [(kernel, False, "disabled_kernel", "disabled")]
