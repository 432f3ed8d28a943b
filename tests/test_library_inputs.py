"""The library's public entry points check what a caller gives them: `routectl.resolve` and
`routectl.start` with an environment mapping of the wrong kind, `EngineSession.load_layer`
and `AwqMoeLayer.for_rank` with a MoE layer spec missing a key or holding a string for a
number. Each raises routectl's InputError naming the offending key, never a bare KeyError,
TypeError or AttributeError."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

import routectl
from native.moe_layer import AwqMoeLayer
from policies import PROJECT
from routectl.errors import InputError
from routectl.replay.harness import RecordingNamespace
from routectl.workload import EngineConfig, Hardware
from tests.policy_helpers import QWEN38_AWQ_MOE

HW = Hardware(70)
WORKLOAD = EngineConfig(tp=4, max_num_batched_tokens=8192)
FAMILY = "sm70-awq-moe"
MOE = QWEN38_AWQ_MOE


class Raising(Mapping[str, str]):
    """A mapping whose lookup fails (a lazy environment whose backing store is gone)."""

    def __getitem__(self, key: str) -> str:
        raise RuntimeError(f"store gone while reading {key}")

    def __iter__(self) -> Iterator[str]:
        return iter(["VLLM_SM70_FP8_QPN8"])

    def __len__(self) -> int:
        return 1


BAD_ENVIRONS: list[tuple[Any, str]] = [
    ({3: "1"}, "environ key 3 is a int"),
    ({"VLLM_SM70_FP8_QPN8": 1}, "environ['VLLM_SM70_FP8_QPN8'] is a int (1)"),
    ({"VLLM_SM70_FP8_QPN8": None}, "environ['VLLM_SM70_FP8_QPN8'] is a NoneType"),
    ({b"VLLM_SM70_FP8_QPN8": b"1"}, "environ key b'VLLM_SM70_FP8_QPN8' is a bytes"),
    (Raising(), "environ['VLLM_SM70_FP8_QPN8'] raised RuntimeError: 'store gone"),
    ([("VLLM_SM70_FP8_QPN8", "1")], "environ must be a mapping"),
]


@pytest.mark.parametrize(("environ", "message"), BAD_ENVIRONS)
def test_resolve_and_start_name_the_bad_environment_entry(environ: Any, message: str) -> None:
    with pytest.raises(InputError) as resolved:
        routectl.resolve(PROJECT, None, environ, HW, WORKLOAD)
    assert message in str(resolved.value)
    with pytest.raises(InputError) as started:
        routectl.start(PROJECT, None, HW, WORKLOAD, environ=environ)
    assert str(started.value) == str(resolved.value)


def test_a_good_environment_mapping_of_any_kind_resolves_as_a_dict() -> None:
    class Plain(Mapping[str, str]):
        def __getitem__(self, key: str) -> str:
            return {"VLLM_SM70_FP8_QPN8": "1"}[key]

        def __iter__(self) -> Iterator[str]:
            return iter(["VLLM_SM70_FP8_QPN8"])

        def __len__(self) -> int:
            return 1

    mine = routectl.resolve(PROJECT, None, Plain(), HW, WORKLOAD)
    plain = routectl.resolve(PROJECT, None, {"VLLM_SM70_FP8_QPN8": "1"}, HW, WORKLOAD)
    assert mine.value("sm70_fp8.qpn8") is True
    assert mine == plain


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden": None}, "lacks 'hidden'"),
        ({"group": None, "top_k": None}, "lacks 'top_k', 'group'"),
        ({"hidden": "2560"}, "'hidden' must be an integer, got '2560' (str)"),
        ({"experts": 512.0}, "'experts' must be an integer, got 512.0 (float)"),
        ({"top_k": True}, "'top_k' must be an integer, got True (bool)"),
        ({"zero_points": 1}, "'zero_points' must be true or false, got 1 (int)"),
        ({"prefix": 7}, "'prefix' must be a string, got 7 (int)"),
    ],
)
def test_a_bad_moe_layer_spec_names_its_key(change: dict[str, Any], message: str) -> None:
    spec = {k: v for k, v in {**MOE, **change}.items() if v is not None}
    with pytest.raises(InputError) as direct:
        AwqMoeLayer.for_rank(spec, 4)
    assert message in str(direct.value)
    session = routectl.start(PROJECT, None, HW, WORKLOAD, environ={})
    recording = RecordingNamespace(PROJECT.catalogue, name="engine double")
    with pytest.raises(InputError) as loaded:
        session.load_layer(FAMILY, spec, None, recording)
    assert message in str(loaded.value)
    assert session.layers == ()


def test_a_moe_layer_spec_that_is_no_mapping() -> None:
    with pytest.raises(InputError, match="must be a mapping with experts, top_k"):
        AwqMoeLayer.for_rank(["experts", 512], 4)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="'tp' must be an integer, got '4'"):
        AwqMoeLayer.for_rank(MOE, "4")  # type: ignore[arg-type]
    assert AwqMoeLayer.for_rank(MOE, 4).intermediate == 160
