"""`routectl config` through the CLI with an explicit environment."""

from __future__ import annotations

import json
from pathlib import Path

from policies.variables import field
from tests.fixtures.toy import invoke, ok
from tests.test_policy_resolution import PINNED_HASH

ROOT = Path(__file__).resolve().parents[1]
QPN2 = field("sm70_nvfp4.qpn2").variable
QPN_M1 = field("sm70_awq_moe.qpn_m1").variable


def config(*args, environ=None):
    return ok(invoke(["config", *args], cwd=ROOT, environ=environ))


def test_text_output_lists_sections_sources_qualification_and_hash():
    result = config("--spec", "dflash", "--tp", "4", "--max-num-seqs", "4")
    assert result.code == 0, result.stderr
    out = result.stdout
    for section in (
        "[sm70_nvfp4]",
        "[sm70_turbomind]",
        "[sm70_awq]",
        "[sm70_awq_moe]",
        "[sm70_fp8]",
        "[engine]",
    ):
        assert section in out
    assert "qpn2" in out and "(default)" in out
    assert "nvfp4_workload: yes" in out
    assert out.splitlines()[-1].startswith("hash (")
    assert result.stderr == ""


def test_json_output_and_hash_agrees_with_the_library():
    result = config("--spec", "dflash", "--format", "json")
    data = json.loads(result.stdout)
    assert data["policy"]["values"]["sm70_nvfp4.qpn2"] == {"value": True, "source": "default"}
    # The whole sm70_fp8 section is active wherever an FP8 linear family loads: Volta block
    # FP8 (70 <= capability < 75) and Turing QPN8 (75); not on newer devices.
    assert "sm70_nvfp4" in data["active_sections"] and "sm70_fp8" in data["active_sections"]
    turing = config("--spec", "dflash", "--format", "json", "--capability", "75")
    assert "sm70_fp8" in json.loads(turing.stdout)["active_sections"]
    ampere = config("--spec", "dflash", "--format", "json", "--capability", "80")
    assert "sm70_fp8" not in json.loads(ampere.stdout)["active_sections"]
    assert len(data["hash"]) == 64 and data["hash"] != PINNED_HASH  # more sections than one


def test_explicit_config_variables_and_ignored(tmp_path):
    path = tmp_path / "kc.json"
    path.write_text(json.dumps({"sm70_nvfp4": {"qpn2": False}}))
    result = config("--kernel-config", f"@{path}", "--format", "json", environ={QPN2: "1"})
    data = json.loads(result.stdout)
    assert data["policy"]["values"]["sm70_nvfp4.qpn2"] == {"value": False, "source": "explicit"}
    assert {"variable": QPN2, "field": "sm70_nvfp4.qpn2"} in data["policy"]["ignored"]
    # A deprecated variable warns on stderr, one line.
    lines = result.stderr.splitlines()
    assert lines == [
        f"warning: {QPN2} is deprecated; use kernel_config.sm70_nvfp4.qpn2. "
        "Explicit configuration takes precedence."
    ]


def test_invalid_variable_is_one_error_line_and_exit_2():
    result = config(environ={QPN_M1: "yes"})
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert QPN_M1 in result.stderr


def test_bad_kernel_config_and_usage_errors_exit_2():
    for args in (
        ["--kernel-config", "{nope"],
        ["--kernel-config", '{"sm70_nvfp4": {"qpn3": true}}'],
        ["--spec", "eagle"],
    ):
        result = config(*args)
        assert result.code == 2, args
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


def test_error_importing_the_project_exits_2_naming_file_key_and_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.routectl]\nproject = "brokenproj:PROJECT"\n')
    (tmp_path / "brokenproj.py").write_text("raise RuntimeError('boom')\n")
    result = invoke(["config"], cwd=tmp_path)
    assert result.code == 2
    assert result.stderr == (
        f"error: {tmp_path / 'pyproject.toml'}: [tool.routectl] project = 'brokenproj:PROJECT':"
        f" cannot import brokenproj: RuntimeError: boom ({tmp_path / 'brokenproj.py'}, line 1)"
        "\n"
    )
    debug = invoke(["--debug", "config"], cwd=tmp_path)
    assert debug.code == 2 and "Traceback" in debug.stderr
    assert debug.stderr.splitlines()[-1] == result.stderr.strip()
