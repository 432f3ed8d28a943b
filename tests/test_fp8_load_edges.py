"""`load_fp8_sm70` at what the FP8 mutation run of issue 28 left alive
(benchmarks/MUTATION.md): the status outcome records the device's capability, the QPN8
block kernel keeps its TurboMind copy on capability 70 by the engine rule (fp8.md §2.3), the
checkpoint tensors given are the ones prepared, and a load error carries every candidate's
verdict (fp8.md §5)."""

from __future__ import annotations

import pytest

from native.layers import BlockFp8Layer
from policies import PROJECT
from policies.linear_fp8_sm70 import load_fp8_sm70
from routectl.errors import SelectionError
from routectl.replay.harness import RecordingNamespace
from routectl.workload import EngineConfig, Hardware
from tests.policy_helpers import QUALIFIED

ENGINE = EngineConfig(tp=4)
LAYER = BlockFp8Layer.of("model.layers.0.mlp.gate_up_proj", 5120, 8704, tp=4)
BLOCK = "QPN8Fp8BlockScaledMMLinearKernel"
TM = "TurboMindFp8LinearKernel"


def namespace(*remove: str) -> RecordingNamespace:
    return RecordingNamespace(PROJECT.catalogue, remove=remove)


def policy(config: object = None, capability: int = 70, engine: EngineConfig = ENGINE):
    return PROJECT.resolve(config, {}, Hardware(capability), engine, emit_warnings=False)


def test_a_status_outcome_records_the_devices_capability() -> None:
    off = {"sm70_fp8": {"enabled": False, "dequant_fallback": False}}
    decision = load_fp8_sm70(LAYER, policy(off, 72), Hardware(72), ENGINE, namespace()).decision
    assert (decision.kernel, decision.capability) == (None, 72)
    assert decision.status is not None and decision.status[0] == "other_backend"


@pytest.mark.parametrize(("capability", "copy"), [(70, True), (72, True)])
def test_the_block_kernel_keeps_its_turbomind_copy_on_volta(capability: int, copy: bool) -> None:
    # QUALIFIED: 4 sequences x (7 + 1) tokens > 8, so the unset rule keeps the copy.
    on = {"sm70_fp8": {"block_qpn8": True}}
    loaded = load_fp8_sm70(
        LAYER, policy(on, capability, QUALIFIED), Hardware(capability), QUALIFIED, namespace()
    )
    assert loaded.decision.kernel == BLOCK
    assert loaded.decision.flags == {"qpn8": True, "gated": False, "turbomind_copy": copy}


def test_the_given_checkpoint_tensors_are_prepared() -> None:
    plain = load_fp8_sm70(LAYER, policy(), Hardware(70), ENGINE, namespace())
    assert plain.resident == {}
    loaded = load_fp8_sm70(
        LAYER, policy(), Hardware(70), ENGINE, namespace(), tensors=LAYER.checkpoint_tensors()
    )
    assert sorted(loaded.resident) == ["fp8_codes", "fp8_scales"]


def test_a_load_error_carries_every_candidates_verdict() -> None:
    explicit = {"sm70_fp8": {"qpn8": True}}
    with pytest.raises(SelectionError) as caught:
        load_fp8_sm70(
            LAYER, policy(explicit), Hardware(70), ENGINE, namespace("fp8_qpn8_prepare_sm70")
        )
    assert caught.value.code == "missing_native_ops"
    assert [v.name for v in caught.value.verdicts] == [BLOCK, TM]
