"""Time the AWQ QPN M1 step (Qwen3.8 TP4, M = 1, one layer) on a CUDA GPU.

Shapes of docs/contracts/core.md §6 (512 experts, K 2560, intermediate 160 per rank, 10 routes). 48
layers with distinct random weight banks (so no layer's weights sit in L2 from the layer before),
each layer its own input, ids and router weights; every variant is captured as one CUDA graph
of the 48 layer steps and timed over graph replays: per-layer time = replay time / 48,
median of --samples (>= 9) samples. Side by side, in the same run:

- triton: the routectl op's CUDA implementation (two Triton launches), 3-byte and 4-byte
  metadata, and the launch configs named by --configs;
- (a) torch from int4 banks, each variant printed and the fastest named: `issue-17` (the
  first sessions' path: from the prepared words, unpacked through a permute, records decoded
  and scales repeated on the hot path, strided gate/up slices); `bmm` as a careful torch user
  writes it (words repacked once, off the hot path, for the bmm: nibble i of word (k8, n) is
  k = 8 k8 + i, so the unpack is a broadcast shift; gate and up columns in two contiguous
  halves; scales and biases as FP16 tensors broadcast over their group; one bmm per stage and
  the router-weighted sum as one matrix product); `bmm-compiled` (the same under
  torch.compile); `fused-compiled` (the dots as multiply-and-sum under torch.compile, which
  fuses gather, unpack, dequantization and the dot into one kernel per stage);
- (b) FP16 weight banks (four times the bytes), likewise: `issue-17` (strided gate/up
  slices), `bmm` (banks laid out (E, K, N) for the bmm, gate and up halves contiguous),
  `bmm-nk` (banks (E, N, K), K contiguous, as nn.Linear keeps them), `bmm-compiled`,
  `fused-compiled`;
- (c) floor: the bytes one step must read (10 x (409,600 + 204,800 + metadata)) over the
  device-to-device copy bandwidth measured here (bytes read plus written) and over the
  read-only bandwidth measured here (a kernel that reads 1 GiB and writes one word a
  program).

The op's outputs on --check-layers layers (48: every one) are checked against the CPU
reference op (exactly) and the FP64 oracle (the seed's bounds); every timed graph's outputs
(its replays write all 48 layers' out and intermediate, poisoned with NaN after the capture)
must equal the op's eager outputs bit for bit; (a) and (b) are checked against the oracle's
bounds on layer 0 and reported. One command on any CUDA machine with Triton:

    python benchmarks/qpn_m1_gpu.py [--samples 15] [--check-layers 48] [--json FILE]

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
import triton.language as tl  # noqa: E402

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
    # Issue 36: W13 asks L2 for its words and metadata in bulk once it knows its expert
    # (`prefetch`), and for its route's W2 banks too (`prefetch-w2`); 200 programs of 4 warps;
    # without waiting for its activations.
    "prefetch": triton_qpn.QpnConfig(w13_prefetch=True),
    "prefetch-w2": triton_qpn.QpnConfig(w13_prefetch=True, w2_prefetch=True),
    "prefetch-p8w4": triton_qpn.QpnConfig(w13_prefetch=True, w13_pairs=8, w13_warps=4),
    "prefetch-no-x-first": triton_qpn.QpnConfig(w13_prefetch=True, w13_x_first=False),
    # W13's words loaded before its first multiply too (like its activations; 155 registers).
    "words-first": triton_qpn.QpnConfig(w13_words_first=True),
    # Other blocks with the prefetch: W13 400 programs of 2 warps, 800 of 1, 50 of 16; W2 80
    # programs of 8 warps, 320 of 2; W13's words first too; the second session's kernels.
    "prefetch-p4w2": triton_qpn.QpnConfig(w13_prefetch=True, w13_pairs=4, w13_warps=2),
    "prefetch-p2w1": triton_qpn.QpnConfig(w13_prefetch=True, w13_pairs=2, w13_warps=1),
    "prefetch-p32w16": triton_qpn.QpnConfig(w13_prefetch=True, w13_pairs=32, w13_warps=16),
    "prefetch-c32w8": triton_qpn.QpnConfig(w13_prefetch=True, w2_columns=32, w2_warps=8),
    "prefetch-c8w2": triton_qpn.QpnConfig(w13_prefetch=True, w2_columns=8, w2_warps=2),
    "prefetch-words-first": triton_qpn.QpnConfig(w13_prefetch=True, w13_words_first=True),
    "prefetch-previous": dataclasses.replace(PREVIOUS, w13_prefetch=True, w13_pdl=True),
    # Issue 36, fifth session: the decode with three shifts a word (the fourth session's
    # default; now one); W13's words first with its registers capped at 144 (so that a W2
    # program of 220 fits beside it) or beside W2 programs of 2 warps.
    "three-shift": triton_qpn.QpnConfig(one_shift_decode=False),
    "words-first-r144": triton_qpn.QpnConfig(w13_words_first=True, w13_maxnreg=144),
    "words-first-c8w2": triton_qpn.QpnConfig(w13_words_first=True, w2_columns=8, w2_warps=2),
    # W13's words in 2, 4 or 5 batches, each loaded before its first multiply.
    "w13-batches2": triton_qpn.QpnConfig(w13_word_batches=2),
    "w13-batches4": triton_qpn.QpnConfig(w13_word_batches=4),
    "w13-batches5": triton_qpn.QpnConfig(w13_word_batches=5),
    "w13-batches2-prefetch": triton_qpn.QpnConfig(w13_word_batches=2, w13_prefetch=True),
    # W13 not asking L2 for the ids and the input before its wait; W2 loading the router
    # weights after its chains; the fourth session's schedule (three shifts, weights last).
    "no-input-prefetch": triton_qpn.QpnConfig(w13_prefetch_inputs=False),
    # W13 not asking L2, before its wait, for the words and metadata of the expert the route's
    # id names then (a hint; the id is read again after the wait); asking, and again after it.
    "no-speculate": triton_qpn.QpnConfig(w13_speculate=False),
    "speculate-prefetch": triton_qpn.QpnConfig(w13_prefetch=True),
    "weights-last": triton_qpn.QpnConfig(w2_weights_first=False),
    "fourth-session": triton_qpn.QpnConfig(
        w13_prefetch_inputs=False,
        w2_weights_first=False,
        one_shift_decode=False,
        w13_speculate=False,
    ),
    # The GPU tests' other configs (tests/test_triton_gpu.py), timed too.
    "p4w2-c8w2": triton_qpn.QpnConfig(w13_pairs=4, w13_warps=2, w2_columns=8, w2_warps=2),
    "prefetch-words-first-w2": triton_qpn.QpnConfig(
        w13_prefetch=True, w2_prefetch=True, w13_words_first=True
    ),
    "batches-capped": triton_qpn.QpnConfig(w13_word_batches=2, w13_maxnreg=144),
    # Issue 36, sixth session: the 3-byte records read a byte at a time (the fifth session's
    # kernels); W2 reading the ids and router weights again after its wait and redoing its
    # chains where an id changed (`recheck`); always redoing them (the recheck's slow path);
    # W13 letting W2 launch only after its own wait (race-free by the order alone).
    "fifth-session": triton_qpn.QpnConfig(wide_metadata=False),
    "recheck": triton_qpn.QpnConfig(w2_recheck=True),
    "w2-redo": triton_qpn.QpnConfig(w2_recheck=True, w2_redo=True),
    "trigger-after-wait": triton_qpn.QpnConfig(w13_trigger_first=False),
    # W13 100 programs of 4 warps, each thread two pairs' four chains (one slice).
    "w13-p16w4": triton_qpn.QpnConfig(w13_warps=4),
    # Issue 36, seventh session: W2's route slots packed, 32 slots holding 3 column blocks' 10
    # routes each (30 of 32 slots a chain, instead of 10 of 16): 4 pairs a block and 107
    # programs of 4 warps, or 2 pairs and 214 programs of 2 warps; with other W13 blocks and
    # the race-free orders.
    "w2-pack4": triton_qpn.QpnConfig(w2_pack_pairs=4),
    "w2-pack2w2": triton_qpn.QpnConfig(w2_pack_pairs=2, w2_warps=2),
    # The same with one column a chain (8 columns a block, 256 threads; 4 columns, 128).
    "w2-pack4-unpaired": triton_qpn.QpnConfig(w2_pack_pairs=4, w2_paired=False, w2_warps=8),
    "w2-pack2-unpaired": triton_qpn.QpnConfig(w2_pack_pairs=2, w2_paired=False),
    # One column a chain, its weights widened to FP32 before the wait (4 columns a block).
    "w2-pack2-widen": triton_qpn.QpnConfig(w2_pack_pairs=2, w2_paired=False, w2_widen=True),
    "pack2-unpaired-trigger-after-wait": triton_qpn.QpnConfig(
        w2_pack_pairs=2, w2_paired=False, w13_trigger_first=False
    ),
    "pack4-w13-p8w4": triton_qpn.QpnConfig(w2_pack_pairs=4, w13_pairs=8, w13_warps=4),
    "pack4-trigger-after-wait": triton_qpn.QpnConfig(w2_pack_pairs=4, w13_trigger_first=False),
    "pack4-recheck": triton_qpn.QpnConfig(w2_pack_pairs=4, w2_recheck=True),
    # W13 one chain a thread (a column's, not a pair's two) with today's schedule: 200
    # programs of 8 warps (16 columns x 16 slices) or 100 of 16; with W2 of 2 warps.
    "w13-unpaired-p8w8": triton_qpn.QpnConfig(w13_gate_up=False, w13_pairs=8, w13_warps=8),
    "w13-unpaired-p16w16": triton_qpn.QpnConfig(w13_gate_up=False, w13_warps=16),
    "w13-unpaired-p8w8-c8w2": triton_qpn.QpnConfig(
        w13_gate_up=False, w13_pairs=8, w13_warps=8, w2_columns=8, w2_warps=2
    ),
    "w13-unpaired-p4w4": triton_qpn.QpnConfig(w13_gate_up=False, w13_pairs=4, w13_warps=4),
    # W13's speculation (before its wait) asking L2 for the route's W2 banks too.
    "w2-speculate": triton_qpn.QpnConfig(w2_speculate=True),
    "pack4-w2-speculate": triton_qpn.QpnConfig(w2_pack_pairs=4, w2_speculate=True),
    "pack2-unpaired-w2-speculate": triton_qpn.QpnConfig(
        w2_pack_pairs=2, w2_paired=False, w2_speculate=True
    ),
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


def time_graph(
    steps: Callable[[], None],
    samples: int,
    replays: int,
    before: Callable[[], None] | None = None,
) -> float:
    """Median microseconds per layer step over graph replays of the 48 steps. `before` runs
    after the capture and before the replays (to poison the outputs they must write)."""
    steps()  # warm-up: compiles, and allocates what eager ops need before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        steps()
    if before is not None:
        before()
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


@dataclass
class Int4Banks:
    """One layer's int4 banks as a careful torch user lays them out for the bmm (built once,
    off the hot path): words (E, K/8, N) int32, nibble i of word (k8, n) holding k = 8 k8 + i;
    W13's columns reordered to gate (the prepared even columns) then up (the odd ones);
    scales and biases FP16 (E, K/g, 1, N), broadcast over their group."""

    w13: torch.Tensor
    s13: torch.Tensor
    b13: torch.Tensor
    w2: torch.Tensor
    s2: torch.Tensor
    b2: torch.Tensor


GATE_UP_ORDER = torch.cat([torch.arange(0, W13_N, 2), torch.arange(1, W13_N, 2)])


def int4_banks(layer: Layer) -> Int4Banks:
    """The layer's logical weights (its prepared 4-byte banks) in Int4Banks' layout."""
    stages = []
    for words, meta, k, n in (
        (layer.w13, layer.meta[False][0], W13_K, W13_N),
        (layer.w2, layer.meta[False][1], W2_K, W2_N),
    ):
        order = GATE_UP_ORDER.to(words.device) if n == W13_N else None
        scales, biases = numerics.decode_metadata(meta, False)
        packed = torch.empty((NUM_EXPERTS, k // 8, n), dtype=torch.int32, device=words.device)
        for first in range(0, NUM_EXPERTS, 64):  # the codes of 64 experts at a time
            codes = numerics.unpack_prepared_words(words[first : first + 64], k, n)
            if order is not None:
                codes = codes[..., order]
            nibbles = codes.reshape(-1, k // 8, 8, n).to(torch.int64)
            word = (nibbles << (4 * torch.arange(8, device=words.device)).reshape(1, 1, 8, 1)).sum(
                2
            )
            packed[first : first + 64] = torch.where(word >= 2**31, word - 2**32, word).to(
                torch.int32
            )
        if order is not None:
            scales, biases = scales[..., order], biases[..., order]
        stages.append((packed, scales.unsqueeze(2).contiguous(), biases.unsqueeze(2).contiguous()))
    (w13, s13, b13), (w2, s2, b2) = stages
    return Int4Banks(w13, s13, b13, w2, s2, b2)


NIBBLE_SHIFTS: dict[torch.device, torch.Tensor] = {}


def _dequantized(
    words: torch.Tensor, scales: torch.Tensor, biases: torch.Tensor, ids: torch.Tensor
) -> torch.Tensor:
    """The routes' FP16 weights (10, K, N) from Int4Banks tensors: gather, shift, dequantize."""
    device = words.device
    if device not in NIBBLE_SHIFTS:
        NIBBLE_SHIFTS[device] = (4 * torch.arange(8, dtype=torch.int32, device=device)).reshape(
            1, 1, 8, 1
        )
    picked = words.index_select(0, ids)  # (10, K/8, N)
    k, n = picked.shape[1] * 8, picked.shape[2]
    codes = ((picked.unsqueeze(2) >> NIBBLE_SHIFTS[device]) & 0xF).reshape(
        TOP_K, k // GROUP_SIZE, GROUP_SIZE, n
    )
    weights = torch.addcmul(biases.index_select(0, ids), codes.half(), scales.index_select(0, ids))
    return weights.reshape(TOP_K, k, n)


def int4_bmm(layer: Layer, banks: Int4Banks) -> torch.Tensor:
    """(a) `bmm`: gather, unpack, dequantize, bmm, SwiGLU on contiguous halves, bmm, one
    matrix product for the router-weighted sum."""
    ids = layer.ids.reshape(-1)
    columns = torch.bmm(
        layer.x.expand(TOP_K, 1, W13_K), _dequantized(banks.w13, banks.s13, banks.b13, ids)
    )
    inter = F.silu(columns[..., :W2_K]) * columns[..., W2_K:]
    routes = torch.bmm(inter, _dequantized(banks.w2, banks.s2, banks.b2, ids))
    return torch.mm(layer.topk, routes.reshape(TOP_K, W2_N).float()).half()


def int4_fused(layer: Layer, banks: Int4Banks) -> torch.Tensor:
    """(a) `fused`: as int4_bmm with each dot a multiply and an FP32 sum over K, which
    torch.compile fuses with the gather, unpack and dequantization (weights read once)."""
    ids = layer.ids.reshape(-1)
    w13 = _dequantized(banks.w13, banks.s13, banks.b13, ids)
    columns = (w13 * layer.x.reshape(1, W13_K, 1)).sum(1, dtype=torch.float32)
    inter = (F.silu(columns[:, :W2_K]) * columns[:, W2_K:]).half()
    w2 = _dequantized(banks.w2, banks.s2, banks.b2, ids)
    routes = (w2 * inter.reshape(TOP_K, W2_K, 1)).sum(1, dtype=torch.float32).half()
    return torch.mm(layer.topk, routes.float()).half()


def fp16_bmm(layer: Layer, banks: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """(b) `bmm`: banks (E, K, N), gate and up halves contiguous; gather and bmm."""
    ids = layer.ids.reshape(-1)
    w13, w2 = banks
    columns = torch.bmm(layer.x.expand(TOP_K, 1, W13_K), w13.index_select(0, ids))
    inter = F.silu(columns[..., :W2_K]) * columns[..., W2_K:]
    routes = torch.bmm(inter, w2.index_select(0, ids))
    return torch.mm(layer.topk, routes.reshape(TOP_K, W2_N).float()).half()


def fp16_bmm_nk(layer: Layer, banks: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """(b) `bmm-nk`: banks (E, N, K) (K contiguous, as nn.Linear holds its weight)."""
    ids = layer.ids.reshape(-1)
    w13, w2 = banks
    columns = torch.bmm(layer.x.expand(TOP_K, 1, W13_K), w13.index_select(0, ids).transpose(1, 2))
    inter = F.silu(columns[..., :W2_K]) * columns[..., W2_K:]
    routes = torch.bmm(inter, w2.index_select(0, ids).transpose(1, 2))
    return torch.mm(layer.topk, routes.reshape(TOP_K, W2_N).float()).half()


def fp16_fused(layer: Layer, banks: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """(b) `fused`: banks (E, N, K); each dot a multiply and an FP32 sum over K (for
    torch.compile, which reads the routes' rows in place instead of gathering them)."""
    ids = layer.ids.reshape(-1)
    w13, w2 = banks
    columns = (w13[ids] * layer.x.reshape(1, 1, W13_K)).sum(2, dtype=torch.float32)
    inter = (F.silu(columns[:, :W2_K]) * columns[:, W2_K:]).half()
    routes = (w2[ids] * inter.reshape(TOP_K, 1, W2_K)).sum(2, dtype=torch.float32).half()
    return torch.mm(layer.topk, routes.float()).half()


@triton.jit
def _read_kernel(src, dst, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    """Reads STEPS blocks of BLOCK int32 from `src` (program p's run of STEPS * BLOCK) and
    writes one word: the read-only bandwidth."""
    start = tl.program_id(0) * (STEPS * BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    for i in range(STEPS):
        offsets = start + i * BLOCK + tl.arange(0, BLOCK)
        acc ^= tl.load(src + offsets, mask=offsets < n, other=0)
    tl.store(dst + tl.program_id(0), tl.reduce(acc, 0, _xor))


@triton.jit
def _xor(a, b):
    return a ^ b


def read_bandwidth(device: torch.device, samples: int) -> float:
    """Read-only bandwidth in bytes/s: _read_kernel over 1 GiB."""
    n = 1 << 28
    src = torch.empty(n, dtype=torch.int32, device=device).random_()
    block, steps = 2048, 16
    programs = triton.cdiv(n, block * steps)
    dst = torch.empty(programs, dtype=torch.int32, device=device)
    _read_kernel[(programs,)](src, dst, n, BLOCK=block, STEPS=steps, num_warps=8)
    times = []
    for _ in range(samples):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        _read_kernel[(programs,)](src, dst, n, BLOCK=block, STEPS=steps, num_warps=8)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return 4 * n / statistics.median(times)


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


def op_outputs(layers: list[Layer], compact: bool) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The op's (out, intermediate) on every layer, called eagerly (outside any graph)."""
    results = []
    for layer in layers:
        out, inter = torch.empty_like(layer.out), torch.empty_like(layer.inter)
        s13, s2 = layer.meta[compact]
        QPN(out, inter, layer.x, layer.w13, s13, layer.w2, s2, layer.ids, layer.topk)
        results.append((out, inter))
    return results


def same_outputs(layers: list[Layer], want: list[tuple[torch.Tensor, torch.Tensor]]) -> bool:
    """Whether every layer's out and intermediate equal `want`'s, bit for bit."""
    return all(
        torch.equal(layer.out, out) and torch.equal(layer.inter, inter)
        for layer, (out, inter) in zip(layers, want, strict=True)
    )


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
        "--no-compile", action="store_true", help="leave out the torch.compile baselines"
    )
    parser.add_argument(
        "--no-kernels", action="store_true", help="time the baselines and floors only"
    )
    parser.add_argument(
        "--check-layers",
        type=int,
        default=2,
        help="layers whose op outputs are compared with the CPU op (spread over the 48; "
        "every timed output is compared with the op's eager outputs on every layer)",
    )
    parser.add_argument(
        "--profile-only",
        action="store_true",
        help="run each layout's (--layouts) op and the --configs other than the default "
        "twice on one layer and exit (for a profiler: ncu --clock-control none -k "
        "'regex:_w(13|2)_kernel' python ...)",
    )
    args = parser.parse_args(argv)
    if args.profile_only:
        layer = make_layer(0, torch.device("cuda"))
        for compact in (LAYOUTS[label] for label in args.layouts.split(",")):
            for _ in range(2):
                op_steps([layer], compact)()
            for name in args.configs.split(","):
                if name != "default":
                    for _ in range(2):
                        triton_steps([layer], compact, CONFIGS[name])()
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

    checks: dict[str, object] = {}
    spread = sorted(
        {round(i * (LAYERS - 1) / max(args.check_layers - 1, 1)) for i in range(args.check_layers)}
    )
    for compact in (True, False):
        label = "3-byte" if compact else "4-byte"
        for index in spread:
            result = check_layer(layers[index], compact)
            result.pop("oracle")
            checks[f"{label} layer {index}"] = result
            print(f"check {label} layer {index}: {result}", flush=True)
    figures["checks"] = checks
    # The op's eager outputs on every layer: every timed graph's outputs must equal them.
    eager = {compact: op_outputs(layers, compact) for compact in (True, False)}

    bandwidth = copy_bandwidth(device, args.samples)
    read = read_bandwidth(device, args.samples)
    figures["copy_bandwidth_GBps"] = bandwidth / 1e9
    figures["read_bandwidth_GBps"] = read / 1e9
    print(f"copy bandwidth {bandwidth / 1e9:.0f} GB/s, read-only {read / 1e9:.0f} GB/s", flush=True)
    timings: dict[str, float] = {}
    for label in args.layouts.split(","):
        compact = LAYOUTS[label]
        timings[f"floor {label} (copy bandwidth)"] = STEP_BYTES[compact] / bandwidth * 1e6
        timings[f"floor {label} (read bandwidth)"] = STEP_BYTES[compact] / read * 1e6
        if args.no_kernels:
            continue

        def poison() -> None:
            for layer in layers:
                layer.out.fill_(float("nan"))
                layer.inter.fill_(float("nan"))

        timings[f"op {label}"] = time_graph(
            op_steps(layers, compact), args.samples, args.replays, poison
        )
        checks[f"{label} op timed outputs equal the op's eager ones"] = same_outputs(
            layers, eager[compact]
        )
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
                        triton_steps(layers, compact, config, stage),
                        args.samples,
                        args.replays,
                        poison if stage == "both" else None,
                    )
                except Exception as exc:  # a config that fails to compile is reported
                    print(f"{key}: failed: {exc}", flush=True)
                    break
                if stage == "both":
                    equal = same_outputs(layers, eager[compact])
                    checks[f"{label} {name} timed outputs equal the op's eager ones"] = equal
                print(
                    f"{key}: {timings[key]:.2f} us "
                    f"({STEP_BYTES[compact] / timings[key] / 1e3:.0f} GB/s whole step"
                    f"{'' if equal else ', OUTPUTS DIFFER'})"
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

    baselines(args, layers, figures, timings, device)
    return finish(args, figures, timings, bandwidth, checks)


FP16_BANKS = 8  # distinct FP16 banks, used in turn by the 48 layers (each step reads 24.6 MB)


def baselines(
    args: argparse.Namespace,
    layers: list[Layer],
    figures: dict[str, object],
    timings: dict[str, float],
    device: torch.device,
) -> None:
    """Time every (a) and (b) variant (module docstring), check each against the oracle's
    bounds on layer 0, and name the fastest of each."""
    shifts = torch.tensor(
        [4 * (i // 2 + 4 * (i % 2)) for i in range(8)], dtype=torch.int32, device=device
    ).reshape(1, 1, 8, 1, 1)
    int4 = [int4_banks(layer) for layer in layers]
    kn = []
    for _ in range(FP16_BANKS):
        kn.append(
            (
                torch.randn((NUM_EXPERTS, W13_K, W13_N), device=device, dtype=torch.float16) * 0.01,
                torch.randn((NUM_EXPERTS, W2_K, W2_N), device=device, dtype=torch.float16) * 0.01,
            )
        )
    nk = [(a.transpose(1, 2).contiguous(), b.transpose(1, 2).contiguous()) for a, b in kn]
    compiled: dict[str, Callable[..., torch.Tensor]] = {}
    if not args.no_compile:
        compiled = {
            "int4 bmm": torch.compile(int4_bmm, fullgraph=True, dynamic=False),
            "int4 fused": torch.compile(int4_fused, fullgraph=True, dynamic=False),
            "fp16 bmm": torch.compile(fp16_bmm, fullgraph=True, dynamic=False),
            "fp16 fused": torch.compile(fp16_fused, fullgraph=True, dynamic=False),
        }
    oracle3 = check_layer(layers[0], True)["oracle"]
    variants: dict[str, Callable[[int], torch.Tensor]] = {
        "(a) issue-17 3-byte": lambda i: torch_path(layers[i], True, shifts),
        "(a) issue-17 4-byte": lambda i: torch_path(layers[i], False, shifts),
        "(a) bmm": lambda i: int4_bmm(layers[i], int4[i]),
        "(b) issue-17": lambda i: fp16_path(layers[i], kn[i % FP16_BANKS]),
        "(b) bmm": lambda i: fp16_bmm(layers[i], kn[i % FP16_BANKS]),
        "(b) bmm-nk": lambda i: fp16_bmm_nk(layers[i], nk[i % FP16_BANKS]),
    }
    if compiled:
        variants.update(
            {
                "(a) bmm-compiled": lambda i: compiled["int4 bmm"](layers[i], int4[i]),
                "(a) fused-compiled": lambda i: compiled["int4 fused"](layers[i], int4[i]),
                "(b) bmm-compiled": lambda i: compiled["fp16 bmm"](layers[i], kn[i % FP16_BANKS]),
                "(b) fused-compiled": lambda i: compiled["fp16 fused"](
                    layers[i], nk[i % FP16_BANKS]
                ),
            }
        )
    for key, variant in variants.items():
        if key.startswith("(a)"):
            got = variant(0).reshape(-1).cpu()
            figures[f"{key} bounds"] = str(check_bounds(got, oracle3))

        def steps(v: Callable[[int], torch.Tensor] = variant) -> None:
            for i in range(LAYERS):
                v(i)

        try:
            timings[key] = time_graph(steps, args.samples, args.replays)
        except Exception as exc:  # a variant torch cannot compile or capture is reported
            print(f"{key}: failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            continue
        print(f"{key}: {timings[key]:.2f} us", flush=True)
    for family in ("(a)", "(b)"):
        times = {k: v for k, v in timings.items() if k.startswith(family)}
        if times:
            best = min(times, key=times.__getitem__)
            figures[f"strongest {family}"] = best
            print(f"strongest {family}: {best} ({times[best]:.2f} us)", flush=True)


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
    ratios = {}
    for label in LAYOUTS:
        op = timings.get(f"op {label}")
        if op is None:
            continue
        for floor in ("copy", "read"):
            ratios[f"op {label} / floor ({floor} bandwidth)"] = (
                op / timings[f"floor {label} ({floor} bandwidth)"]
            )
        for family in ("(a)", "(b)"):
            best = figures.get(f"strongest {family}")
            if isinstance(best, str):
                ratios[f"strongest {family} {best} / op {label}"] = timings[best] / op
    figures["ratios"] = ratios
    for key, value in ratios.items():
        print(f"{key}: {value:.2f}x")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    ok = all(
        c is True or (isinstance(c, dict) and c["equal_to_cpu_op"] and c["oracle_bounds_passed"])
        for c in checks.values()
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
