"""A real engine session under the observer (tests/observed_session.py, a subprocess: it
registers an op) joined with the retained rows by `routectl parity`: the honest layer agrees,
its step made while the injected capture predicate said a CUDA graph was being captured is
marked captured, and the layer served through another op at run time is named, with its M,
and nothing else is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from routectl.cli import run

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "observed_session.py"
HANG_S = 1800  # only a hang guard: two real layer loads
QPN_OP = "awq_moe_qpn_m1_sm70_out"
LEGACY_OP = "awq_moe_single_token_sm70_out"


def test_a_planted_divergence_is_named_by_layer_and_m(tmp_path, capsys):
    record = tmp_path / "observed.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(record), "--divergent"],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    document = json.loads(record.read_text())
    captured = [e for e in document["entries"] if e["captured"]]
    assert [(e["layer"], e["m"], e["op"], e["count"]) for e in captured] == [
        ("model.layers.0.mlp.experts", 1, QPN_OP, 1)
    ]
    code = run(["--project", str(ROOT), "parity", str(record), "--format", "github"], {})
    out, _ = capsys.readouterr()
    assert code == 1
    errors = [line for line in out.splitlines() if line.startswith("::error ")]
    assert len(errors) == 1
    assert "model.layers.1.mlp.experts M 1: predicted awq_moe_qpn_m1_sm70_out" in errors[0]
    assert f"observed {LEGACY_OP}" in errors[0]
    code = run(["--project", str(ROOT), "parity", str(record), "--format", "json"], {})
    result = json.loads(capsys.readouterr()[0])
    [row] = result["rows"]
    assert row["row"] == "edge:example_qpn_m1"
    agreed = {(a["layer"], a["m"], a["op"]): (a["eager"], a["captured"]) for a in row["agreed"]}
    assert agreed[("model.layers.0.mlp.experts", 1, QPN_OP)] == (1, 1)
    # Both layers' loads agree with the row's prepare calls.
    loads = sorted(a["layer"] for a in row["agreed"] if a["m"] is None)
    assert loads == 2 * ["model.layers.0.mlp.experts"] + 2 * ["model.layers.1.mlp.experts"]
    assert [(d["layer"], d["m"]) for d in row["disagreed"]] == [("model.layers.1.mlp.experts", 1)]
    assert row["unpredicted"] == []
