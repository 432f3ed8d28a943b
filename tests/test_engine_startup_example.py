"""`examples/engine_startup.py` runs in the suite: a subprocess loading the Qwen3.8 TP4 AWQ MoE
layer for real through the reference ops, both metadata layouts. Its speed is measured in
`benchmarks/`, never asserted here; the timeout only guards against a hang."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from jsonschema import Draft202012Validator

from policies.variables import VARIABLE_PREFIX
from routectl.io.schemas import schema

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "engine_startup.py"
# Only a hang guard: 10-18 s on two shared cores, minutes on a loaded shared runner.
HANG_S = 1800
MARGINS = re.compile(r"^margins (4-byte|3-byte): max=(\S+) l2=(\S+)$", re.MULTILINE)


def test_example_passes_for_both_layouts(tmp_path):
    report = tmp_path / "startup-report.json"
    observed = tmp_path / "observed.json"
    # The example resolves against its process environment, as an engine does: give it one
    # without any policy variable of the caller's.
    env = {k: v for k, v in os.environ.items() if not k.startswith(VARIABLE_PREFIX)}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--report-json", str(report), "--observe", str(observed)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    margins = MARGINS.findall(proc.stdout)
    assert [label for label, _, _ in margins] == ["4-byte", "3-byte"]
    for _, max_ratio, l2_ratio in margins:
        assert 0 <= float(max_ratio) <= 1 and 0 <= float(l2_ratio) <= 1
    lines = proc.stdout.splitlines()
    for label in ("4-byte", "3-byte"):
        assert f"replay == execution {label}: yes" in lines
        assert f"routed experts decode to the checkpoint {label}: yes" in lines
    assert "outputs 4-byte == 3-byte: yes" in lines
    # The startup report was printed for both startups, QPN M1 serving M = 1 in each.
    qpn_lines = [line for line in lines if line.startswith("  M 1 at 1: lane.qpn_m1 -> ")]
    assert [("metadata=4-byte" in line, "metadata=3-byte" in line) for line in qpn_lines] == [
        (True, False),
        (False, True),
    ]
    document = json.loads(report.read_text())
    validator = Draft202012Validator(schema("startup-report"))
    assert [e.message for e in validator.iter_errors(document)] == []
    assert document["layers"][0]["prepared_layout"] == "3-byte"
    # Each session's observation record joins its retained row: `routectl parity` passes.
    assert "observed steps agree 3-byte: yes" in lines
    records = [observed, observed.with_name("observed.4-byte.json")]
    parity = subprocess.run(
        [sys.executable, "-m", "routectl", "--project", str(ROOT), "parity", *map(str, records)],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert parity.returncode == 0, parity.stdout + parity.stderr
    assert "sm70-awq-moe:edge:example_qpn_m1 (" in parity.stdout
    assert "sm70-awq-moe:edge:example_qpn_m1_4byte (" in parity.stdout


def test_example_fails_unless_every_check_passes():
    """The exit status logic, on the example's own result type."""
    import importlib.util

    import torch

    from native.reference.oracle import BoundCheck
    from routectl.replay.observe import CallRecord

    spec = importlib.util.spec_from_file_location("engine_startup_example_status", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    record = CallRecord(1, [{"op": "p", "plan": {"experts": 2}}], [], "3-byte", 8)
    within = BoundCheck(1.0, 2.0, 1.0, 2.0)

    def run(**changes):
        fields = {
            "label": "3-byte",
            "report": None,
            "replay": record,
            "execution": record,
            "margins": within,
            "banks_ok": True,
            "out": torch.zeros(1),
        }
        return module.LayoutRun(**{**fields, **changes})

    assert run().passed
    assert not run(margins=BoundCheck(3.0, 2.0, 1.0, 2.0)).passed
    assert not run(margins=BoundCheck(float("nan"), 2.0, 1.0, 2.0)).passed
    assert not run(banks_ok=False).passed
    assert not run(execution=CallRecord(1, [], [], "3-byte", 8)).passed
