"""`load_fp8_sm70` with what its caller lends it (docs/contracts/fp8.md §4.2, §5): layers
loaded with one device registry share its workspaces, sized by the largest binding, and a
requested block kernel that the build refuses leaves a fallback record naming the policy
field and the value the policy gave it. The two loader mutants the FP8 mutation run of issue
28 left open (benchmarks/MUTATION.md) fail here."""

from __future__ import annotations

import pytest

from native.kernels import fp8_sm70 as fs
from native.layers import BlockFp8Layer
from policies import PROJECT
from policies.linear_fp8_sm70 import load_fp8_sm70
from routectl.errors import SelectionError
from routectl.policy.loaded import Fallback
from routectl.replay.harness import RecordingNamespace
from routectl.workload import EngineConfig, Hardware
from tests.policy_helpers import QUALIFIED

ENGINE = EngineConfig(tp=4)
GATE_UP = BlockFp8Layer.of("model.layers.0.mlp.gate_up_proj", 5120, 8704, tp=4)
# A layer larger than the 5120 x 8704 minimum: its own K x N elements.
WIDE = BlockFp8Layer.of("model.layers.1.mlp.gate_up_proj", 5120, 17408, tp=4)
BLOCK = "QPN8Fp8BlockScaledMMLinearKernel"
TM = "TurboMindFp8LinearKernel"


def _load(layer: BlockFp8Layer, registry: fs.Fp8Workspaces, config: object = None) -> str | None:
    policy = PROJECT.resolve(config, {}, Hardware(70), ENGINE, emit_warnings=False)
    loaded = load_fp8_sm70(
        layer,
        policy,
        Hardware(70),
        ENGINE,
        RecordingNamespace(PROJECT.catalogue),
        tensors=layer.checkpoint_tensors(),
        workspaces=registry,
    )
    return loaded.decision.kernel


def test_layers_loaded_with_one_registry_share_its_exact_dense_workspace() -> None:
    # Each alone: its own FP16 exact-dense buffer of K x N elements (2 bytes each).
    alone = {}
    for layer in (GATE_UP, WIDE):
        registry = fs.Fp8Workspaces()
        assert _load(layer, registry) == TM
        alone[layer.prefix] = registry.bytes_json()
    assert alone == {
        GATE_UP.prefix: {"exact_dense": 5120 * 8704 * 2},
        WIDE.prefix: {"exact_dense": 5120 * 17408 * 2},
    }
    # Shared, the smaller layer first: one buffer, as large as the larger binding, which a
    # smaller layer loaded after it does not shrink.
    shared = fs.Fp8Workspaces()
    assert _load(GATE_UP, shared) == TM
    assert shared.bytes_json() == {"exact_dense": 5120 * 8704 * 2}
    assert _load(WIDE, shared) == TM
    assert shared.bytes_json() == {"exact_dense": 5120 * 17408 * 2}
    small = BlockFp8Layer.of("model.layers.2.mlp.gate_up_proj", 5120, 8704, tp=4)
    assert _load(small, shared) == TM
    assert shared.bytes_json() == {"exact_dense": 5120 * 17408 * 2}


def test_a_lent_registry_that_bound_the_prefix_elsewhere_refuses_the_layer() -> None:
    # The registry the caller lends is the one bound: a prefix it already holds for the
    # PP2/TP4 workspace cannot take the exact-dense one.
    registry = fs.Fp8Workspaces()
    registry.bind(GATE_UP.prefix, fs.PP2_TP4_WORKSPACE, 16)
    with pytest.raises(SelectionError) as caught:
        _load(GATE_UP, registry)
    assert caught.value.code == "workspace_rebound"


def test_a_requested_block_kernel_refused_by_the_build_is_a_fallback_of_its_field() -> None:
    # block_qpn8 on, the build without the QPN8 prefill op: TurboMind serves the layer and
    # the record names sm70_fp8.block_qpn8 with the value the policy gave it (True).
    on = {"sm70_fp8": {"block_qpn8": True}}
    policy = PROJECT.resolve(on, {}, Hardware(70), QUALIFIED, emit_warnings=False)
    ns = RecordingNamespace(PROJECT.catalogue, remove=("fp8_qpn8_prefill_sm70_out",))
    decision = load_fp8_sm70(GATE_UP, policy, Hardware(70), QUALIFIED, ns).decision
    assert decision.kernel == TM
    assert [(v.name, v.ok, v.stage) for v in decision.selection.verdicts] == [
        (BLOCK, False, "ops"),
        (TM, True, None),
    ]
    assert decision.fallbacks == (
        Fallback(
            "sm70_fp8.block_qpn8",
            True,
            False,
            f"{BLOCK}: missing native operators: [fp8_qpn8_prefill_sm70_out]",
        ),
    )
