"""The engine-facing API (`routectl.engine.startup`): environ handling, resolve-once, logging, layer
loading through the project's loaders, the composite namespace and the startup report.

MoE layers here load on meta tensors through a recording namespace (cheap); the real 512-
expert runs live in test_replay_equals_execution.py.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from jsonschema import Draft202012Validator

import native.reference  # noqa: F401  (registers the routectl:: reference ops)
from native.awq_schemas import PREPARE_COMPACT_OP, QPN_M1_OP, REFERENCE_NAMESPACE
from native.kernels.awq_dense import AWQ_GEMM_OP
from native.layers import AwqLayer
from policies import PROJECT
from policies.variables import FIELDS, UNKNOWN_PREFIX, field
from routectl.engine.startup import LOGGER_NAME, NotDispatchedError, start
from routectl.engine.startup_report import TOKEN_CLASSES, validate_report
from routectl.errors import InputError, SelectionError
from routectl.io.schemas import schema
from routectl.namespaces.composite_ns import CompositeNamespace, NoImplementationError
from routectl.namespaces.native_ns import InMemoryNamespace, TorchOpsNamespace
from routectl.namespaces.ops import bind_arguments, derive_plan
from routectl.policy.fields import Kind
from routectl.replay.harness import RecordingNamespace
from routectl.replay.observe import OpObserver
from routectl.workload import EngineConfig, Hardware
from tests import families
from tests.policy_helpers import QWEN38_AWQ_MOE

ROOT = Path(__file__).resolve().parents[1]
HW = Hardware(70)
WORKLOAD = EngineConfig(tp=4, max_num_batched_tokens=8192)
MOE = QWEN38_AWQ_MOE
QPN_VAR = field("sm70_awq_moe.qpn_m1").variable
DISABLE_VAR = field("sm70_awq_moe.disable").variable
DEPRECATED_VAR = next(f.variable for f in FIELDS if f.kind is Kind.DEPRECATED)
FAMILY = "sm70-awq-moe"
QPN_ON = {"sm70_awq_moe": {"qpn_m1": True}}


def _recording(*remove: str) -> RecordingNamespace:
    return RecordingNamespace(PROJECT.catalogue, remove=remove, name="engine double")


def _moe(layer_id: int = 0) -> dict:
    return {**MOE, "layer_id": layer_id, "prefix": f"model.layers.{layer_id}.mlp.experts"}


def _meta_inputs(m: int) -> tuple[torch.Tensor, ...]:
    return (
        torch.empty((m, 2560), dtype=torch.float16, device="meta"),
        torch.empty((m, 10), dtype=torch.int32, device="meta"),
        torch.empty((m, 10), dtype=torch.float32, device="meta"),
    )


def _composite() -> CompositeNamespace:
    reference = TorchOpsNamespace(REFERENCE_NAMESPACE)
    catalogue = PROJECT.catalogue
    return CompositeNamespace(
        reference,
        [op for op in catalogue.ops if not reference.has_op(op)],
        abi={op: 1 for op, s in catalogue.ops.items() if s.getter},
    )


def _errors(document: dict) -> list[str]:
    validator = Draft202012Validator(schema("startup-report"))
    return [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(document)]


# --- environ ----------------------------------------------------------------------------------


# Run in a fresh interpreter whose environment the test gives explicitly: start() without a
# mapping reads that process's environment; with one, it reads only the mapping.
PROCESS_ENVIRON_SCRIPT = """
import json, os
from policies import PROJECT
from routectl.engine.startup import start
from routectl.workload import EngineConfig, Hardware
hw, workload = Hardware(70), EngineConfig(tp=4, max_num_batched_tokens=8192)
var, key = os.environ["CHECKED_VARIABLE"], "sm70_awq_moe.qpn_m1"
before = dict(os.environ)
out = {}
for name, environ in (("process", None), ("explicit", {}), ("overlay", {var: "0"})):
    policy = start(PROJECT, None, hw, workload, environ=environ).policy
    out[name] = [policy.value(key), policy.source(key)]
out["environ_unchanged"] = dict(os.environ) == before
print(json.dumps(out))
"""


def test_explicit_environ_is_used_and_process_environ_ignored():
    environ = {
        "PATH": os.environ.get("PATH", os.defpath),
        "PYTHONPATH": str(ROOT),
        "CHECKED_VARIABLE": QPN_VAR,
        QPN_VAR: "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", PROCESS_ENVIRON_SCRIPT],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "process": [True, f"alias:{QPN_VAR}"],
        "explicit": [False, "default"],
        "overlay": [False, f"alias:{QPN_VAR}"],
        "environ_unchanged": True,
    }


def test_policy_is_resolved_once_at_start():
    environ: dict[str, str] = {}
    session = start(PROJECT, None, HW, WORKLOAD, environ=environ)
    environ[QPN_VAR] = "1"  # too late: the session resolved at start
    layer = session.load_layer(FAMILY, MOE, None, _recording())
    assert layer.decision.flags["qpn_m1"] is False
    assert session.report().layers[0]["classes"][1]["samples"][0]["ops"][0]["op"] != QPN_M1_OP


def test_explicit_config_wins_over_the_environment():
    session = start(PROJECT, QPN_ON, HW, WORKLOAD, environ={QPN_VAR: "0"})
    assert session.policy.value("sm70_awq_moe.qpn_m1") is True
    assert session.policy.source("sm70_awq_moe.qpn_m1") == "explicit"
    assert [(i["variable"], i["key"]) for i in session.report().to_json()["policy"]["ignored"]] == [
        (QPN_VAR, "sm70_awq_moe.qpn_m1")
    ]


# --- logging ----------------------------------------------------------------------------------


def test_no_handlers_are_installed():
    logger = logging.getLogger(LOGGER_NAME)
    root = logging.getLogger()
    before = (list(logger.handlers), list(root.handlers), logger.propagate)
    session = start(PROJECT, None, HW, WORKLOAD, environ={})
    session.load_layer(FAMILY, MOE, None, _recording(PREPARE_COMPACT_OP))
    session.report()
    assert (list(logger.handlers), list(root.handlers), logger.propagate) == before


def test_each_fallback_is_logged_once_with_the_rows_reason(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    session = start(PROJECT, None, HW, WORKLOAD, environ={})
    ns = _recording(PREPARE_COMPACT_OP)
    for layer_id in (0, 1, 2):
        session.load_layer(FAMILY, _moe(layer_id), None, ns)
    reasons = {f["reason"] for layer in session.report().layers for f in layer["fallbacks"]}
    assert len(reasons) == 1 and all(
        len(layer["fallbacks"]) == 1 for layer in session.report().layers
    )
    reason = reasons.pop()
    fallback_records = [
        r for r in caplog.records if r.name == LOGGER_NAME and r.levelno == logging.WARNING
    ]
    assert len(fallback_records) == 1
    assert fallback_records[0].getMessage().endswith(f": {reason}")
    assert "model.layers.0.mlp.experts" in fallback_records[0].getMessage()
    loads = [
        r
        for r in caplog.records
        if r.levelno == logging.INFO and "prepared layout" in r.getMessage()
    ]
    assert len(loads) == 3


def test_deprecations_go_to_the_logger_once_per_process(caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER_NAME)
    with warnings.catch_warnings(record=True) as escaped:
        warnings.simplefilter("always")
        for _ in range(2):
            session = start(PROJECT, None, HW, WORKLOAD, environ={DEPRECATED_VAR: "1"})
    assert escaped == []
    deprecations = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert len(deprecations) == 1 and deprecations[0].startswith(DEPRECATED_VAR)
    assert deprecations[0] in session.policy.warnings


def test_unknown_variables_are_logged_on_every_start(caplog):
    caplog.set_level(logging.WARNING, logger=LOGGER_NAME)
    typo = UNKNOWN_PREFIX + "AWQ_MOE_COMPACT_METADTA"
    for _ in range(2):
        start(PROJECT, None, HW, WORKLOAD, environ={typo: "1"})
    notes = [r.getMessage() for r in caplog.records if typo in r.getMessage()]
    assert len(notes) == 2


def test_selection_errors_are_logged_and_raised(caplog):
    caplog.set_level(logging.ERROR, logger=LOGGER_NAME)
    session = start(PROJECT, QPN_ON, HW, WORKLOAD, environ={})
    with pytest.raises(SelectionError) as error:
        session.load_layer(FAMILY, MOE, None, _recording(QPN_M1_OP))
    assert [r.getMessage() for r in caplog.records] == [
        f"model.layers.0.mlp.experts [{FAMILY}]: [{error.value.code}] {error.value.message}"
    ]
    assert session.layers == ()


# --- loading ------------------------------------------------------------------------------------


def test_families_are_the_selector_families():
    session = start(PROJECT, None, HW, WORKLOAD, environ={})
    assert set(session.families) == set(PROJECT.selectors)


def test_unknown_family_and_unwanted_workspace_are_input_errors():
    session = start(PROJECT, None, HW, WORKLOAD, environ={})
    with pytest.raises(InputError, match="unknown kernel family 'sm99'"):
        session.load_layer("sm99", MOE, None, _recording())
    with pytest.raises(InputError, match="takes no workspace"):
        session.load_layer(FAMILY, MOE, None, _recording(), workspace=1)


QUALIFIED = EngineConfig(
    tp=4,
    spec_method="dflash",
    spec_tokens=7,
    selector_top_k=16,
    max_num_seqs=4,
    max_num_batched_tokens=8192,
)
# Family -> (capability, layer, kernel_config): one served layer of every engine family.
# One hand-written case per family that loads layers, in its module in tests/families/
# (`ENGINE_CASE`): a coverage pin (`test_every_engine_family_has_a_case`).
FAMILY_CASES = {family: case for family, case in families.stated("ENGINE_CASE")}


def test_every_engine_family_has_a_case():
    assert set(FAMILY_CASES) == set(PROJECT.loaders)


@pytest.mark.parametrize("family", sorted(FAMILY_CASES))
def test_dispatch_follows_the_token_count(family):
    """Loaded without tensors (meta), each family's layer dispatches, per token count, the
    ops its startup report lists for that count, with the same plans."""
    capability, spec, config = FAMILY_CASES[family]
    session = start(PROJECT, config, Hardware(capability), QUALIFIED, environ={})
    ns = _recording()
    layer = session.load_layer(family, spec, None, ns, name="layer0")
    assert layer.name == "layer0" and layer.dispatched and layer.kernel is not None
    report = session.report().layer("layer0")
    assert report["replay_matches_load"] is True and report["bytes"]["total"] > 0
    loader = PROJECT.loaders[family]
    for token_class in report["classes"]:
        assert token_class["samples"], token_class
        for sample in token_class["samples"]:
            mark = ns.mark()
            layer(*loader.call_inputs(spec, layer.prepared, sample["m"]))
            assert [
                {"op": c["op"], "plan": {"m": sample["m"], **c["plan"]}} for c in ns.since(mark)
            ] == sample["ops"]


def test_a_method_routectl_does_not_dispatch():
    session = start(PROJECT, None, HW, WORKLOAD, environ={DISABLE_VAR: "1"})
    layer = session.load_layer(FAMILY, MOE, None, _recording())
    assert layer.kernel == "MoeWNA16" and not layer.dispatched
    with pytest.raises(NotDispatchedError, match="MoeWNA16 serves this layer"):
        layer(*_meta_inputs(1))
    entry = session.report().layers[0]
    assert all(c["samples"] == [] and "MoeWNA16" in c["skipped"] for c in entry["classes"])
    assert _errors(session.report().to_json()) == []


def test_linear_layer_end_to_end_on_the_composite_namespace():
    """A real AWQ dense linear: prepared by the reference op (observed), its replay equals
    the observed prepare, and the GEMM (declared only) fails with the clear error whose
    arguments give the plan the report replayed for M = 1."""
    session = start(PROJECT, None, HW, WORKLOAD, environ={})
    spec = AwqLayer.of("model.layers.0.self_attn.qkv_proj", 2560, 3584, 32)
    g = torch.Generator().manual_seed(3)
    tensors = {
        "qweight": torch.randint(
            -(2**31), 2**31, spec.qweight_shape, generator=g, dtype=torch.int64
        ).to(torch.int32),
        "qzeros": torch.randint(
            -(2**31), 2**31, spec.qzeros_shape, generator=g, dtype=torch.int64
        ).to(torch.int32),
        "scales": (torch.rand(spec.scales_shape, generator=g) * 0.01 + 0.001).half(),
    }
    with OpObserver(PROJECT.catalogue, REFERENCE_NAMESPACE) as seen:
        layer = session.load_layer("sm70-awq-linear", spec, tensors, _composite())
    entry = session.report().layer(spec.prefix)
    assert entry["kernel"] == layer.kernel and entry["replay_matches_load"]
    assert entry["prepare"] == seen.calls and len(seen.calls) == 1
    assert entry["bytes"]["total"] == sum(c.nbytes for c in seen.observed)
    with pytest.raises(
        NoImplementationError, match=f"no reference implementation for {AWQ_GEMM_OP}"
    ) as error:
        layer(torch.zeros((1, 2560), dtype=torch.float16))
    spec_op = PROJECT.catalogue.op(error.value.op)
    plan = derive_plan(spec_op, bind_arguments(spec_op, (), error.value.arguments))
    one = next(c for c in entry["classes"] if c["name"] == "1")["samples"][0]
    assert one["ops"] == [{"op": error.value.op, "plan": {"m": 1, **plan}}]
    assert _errors(session.report().to_json()) == []


# --- composite namespace -----------------------------------------------------------------------


def test_composite_namespace_declares_without_implementing():
    implemented = InMemoryNamespace(
        ["a", "getter"], name="impl", abi={"getter": 7}, impls={"a": lambda **kw: ("a", kw)}
    )
    ns = CompositeNamespace(
        implemented, ["a", "b", "declared_getter", "bare_getter"], abi={"declared_getter": 3}
    )
    assert ns.name == "impl+declared"
    assert [ns.has_op(op) for op in ("a", "b", "c")] == [True, True, False]
    assert ns.declared == {"b", "declared_getter", "bare_getter"}
    assert ns.call("a", x=1) == ("a", {"x": 1})
    with pytest.raises(NoImplementationError, match="no reference implementation for b") as e:
        ns.call("b", x=2)
    assert e.value.op == "b" and e.value.arguments == {"x": 2}
    with pytest.raises(RuntimeError, match="impl\\+declared::c is not available"):
        ns.call("c")
    assert (
        ns.abi_revision("getter"),
        ns.abi_revision("declared_getter"),
        ns.abi_revision("c"),
    ) == (7, 3, None)
    with pytest.raises(NoImplementationError, match="bare_getter"):
        ns.abi_revision("bare_getter")


def test_composite_namespace_reports_reference_schemas():
    ns = _composite()
    assert ns.schema(QPN_M1_OP) is not None and ns.schema(AWQ_GEMM_OP) is None
    assert ns.implements(QPN_M1_OP) and not ns.implements(AWQ_GEMM_OP)
    assert ns.has_op(AWQ_GEMM_OP)


# --- the report ---------------------------------------------------------------------------------


def test_report_covers_every_class_policy_value_and_candidate():
    session = start(PROJECT, QPN_ON, HW, WORKLOAD, environ={QPN_VAR: "1"})
    ns = _recording(PREPARE_COMPACT_OP)
    session.load_layer(FAMILY, MOE, None, ns)
    document = session.report().to_json()
    assert _errors(document) == []
    validate_report(document, PROJECT)
    # schema_version, as every document routectl writes says it (issue 30)
    assert document["schema_version"] == 1 and "format" not in document
    with pytest.raises(InputError):
        validate_report(
            {"format": 1, **{k: v for k, v in document.items() if k != "schema_version"}}, PROJECT
        )
    policy = session.policy
    assert {v["key"]: (v["value"], v["source"]) for v in document["policy"]["values"]} == {
        k: (policy.to_json()["values"][k], policy.source(k)) for k, _ in policy.values
    }
    layer = document["layers"][0]
    assert [c["name"] for c in layer["classes"]] == [c.name for c in TOKEN_CLASSES]
    assert all(c["samples"] for c in layer["classes"])
    assert [v["name"] for v in layer["candidates"]] == [
        v.name for v in session.layers[0].decision.selection.verdicts
    ]
    assert layer["prepared_layout"] == session.layers[0].decision.layout
    assert layer["namespace"]["missing"] == [PREPARE_COMPACT_OP]
    assert layer["replay_matches_load"] is True
    text = session.report().to_text()
    for token_class in layer["classes"]:
        for sample in token_class["samples"]:
            assert f"M {token_class['name']} at {sample['m']}: " in text
    for fallback in layer["fallbacks"]:
        assert fallback["reason"] in text


def test_report_skips_counts_above_the_budget():
    small = EngineConfig(tp=4, max_num_batched_tokens=64)
    session = start(PROJECT, None, HW, small, environ={})
    session.load_layer(FAMILY, MOE, None, _recording())
    classes = {c["name"]: c for c in session.report().layers[0]["classes"]}
    assert classes[">=128"]["samples"] == [] and "64" in classes[">=128"]["skipped"]
    assert [s["m"] for s in classes["9-127"]["samples"]] == [9]


def test_invalid_report_is_rejected():
    session = start(PROJECT, None, HW, WORKLOAD, environ={})
    session.load_layer(FAMILY, MOE, None, _recording())
    document = session.report().to_json()
    document["layers"][0]["classes"][0]["name"] = "zero"
    with pytest.raises(InputError, match="invalid startup report"):
        validate_report(document, PROJECT)


# --- the engine loaders: how the startup report replays each family on meta tensors ----------

MOE_FAMILIES = {family for family, layer in families.stated("ENGINE_LAYER") if layer == "moe"}
LINEAR_FAMILIES = sorted(f for f in FAMILY_CASES if f not in MOE_FAMILIES)


@pytest.mark.parametrize("family", LINEAR_FAMILIES)
def test_linear_loaders_replay_on_meta_and_take_a_workspace(family):
    """A linear family's checkpoint and call inputs are meta tensors (no storage is
    allocated for the report), the activation is (M, K) in the layer's dtype, and its loader
    takes the engine's workspace."""
    capability, spec, config = FAMILY_CASES[family]
    loader = PROJECT.loaders[family]
    tensors = loader.meta_tensors(spec)
    assert tensors and all(t.device.type == "meta" for t in tensors.values())
    session = start(PROJECT, config, Hardware(capability), QUALIFIED, environ={})
    layer = session.load_layer(family, spec, None, _recording(), workspace=1 << 20)
    (x,) = loader.call_inputs(spec, layer.prepared, 3)
    assert (tuple(x.shape), x.dtype, x.device.type) == (
        (3, spec.input_size),
        torch.float16,
        "meta",
    )
    assert loader.last_call is None


def test_the_moe_loader_reports_its_last_call_and_takes_no_checkpoint():
    loader = PROJECT.loaders[FAMILY]
    assert loader.meta_tensors(MOE) is None and not loader.takes_workspace
    session = start(PROJECT, None, HW, WORKLOAD, environ={})
    layer = session.load_layer(FAMILY, MOE, None, _recording())
    assert loader.last_call(layer.prepared) is None  # nothing called yet
    inputs = loader.call_inputs(MOE, layer.prepared, 1)
    # docs/contracts/core.md §3.4: x (M, 2560) fp16, router ids (M, top-k 10) int32, weights fp32.
    assert [(tuple(t.shape), t.dtype, t.device.type) for t in inputs] == [
        ((1, 2560), torch.float16, "meta"),
        ((1, 10), torch.int32, "meta"),
        ((1, 10), torch.float32, "meta"),
    ]
    layer(*inputs)
    last = loader.last_call(layer.prepared)
    # M = 1 on the defaults: the legacy lane (3.4); QPN M1 refused as not admitted (opt-in,
    # 3.5); the zero-output lane's token-count refusal is not listed.
    assert set(last) == {"stages", "rejected"}
    assert last["stages"] == ["lane.legacy_single_token"]
    assert [(v["name"], v["code"]) for v in last["rejected"]] == [("lane.qpn_m1", "not_admitted")]
