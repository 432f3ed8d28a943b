"""Time the AWQ QPN M1 step (Qwen3.8 TP4, M = 1, one layer) on a CUDA GPU.

Shapes of docs/contracts/core.md §6 (512 experts, K 2560, intermediate 160 per rank, 10 routes). 48
layers with distinct random weight banks (so no layer's weights sit in L2 from the layer before),
each layer its own input, ids and router weights; every variant is captured as one CUDA graph
of the 48 layer steps and timed over graph replays: per-layer time = replay time / 48,
median of --samples (>= 9) samples. Side by side, in the same run:

- triton: the routectl op's CUDA implementation (two Triton launches), 3-byte and 4-byte
  metadata, and the launch configs named by --configs;
- (a) torch: gather the 10 experts' int4 words, unpack, dequantize, bmm, SwiGLU, bmm,
  weighted sum (plain torch ops);
- (b) fp16: FP16 weight banks, gather and bmm (cuBLAS), four times the bytes;
- (c) floor: the bytes one step must read (10 x (409,600 + 204,800 + metadata)) over the
  device-to-device copy bandwidth measured here (bytes read plus written).

The Triton outputs of two layers are checked against the CPU reference op (exactly) and the
FP64 oracle (the seed's bounds); (a) and (b) are checked against the oracle's bounds and
reported. One command on any CUDA machine with Triton:

    python benchmarks/qpn_m1_gpu.py [--samples 15] [--json FILE]

A profile of the two kernels (achieved bandwidth, occupancy):

    ncu --clock-control none -k 'regex:_w(13|2)_kernel' --section SpeedOfLight --section Occupancy \
        python benchmarks/qpn_m1_gpu.py --profile-only
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402

import native.reference  # noqa: E402,F401  (registers the ops)
from native.awq_schemas import GROUP_SIZE, NUM_EXPERTS, TOP_K, W2_K, W2_N, W13_K, W13_N  # noqa: E402
from native.reference import numerics, triton_qpn  # noqa: E402
from native.reference.oracle import check_bounds, oracle_qpn_m1  # noqa: E402

QPN = torch.ops.routectl.awq_moe_qpn_m1_sm70_out
LAYERS = 48
WORD_BYTES = TOP_K * (W13_K * W13_N // 2 + W2_K * W2_N // 2)  # 10 x (409,600 + 204,800)
META_RECORDS = TOP_K * (W13_K // GROUP_SIZE * W13_N + W2_K // GROUP_SIZE * W2_N)
STEP_BYTES = {True: WORD_BYTES + 3 * META_RECORDS, False: WORD_BYTES + 4 * META_RECORDS}
# The second session's default (2026-12-01): one chain per thread, 400 W13 and 320 W2
# programs of 4 warps, exchanges by 16-operand reductions, W13 not waiting for its predecessor.
PREVIOUS = triton_qpn.QpnConfig(
    w13_pairs=4, w13_warps=4, w2_columns=8, w13_gate_up=False, w2_paired=False, w13_pdl=False
)
CONFIGS = {
    "default": triton_qpn.DEFAULT_CONFIG,
    # The default's parts one by one: no programmatic dependent launch at all, none for W13,
    # W2 decoding after its wait.
    "no-pdl": triton_qpn.QpnConfig(pdl=False),
    "no-w13-pdl": triton_qpn.QpnConfig(w13_pdl=False),
    "no-predecode": triton_qpn.QpnConfig(w2_predecode=False),
    # Other block sizes: W13 50 programs of 16 warps, or 200 of 4; W2 320 programs of 2 warps;
    # W2 one chain per thread (320 programs of 8 columns x 16 route slots).
    "w13-p32w16": triton_qpn.QpnConfig(w13_pairs=32, w13_warps=16),
    "w13-p8w4": triton_qpn.QpnConfig(w13_pairs=8, w13_warps=4),
    "w2-c8w2": triton_qpn.QpnConfig(w2_columns=8, w2_warps=2),
    "w2-unpaired": triton_qpn.QpnConfig(w2_columns=8, w2_paired=False),
    "previous": PREVIOUS,
    "previous-w13-pdl": dataclasses.replace(PREVIOUS, w13_pdl=True),
}
LAYOUTS = {"3-byte": True, "4-byte": False}


@dataclass
class Layer:
    w13: torch.Tensor
    w2: torch.Tensor
    meta: dict[bool, tuple[torch.Tensor, torch.Tensor]]  # compact -> (s13, s2)
    x: torch.Tensor
    ids: torch.Tensor
    topk: torch.Tensor
    out: torch.Tensor
    inter: torch.Tensor


def make_layer(seed: int, device: torch.device) -> Layer:
    gen = torch.Generator(device=device).manual_seed(seed)
    meta: dict[bool, list[torch.Tensor]] = {False: [], True: []}
    words = []
    for k, n in ((W13_K, W13_N), (W2_K, W2_N)):
        words.append(
            torch.randint(
                -(2**31),
                2**31,
                (NUM_EXPERTS, k, n // 8),
                generator=gen,
                device=device,
                dtype=torch.int64,
            ).to(torch.int32)
        )
        groups = (NUM_EXPERTS, k // GROUP_SIZE, n)
        scales = (torch.rand(groups, generator=gen, device=device) * 0.01 + 0.001).half()
        zeros = torch.randint(0, 16, groups, generator=gen, device=device, dtype=torch.int32)
        for compact in (False, True):
            meta[compact].append(numerics.encode_metadata(scales, zeros, compact))
    ids = torch.randperm(NUM_EXPERTS, generator=gen, device=device)[:TOP_K]
    return Layer(
        w13=words[0],
        w2=words[1],
        meta={c: (m[0], m[1]) for c, m in meta.items()},
        x=torch.randn((1, W13_K), generator=gen, device=device).half(),
        ids=ids.to(torch.int32).reshape(1, TOP_K),
        topk=torch.softmax(torch.randn((1, TOP_K), generator=gen, device=device), -1),
        out=torch.empty((1, W2_N), dtype=torch.float16, device=device),
        inter=torch.empty((TOP_K, W2_K), dtype=torch.float16, device=device),
    )


def time_graph(steps: Callable[[], None], samples: int, replays: int) -> float:
    """Median microseconds per layer step over graph replays of the 48 steps."""
    steps()  # warm-up: compiles, and allocates what eager ops need before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        steps()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / (replays * LAYERS))
    return statistics.median(times)


def copy_bandwidth(device: torch.device, samples: int) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus written."""
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device=device).random_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return 2 * n / statistics.median(times)


def torch_path(layer: Layer, compact: bool, shifts: torch.Tensor) -> torch.Tensor:
    """(a): plain torch from the prepared int4 banks (FP16 arithmetic, not the contract's)."""
    ids = layer.ids.reshape(-1).long()
    s13, s2 = layer.meta[compact]

    def weights(words: torch.Tensor, meta: torch.Tensor, k: int, n: int) -> torch.Tensor:
        picked = words.index_select(0, ids).reshape(TOP_K, n // 32, k // 8, 32)
        codes = (picked.permute(0, 2, 1, 3).unsqueeze(2) >> shifts) & 0xF
        records = meta.index_select(0, ids).to(torch.int32)
        if compact:
            scales = (records[..., 0] | (records[..., 1] << 8)).to(torch.int16).view(torch.float16)
            biases = -records[..., 2].half() * scales
        else:
            scales = (records & 0xFFFF).to(torch.int16).view(torch.float16)
            biases = (records >> 16).to(torch.int16).view(torch.float16)
        return torch.addcmul(
            biases.repeat_interleave(GROUP_SIZE, 1),
            codes.reshape(TOP_K, k, n).half(),
            scales.repeat_interleave(GROUP_SIZE, 1),
        )

    columns = torch.bmm(layer.x.expand(TOP_K, 1, W13_K), weights(layer.w13, s13, W13_K, W13_N))
    inter = F.silu(columns[..., 0::2]) * columns[..., 1::2]
    routes = torch.bmm(inter, weights(layer.w2, s2, W2_K, W2_N))
    out = (layer.topk.reshape(TOP_K, 1, 1) * routes.float()).sum(0).half()
    layer.out.copy_(out)
    return layer.out


def fp16_path(layer: Layer, banks: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """(b): FP16 weight banks, gather and bmm."""
    ids = layer.ids.reshape(-1).long()
    w13, w2 = banks
    columns = torch.bmm(layer.x.expand(TOP_K, 1, W13_K), w13.index_select(0, ids))
    inter = F.silu(columns[..., 0::2]) * columns[..., 1::2]
    routes = torch.bmm(inter, w2.index_select(0, ids))
    layer.out.copy_((layer.topk.reshape(TOP_K, 1, 1) * routes.float()).sum(0).half())
    return layer.out


def triton_steps(
    layers: list[Layer], compact: bool, config: triton_qpn.QpnConfig, stage: str = "both"
) -> Callable[[], None]:
    def steps() -> None:
        for layer in layers:
            s13, s2 = layer.meta[compact]
            if stage in ("both", "w13"):
                triton_qpn.launch_w13(
                    layer.inter, layer.x, layer.w13, s13, layer.ids, compact=compact, config=config
                )
            if stage in ("both", "w2"):
                triton_qpn.launch_w2(
                    layer.out,
                    layer.inter,
                    layer.w2,
                    s2,
                    layer.ids,
                    layer.topk,
                    compact=compact,
                    config=config,
                )

    return steps


def op_steps(layers: list[Layer], compact: bool) -> Callable[[], None]:
    def steps() -> None:
        for layer in layers:
            QPN(
                layer.out,
                layer.inter,
                layer.x,
                layer.w13,
                layer.meta[compact][0],
                layer.w2,
                layer.meta[compact][1],
                layer.ids,
                layer.topk,
            )

    return steps


def check_layer(layer: Layer, compact: bool) -> dict[str, object]:
    """The op's output on `layer` against the CPU reference op and the FP64 oracle."""
    cpu = [
        t.cpu()
        for t in (
            layer.x,
            layer.w13,
            layer.meta[compact][0],
            layer.w2,
            layer.meta[compact][1],
            layer.ids,
            layer.topk,
        )
    ]
    out = torch.empty((1, W2_N), dtype=torch.float16)
    inter = torch.empty((TOP_K, W2_K), dtype=torch.float16)
    QPN(out, inter, *cpu)
    gpu_out, gpu_inter = torch.empty_like(layer.out), torch.empty_like(layer.inter)
    QPN(
        gpu_out,
        gpu_inter,
        layer.x,
        layer.w13,
        layer.meta[compact][0],
        layer.w2,
        layer.meta[compact][1],
        layer.ids,
        layer.topk,
    )
    oracle = oracle_qpn_m1(*cpu, intermediate=gpu_inter.cpu())
    bounds = check_bounds(gpu_out.cpu(), oracle.out)
    return {
        "equal_to_cpu_op": torch.equal(out, gpu_out.cpu()) and torch.equal(inter, gpu_inter.cpu()),
        "oracle_bounds_passed": bounds.passed,
        "max_margin": bounds.max_abs_margin,
        "l2_margin": bounds.l2_margin,
        "oracle": oracle.out,
    }


def config_equals_op(layer: Layer, compact: bool, config: triton_qpn.QpnConfig) -> bool:
    """Whether `config`'s kernels give the op's outputs on `layer`, bit for bit (the op is
    checked against the CPU reference op and the oracle before)."""
    s13, s2 = layer.meta[compact]
    want_out, want_inter = torch.empty_like(layer.out), torch.empty_like(layer.inter)
    QPN(want_out, want_inter, layer.x, layer.w13, s13, layer.w2, s2, layer.ids, layer.topk)
    got_out = torch.full_like(layer.out, float("nan"))
    got_inter = torch.full_like(layer.inter, float("nan"))
    triton_qpn.launch_qpn_m1(
        got_out,
        got_inter,
        layer.x,
        layer.w13,
        s13,
        layer.w2,
        s2,
        layer.ids,
        layer.topk,
        compact=compact,
        config=config,
    )
    return torch.equal(got_out, want_out) and torch.equal(got_inter, want_inter)


@triton.jit
def _empty_kernel(ptr):
    pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--replays", type=int, default=5)
    parser.add_argument(
        "--configs",
        default=",".join(CONFIGS),
        help=f"comma-separated launch configs of {sorted(CONFIGS)}",
    )
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    parser.add_argument(
        "--compile-only",
        action="store_true",
        help="compile the --configs' kernels (--layouts) into Triton's cache and exit (run a "
        "few in parallel before a timed run to spread the compilations over the CPUs)",
    )
    parser.add_argument(
        "--layouts",
        default=",".join(LAYOUTS),
        help=f"comma-separated, of {sorted(LAYOUTS)}: the layouts compiled or timed (both are "
        "always checked)",
    )
    parser.add_argument(
        "--no-baselines", action="store_true", help="leave out (a) and (b) (quicker runs)"
    )
    parser.add_argument(
        "--profile-only",
        action="store_true",
        help="run each layout's op twice on one layer and exit (for a "
        "profiler: ncu --clock-control none -k 'regex:_w(13|2)_kernel' python ...)",
    )
    args = parser.parse_args(argv)
    if args.profile_only:
        layer = make_layer(0, torch.device("cuda"))
        for compact in (True, False):
            for _ in range(2):
                op_steps([layer], compact)()
        torch.cuda.synchronize()
        return 0
    if args.compile_only:
        layer = make_layer(0, torch.device("cuda"))
        for name in args.configs.split(","):
            for label in args.layouts.split(","):
                triton_steps([layer], LAYOUTS[label], CONFIGS[name])()
        torch.cuda.synchronize()
        return 0
    if args.samples < 9:
        parser.error("--samples must be at least 9")
    device = torch.device("cuda")
    props = torch.cuda.get_device_properties(device)
    figures: dict[str, object] = {
        "gpu": props.name,
        "sms": props.multi_processor_count,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "layers": LAYERS,
        "samples": args.samples,
    }
    print(
        f"{props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, "
        f"triton {triton.__version__}, CUDA {torch.version.cuda}",
        flush=True,
    )
    layers = [make_layer(1000 + i, device) for i in range(LAYERS)]
    torch.cuda.synchronize()

    checks = {}
    for compact in (True, False):
        label = "3-byte" if compact else "4-byte"
        for index in (0, LAYERS - 1):
            result = check_layer(layers[index], compact)
            result.pop("oracle")
            checks[f"{label} layer {index}"] = result
            print(f"check {label} layer {index}: {result}", flush=True)
    figures["checks"] = checks

    bandwidth = copy_bandwidth(device, args.samples)
    figures["copy_bandwidth_GBps"] = bandwidth / 1e9
    timings: dict[str, float] = {}
    for label in args.layouts.split(","):
        compact = LAYOUTS[label]
        timings[f"floor {label}"] = STEP_BYTES[compact] / bandwidth * 1e6
        timings[f"op {label}"] = time_graph(op_steps(layers, compact), args.samples, args.replays)
        print(f"op {label}: {timings[f'op {label}']:.2f} us", flush=True)
        for name in args.configs.split(","):
            config = CONFIGS[name]
            exact = config_equals_op(layers[0], compact, config)
            checks[f"{label} {name} equals the op"] = exact
            if not exact:
                print(f"{label} {name}: differs from the op's output, not timed", flush=True)
                continue
            for stage in ("both", "w13", "w2"):
                key = f"triton {label} {name} {stage}"
                try:
                    timings[key] = time_graph(
                        triton_steps(layers, compact, config, stage), args.samples, args.replays
                    )
                except Exception as exc:  # a config that fails to compile is reported
                    print(f"{key}: failed: {exc}", flush=True)
                    break
                print(
                    f"{key}: {timings[key]:.2f} us "
                    f"({STEP_BYTES[compact] / timings[key] / 1e3:.0f} GB/s whole step)"
                    if stage == "both"
                    else f"{key}: {timings[key]:.2f} us",
                    flush=True,
                )

    if args.no_baselines:
        return finish(args, figures, timings, bandwidth, checks)
    dummy = torch.empty(1, device=device)

    def empties() -> None:
        for _ in range(2 * LAYERS):
            _empty_kernel[(1,)](dummy)

    timings["two empty launches"] = time_graph(empties, args.samples, args.replays)

    shifts = torch.tensor(
        [4 * (i // 2 + 4 * (i % 2)) for i in range(8)], dtype=torch.int32, device=device
    ).reshape(1, 1, 8, 1, 1)
    for compact in (True, False):
        label = "3-byte" if compact else "4-byte"
        key = f"(a) torch {label}"

        def torch_steps(c: bool = compact) -> None:
            for layer in layers:
                torch_path(layer, c, shifts)

        timings[key] = time_graph(torch_steps, args.samples, args.replays)
        print(f"{key}: {timings[key]:.2f} us", flush=True)
        reference = check_layer(layers[0], compact)["oracle"]
        torch_path(layers[0], compact, shifts)
        figures[f"(a) bounds {label}"] = str(check_bounds(layers[0].out.cpu(), reference))
    fp16_banks = [
        (
            torch.randn((NUM_EXPERTS, W13_K, W13_N), device=device, dtype=torch.float16) * 0.01,
            torch.randn((NUM_EXPERTS, W2_K, W2_N), device=device, dtype=torch.float16) * 0.01,
        )
        for _ in range(LAYERS)
    ]

    def fp16_steps() -> None:
        for layer, banks in zip(layers, fp16_banks, strict=True):
            fp16_path(layer, banks)

    timings["(b) fp16 gather+bmm"] = time_graph(fp16_steps, args.samples, args.replays)
    print(f"(b): {timings['(b) fp16 gather+bmm']:.2f} us", flush=True)
    return finish(args, figures, timings, bandwidth, checks)


def finish(
    args: argparse.Namespace,
    figures: dict[str, object],
    timings: dict[str, float],
    bandwidth: float,
    checks: dict[str, object],
) -> int:
    """Print the table, write --json, and return 0 when every check passed (else 1)."""
    figures["timings_us"] = timings
    print("\n| variant | us per layer step |\n|---|---|")
    for key, value in timings.items():
        print(f"| {key} | {value:.2f} |")
    print(f"copy bandwidth {bandwidth / 1e9:.0f} GB/s")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    ok = all(
        c is True or (isinstance(c, dict) and c["equal_to_cpu_op"] and c["oracle_bounds_passed"])
        for c in checks.values()
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
