"""The strict start-up contract: a deployment profile refuses a start-up whose selection
does not meet it (one error naming every mismatch, code contract_mismatch) and accepts one
that does; the startup report carries required against selected; `routectl explain --profile`
and `routectl config --profile` check a profile against a snapshot row without an engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policies import PROJECT
from routectl.cli import run
from routectl.engine.profile import CONTRACT_MISMATCH, ContractError, load_profile
from routectl.engine.startup import start
from routectl.engine.startup_report import validate_report
from routectl.errors import InputError
from routectl.replay.harness import RecordingNamespace
from routectl.workload import EngineConfig, Hardware
from tests.policy_helpers import QWEN38_AWQ_MOE

ROOT = Path(__file__).resolve().parents[1]
HW = Hardware(70)
WORKLOAD = EngineConfig(tp=4, max_num_seqs=8, max_num_batched_tokens=8192)
FAMILY = "sm70-awq-moe"
MOE = QWEN38_AWQ_MOE
EXPERTS = "model.layers.*.mlp.experts"
COMPACT_OP = "awq_sm70_prepare_compact"


def _session(profile, config=None, *remove):
    session = start(PROJECT, config, HW, WORKLOAD, environ={}, profile=profile)
    ns = RecordingNamespace(PROJECT.catalogue, remove=remove, name="engine double")
    session.load_layer(FAMILY, MOE, None, ns)
    return session


def _profile(routes):
    return {"schema_version": 1, "routes": routes}


def test_a_profile_the_selection_meets_is_accepted_and_reported():
    session = _session(_profile({EXPERTS: ["TurboMindAwqMoE", "no fallback"]}))
    session.verify_profile()  # does not raise
    document = session.report().to_json()
    validate_report(document, PROJECT)
    profile = document["profile"]
    assert profile["mismatches"] == []
    assert [(r["required"], r["selected"], r["ok"]) for r in profile["requirements"]] == [
        ("TurboMindAwqMoE", "TurboMindAwqMoE", True),
        ("no fallback", "no fallback", True),
    ]
    assert "deployment profile (mapping): met" in session.report().to_text()


def test_a_profile_refuses_naming_every_mismatch():
    # Without the compact prepare op the default compact layout falls back to 4-byte; the
    # second pattern matches no layer.
    profile = _profile(
        {EXPERTS: ["MoeWNA16", "no fallback"], "model.layers.*.self_attn": "SomeAttention"}
    )
    session = _session(profile, None, COMPACT_OP)
    with pytest.raises(ContractError) as caught:
        session.verify_profile()
    error = caught.value
    assert error.code == CONTRACT_MISMATCH
    assert list(error.mismatches) == [
        "model.layers.0.mlp.experts: requires MoeWNA16, selected TurboMindAwqMoE",
        "model.layers.0.mlp.experts: requires no fallback, selected fallback of "
        "sm70_awq_moe.compact_metadata",
        "model.layers.*.self_attn: matches no loaded layer",
    ]
    assert all(m in error.message for m in error.mismatches)
    document = session.report().to_json()
    validate_report(document, PROJECT)
    assert document["profile"]["mismatches"] == list(error.mismatches)


def test_no_profile_reports_none_and_verifies():
    session = _session(None)
    session.verify_profile()
    assert session.report().to_json()["profile"] is None


@pytest.mark.parametrize(
    "bad",
    [
        {"schema_version": 2, "routes": {EXPERTS: "K"}},
        {"schema_version": 1, "routes": {}},
        {"schema_version": 1, "routes": {EXPERTS: 3}},
        {"schema_version": 1, "routes": {EXPERTS: "K"}, "extra": 1},
    ],
)
def test_an_invalid_profile_is_an_input_error(bad):
    with pytest.raises(InputError, match="deployment profile"):
        start(PROJECT, None, HW, WORKLOAD, environ={}, profile=bad)


def test_a_profile_file_is_read(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_profile({EXPERTS: "TurboMindAwqMoE"})))
    assert load_profile(path).routes == ((EXPERTS, ("TurboMindAwqMoE",)),)


def _cli(*args, capsys):
    code = run(["--project", str(ROOT), *args], {})
    out, err = capsys.readouterr()
    return code, out, err


def test_explain_profile_checks_a_row(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_profile({EXPERTS: ["TurboMindAwqMoE", "no fallback"]})))
    code, out, _ = _cli(
        "explain", "sm70-awq-moe:edge:example_qpn_m1", "--profile", str(good), capsys=capsys
    )
    assert code == 0, out
    assert "deployment profile" in out and "met" in out
    # The default compact layout without its op falls back: "no fallback" fails (exit 1).
    code, out, _ = _cli(
        "explain",
        "sm70-awq-moe:edge:compact_default_op_missing",
        "--profile",
        str(good),
        capsys=capsys,
    )
    assert code == 1
    assert "requires no fallback, selected fallback of sm70_awq_moe.compact_metadata" in out


def test_config_profile_checks_a_row(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_profile({EXPERTS: "MoeWNA16"})))
    code, out, _ = _cli(
        "config", "--profile", str(bad), "--row", "sm70-awq-moe:edge:example_qpn_m1", capsys=capsys
    )
    assert code == 1
    assert "model.layers.0.mlp.experts: requires MoeWNA16, selected TurboMindAwqMoE" in out
