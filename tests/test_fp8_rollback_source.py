"""The FP8 rollback's source: when a present VLLM_SM70_FP8_QPN8 that resolved qpn8 to false
overrides a present VLLM_SM70_FP8_QPN8_PP2_TP4 (docs/contracts/fp8.md §1.2), the source of
`sm70_fp8.qpn8_pp2_tp4` names what decided it, not the variable it overrode."""

from __future__ import annotations

import pytest

from policies import PROJECT
from routectl.workload import EngineConfig, Hardware

PLAIN = EngineConfig(tp=4, max_num_seqs=4)
QPN8 = "VLLM_SM70_FP8_QPN8"
PP2 = "VLLM_SM70_FP8_QPN8_PP2_TP4"
KEY = "sm70_fp8.qpn8_pp2_tp4"


def decided(env: dict[str, str], config: dict | None = None) -> tuple[object, str]:
    policy = PROJECT.resolve(config, env, Hardware(70), PLAIN, emit_warnings=False)
    return policy.value(KEY), policy.source(KEY)


@pytest.mark.parametrize(
    ("env", "config", "expected"),
    [
        ({QPN8: "0", PP2: "1"}, None, (False, f"alias:{QPN8}")),  # the rollback decided
        ({QPN8: "0", PP2: "0"}, None, (False, f"alias:{QPN8}")),
        ({QPN8: "1", PP2: "0"}, None, (False, f"alias:{PP2}")),  # its own variable decided
        ({QPN8: "1", PP2: "1"}, None, (True, f"alias:{PP2}")),
        ({QPN8: "0"}, None, (False, "default")),  # unset: inherited, source default
        ({PP2: "1"}, None, (True, f"alias:{PP2}")),
        # A typed qpn8 of false with the generic variable present decided it.
        ({QPN8: "1", PP2: "1"}, {"sm70_fp8": {"qpn8": False}}, (False, "explicit")),
    ],
)
def test_the_source_names_what_decided_the_value(env, config, expected) -> None:
    assert decided(env, config) == expected
