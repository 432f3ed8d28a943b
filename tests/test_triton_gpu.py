"""The CUDA (Triton) implementation of the routectl reference ops, on a GPU, at the contract's
shapes: the oracle tests (FP64 reference and the seed's bounds, one-hot acceptance), equality
with the CPU reference op, both layouts, invalid and duplicate ids, adversarial scales, all
512 experts, determinism, no device synchronisation and CUDA-graph capture.

Marked `gpu`, which the default run deselects. On a CUDA machine with Triton:

    python -m pytest -m gpu tests/test_triton_gpu.py
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal

import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc

import native.reference  # noqa: F401  (registers the ops)
from native.awq_schemas import GROUP_SIZE, NUM_EXPERTS, W2_K, W2_N, W13_K, W13_N
from native.reference import triton_qpn
from native.reference.oracle import check_bounds, oracle_qpn_m1
from native.reference.packing import pack_checkpoint, random_expert
from tests import test_mut_triton_rounding as rounding
from tests.qpn_triton_helpers import (
    balanced_weights,
    build_banks,
    expected_routes,
    expected_step,
    guarded,
    spilled,
    with_free_biases,
)

pytestmark = pytest.mark.gpu

QPN = torch.ops.routectl.awq_moe_qpn_m1_sm70_out
CUDA = torch.device("cuda")
SEED_IDS = [511, 0, 257, 1, 511, 1, 0, 257, 0, 511]
MIXED_IDS = [257, -1, 0, 511, 512, 1, 257, 3, -7, 100]
ONE_HOT_K = (0, 31, 32, 2559)
Banks = dict[bool, tuple[torch.Tensor, ...]]


def full_banks(seed: int) -> Banks:
    """Every one of the 512 experts random (prepared words are any int32; scales and zeros
    as the seed's test draws them), both layouts of the same logical weights."""
    gen = torch.Generator().manual_seed(seed)
    banks: Banks = {}
    stages = []
    for k, n in ((W13_K, W13_N), (W2_K, W2_N)):
        words = torch.randint(
            -(2**31), 2**31, (NUM_EXPERTS, k, n // 8), generator=gen, dtype=torch.int64
        ).to(torch.int32)
        groups = (NUM_EXPERTS, k // GROUP_SIZE, n)
        scales = (torch.rand(groups, generator=gen) * 0.01 + 0.001).half()
        zeros = torch.randint(0, 16, groups, generator=gen, dtype=torch.int32)
        stages.append((words, scales, zeros))
    from native.reference.numerics import encode_metadata

    for compact in (False, True):
        banks[compact] = tuple(
            t
            for words, scales, zeros in stages
            for t in (words, encode_metadata(scales, zeros, compact))
        )
    return banks


@pytest.fixture(scope="module")
def random_banks() -> Banks:
    return full_banks(23)


@pytest.fixture(scope="module")
def seed_banks() -> Banks:
    """The seed's experts 0, 1, 257, 511 (3 adversarial) packed from logical weights."""
    small = build_banks(4, W13_K, W13_N, W2_K, W2_N, GROUP_SIZE, seed=7, adversarial=(3,))
    slots = torch.tensor([0, 1, 257, 511])
    banks: Banks = {}
    for compact, tensors in small.items():
        full = []
        for t in tensors:
            bank = torch.zeros((NUM_EXPERTS, *t.shape[1:]), dtype=t.dtype)
            bank[slots] = t
            full.append(bank)
        banks[compact] = tuple(full)
    return banks


def on(device: torch.device, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(t.to(device) for t in tensors)


def call(
    banks: tuple[torch.Tensor, ...],
    x: torch.Tensor,
    ids: list[int],
    topk: torch.Tensor,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    out = torch.full((1, 2560), float("nan"), dtype=torch.float16, device=device)
    inter = torch.full((10, 160), float("nan"), dtype=torch.float16, device=device)
    QPN(
        out,
        inter,
        *on(device, x),
        *on(device, *banks),
        *on(device, torch.tensor([ids], dtype=torch.int32), topk),
    )
    return out.cpu(), inter.cpu()


def inputs(seed: int, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return (
        (torch.randn((1, 2560), generator=gen) * scale).half(),
        torch.rand((1, 10), generator=gen),
    )


@pytest.fixture(scope="module")
def gpu_banks(random_banks: Banks) -> Banks:
    return {compact: on(CUDA, *t) for compact, t in random_banks.items()}


@pytest.mark.parametrize("compact", [False, True], ids=["4-byte", "3-byte"])
@pytest.mark.parametrize("ids", [SEED_IDS, MIXED_IDS], ids=["seed-ids", "invalid-and-dupes"])
def test_random_equal_cpu_op_and_within_oracle_bounds(
    random_banks: Banks, compact: bool, ids: list[int]
) -> None:
    x, topk = inputs(1)
    banks = random_banks[compact]
    out, inter = call(banks, x, ids, topk, CUDA)
    cpu_out, cpu_inter = call(banks, x, ids, topk, torch.device("cpu"))
    assert torch.equal(inter, cpu_inter) and torch.equal(out, cpu_out)
    oracle = oracle_qpn_m1(
        x, *banks, torch.tensor([ids], dtype=torch.int32), topk, intermediate=inter
    )
    check = check_bounds(out, oracle.out)
    assert check.passed, check
    for r, e in enumerate(ids):
        if not 0 <= e < NUM_EXPERTS:
            assert not inter[r].any()


@pytest.mark.parametrize("compact", [False, True], ids=["4-byte", "3-byte"])
@pytest.mark.parametrize("k", ONE_HOT_K)
def test_one_hot_seed_acceptance(seed_banks: Banks, compact: bool, k: int) -> None:
    x = torch.zeros((1, 2560), dtype=torch.float16)
    x[0, k] = 1
    topk = torch.linspace(0.05, 0.5, 10).reshape(1, 10)
    banks = seed_banks[compact]
    out, inter = call(banks, x, SEED_IDS, topk, CUDA)
    oracle = oracle_qpn_m1(
        x, *banks, torch.tensor([SEED_IDS], dtype=torch.int32), topk, intermediate=inter
    )
    assert torch.equal(inter, oracle.intermediate)
    assert check_bounds(out, oracle.out).passed


@pytest.mark.parametrize("compact", [False, True], ids=["4-byte", "3-byte"])
def test_adversarial_scales_equal_cpu_op(seed_banks: Banks, compact: bool) -> None:
    banks = seed_banks[compact]
    if not compact:
        w13, s13, w2, s2 = banks
        banks = (w13, with_free_biases(s13, 257, seed=4), w2, s2)
    x, topk = inputs(2, scale=0.05)
    ids = [511, 257, 511, 0, 1, -1, 511, 257, 1, 0]
    got = call(banks, x, ids, topk, CUDA)
    want = call(banks, x, ids, topk, torch.device("cpu"))
    assert torch.equal(got[1], want[1]) and torch.equal(got[0], want[0])


def test_all_512_experts_reachable_and_layouts_identical(
    random_banks: Banks, gpu_banks: Banks
) -> None:
    x, topk = inputs(3)
    order = torch.randperm(NUM_EXPERTS, generator=torch.Generator().manual_seed(0)).tolist()
    order += order[:8]  # 520 = 52 calls of 10
    for start in range(0, len(order), 10):
        ids = order[start : start + 10]
        three = call(gpu_banks[True], x, ids, topk, CUDA)
        four = call(gpu_banks[False], x, ids, topk, CUDA)
        assert torch.equal(three[0], four[0]) and torch.equal(three[1], four[1])
        if start % 130 == 0:  # the CPU op is slow: compare a spread of the calls
            cpu = call(random_banks[True], x, ids, topk, torch.device("cpu"))
            assert torch.equal(three[0], cpu[0]) and torch.equal(three[1], cpu[1])
        assert three[1].abs().amax(dim=1).gt(0).all()


def _static_call(gpu_banks: Banks) -> tuple[Callable[[], None], dict[str, torch.Tensor]]:
    x, topk = inputs(4)
    static = {
        "out": torch.empty((1, 2560), dtype=torch.float16, device=CUDA),
        "inter": torch.empty((10, 160), dtype=torch.float16, device=CUDA),
        "x": x.to(CUDA),
        "ids": torch.tensor([SEED_IDS], dtype=torch.int32, device=CUDA),
        "topk": topk.to(CUDA),
    }

    def step() -> None:
        QPN(
            static["out"],
            static["inter"],
            static["x"],
            *gpu_banks[True],
            static["ids"],
            static["topk"],
        )

    return step, static


def test_deterministic_no_sync_and_graph_capturable(gpu_banks: Banks) -> None:
    step, static = _static_call(gpu_banks)
    step()  # compiles the kernels
    torch.cuda.synchronize()
    first = static["out"].clone(), static["inter"].clone()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(5):
            step()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(static["out"], first[0]) and torch.equal(static["inter"], first[1])

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    x, topk = inputs(5)
    ids = [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
    static["x"].copy_(x.to(CUDA))
    static["topk"].copy_(topk.to(CUDA))
    static["ids"].copy_(torch.tensor([ids], dtype=torch.int32))
    static["out"].fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    eager = call(gpu_banks[True], x, ids, topk, CUDA)
    assert torch.equal(static["out"].cpu(), eager[0])
    assert torch.equal(static["inter"].cpu(), eager[1])


def test_back_to_back_steps_share_the_intermediate(gpu_banks: Banks) -> None:
    """Steps enqueued back to back with one intermediate buffer (as the layers of a model): W13
    is launched with programmatic dependent launch and must not overwrite the intermediate
    the previous step's W2 still reads, nor read ids and input before they are written."""
    steps = []
    for seed in range(8):
        x, topk = inputs(10 + seed)
        gen = torch.Generator().manual_seed(seed)
        ids = torch.randint(-1, NUM_EXPERTS, (10,), generator=gen).tolist()
        steps.append((x, topk, ids, seed % 2 == 0))
    want = [call(gpu_banks[compact], x, ids, topk, CUDA) for x, topk, ids, compact in steps]
    inter = torch.full((10, 160), float("nan"), dtype=torch.float16, device=CUDA)
    ids_buffer = torch.empty((1, 10), dtype=torch.int32, device=CUDA)
    x_buffer = torch.empty((1, 2560), dtype=torch.float16, device=CUDA)
    outs = []
    torch.cuda.synchronize()
    for x, topk, ids, compact in steps:
        # Written by copies just before each step, as a preceding kernel would write them.
        ids_buffer.copy_(torch.tensor([ids], dtype=torch.int32), non_blocking=True)
        x_buffer.copy_(x, non_blocking=True)
        out = torch.full((1, 2560), float("nan"), dtype=torch.float16, device=CUDA)
        QPN(out, inter, x_buffer, *gpu_banks[compact], ids_buffer, topk.to(CUDA))
        outs.append(out)
    torch.cuda.synchronize()
    for out, (want_out, _) in zip(outs, want, strict=True):
        assert torch.equal(out.cpu(), want_out)
    assert torch.equal(inter.cpu(), want[-1][1])


@triton.jit
def _copy(dst_ptr, src_ptr, n, BLOCK: tl.constexpr):
    for start in range(0, n, BLOCK):
        at = start + tl.arange(0, BLOCK)
        tl.store(dst_ptr + at, tl.load(src_ptr + at, mask=at < n), mask=at < n)


@triton.jit
def _late_writer(
    spin_ptr, spins, dst0, src0, n0, dst1, src1, n1, dst2, src2, n2, BLOCK: tl.constexpr
):
    """A kernel that lets the next kernel launch at once and writes what that kernel reads
    (each src copied to its dst, n int32 words) only after a long dependent chain: legal
    under programmatic dependent launch, where the next kernel waits for this grid before it
    reads them. The stand-in for a router that writes the ids late (before W13), or for a
    W13 whose last program writes the intermediate late (before W2)."""
    gdc.gdc_launch_dependents()
    acc = tl.load(spin_ptr)
    for _ in range(spins):
        acc = acc * 0.999 + 0.001
    tl.store(spin_ptr, acc)
    _copy(dst0, src0, n0, BLOCK)
    _copy(dst1, src1, n1, BLOCK)
    _copy(dst2, src2, n2, BLOCK)


@triton.jit
def _early_reader(dst_ptr, src_ptr, n, BLOCK: tl.constexpr):
    """Copies src to dst with no grid-dependency wait: launched with programmatic dependent
    launch after _late_writer, it reads what a kernel that lost its wait would read."""
    _copy(dst_ptr, src_ptr, n, BLOCK)


# Milliseconds of dependent FMAs, against microseconds for a launch: the kernel after the
# writer starts and reads long before the writer writes (a tenth of this once failed that
# premise on the H200 with 16 processes sharing the GPU).
LATE_SPINS = 10_000_000


def late_write(*copies: tuple[torch.Tensor, torch.Tensor], spins: int = LATE_SPINS) -> None:
    """Enqueues _late_writer copying each (src, dst) pair (up to three, as int32 words)."""
    args: list[object] = []
    for src, dst in copies:
        args += [
            dst.view(torch.int32),
            src.view(torch.int32),
            dst.numel() * dst.element_size() // 4,
        ]
    unused = torch.zeros(1, dtype=torch.int32, device=CUDA)
    args += [unused, unused, 0] * (3 - len(copies))
    _late_writer[(1,)](torch.ones(1, device=CUDA), spins, *args, BLOCK=1024)


def assert_the_next_kernel_reads_before_the_late_write() -> None:
    """The premise of the late-writer tests, checked where they run: a kernel launched with
    programmatic dependent launch after _late_writer and reading without a wait sees what
    was there before the write (else a missing wait would read the final data and pass).
    Also compiles both kernels, so that no compile delays a later launch."""
    before = torch.zeros(4096, dtype=torch.int32, device=CUDA)
    after = torch.arange(1, 4097, dtype=torch.int32, device=CUDA)
    seen = torch.full_like(before, -1)
    late_write((after, before), spins=0)
    _early_reader[(1,)](seen, before, 4096, BLOCK=1024, launch_pdl=True)
    before.zero_()
    torch.cuda.synchronize()
    late_write((after, before))
    _early_reader[(1,)](seen, before, 4096, BLOCK=1024, launch_pdl=True)
    torch.cuda.synchronize()
    assert torch.equal(before, after), "the late write did not happen"
    assert not seen.any(), "the next kernel did not start before the late write"


# The previous step's ids in the late-writer tests: all valid, none of MIXED_IDS.
OLD_IDS = [3, 9, 27, 81, 243, 5, 25, 125, 7, 49]

LATE_ROUTER_CONFIGS = {
    "default": triton_qpn.DEFAULT_CONFIG,
    "recheck": triton_qpn.QpnConfig(w2_recheck=True),
    "trigger-after-wait": triton_qpn.QpnConfig(w13_trigger_first=False),
}


@pytest.mark.parametrize("name", sorted(LATE_ROUTER_CONFIGS))
@pytest.mark.parametrize("compact", [False, True], ids=["4-byte", "3-byte"])
def test_step_after_a_router_that_writes_the_ids_late(
    gpu_banks: Banks, compact: bool, name: str
) -> None:
    """A router that lets W13 launch early and writes the ids, router weights and input at
    its end: W13 must wait for it before it reads them, so the intermediate is the new
    step's. `recheck` and `trigger-after-wait` make W2 safe after such a router too (the
    output is the new step's). The default is not (launch_qpn_m1's condition on the kernel
    before the step): its W13 lets W2 launch before its own wait, and W2 reads the ids and
    router weights before its wait, which covers W13 only; on the H200 its output was the
    old ids' once the step was compiled before the router ran (benchmarks/mutation/
    triton.md, twelfth session), so only its intermediate is checked."""
    config = LATE_ROUTER_CONFIGS[name]
    old_x, old_topk = inputs(11)
    new_x, new_topk = inputs(12)
    old_ids = OLD_IDS
    new_ids = MIXED_IDS
    want_out, want_inter = call(gpu_banks[compact], new_x, new_ids, new_topk, CUDA)
    ids, topk, x = on(CUDA, torch.tensor([old_ids], dtype=torch.int32), old_topk, old_x)
    fresh = on(CUDA, torch.tensor([new_ids], dtype=torch.int32), new_topk, new_x)
    out = torch.full((1, 2560), float("nan"), dtype=torch.float16, device=CUDA)
    inter = torch.full((10, 160), float("nan"), dtype=torch.float16, device=CUDA)

    def step() -> None:
        triton_qpn.launch_qpn_m1(
            out, inter, x, *gpu_banks[compact], ids, topk, compact=compact, config=config
        )

    # Compiled first: a step compiled after the router is enqueued starts seconds later,
    # long after the router has written (how this test once let W13 without its wait pass).
    step()
    assert_the_next_kernel_reads_before_the_late_write()
    out.fill_(float("nan"))
    inter.fill_(float("nan"))
    torch.cuda.synchronize()
    late_write(*zip(fresh, (ids, topk, x), strict=True))
    step()
    torch.cuda.synchronize()
    assert torch.equal(ids.cpu(), fresh[0].cpu())
    assert torch.equal(inter.cpu(), want_inter)
    if name != "default":
        assert torch.equal(out.cpu(), want_out)


# W2 launched after a kernel that writes the intermediate at its end: each of W2's waits
# (after the decode, after the widened decode, before the decode) and what is read after
# them (the activations; with the recheck, the ids and router weights too).
LATE_INTERMEDIATE_CONFIGS = {
    "default": triton_qpn.DEFAULT_CONFIG,
    "widen": triton_qpn.QpnConfig(w2_pack_pairs=2, w2_paired=False, w2_widen=True),
    "decode-after-wait": triton_qpn.QpnConfig(w2_predecode=False),
    "recheck": triton_qpn.QpnConfig(w2_recheck=True),
    "widen-recheck": triton_qpn.QpnConfig(
        w2_pack_pairs=2, w2_paired=False, w2_widen=True, w2_recheck=True
    ),
    "decode-after-wait-recheck": triton_qpn.QpnConfig(w2_predecode=False, w2_recheck=True),
}


@pytest.mark.parametrize("name", sorted(LATE_INTERMEDIATE_CONFIGS))
def test_w2_after_a_kernel_that_writes_the_intermediate_late(gpu_banks: Banks, name: str) -> None:
    """W2 may start while the kernel before it runs (programmatic dependent launch) and
    decodes its weights meanwhile, but must read the intermediate only after its wait. The
    kernel before it here writes the intermediate (and, where W2 reads them again after its
    wait, the ids and router weights) only at its end, the previous step's values there
    until then: W2's output must be the new step's. Without the recheck the ids and router
    weights are final from the start (launch_w2: its predecessor, W13, writes neither)."""
    config = LATE_INTERMEDIATE_CONFIGS[name]
    x, old_topk = inputs(13)
    _, new_topk = inputs(14)
    old_ids = OLD_IDS
    new_ids = MIXED_IDS
    banks = gpu_banks[True]
    _, old_inter = call(banks, x, old_ids, old_topk, CUDA)
    want_out, new_inter = call(banks, x, new_ids, new_topk, CUDA)
    fresh_ids, fresh_topk = on(CUDA, torch.tensor([new_ids], dtype=torch.int32), new_topk)
    if config.w2_recheck:
        ids, topk = on(CUDA, torch.tensor([old_ids], dtype=torch.int32), old_topk)
    else:
        ids, topk = fresh_ids.clone(), fresh_topk.clone()
    inter = old_inter.to(CUDA)
    out = torch.full((1, 2560), float("nan"), dtype=torch.float16, device=CUDA)

    def w2() -> None:
        triton_qpn.launch_w2(out, inter, banks[2], banks[3], ids, topk, compact=True, config=config)

    w2()  # compiled first (see the late-router test)
    assert_the_next_kernel_reads_before_the_late_write()
    inter.copy_(old_inter)
    out.fill_(float("nan"))
    torch.cuda.synchronize()
    copies = [(new_inter.to(CUDA), inter)]
    if config.w2_recheck:
        copies += [(fresh_ids, ids), (fresh_topk, topk)]
    late_write(*copies)
    w2()
    torch.cuda.synchronize()
    assert torch.equal(inter.cpu(), new_inter)
    assert torch.equal(out.cpu(), want_out)


# Sixteen routes: every one of W2's route slots holds a chain (at ten, the slots past the
# tenth read -1 before and after the wait, equal, so any comparison that looks for an equal
# id finds one there), and every id of the late write differs from the one it replaces, so
# in each program every slot's id changed: only the recheck's "any id differs" then redoes.
SIXTEEN = triton_qpn.QpnGeometry(top_k=16)
OLD_IDS_16 = [3, 9, 27, 81, 243, 5, 25, 125, 7, 49, 343, 11, 121, 13, 169, 17]
NEW_IDS_16 = [257, -1, 0, 511, 512, 1, 257, 3, -7, 100, 9, 27, 2, 4, 6, 8]
RECHECK_16_CONFIGS = {
    "recheck": triton_qpn.QpnConfig(w2_recheck=True),
    "recheck-pack4": triton_qpn.QpnConfig(w2_pack_pairs=4, w2_recheck=True),
    "recheck-decode-after-wait": triton_qpn.QpnConfig(w2_predecode=False, w2_recheck=True),
}


@pytest.mark.parametrize("name", sorted(RECHECK_16_CONFIGS))
def test_w2_recheck_after_a_late_write_that_changes_every_id(
    random_banks: Banks, gpu_banks: Banks, name: str
) -> None:
    """W2 with the recheck at sixteen routes after a kernel that writes the intermediate,
    ids and router weights at its end, each id a different one: the ids W2 read before its
    wait all changed, so every program must redo its chains from the final ids (with the
    ids read before the wait kept, the output is the old ids')."""
    config = RECHECK_16_CONFIGS[name]
    assert all(old != new for old, new in zip(OLD_IDS_16, NEW_IDS_16, strict=True))
    gen = torch.Generator().manual_seed(16)
    x = torch.randn((1, W13_K), generator=gen).half()
    old_topk, new_topk = torch.rand((2, 1, 16), generator=gen)
    cpu_banks = random_banks[True]
    old_ids = torch.tensor([OLD_IDS_16], dtype=torch.int32)
    new_ids = torch.tensor([NEW_IDS_16], dtype=torch.int32)
    old_out, old_inter = expected_step(x, *cpu_banks, old_ids, old_topk)
    want_out, new_inter = expected_step(x, *cpu_banks, new_ids, new_topk)
    assert not torch.equal(old_out, want_out)
    banks = gpu_banks[True]
    ids, topk, inter = on(CUDA, old_ids, old_topk, old_inter)
    fresh = on(CUDA, new_ids, new_topk, new_inter)
    out = torch.full((1, W2_N), float("nan"), dtype=torch.float16, device=CUDA)

    def w2() -> None:
        triton_qpn.launch_w2(
            out, inter, banks[2], banks[3], ids, topk, compact=True, geometry=SIXTEEN,
            config=config,
        )  # fmt: skip

    w2()  # compiled first (see the late-router test)
    assert_the_next_kernel_reads_before_the_late_write()
    out.fill_(float("nan"))  # W2 writes nothing else: ids, topk and inter are still the old
    torch.cuda.synchronize()
    late_write(*zip(fresh, (ids, topk, inter), strict=True))
    w2()
    torch.cuda.synchronize()
    assert torch.equal(ids.cpu(), new_ids)
    assert torch.equal(out.cpu(), want_out)


# The other code paths of the launch configs the benchmark times: the second session's
# one-chain-per-thread kernels (W13 not waiting for its predecessor), smaller blocks of the
# default's kernels, the default's W13 with one-chain-per-thread W2, no programmatic
# dependent launch at all, the L2 prefetches with W13's words loaded first, the fourth
# session's schedule (three shifts a word, W2's router weights after its chains, no L2 hints
# before W13's wait) and W13's words in two batches under a register cap.
OTHER_CONFIGS = {
    "previous": triton_qpn.QpnConfig(
        w13_pairs=4,
        w13_warps=4,
        w2_columns=8,
        w13_gate_up=False,
        w2_paired=False,
        w13_pdl=False,
    ),
    "p4w2-c8w2": triton_qpn.QpnConfig(w13_pairs=4, w13_warps=2, w2_columns=8, w2_warps=2),
    "no-pdl": triton_qpn.QpnConfig(pdl=False),
    "w2-unpaired": triton_qpn.QpnConfig(w2_columns=8, w2_paired=False),
    # W13 asking L2 for its own and its route's W2 banks in bulk, its words loaded first.
    "prefetch-words-first": triton_qpn.QpnConfig(
        w13_prefetch=True, w2_prefetch=True, w13_words_first=True
    ),
    "fourth-session": triton_qpn.QpnConfig(
        one_shift_decode=False,
        w2_weights_first=False,
        w13_prefetch_inputs=False,
        w13_speculate=False,
    ),
    "batches-capped": triton_qpn.QpnConfig(w13_word_batches=2, w13_maxnreg=144),
    # W2 reading the ids and router weights again after its wait (redoing its chains where
    # an id changed), and always redoing them (the recheck's slow path); W13 letting W2
    # launch only after its own wait; the 3-byte records a byte at a time (the fifth
    # session's kernels).
    "recheck": triton_qpn.QpnConfig(w2_recheck=True),
    "w2-redo": triton_qpn.QpnConfig(w2_recheck=True, w2_redo=True),
    "trigger-after-wait": triton_qpn.QpnConfig(w13_trigger_first=False),
    "fifth-session": triton_qpn.QpnConfig(wide_metadata=False),
    # W2's route slots packed (3 column blocks' routes in 32 slots; the last program's
    # columns past the end masked), with 4 or 2 pairs a block, and with the recheck's slow path.
    "w2-pack4": triton_qpn.QpnConfig(w2_pack_pairs=4),
    "w2-pack2w2": triton_qpn.QpnConfig(w2_pack_pairs=2, w2_warps=2),
    "w2-pack2-widen": triton_qpn.QpnConfig(w2_pack_pairs=2, w2_paired=False, w2_widen=True),
    "pack4-w2-speculate": triton_qpn.QpnConfig(w2_pack_pairs=4, w2_speculate=True),
    "pack4-redo": triton_qpn.QpnConfig(w2_pack_pairs=4, w2_recheck=True, w2_redo=True),
}


@pytest.mark.parametrize("name", sorted(OTHER_CONFIGS))
def test_launch_configs_equal_the_op(gpu_banks: Banks, name: str) -> None:
    x, topk = inputs(6)
    ids = MIXED_IDS
    want_out, want_inter = call(gpu_banks[True], x, ids, topk, CUDA)
    out = torch.full((1, 2560), float("nan"), dtype=torch.float16, device=CUDA)
    inter = torch.full((10, 160), float("nan"), dtype=torch.float16, device=CUDA)
    triton_qpn.launch_qpn_m1(
        out,
        inter,
        *on(CUDA, x),
        *gpu_banks[True],
        *on(CUDA, torch.tensor([ids], dtype=torch.int32), topk),
        compact=True,
        config=OTHER_CONFIGS[name],
    )
    assert torch.equal(out.cpu(), want_out) and torch.equal(inter.cpu(), want_inter)


def test_cuda_prepare_ops_equal_cpu() -> None:
    ck = pack_checkpoint(random_expert(W13_K, W13_N, GROUP_SIZE, torch.Generator().manual_seed(8)))
    for op in (torch.ops.routectl.awq_sm70_prepare, torch.ops.routectl.awq_sm70_prepare_compact):
        for interleave in (False, True):
            cpu = op(ck.qweight, ck.scales, ck.qzeros, GROUP_SIZE, interleave)
            gpu = op(*on(CUDA, ck.qweight, ck.scales, ck.qzeros), GROUP_SIZE, interleave)
            assert all(g.device.type == "cuda" for g in gpu)
            assert all(torch.equal(c, g.cpu()) for c, g in zip(cpu, gpu, strict=True))


# The interpreter tests' reduced geometries and launch configs, compiled: the code the
# interpreter never runs (the FP16x2 FMA decode, the decode before W2's wait and its wait,
# the 16-byte activation loads, the recheck's loads, the compiled tl.fma of the combine, the
# L2 hints; W2's widened, late-weights and decode-after-the-wait paths) at shapes that
# compile in seconds, every element compared with the reference arithmetic
# (tests/test_mut_triton_interp.py, tests/test_mut_triton_rounding.py).
REDUCED = triton_qpn.QpnGeometry(experts=3, w13_k=16 * 16, w13_n=64, w2_k=32, w2_n=64, group=8)
REDUCED_WIDE = dataclasses.replace(REDUCED, top_k=16)
REDUCED_CASES = {
    "pairs": (
        True,
        REDUCED,
        triton_qpn.QpnConfig(w13_pairs=16, w13_warps=1, w2_columns=32, w2_warps=1),
    ),
    "chains-recheck": (
        False,
        REDUCED,
        triton_qpn.QpnConfig(
            w13_pairs=32,
            w13_warps=2,
            w2_columns=64,
            w2_warps=2,
            w13_x_first=False,
            w13_gate_up=False,
            w2_paired=False,
            w13_word_batches=2,
            w2_weights_first=False,
            w2_recheck=True,
            w2_redo=True,
            one_shift_decode=False,
            wide_metadata=False,
        ),
    ),
    "packed": (
        True,
        REDUCED,
        triton_qpn.QpnConfig(w13_pairs=8, w13_warps=1, w2_pack_pairs=2, w2_warps=1),
    ),
    "packed-unpaired-widen": (
        False,
        REDUCED_WIDE,
        triton_qpn.QpnConfig(
            w13_pairs=32,
            w13_warps=1,
            w2_pack_pairs=4,
            w2_paired=False,
            w2_widen=True,
            w2_warps=2,
            w2_recheck=True,
            w2_redo=True,
        ),
    ),
    # W2's fast paths that the recheck's redo (above) overwrites: one column a chain widened
    # before the wait, the router weights after the chains, the decode after the wait.
    "packed-unpaired-widen-fast": (
        False,
        REDUCED_WIDE,
        triton_qpn.QpnConfig(
            w13_pairs=32, w13_warps=1, w2_pack_pairs=4, w2_paired=False, w2_widen=True
        ),
    ),
    "weights-late": (
        True,
        REDUCED,
        triton_qpn.QpnConfig(
            w13_pairs=16, w13_warps=1, w2_columns=32, w2_warps=1, w2_weights_first=False
        ),
    ),
    "no-predecode": (
        False,
        REDUCED,
        triton_qpn.QpnConfig(
            w13_pairs=16, w13_warps=1, w2_columns=32, w2_warps=1, w2_predecode=False
        ),
    ),
    "prefetch-speculate": (
        True,
        REDUCED,
        triton_qpn.QpnConfig(
            w13_pairs=16,
            w13_warps=1,
            w2_columns=32,
            w2_warps=1,
            w13_prefetch=True,
            w2_prefetch=True,
            w13_words_first=True,
            w2_speculate=True,
        ),
    ),
}
REDUCED_IDS = [1, 2, -1, 0, 1, 3, 2, 0, -5, 1]
# The router weights of a reduced case: as drawn, or balanced (every route shows).
Weights = Literal["drawn", "balanced"]
REDUCED_WIDE_IDS = [*REDUCED_IDS, 2, 0, 3, 1, -1, 2]


def reduced_inputs(name: str, weights: Weights = "drawn") -> tuple[torch.Tensor, ...]:
    """Reduced case `name`'s inputs on the CPU: (x, w13, s13, w2, s2, ids, topk), the router
    weights as drawn or balanced (qpn_triton_helpers.balanced_weights: then every route
    shows in the output)."""
    compact, g, _ = REDUCED_CASES[name]
    layouts = build_banks(
        g.experts, g.w13_k, g.w13_n, g.w2_k, g.w2_n, g.group, seed=23, adversarial=(1,)
    )
    w13, s13, w2, s2 = layouts[compact]
    if not compact:
        s13 = with_free_biases(s13, 2, seed=3)
    ids = REDUCED_WIDE_IDS if g.top_k == 16 else REDUCED_IDS
    gen = torch.Generator().manual_seed(5)
    x = (torch.randn((1, g.w13_k), generator=gen) * 0.05).half()
    topk = torch.rand((1, len(ids)), generator=gen) * 2 - 0.5
    id_tensor = torch.tensor([ids], dtype=torch.int32)
    if weights == "balanced":
        routes, _ = expected_routes(x, w13, s13, w2, s2, id_tensor)
        topk = balanced_weights(routes, topk)
    return x, w13, s13, w2, s2, id_tensor, topk


def reduced_step(
    name: str, weights: Weights = "drawn"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Reduced case `name` compiled: (out, intermediate) on the CPU, then the reference's, and
    how many guard elements behind the two buffers a store reached (`guarded`)."""
    compact, g, config = REDUCED_CASES[name]
    inputs = reduced_inputs(name, weights)
    ids = inputs[5]
    out = guarded(1, g.w2_n, CUDA)
    inter = guarded(ids.shape[1], g.w2_k, CUDA)
    triton_qpn.launch_qpn_m1(
        out, inter, *on(CUDA, *inputs), compact=compact, geometry=g, config=config
    )
    want_out, want_inter = expected_step(*inputs)
    return out.cpu(), inter.cpu(), want_out, want_inter, spilled(out) + spilled(inter)


@pytest.mark.parametrize("name", sorted(REDUCED_CASES))
def test_reduced_geometries_compiled_equal_the_reference(name: str) -> None:
    # Drawn weights show the combine's order and roundings; balanced ones show every route.
    for weights in ("drawn", "balanced"):
        out, inter, want_out, want_inter, spill = reduced_step(name, weights)
        assert torch.equal(inter, want_inter), weights
        assert torch.equal(out, want_out), weights
        assert out.abs().min() > 0
        assert spill == 0, "a store past the end of the output or the intermediate"


def test_crafted_roundings_compiled() -> None:
    """tests/test_mut_triton_rounding.py's decodes on FP16 midpoints and FMAs on FP32 ones,
    compiled (fma.rn.f16x2 and fma.rn.f32 round once: the same bits)."""
    x, topk, ids = rounding.crafted_inputs()
    w13, s13, w2, s2 = rounding.banks()
    g = rounding.GEOMETRY
    out = torch.full((1, g.w2_n), float("nan"), dtype=torch.float16, device=CUDA)
    inter = torch.full((len(rounding.IDS), g.w2_k), float("nan"), dtype=torch.float16, device=CUDA)
    triton_qpn.launch_qpn_m1(
        out, inter, *on(CUDA, x, w13, s13, w2, s2, ids, topk),
        compact=False, geometry=g, config=rounding.CONFIG,
    )  # fmt: skip
    assert out[0, : len(rounding.OUT)].tolist() == list(rounding.OUT)
    want_out, want_inter = expected_step(x, w13, s13, w2, s2, ids, topk)
    assert torch.equal(inter.cpu(), want_inter)
    assert torch.equal(out.cpu(), want_out)
    # The same decodes in W2 (route column c is W2's decoded weight c), and in its redo.
    x, topk, ids = rounding.w2_inputs()
    banks = on(CUDA, *rounding.w2_banks())
    for config in (
        rounding.CONFIG,
        dataclasses.replace(rounding.CONFIG, w2_recheck=True, w2_redo=True),
    ):
        out.fill_(float("nan"))
        triton_qpn.launch_qpn_m1(
            out, inter, *on(CUDA, x), *banks, *on(CUDA, ids, topk),
            compact=False, geometry=g, config=config,
        )  # fmt: skip
        assert out[0].tolist() == [w for *_, w in rounding.UP_CASES], config
