"""Realistic reviews, replayed on copies of this project (the checkout's policies stay as they
are). The indexed-prefill minimum of the AWQ MoE admission raised from 128 to 256 tokens reads
as one cluster: no reorder as invented field changes, every stage named by its M, a short
text, and an expected-changes file of a few entries that each state fields. The AWQ exact
dense prefill turned off removes a fallback with a long reason: only terminal text shortens
it (and `--full` shows it whole)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from policies.variables import VARIABLE_PREFIX
from tests.project_files import copy_project

ROOT = Path(__file__).resolve().parents[1]
CONSTANT = re.compile(r"^INDEXED_MIN_TOKENS = 128$", re.M)


EXACT_DENSE = re.compile(r'(name="prefill_exact_dense",\s*type=bool,\s*default=)True')


def project_copy(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    return copy_project(tmp_path_factory.mktemp(name) / "project")


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = project_copy(tmp_path_factory, "moe")
    admission = root / "policies" / "awq_moe_admission.py"
    text, count = CONSTANT.subn("INDEXED_MIN_TOKENS = 256", admission.read_text())
    assert count == 1, "the constant this review changes moved: update the test"
    admission.write_text(text)
    return root


@pytest.fixture(scope="module")
def exact_dense_off(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = project_copy(tmp_path_factory, "linear")
    variables = root / "policies" / "variables.py"
    text, count = EXACT_DENSE.subn(r"\g<1>False", variables.read_text())
    assert count, "the default this review changes moved: update the test"
    variables.write_text(text)
    return root


def check(
    root: Path, *args: str, category: str = "sm70-awq-moe"
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(VARIABLE_PREFIX)}
    env.update({"PYTHONPATH": str(root), "NO_COLOR": "1"})
    env.pop("CI", None)
    return subprocess.run(
        [sys.executable, "-m", "routectl", "check", "-c", category, *args],
        cwd=root,
        env=env,
        text=True,
        capture_output=True,
        timeout=600,
    )


def test_the_moe_change_reads_as_one_cluster(copy):
    shown = check(copy)
    assert shown.returncode == 1, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) <= 20, shown.stdout
    # One cluster: the rows of every group are counted under one heading.
    assert lines[1] == "  changed 67 rows in 5 groups (unexpected)"
    assert "more field change" not in shown.stdout  # nothing cut by --max-fields
    # Every stage is named by its M; no bare index of a keyed list.
    assert "route.stages[M=128]" in shown.stdout
    assert not re.search(r"\.(stages|rejected|dispatch|verdicts)\[[0-9*]", shown.stdout)

    report = json.loads(check(copy, "--format", "json").stdout)
    diffs = report["categories"]["sm70-awq-moe"]["diffs"]
    paths = {c["path"] for changes in diffs.values() for c in changes}
    # A reorder is never a field change: no item changes its name (by position it would).
    assert not [p for p in paths if p.endswith(".name")]
    for path in paths:  # every distinct path is shown
        assert path in shown.stdout, path


def test_the_moe_change_writes_a_few_entries_that_each_state_fields(copy, tmp_path):
    written = tmp_path / "moe.json"
    assert check(copy, "--write-expected", str(written)).returncode == 1
    entries = json.loads(written.read_text())["changes"]
    assert 1 <= len(entries) <= 5
    for entry in entries:
        assert entry.get("fields") or entry.get("note"), entry
    fed_back = check(copy, "--expected-changes", str(written))
    assert fed_back.returncode == 0, fed_back.stdout
    assert fed_back.stdout.splitlines()[-1] == "ok: 1 category, 562 rows, 67 expected changes"


def test_long_values_are_cut_only_in_terminal_text(exact_dense_off):
    retained = json.loads((ROOT / "snapshots" / "sm70-awq-linear.json").read_text())
    (row,) = [r for r in retained["rows"] if r["id"] == "edge:workspace_missing"]
    (fallback,) = row["route"]["fallbacks"]
    reason = fallback["reason"]
    # What the test is about: a value (the removed fallback) longer than terminal text shows.
    assert len(json.dumps(fallback)) > 120

    def shown(*args: str) -> str:
        done = check(exact_dense_off, *args, category="sm70-awq-linear")
        assert done.returncode == 1, done.stderr
        return done.stdout

    assert reason not in shown() and "..." in shown()
    assert reason in shown("--full")
    for fmt in ("markdown", "github"):
        out = shown("--format", fmt)
        assert "..." not in out, fmt
        assert reason in out, fmt
