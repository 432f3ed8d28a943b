"""Replay equals execution: what the startup report's meta-tensor replay of the Qwen3.8 TP4
AWQ MoE layer recorded (ops and plans, prepared layout, resident bytes) equals what a torch
dispatch mode observed while the same layer ran for real on CPU through the reference ops.

Two real layers are prepared once for the module (every expert of both banks, ~10 s each):
QPN M1 requested with the default 3-byte metadata, and QPN M1 off with 4-byte metadata (the
legacy monolithic op then serves M = 1; it has no reference implementation).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from jsonschema import Draft202012Validator

from native.moe_layer import AwqMoeLayer
from native.moe_stages import LegacySingleToken, QpnM1
from native.reference.moe_checkpoint import random_moe_checkpoint
from routectl.engine.startup import EngineLayer, start
from routectl.engine.startup_report import StartupReport
from routectl.io.schemas import schema
from routectl.namespaces.composite_ns import NoImplementationError
from routectl.namespaces.ops import bind_arguments, derive_plan
from routectl.replay.observe import CallRecord, OpObserver, replay_record

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "engine_startup.py"


@pytest.fixture(scope="module")
def example() -> ModuleType:
    """The example's own helpers (namespace, inputs, execution record), in process."""
    spec = importlib.util.spec_from_file_location("engine_startup_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@dataclass
class RealRun:
    layer: EngineLayer
    report: StartupReport
    load_seen: OpObserver
    steps: dict[int, OpObserver]
    errors: dict[int, Exception]
    project: Any

    def execution(self, m: int, example: ModuleType) -> CallRecord:
        return example.execution_record(self.load_seen, self.steps[m], m)

    def replay(self, m: int) -> CallRecord:
        return replay_record(self.report.layer(self.layer.name), m)


def _real_run(example: ModuleType, checkpoint: Any, kernel_config: dict) -> RealRun:
    project = example.load_project(ROOT)
    namespace = example.engine_namespace(project.catalogue)
    # The engine reads no caller variable here: an explicit, empty environment.
    session = start(project, kernel_config, example.HARDWARE, example.WORKLOAD, environ={})
    with OpObserver(project.catalogue, example.REFERENCE_NAMESPACE) as load_seen:
        layer = session.load_layer(example.FAMILY, example.QWEN38_LAYER, checkpoint, namespace)
    steps: dict[int, OpObserver] = {}
    errors: dict[int, Exception] = {}
    x, ids, weights = example.step_inputs(layer.prepared.state["layer"], torch.device("cpu"))
    for m in (1, 0):
        with OpObserver(project.catalogue, example.REFERENCE_NAMESPACE) as seen:
            try:
                layer(x[:m], ids[:m], weights[:m])
            except NoImplementationError as exc:
                errors[m] = exc
        steps[m] = seen
    return RealRun(layer, session.report(), load_seen, steps, errors, project)


@pytest.fixture(scope="module")
def checkpoint(example: ModuleType) -> Any:
    layer = AwqMoeLayer.for_rank(example.QWEN38_LAYER, example.WORKLOAD.tp)
    return random_moe_checkpoint(layer, example.CHECKPOINT_SEED)


@pytest.fixture(scope="module")
def qpn(example: ModuleType, checkpoint: Any) -> RealRun:
    return _real_run(example, checkpoint, {"sm70_awq_moe": {"qpn_m1": True}})


@pytest.fixture(scope="module")
def legacy(example: ModuleType, checkpoint: Any) -> RealRun:
    return _real_run(
        example, checkpoint, {"sm70_awq_moe": {"qpn_m1": False, "compact_metadata": False}}
    )


def _sample(run: RealRun, m: int) -> dict[str, Any]:
    layer = run.report.layer(run.layer.name)
    return next(s for c in layer["classes"] for s in c["samples"] if s["m"] == m)


def test_replay_equals_execution_for_the_qpn_m1_route(qpn, example):
    replay, execution = qpn.replay(1), qpn.execution(1, example)
    assert replay.differences(execution) == []
    assert replay == execution
    # The route is the QPN one, run for real: one call of the QPN op, every expert prepared.
    assert [c["op"] for c in execution.dispatch] == [QpnM1.op]
    assert sum(c["plan"]["experts"] for c in execution.prepare) == 2 * 512
    assert execution.resident_bytes == qpn.layer.prepared.bytes_json()["total"]
    assert qpn.errors == {}


def test_replay_equals_execution_at_m0(qpn, example):
    assert qpn.replay(0) == qpn.execution(0, example)
    assert qpn.execution(0, example).dispatch == []


def test_comparison_fails_for_a_real_run_with_a_different_m(qpn, example):
    """The M = 0 run (no launch) against the replay of M = 1."""
    observed = qpn.execution(0, example)
    wrong = CallRecord(
        1, observed.prepare, observed.dispatch, observed.prepared_layout, observed.resident_bytes
    )
    differences = qpn.replay(1).differences(wrong)
    assert len(differences) == 1 and differences[0].startswith("dispatch:")
    assert qpn.replay(1) != qpn.execution(0, example)


def test_comparison_fails_for_a_different_layout(qpn, legacy, example):
    """The 3-byte replay against the 4-byte real load."""
    observed = legacy.execution(0, example)
    replayed = qpn.replay(0)
    fields = {line.split(":", 1)[0] for line in replayed.differences(observed)}
    assert fields == {"prepare", "prepared_layout", "resident_bytes"}


def test_legacy_route_when_qpn_m1_is_off(legacy, example):
    sample = _sample(legacy, 1)
    assert sample["stages"] == [f"lane.{LegacySingleToken.label}"]
    assert [c["op"] for c in sample["ops"]] == [LegacySingleToken.op]
    assert any(v["name"] == f"lane.{QpnM1.label}" for v in sample["rejected"])
    # The call reached the composite namespace and stopped there with the clear error ...
    error = legacy.errors[1]
    assert isinstance(error, NoImplementationError) and error.op == LegacySingleToken.op
    assert f"no reference implementation for {LegacySingleToken.op}" in str(error)
    assert legacy.steps[1].calls == []  # ... never reaching a kernel
    # ... and the plan of the call it would have run is the replay's.
    spec = legacy.project.catalogue.op(error.op)
    plan = derive_plan(spec, bind_arguments(spec, (), error.arguments))
    assert sample["ops"][0]["plan"] == {"m": 1, **plan}
    # The layer survives the error, and its prepare replay equals the real one.
    assert legacy.replay(0) == legacy.execution(0, example)
    assert legacy.execution(0, example).prepared_layout == "4-byte"


def test_real_reports_validate_and_agree_with_their_loads(qpn, legacy):
    validator = Draft202012Validator(schema("startup-report"))
    for run in (qpn, legacy):
        document = run.report.to_json()
        assert [e.message for e in validator.iter_errors(document)] == []
        assert document["layers"][0]["replay_matches_load"] is True


def test_real_output_is_finite(qpn, example):
    x, ids, weights = example.step_inputs(qpn.layer.prepared.state["layer"], torch.device("cpu"))
    out = qpn.layer(x, ids, weights)
    assert out.shape == (1, 2560) and bool(torch.isfinite(out).all())
