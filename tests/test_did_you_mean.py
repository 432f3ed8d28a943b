"""Every place a name is typed answers a typo with one line naming the closest valid name and
exit 2: KernelConfig keys (nested, with their path), a `--kernel-config` file without its
`@`, kernels of `native probe`, git refs, row ids of expected-changes files and `matrix
--field` paths. One helper (`routectl.suggest`) serves them all."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from routectl.errors import InputError
from routectl.review.git import resolve_commit
from routectl.suggest import closest
from tests.fixtures.toy import invoke, make_project, ok

ROOT = Path(__file__).resolve().parents[1]


def typo(args: list, *, cwd: Path = ROOT) -> str:
    result = ok(invoke(args, cwd=cwd))
    assert result.code == 2, result.stdout + result.stderr
    (line,) = result.stderr.splitlines()
    return line


def test_closest_prefers_case_then_spelling_then_a_prefix_then_a_part():
    known = ["Qpn2NvFp4LinearKernel", "TuringQpn2NvFp4LinearKernel", "main", "bytes.total"]
    assert closest("qpn2nvfp4linearkernel", known) == ["Qpn2NvFp4LinearKernel"]
    assert closest("mian", known) == ["main"]
    assert closest("Qpn2", known) == ["Qpn2NvFp4LinearKernel"]
    assert closest("Turing", known) == ["TuringQpn2NvFp4LinearKernel"]
    assert closest("NvFp4Linear", known) == ["Qpn2NvFp4LinearKernel"]  # the shorter holder
    assert closest("ab", known) == [] and closest("zzzz", known) == []


def test_a_misspelled_kernel_config_key_names_the_key_with_its_path(tmp_path):
    line = typo(["config", "--kernel-config", '{"sm70_awq": {"prefil_exact_dense": true}}'])
    assert line == (
        "error: kernel_config.sm70_awq.prefil_exact_dense: unknown key; did you mean "
        "kernel_config.sm70_awq.prefill_exact_dense?"
    )
    assert "did you mean kernel_config.sm70_awq?" in typo(
        ["config", "--kernel-config", '{"sm70_aqw": {}}']
    )


def test_a_kernel_config_file_without_its_at_sign(tmp_path):
    config = tmp_path / "kc.json"
    config.write_text(json.dumps({"sm70_awq": {"prefill_exact_dense": False}}))
    assert typo(["config", "--kernel-config", config]) == (
        f"error: kernel config '{config}' is not JSON text but names a file; did you mean "
        f"@{config}?"
    )
    assert ok(invoke(["config", "--kernel-config", f"@{config}"], cwd=ROOT)).code == 0


def test_a_misspelled_kernel_of_native_probe():
    line = typo(["native", "probe", "--kernel", "Qpn2"])
    assert line.startswith(
        "error: unknown kernel or stage Qpn2; did you mean Qpn2NvFp4LinearKernel? (known: "
    )


def test_a_misspelled_git_ref_names_the_closest_branch_or_tag(tmp_path):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "a"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    subprocess.run([*git, "tag", "release-1.4"], check=True, capture_output=True)
    for wrong, meant in [("mian", "main"), ("release-1.5", "release-1.4")]:
        with pytest.raises(InputError) as refused:
            resolve_commit(tmp_path, wrong, {})
        assert f"; did you mean {meant}?" in str(refused.value)


def test_a_misspelled_row_id_of_an_expected_changes_file(tmp_path):
    project = make_project(tmp_path)
    for listed in ("toy-a:edge:slw", {"rows": "edge:slw", "reason": "r"}):
        (project / "expected.json").write_text(
            json.dumps({"schema_version": 3, "changes": [listed]})
        )
        line = typo(["check", "--expected-changes", "expected.json"], cwd=project)
        assert line == (
            "error: expected-changes entry [0] names row 'edge:slw', which no category has; "
            "did you mean edge:slow?"
        )


def test_a_misspelled_matrix_field_is_refused_not_a_grid_of_dashes():
    line = typo(["matrix", "-c", "sm70-awq-linear", "--field", "bytes.totl"])
    assert line == "error: no route has a field 'bytes.totl'; did you mean bytes.total?"
