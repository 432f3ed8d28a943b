"""The DFlash2 verifier policy through `routectl config`, `explain` and the engine's startup
report: model facts as options or a `--model` scope, the section with sources, the verifier
qualification, the guards, and invalid alias values as input errors."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from policies import PROJECT
from routectl.engine.startup import start
from routectl.io.schemas import schema
from routectl.workload import EngineConfig, Hardware, ModelFacts
from tests.fixtures.toy import invoke, ok
from tests.test_dflash2_policy import ALLOW_CANDIDATE_ORDER, DENSE_ORDER, TABLE

ROOT = Path(__file__).resolve().parents[1]
MODEL_27B = [
    "--architecture",
    "Qwen3_5ForConditionalGeneration",
    "--dtype",
    "float16",
    "--hidden-size",
    "5120",
    "--attention-heads",
    "24",
    "--kv-heads",
    "4",
    "--head-dim",
    "256",
]


def run(*args, environ=None):
    return ok(invoke(list(args), cwd=ROOT, environ=environ))


def config_json(*args, environ=None):
    result = run("config", "--format", "json", *args, environ=environ)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def verdict(data, name):
    return next(v for v in data["qualification"] if v["name"] == name)


def test_config_text_prints_the_section_with_sources_and_the_verifier_qualification():
    result = run("config", "--spec", "dflash", "--tp", "4", "--model", "27b_dflash2_nvfp4")
    assert result.code == 0 and result.stderr == ""
    out = result.stdout.splitlines()
    section = out[out.index("[sm70_dflash2]") + 1 : out.index("[sm70_dflash2]") + 19]
    assert sorted(line.split()[0] for line in section) == sorted(name for name, _ in TABLE)
    assert all(line.endswith("= true  (default)") for line in section)
    assert "  dflash2_verifier: yes" in out
    assert out[-1].startswith("hash (") and "sm70_dflash2" in out[-1]


def test_config_without_model_facts_is_not_qualified():
    data = config_json("--spec", "dflash")
    assert data["workload"]["model"] is None
    assert verdict(data, "dflash2_verifier")["code"] == "architecture_not_qwen3_5"
    assert data["policy"]["values"]["sm70_dflash2.fused_gdn_verify"] == {
        "value": False,
        "source": "default",
    }
    # A DFlash engine hashes the section even unqualified.
    assert "sm70_dflash2" in data["active_sections"]
    assert "sm70_dflash2" not in config_json("--spec", "mtp")["active_sections"]


def test_model_options_and_scope_give_the_same_facts():
    by_options = config_json("--spec", "dflash", *MODEL_27B)
    by_scope = config_json("--spec", "dflash", "--model", "27b_dflash2_nvfp4")
    assert (
        by_options["workload"]["model"]
        == by_scope["workload"]["model"]
        == {
            "architectures": ["Qwen3_5ForConditionalGeneration"],
            "dtype": "float16",
            "hidden_size": 5120,
            "num_attention_heads": 24,
            "num_key_value_heads": 4,
            "head_dim": 256,
            "quantization": None,
            "language_model_only": None,
        }
    )
    assert verdict(by_options, "dflash2_verifier")["ok"] is True
    assert by_options["hash"] == by_scope["hash"]


@pytest.mark.parametrize(
    "args,code",
    [
        (["--model", "27b_dflash2_nvfp4", "--hidden-size", "2048"], "hidden_size_not_5120"),
        (["--model", "27b_dflash2_nvfp4", "--dtype", "bfloat16"], "dtype_not_float16"),
        (["--model", "35b_a3b_awq"], "hidden_size_not_5120"),
        (["--model", "flash_next_mtp4_nvfp4"], "architecture_not_qwen3_5"),
        (["--model", "27b_dflash2_nvfp4", "--capability", "75"], "capability_not_70"),
        (MODEL_27B[:2], "dtype_not_float16"),
    ],
)
def test_explicit_options_override_the_scope(args, code):
    data = config_json("--spec", "dflash", *args)
    assert verdict(data, "dflash2_verifier")["code"] == code
    assert data["policy"]["values"]["sm70_dflash2.context_pipeline"]["value"] is False


def test_unknown_model_scope_is_an_input_error():
    result = run("config", "--model", "70b_unknown")
    assert result.code == 2
    # 27b_fp8 and 35b_a3b_fp8 carry model facts since issue 16.
    assert result.lines == [
        "error: unknown model scope '70b_unknown' (known: "
        "27b_dflash2_nvfp4, 27b_fp8, 35b_a3b_awq, 35b_a3b_fp8, "
        "flash_next_mtp4_nvfp4)"
    ]


@pytest.mark.parametrize("text", ["yes", "1.0", ""])
def test_invalid_alias_value_exits_2_naming_the_variable(text):
    result = run(
        "config", "--spec", "dflash", environ={"VLLM_SM70_DFLASH2_SPARSE_TARGET_REJECTION": text}
    )
    assert result.code == 2 and result.stdout == ""
    assert result.lines == [
        f"error: invalid value {text!r} for "
        "VLLM_SM70_DFLASH2_SPARSE_TARGET_REJECTION: accepted values are "
        "integers (0 = false, any other integer = true)"
    ]


def test_config_warns_for_deprecated_obsolete_and_removed_names():
    result = run(
        "config",
        "--spec",
        "dflash",
        "--model",
        "27b_dflash2_nvfp4",
        environ={"VLLM_SM70_FP8_QPN8": "0", DENSE_ORDER: "whatever", ALLOW_CANDIDATE_ORDER: "1"},
    )
    assert result.code == 0
    # One variable, two fields (issue 16): one message naming both paths.
    assert result.lines[0] == (
        "warning: VLLM_SM70_FP8_QPN8 is deprecated; use "
        "kernel_config.sm70_dflash2.target_fp8_qpn8 or "
        "kernel_config.sm70_fp8.qpn8. Explicit "
        "configuration takes precedence."
    )
    assert result.lines[1].startswith(
        f"warning: {DENSE_ORDER} is obsolete and ignored: dense tie ordering is mandatory"
    )
    assert result.lines[2].startswith(
        f"warning: {ALLOW_CANDIDATE_ORDER} was removed and has no effect"
    )
    assert len(result.lines) == 3
    assert (
        "  target_fp8_qpn8          = false  (alias:VLLM_SM70_FP8_QPN8)"
        in result.stdout.splitlines()
    )


def test_explain_prints_policy_qualification_and_guards():
    result = run("explain", "sm70-dflash2-policy:27b_dflash2_nvfp4/fp8_e4m3/tp2/dflash/c1/q8192")
    assert result.code == 0, result.stderr
    out = result.stdout.splitlines()
    assert "qualification: yes" in out
    assert "  fused_gdn_verify         = true  (default)" in out
    guards = out[out.index("guards:") + 1 : out.index("guards:") + 5]
    assert guards[0].split() == ["enable_sm70_dflash2_fused_gdn_verify", "admitted"]
    assert guards[3].split()[:3] == [
        "enable_sm70_dflash2_fused_gdn_combined_split",
        "refused",
        "[local_tail_layout]",
    ]
    assert "GDN layout: ba=24 head_dim=128 key_heads=16 qkv=5120 value_heads=48 z=3072" in out
    assert "candidates: none" not in out


def test_explain_json_of_an_unqualified_row():
    result = run(
        "explain",
        "35b_a3b_awq/float16/tp4/dflash/c1/q4096",
        "-c",
        "sm70-dflash2-policy",
        "--format",
        "json",
    )
    document = json.loads(result.stdout)
    route = document["route"]
    assert route["qualification"]["code"] == "hidden_size_not_5120"
    assert [g["code"] for g in route["gdn_admission"]] == ["policy_disabled"] * 4
    assert document["inputs"]["engine"]["model"]["hidden_size"] == 2048


def test_startup_report_records_the_model_facts(caplog):
    facts = ModelFacts(("Qwen3_5ForConditionalGeneration",), "float16", 5120, 24, 4, 256)
    engine = EngineConfig(tp=4, spec_method="dflash", spec_tokens=7, selector_top_k=16, model=facts)
    with caplog.at_level(logging.WARNING, logger="routectl"):
        session = start(PROJECT, None, Hardware(70), engine, environ={DENSE_ORDER: "0"})
        start(PROJECT, None, Hardware(70), engine, environ={DENSE_ORDER: "0"})
    assert session.policy.value("sm70_dflash2.fused_gdn_verify") is True
    obsolete = [r for r in caplog.records if DENSE_ORDER in r.getMessage()]
    assert len(obsolete) == 1  # once per process
    document = session.report().to_json()
    assert document["engine"]["model"]["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    assert document["engine"]["model"]["head_dim"] == 256
    assert list(Draft202012Validator(schema("startup-report")).iter_errors(document)) == []
    unknown = start(PROJECT, None, Hardware(70), EngineConfig(), environ={}).report().to_json()
    assert unknown["engine"]["model"] is None
