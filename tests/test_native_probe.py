"""`routectl native probe` against real torch.ops namespaces."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from routectl.io.schemas import schema_violation
from tests.fixtures.toy import invoke, ok

ROOT = Path(__file__).resolve().parents[1]
MISMATCH_NS = "routectl_probe_mismatch"

_lib = torch.library.Library(MISMATCH_NS, "DEF")  # noqa: TOR901 - throwaway test namespace
_lib.define("awq_sm70_prepare(Tensor kernel, Tensor scaling_factors, int group_size) -> Tensor[]")


def probe(*args):
    return ok(invoke(["native", "probe", *args], cwd=ROOT))


def test_reference_ops_serve_the_qpn_stage_and_turbomind_awq():
    result = probe(
        "--namespace",
        "routectl",
        "--import",
        "native.reference",
        "--kernel",
        "awq_moe.qpn_m1",
        "--kernel",
        "TurboMindAwqLinearKernel",
    )
    assert result.code == 0, result.stdout + result.stderr
    assert "routectl::awq_moe_qpn_m1_sm70_out: present, schema match" in result.stdout
    assert "routectl::awq_sm70_prepare: present, schema match" in result.stdout


def test_whole_catalogue_lists_the_engine_ops_without_reference():
    result = probe("--namespace", "routectl", "--import", "native.reference", "--format", "json")
    assert result.code == 1
    data = json.loads(result.stdout)
    assert schema_violation("probe", data) is None
    assert data["schema_version"] == 1 and "format" not in data  # as every document says it
    statuses = {op["op"]: op["status"] for k in data["kernels"] for op in k["ops"]}
    assert statuses["awq_moe_qpn_m1_sm70_out"] == "present"
    assert statuses["nvfp4_qpn2_prepare_sm70"] == "missing"
    assert statuses["awq_moe_single_token_sm70_out"] == "missing"
    qpn2 = next(k for k in data["kernels"] if k["name"] == "Qpn2NvFp4LinearKernel")
    assert qpn2["abi_getter"] == "nvfp4_qpn2_compact_scales_version_sm70"
    assert qpn2["abi_revision"] is None


def test_empty_namespace_exits_1_and_text_summary_names_missing_ops():
    result = probe("--namespace", "routectl_probe_empty")
    assert result.code == 1
    assert "missing: " in result.stdout.splitlines()[-1]


def test_pinned_schema_mismatch_exits_1():
    result = probe("--namespace", MISMATCH_NS, "--kernel", "TurboMindAwqLinearKernel")
    assert result.code == 1
    assert "schema mismatch" in result.stdout and "expected awq_sm70_prepare(" in result.stdout


def test_unknown_kernel_and_unimportable_module_exit_2():
    assert probe("--kernel", "NoSuchKernel").code == 2
    bad = probe("--import", "no_such_module_xyz")
    assert bad.code == 2 and bad.stderr.startswith("error: cannot import no_such_module_xyz")
