"""What an engine's start-up does once, whatever its layer count (benchmarks/startup_speed.py
measures how long it takes): the policy is resolved once per session, not per layer nor per
report; and the report's JSON copy is a copy, also of documents orjson cannot round-trip."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from policies import PROJECT
from policies.categories.awq_moe import QWEN38
from routectl import EngineConfig, Hardware
from routectl.engine.startup import start
from routectl.engine.startup_report import StartupReport
from routectl.replay.harness import RecordingNamespace

WORKLOAD = EngineConfig(tp=4, max_num_seqs=8, max_num_batched_tokens=8192)
LAYERS = 6


def test_the_policy_is_resolved_once_for_every_layer_and_the_report():
    contexts: list[tuple[Any, Any]] = []

    def counted(hardware: Hardware, engine: EngineConfig) -> Any:
        contexts.append((hardware, engine))
        return PROJECT.context(hardware, engine)

    project = replace(PROJECT, context=counted)
    session = start(project, {"sm70_awq_moe": {"qpn_m1": True}}, Hardware(70), WORKLOAD, environ={})
    assert len(contexts) == 1
    namespace = RecordingNamespace(project.catalogue, name="engine double")
    for i in range(LAYERS):
        spec = {**QWEN38, "layer_id": i, "prefix": f"model.layers.{i}.mlp.experts"}
        session.load_layer("sm70-awq-moe", spec, None, namespace)
    report = session.report()
    assert len(report.layers) == LAYERS
    assert len(contexts) == 1  # resolved at start only: no layer, no report re-resolves


def test_the_json_copy_is_a_copy():
    session = start(PROJECT, None, Hardware(70), WORKLOAD, environ={})
    spec = {**QWEN38, "layer_id": 0}
    session.load_layer("sm70-awq-moe", spec, None, RecordingNamespace(PROJECT.catalogue))
    report = session.report()
    copied = report.to_json()
    assert copied == report.document
    copied["layers"][0]["name"] = "changed"
    copied["policy"]["values"].clear()
    assert report.layers[0]["name"] != "changed" and report.document["policy"]["values"]


def test_a_document_orjson_would_change_is_copied_as_it_is():
    for odd in ((1, 2), math.inf, 1 << 70, {1: "int key"}):
        document = {"layers": [{"value": odd}]}
        copied = StartupReport(document).to_json()
        assert copied == document and type(copied["layers"][0]["value"]) is type(odd)
        assert copied["layers"] is not document["layers"]
    nan = StartupReport({"x": [math.nan]}).to_json()["x"][0]
    assert isinstance(nan, float) and math.isnan(nan)


def _moe_session(config: dict[str, Any], environ: dict[str, str]) -> Any:
    workload = EngineConfig(tp=4, max_num_seqs=8, max_num_batched_tokens=8192)
    session = start(PROJECT, config, Hardware(70), workload, environ=environ)
    namespace = RecordingNamespace(PROJECT.catalogue, name="engine double")
    for i in range(8):
        spec = {**QWEN38, "layer_id": i, "prefix": f"model.layers.{i}.mlp.experts"}
        session.load_layer("sm70-awq-moe", spec, None, namespace)
    return session


def test_layers_of_one_shape_share_their_replayed_calls_and_the_report_is_unchanged():
    """The report replays the calls of one layer per shape and decision: every layer's entry
    equals the entry replayed for that layer alone, also where the deny list gives some
    layers another decision (their calls replayed on their own), and no two layers share
    one object (an engine may edit its copy)."""
    from routectl.engine.startup_report import layer_json

    session = _moe_session({}, {"VLLM_SM70_AWQ_MOE_BATCHED_LAYER_DENYLIST": "2-3"})
    document = session.report().to_json()
    alone = [
        layer_json(session.project, session.policy, session.hardware, session.workload, layer)
        for layer in session.layers
    ]
    assert document["layers"] == alone
    # The batched layers alike; layers 2 and 3 each their own (the reasons name the layer).
    assert len({repr(layer["classes"]) for layer in alone}) == 3
    first, second = session.report().layers[0], session.report().layers[1]
    assert first["classes"] == second["classes"] and first["classes"] is not second["classes"]
    first["classes"][0]["samples"].clear()
    assert second["classes"][0]["samples"]
