"""How long does an engine's start-up take in routectl? `routectl.start` and every layer of a
whole model loaded on meta tensors, timed beyond `import routectl` (target: at most 150 ms per
model), with and without the start-up report.

Models:
- `qwen38-tp4-moe`: the Qwen3.8 AWQ MoE model at TP4 (sm70-awq-moe, 48 MoE layers, qpn_m1
  requested), the expert layer of the category's rows at each layer id.
- `27b-nvfp4`: the 27B CT NVFP4 model at TP4 with DFlash (sm70-nvfp4-linear): the layers its
  category probes (in_proj_qkvz of the row, gate_up_proj and down_proj of its probes) for
  each of its 64 decoder layers (the layer count of a Qwen3.5-27B-class model; the
  contracts pin no count for it).

Each figure is the median of `--repeat` fresh processes: an engine starts once per process,
so what the first `start` pays (a lazy import, the first policy resolution) is part of it.
torch, `routectl` and the project are imported before the clock starts (an engine has
imported torch already). The engine's namespace is routectl's recording double, as the
startup report's replay uses.

Run from the repository root: `python benchmarks/startup_speed.py [--repeat N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MOE_LAYERS = 48
NVFP4_LAYERS = 64
NVFP4_ROW = "27b_dflash2_nvfp4/fp8_e4m3/tp4/dflash/c4/q8192"

# Runs in a fresh interpreter: prints {"start_ms", "layers", "load_ms", "report_ms"}.
CHILD = """
import json, sys, time
import torch  # noqa: F401  (the engine imported it long before)
import routectl
from routectl import Hardware, load_project
from routectl.engine.startup import start
from routectl.replay.harness import RecordingNamespace
from policies.categories.nvfp4_sm70 import DOWN, GATE_UP

model, with_report = sys.argv[1], sys.argv[2] == "1"
project = load_project()
if model == "qwen38-tp4-moe":
    from policies.categories.awq_moe import QWEN38
    from routectl import EngineConfig
    family, capability = "sm70-awq-moe", 70
    workload = EngineConfig(tp=4, max_num_seqs=8, max_num_batched_tokens=8192)
    config = {"sm70_awq_moe": {"qpn_m1": True}}
    specs = [
        {**QWEN38, "layer_id": i, "prefix": f"model.layers.{i}.mlp.experts"}
        for i in range(%(moe)d)
    ]
else:
    family, capability, config = "sm70-nvfp4-linear", 70, None
    row = next(r for r in project.category(family).rows() if r.id == %(row)r)
    workload = row.engine
    from native.layers import Nvfp4Layer
    specs = [
        Nvfp4Layer.of(f"model.layers.{i}.{d['role']}", d["k"], d["n"])
        for i in range(%(nvfp4)d)
        for d in (row.layer, GATE_UP, DOWN)
    ]
namespace = RecordingNamespace(project.catalogue, name="engine double")
begin = time.perf_counter()
session = start(project, config, Hardware(capability), workload, environ={})
started = time.perf_counter()
for spec in specs:
    session.load_layer(family, spec, None, namespace)
loaded = time.perf_counter()
if with_report:
    session.report().to_json()
done = time.perf_counter()
print(json.dumps({
    "start_ms": (started - begin) * 1e3,
    "layers": len(specs),
    "load_ms": (loaded - started) * 1e3,
    "report_ms": (done - loaded) * 1e3,
    "total_ms": (done - begin) * 1e3,
}))
"""


def child(model: str, with_report: bool) -> dict[str, float]:
    code = CHILD % {"moe": MOE_LAYERS, "nvfp4": NVFP4_LAYERS, "row": NVFP4_ROW}
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", code, model, "1" if with_report else "0"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    summary: dict[str, object] = {}
    for model in ("qwen38-tp4-moe", "27b-nvfp4"):
        for with_report in (False, True):
            runs = [child(model, with_report) for _ in range(args.repeat)]
            total = median([r["total_ms"] for r in runs])
            layers = int(runs[0]["layers"])
            name = f"{model}{' +report' if with_report else ''}"
            parts = {k: median([r[k] for r in runs]) for k in ("start_ms", "load_ms", "report_ms")}
            print(
                f"{name:<24} {total:7.1f} ms beyond import routectl ({layers} layers, "
                f"{total / layers:.2f} ms a layer; start {parts['start_ms']:.1f} ms, loads "
                f"{parts['load_ms']:.1f} ms, report {parts['report_ms']:.1f} ms; median of "
                f"{args.repeat}; target <= 150 ms)"
            )
            summary[name] = {"total_ms": round(total, 1), "layers": layers}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
