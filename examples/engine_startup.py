"""An engine's startup, end to end on CPU or CUDA, through routectl's engine API.

Plays an engine loading one Qwen3.8 TP4 AWQ MoE layer (512 experts, top-k 10, group 32,
random AutoAWQ checkpoint tensors) with `qpn_m1` requested, on declared hardware capability
70 (the reference ops run on CPU, or with `--device cuda` on a CUDA GPU through their Triton
implementation; the engine op's capability check is not modelled). The native
namespace is composite: the `routectl` reference ops (awq_sm70_prepare,
awq_sm70_prepare_compact, awq_moe_qpn_m1_sm70_out) plus declared-only entries for every other
catalogue op, so admission sees a full engine build; calling a declared op raises "no
reference implementation for <op>".

For each metadata layout (4-byte: compact_metadata off; 3-byte: the default) it starts an
engine session, loads the layer (every expert prepared for real), prints the startup report,
runs one M = 1 step and checks:
- the output against the FP64 oracle, printing `margins <layout>: max=<ratio> l2=<ratio>`
  (error / bound; at most 1 passes);
- the routed experts' prepared banks decode to the checkpoint's logical weights;
- replay equals execution: the calls the report's meta-tensor replay recorded (ops and
  plans, prepared layout, resident bytes) equal those a torch dispatch mode observed in the
  real run.
Both layouts must also give identical outputs. Exit 0 only when every check passes.

The policy is resolved against this process's environment (as an engine's would be).

    python examples/engine_startup.py [--device cuda] [--report-json FILE] [--observe FILE]

With `--observe FILE` each session installs routectl's observer at start-up and, after the
checks' step, runs `OBSERVED_STEPS` more real M = 1 steps (on CUDA: one step eager, one
captured in a CUDA graph and replayed, the replay's output checked against the eager one);
the default-layout (3-byte) session's observation record is written to FILE and the 4-byte
one's beside it (`<stem>.4-byte<suffix>`). `routectl parity FILE` then joins each record with
its retained snapshot row (docs/observed-routes.md).

With `--device cuda` the checkpoint, the prepared banks and the step's tensors live on the GPU
(the prepare ops and the QPN M1 op run there); the oracle and the bank check read CPU copies.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from routectl import EngineConfig, Hardware, load_project
from routectl.engine.startup import EngineLayer, start
from routectl.engine.startup_report import StartupReport, validate_report
from routectl.namespaces.composite_ns import CompositeNamespace
from routectl.namespaces.native_ns import TorchOpsNamespace
from routectl.project import Catalogue, Project
from routectl.replay.harness import FULL_BUILD_ABI_REVISION
from routectl.replay.observe import CallRecord, OpObserver, replay_record, with_m

# The project's own native/ and policies/ come from the root its [tool.routectl] table names,
# as the CLI and an engine find them: loading the project puts that root first on sys.path.
PROJECT = load_project(Path(__file__).resolve().parents[1])

import native.reference  # noqa: E402,F401  (registers the routectl:: reference ops)
from native.awq_layout import layout_of_metadata_dtype  # noqa: E402
from native.awq_schemas import REFERENCE_NAMESPACE  # noqa: E402
from native.moe_layer import BANKS, W13, AwqMoeLayer, ExpertBank, MoeCheckpoint  # noqa: E402
from native.reference.moe_checkpoint import expert_weights, random_moe_checkpoint  # noqa: E402
from native.reference.oracle import BoundCheck, check_bounds, oracle_qpn_m1  # noqa: E402
from native.reference.packing import PreparedExpert, unpack_prepared  # noqa: E402

FAMILY = "sm70-awq-moe"
HARDWARE = Hardware(70)
WORKLOAD = EngineConfig(tp=4, max_num_seqs=8, max_num_batched_tokens=8192)
# The model-level description of one Qwen3.8 MoE layer (a TP4 rank holds 160 of 640).
QWEN38_LAYER = {
    "prefix": "model.layers.0.mlp.experts",
    "layer_id": 0,
    "experts": 512,
    "top_k": 10,
    "hidden": 2560,
    "intermediate": 640,
    "group": 32,
}
# (label, kernel_config): qpn_m1 requested in both; 4-byte turns compact metadata off.
LAYOUTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("4-byte", {"sm70_awq_moe": {"qpn_m1": True, "compact_metadata": False}}),
    ("3-byte", {"sm70_awq_moe": {"qpn_m1": True}}),
)
STEP_TOKENS = 1
# The snapshot category the example's sessions declare in their observation records, and the
# eager M = 1 steps an observed CPU session runs after the checks' step.
CATEGORY = "sm70-awq-moe"
OBSERVED_STEPS = 2
CHECKPOINT_SEED = 0
INPUT_SEED = 1


def engine_namespace(catalogue: Catalogue) -> CompositeNamespace:
    """The reference ops for real, every other catalogue op declared (a full engine build,
    version getters at the full build's revision)."""
    reference = TorchOpsNamespace(REFERENCE_NAMESPACE)
    declared = [op for op in catalogue.ops if not reference.has_op(op)]
    getters = {op: FULL_BUILD_ABI_REVISION for op, spec in catalogue.ops.items() if spec.getter}
    return CompositeNamespace(
        reference, declared, abi=getters, name="engine build (routectl reference ops + declared)"
    )


def step_inputs(
    layer: AwqMoeLayer, device: torch.device, seed: int = INPUT_SEED
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One decode token: activations, the router's top-k expert ids and weights (drawn on
    the CPU, so both devices see the same step)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn((STEP_TOKENS, layer.hidden), generator=generator).half()
    ids = torch.randperm(layer.num_experts, generator=generator)[: layer.top_k]
    weights = torch.softmax(torch.randn((STEP_TOKENS, layer.top_k), generator=generator), -1)
    ids = ids.to(torch.int32).reshape(STEP_TOKENS, layer.top_k)
    return x.to(device), ids.to(device), weights.to(device)


def checkpoint_on(checkpoint: MoeCheckpoint, device: torch.device) -> MoeCheckpoint:
    """The checkpoint's banks stacked onto `device` (per-expert views, as an engine holds
    its parameters)."""
    if device.type == "cpu":
        return checkpoint
    return MoeCheckpoint(
        *(
            ExpertBank.from_stacked(
                *(
                    torch.stack(list(tensors)).to(device)
                    for tensors in (bank.qweight, bank.qzeros, bank.scales)
                )
            )
            for bank in (checkpoint.w13, checkpoint.w2)
        )
    )


def metadata_layout_of(observed: Sequence[Any]) -> str | None:
    """The layout of the metadata every observed prepare call returned (its second tensor)."""
    layouts = {layout_of_metadata_dtype(call.outputs[1][0]) for call in observed}
    return layouts.pop() if len(layouts) == 1 else None


def execution_record(load_seen: OpObserver, step_seen: OpObserver, m: int) -> CallRecord:
    """What the real run did, as observed: the prepare outputs are the resident banks."""
    return CallRecord(
        m,
        list(load_seen.calls),
        with_m(step_seen.calls, m),
        metadata_layout_of(load_seen.observed),
        sum(call.nbytes for call in load_seen.observed),
    )


def banks_match_checkpoint(
    layer: EngineLayer, checkpoint: MoeCheckpoint, experts: Sequence[int]
) -> bool:
    """Each routed expert's prepared words and metadata decode (independent unpacker) to the
    checkpoint's codes, zeros and scales, W13 de-interleaved."""
    banks = layer.prepared.state["banks"]
    group = layer.prepared.state["layer"].prepared_group
    for bank in BANKS:
        words, meta = (banks.w13, banks.s13) if bank == W13 else (banks.w2, banks.s2)
        for e in experts:
            got = unpack_prepared(
                PreparedExpert(words[e].cpu(), meta[e].cpu()),
                group,
                interleaved=bank == W13 and banks.w13_interleaved,
            ).logical()
            want = expert_weights(checkpoint, bank, e)
            if not (
                torch.equal(got.codes, want.codes)
                and torch.equal(got.zeros, want.zeros)
                and torch.equal(got.scales, want.scales)
            ):
                return False
    return True


@dataclass
class LayoutRun:
    label: str
    report: StartupReport
    replay: CallRecord
    execution: CallRecord
    margins: BoundCheck
    banks_ok: bool
    out: torch.Tensor
    steps_ok: bool = True  # the observed steps' outputs agree (True when not observing)

    @property
    def passed(self) -> bool:
        return (
            self.margins.passed
            and self.banks_ok
            and self.steps_ok
            and not self.replay.differences(self.execution)
        )


def record_path(observe: Path, label: str) -> Path:
    """Where the `label` session's observation record goes: `observe` for the default
    (3-byte) layout, `<stem>.<label><suffix>` beside it for the other."""
    if label == LAYOUTS[-1][0]:
        return observe
    return observe.with_name(f"{observe.stem}.{label}{observe.suffix}")


def observed_steps(
    layer: EngineLayer,
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    device: torch.device,
) -> bool:
    """Real M = 1 steps under the session's observer: on CPU `OBSERVED_STEPS` eager steps;
    on CUDA one eager step, then one captured in a CUDA graph and replayed. True when every
    step's output equals the first's (the replayed graph's included)."""
    first = layer(*inputs)
    if device.type != "cuda":
        return all(torch.equal(layer(*inputs), first) for _ in range(OBSERVED_STEPS - 1))
    static = tuple(t.clone() for t in inputs)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture stream, as graph capture wants
        layer(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = layer(*static)
    graph.replay()
    torch.cuda.synchronize()
    return torch.equal(captured.cpu(), first.cpu())


def run_layout(
    project: Project,
    namespace: CompositeNamespace,
    checkpoint: MoeCheckpoint,
    label: str,
    kernel_config: Mapping[str, Any],
    device: torch.device,
    observe: Path | None = None,
) -> LayoutRun:
    session = start(project, kernel_config, HARDWARE, WORKLOAD)
    if observe is not None:
        session.observe(
            record_path(observe, label),
            namespace,
            REFERENCE_NAMESPACE,
            category=CATEGORY,
            # The engine's own capture predicate: calls made during graph capture are marked.
            is_capturing=torch.cuda.is_current_stream_capturing if device.type == "cuda" else None,
        )
    with OpObserver(project.catalogue, REFERENCE_NAMESPACE) as load_seen:
        layer = session.load_layer(
            FAMILY, QWEN38_LAYER, checkpoint_on(checkpoint, device), namespace
        )
    moe: AwqMoeLayer = layer.prepared.state["layer"]
    x, ids, weights = step_inputs(moe, device)
    with OpObserver(project.catalogue, REFERENCE_NAMESPACE) as step_seen:
        out = layer(x, ids, weights)
    steps_ok = True
    if session.observing is not None:
        steps_ok = observed_steps(layer, (x, ids, weights), device)
        session.observing.close()  # writes the record
    report = session.report()
    banks = layer.prepared.state["banks"]
    reference = oracle_qpn_m1(
        *(t.cpu() for t in (x, banks.w13, banks.s13, banks.w2, banks.s2, ids, weights))
    )
    return LayoutRun(
        label=label,
        report=report,
        replay=replay_record(report.layer(layer.name), STEP_TOKENS),
        execution=execution_record(load_seen, step_seen, STEP_TOKENS),
        margins=check_bounds(out.cpu(), reference.out),
        banks_ok=banks_match_checkpoint(layer, checkpoint, [int(i) for i in ids.flatten()]),
        out=out.cpu(),
        steps_ok=steps_ok,
    )


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--report-json",
        type=Path,
        metavar="FILE",
        help="write the JSON startup report of the default-layout (3-byte) "
        "startup to FILE (validated against its schema)",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where the checkpoint, banks and step run (default: cpu)",
    )
    parser.add_argument(
        "--observe",
        type=Path,
        metavar="FILE",
        help="install routectl's observer in each session, run real M = 1 steps (on CUDA "
        "one captured in a CUDA graph) and write the 3-byte session's observation record to "
        "FILE, the 4-byte one's to <stem>.4-byte<suffix> (check them: routectl parity FILE)",
    )
    args = parser.parse_args(argv)
    # One intra-op thread: the CPU reference ops work expert by expert on tensors of about
    # 10^5 elements, where a second thread saves less than it costs to synchronise, and on
    # a shared 2-core machine made the run 4-7x slower (benchmarks/RESULTS.md). The
    # printed results are the same either way (integer bit work, elementwise roundings).
    torch.set_num_threads(1)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda needs a CUDA GPU", file=sys.stderr)
        return 2
    project = PROJECT
    namespace = engine_namespace(project.catalogue)
    checkpoint = random_moe_checkpoint(
        AwqMoeLayer.for_rank(QWEN38_LAYER, WORKLOAD.tp), CHECKPOINT_SEED
    )
    runs: list[LayoutRun] = []
    for label, kernel_config in LAYOUTS:
        run = run_layout(project, namespace, checkpoint, label, kernel_config, device, args.observe)
        runs.append(run)
        print(
            f"== engine startup, {label} metadata: kernel_config "
            f"{json.dumps(kernel_config, sort_keys=True)} =="
        )
        print(run.report.to_text(), end="")
        print(f"routed experts decode to the checkpoint {label}: {_yes(run.banks_ok)}")
        differences = run.replay.differences(run.execution)
        print(f"replay == execution {label}: {_yes(not differences)}")
        for line in differences:
            print(f"  {line}")
        if args.observe is not None:
            print(f"observed steps agree {label}: {_yes(run.steps_ok)}")
            print(f"observation record {label}: {record_path(args.observe, label)}")
    identical = torch.equal(runs[0].out, runs[1].out)
    print(f"outputs 4-byte == 3-byte: {_yes(identical)}")
    for run in runs:
        print(
            f"margins {run.label}: max={run.margins.max_abs_margin:.6f} "
            f"l2={run.margins.l2_margin:.6f}"
        )
    if args.report_json is not None:
        document = runs[-1].report.to_json()
        validate_report(document, project)
        args.report_json.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    return 0 if identical and all(run.passed for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
