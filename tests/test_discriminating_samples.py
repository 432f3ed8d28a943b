"""Tuning tables and modulus rules sampled where a neighbouring rule would answer otherwise.

Every `x % M == 0` rule of the capability classes and qualifications is tried at M, 3M and 5M
(multiples of M that are not multiples of 2M: `% 2M` refuses them) and at M/2 and 3M/2
(multiples of M/2 that are not multiples of M: `% (M/2)` admits them), plus M + 8 or one off
where the rule's neighbours are not powers of two. Each tuning table's fallback rule
(`split_k 8 if gated or K % 256 else 16`) is tried at K = 256, 768 and 1280 against 128, 384 and
640, and every table entry beside its untabled neighbours (the other gated flag, N one tile
off). Literals from docs/contracts/core.md §2.1-2.3 and §4, docs/contracts/fp8.md §2.3, §3.2,
§3.3, §3.5 and §5 (its item 8).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from native.catalogue import CATALOGUE
from native.kernels import awq_dense as awq
from native.kernels import fp8_sm70 as fs
from native.kernels import nvfp4_sm70 as nv
from native.kernels import turing as tu
from native.kernels.common import padded
from native.layers import AwqLayer, BlockFp8Layer, Fp8Layer, Nvfp4Layer
from policies import PROJECT
from policies.linear_fp8_sm70 import block_qpn8_turbomind_copy
from policies.qualification import qpn4_layer_qualified
from routectl.errors import SelectionError
from routectl.namespaces.native_ns import InMemoryNamespace
from routectl.reasons import Check
from routectl.workload import EngineConfig, Hardware

EVERY_OP = InMemoryNamespace(tuple(CATALOGUE.ops))


def multiples(m: int) -> tuple[list[int], list[int]]:
    """(values a `% m` rule admits and `% 2m` refuses, values it refuses and `% (m/2)` admits)."""
    return [m, 3 * m, 5 * m], [m // 2, 3 * m // 2]


def code(check: Check) -> str | None:
    ok, reason = check
    return None if ok else (reason.code if reason is not None else "?")


@dataclasses.dataclass(frozen=True)
class Rule:
    name: str
    modulus: int
    refusal: str  # the reason code of a value off the modulus
    check: Callable[[int], Check]


def _awq(k: int = 256, n: int = 256, group: int = 32, role: str = "o_proj") -> AwqLayer:
    return AwqLayer.of(f"model.layers.0.self_attn.{role}", k, n, group)


def _nvfp4(k: int = 5120, n: int = 5120, role: str = "o_proj") -> Nvfp4Layer:
    return Nvfp4Layer.of(f"model.layers.0.mlp.{role}", k, n)


def _fp8_block(k: int = 5120, n: int = 5120) -> fs.W8A16Request:
    return fs.W8A16Request(BlockFp8Layer.of("model.layers.0.self_attn.o_proj", k, n))


RULES = (
    *(
        Rule(
            f"awq K % group {g}",
            g,
            "k_not_multiple_of_group",
            lambda k, g=g: awq.TurboMindAwqLinearKernel.can_implement(_awq(k=k, group=g), EVERY_OP),
        )
        for g in (32, 64, 128)
    ),
    Rule(
        "awq triton K % group 128",
        128,
        "k_not_multiple_of_group",
        lambda k: awq.TritonAwqLinearKernel.can_implement(_awq(k=k, group=128), EVERY_OP),
    ),
    Rule(
        "awq N % 8",
        8,
        "n_not_multiple_of_8",
        lambda n: awq.TurboMindAwqLinearKernel.can_implement(_awq(n=n), EVERY_OP),
    ),
    Rule(
        "nvfp4 qpn2 K % 128",
        128,
        "k_not_multiple_of_128",
        lambda k: nv.Qpn2NvFp4LinearKernel.can_implement(_nvfp4(k=k), EVERY_OP),
    ),
    Rule(
        "nvfp4 qpn2 gated N % 64",
        64,
        "gated_n_not_multiple_of_64",
        lambda n: nv.Qpn2NvFp4LinearKernel.can_implement(
            _nvfp4(n=n, role="gate_up_proj"), EVERY_OP
        ),
    ),
    Rule(
        "turing qpn2 K % 128",
        128,
        "k_not_multiple_of_128",
        lambda k: tu.TuringQpn2NvFp4LinearKernel.can_implement(_nvfp4(k=k), EVERY_OP),
    ),
    Rule(
        "turing qpn8 N % 32",
        32,
        "n_not_multiple_of_32",
        lambda n: tu.TuringQpn8Fp8LinearKernel.can_implement(
            Fp8Layer.of("model.layers.0.mlp.down_proj", 5120, n), EVERY_OP
        ),
    ),
    Rule(
        "turing qpn8 K % 128",
        128,
        "k_not_multiple_of_128",
        lambda k: tu.TuringQpn8Fp8LinearKernel.can_implement(
            Fp8Layer.of("model.layers.0.mlp.down_proj", k, 5120), EVERY_OP
        ),
    ),
    Rule(
        "qpn4 down_proj K % 128",
        128,
        "qpn4_down_k",
        lambda k: qpn4_layer_qualified(_nvfp4(k=k, n=5120, role="down_proj"), False),
    ),
    Rule(
        "qpn4 gate_up N % 64",
        64,
        "qpn4_gate_up_n",
        lambda n: qpn4_layer_qualified(_nvfp4(k=5120, n=n, role="gate_up_proj"), True),
    ),
    Rule(
        "fp8 block qpn8 N % 128",
        128,
        "n_k_not_multiple_of_128",
        lambda n: fs.QPN8Fp8BlockScaledMMLinearKernel.can_implement(_fp8_block(n=n), EVERY_OP),
    ),
    Rule(
        "fp8 block qpn8 K % 128",
        128,
        "n_k_not_multiple_of_128",
        lambda k: fs.QPN8Fp8BlockScaledMMLinearKernel.can_implement(_fp8_block(k=k), EVERY_OP),
    ),
)


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_each_modulus_rule_on_both_sides_and_against_its_neighbours(rule: Rule) -> None:
    admitted, refused = multiples(rule.modulus)
    assert [code(rule.check(v)) for v in admitted] == [None] * len(admitted), admitted
    assert [code(rule.check(v)) for v in refused] == [rule.refusal] * len(refused), refused


@pytest.mark.parametrize("group", [16, 48, 96, 256])
def test_awq_groups_are_exactly_32_64_128(group: int) -> None:
    # core.md §2.3: group in {32, 64, 128}; 16 and 256 are the powers-of-two neighbours.
    layer = _awq(k=768, group=group)
    assert code(awq.TurboMindAwqLinearKernel.can_implement(layer, EVERY_OP)) == (
        "unsupported_group_size"
    )


@pytest.mark.parametrize(("k", "n", "why"), [
    (4096, 4096, None),
    (4160, 4096, "exact_dense_k"),  # 4160 = 65 x 64: % 64 admits it
    (4096, 4160, "exact_dense_n"),
    (384, 4096, None),  # 3 x 128: % 256 would refuse it
    (4096, 640, None),
])  # fmt: skip
def test_awq_exact_dense_needs_k_and_n_multiples_of_128(k: int, n: int, why: str | None) -> None:
    layer = _awq(k=k, n=n, group=128, role="o_proj")
    reason, _refused = awq._exact_dense(layer, awq.AwqOptions(), False, EVERY_OP, None)
    assert (reason.code if reason is not None else None) == why


@pytest.mark.parametrize(
    ("rows", "ok"), [(128, True), (384, True), (640, True), (64, False), (192, False)]
)
def test_fp8_grouped_rows_per_group_are_multiples_of_128(rows: int, ok: bool) -> None:
    # fp8.md §5, item 8: rows per group a multiple of 128 (two groups).
    layer = BlockFp8Layer.of("model.layers.0.self_attn.wo_a", 4096, 2 * rows, groups=2)
    layer = dataclasses.replace(layer, scale_shape=(2 * -(-rows // 128), 32))
    if ok:
        fs.check_grouped(layer)
    else:
        with pytest.raises(SelectionError, match="is not a multiple of 128"):
            fs.check_grouped(layer)


# --- tuning tables --------------------------------------------------------------------------


UNTABLED_N = 1000  # no entry has it
FALLBACK_16 = (256, 768, 1280)  # K % 256 == 0, K % 512 != 0 for 768 and 1280
FALLBACK_8 = (128, 384, 640)  # K % 128 == 0, K % 256 != 0


@pytest.mark.parametrize("tuning", [fs.qpn8_tuning, nv.qpn2_tuning], ids=["qpn8", "qpn2"])
def test_the_fallback_split_k_tells_256_from_its_neighbours(tuning: Callable[..., tuple]) -> None:
    assert [tuning(k, UNTABLED_N, False)[0] for k in FALLBACK_16] == [16, 16, 16]
    assert [tuning(k, UNTABLED_N, False)[0] for k in FALLBACK_8] == [8, 8, 8]
    assert [tuning(k, UNTABLED_N, True)[0] for k in FALLBACK_16] == [8, 8, 8]  # gated: 8


def test_qpn8_fallback_is_two_chains_without_prefetch() -> None:
    assert fs.qpn8_tuning(768, UNTABLED_N, False) == (16, 2, False)
    assert fs.qpn8_tuning(640, UNTABLED_N, True) == (8, 2, False)


# fp8.md §3.2: the generic QPN8 table, and each entry's untabled neighbours.
QPN8_TABLE = {
    (4352, 5120, False): (16, 1, False),
    (1536, 5120, False): (16, 1, False),
    (5120, 4096, False): (16, 2, False),
    (5120, 3584, False): (16, 2, False),
    (5120, 8704, False): (16, 1, True),
    (5120, 8704, True): (8, 2, True),
}
# core.md §2.1: (K, N padded to 32, gated call) -> (split_k, nacc).
QPN2_TABLE = {
    (1536, 5120, False): (8, 2),
    (5120, 3584, False): (16, 2),
    (5120, 4128, False): (16, 2),
    (5120, 8704, False): (8, 2),
    (5120, 8704, True): (8, 2),
    (4352, 5120, False): (16, 2),
}


def _fallback_qpn8(k: int, gated: bool) -> tuple[int, int, bool]:
    return (8 if gated or k % 256 else 16, 2, False)


def _fallback_qpn2(k: int, gated: bool) -> tuple[int, int]:
    return (8 if gated or k % 256 else 16, 2)


@pytest.mark.parametrize(("key", "value"), list(QPN8_TABLE.items()))
def test_qpn8_table_entries_and_their_neighbours(key: tuple[int, int, bool], value: tuple) -> None:
    k, n, gated = key
    assert fs.qpn8_tuning(k, n, gated) == value
    for nk, nn, ng in [(k, n, not gated), (k, n + 128, gated), (k, n - 128, gated)]:
        expected = QPN8_TABLE.get((nk, nn, ng), _fallback_qpn8(nk, ng))
        assert fs.qpn8_tuning(nk, nn, ng) == expected, (nk, nn, ng)


@pytest.mark.parametrize(("key", "value"), list(QPN2_TABLE.items()))
def test_qpn2_table_entries_and_their_neighbours(key: tuple[int, int, bool], value: tuple) -> None:
    k, n, gated = key
    assert nv.qpn2_tuning(k, n, gated) == value
    for nk, nn, ng in [(k, n, not gated), (k, n + 32, gated), (k, n - 32, gated)]:
        expected = QPN2_TABLE.get((nk, nn, ng), _fallback_qpn2(nk, ng))
        assert nv.qpn2_tuning(nk, nn, ng) == expected, (nk, nn, ng)


def test_the_qpn2_table_discriminates_wherever_the_fallback_disagrees() -> None:
    # (1536, 5120) and (5120, 8704, F): the table says 8 where K % 256 == 0 says 16.
    assert _fallback_qpn2(1536, False) == (16, 2) != QPN2_TABLE[(1536, 5120, False)]
    assert _fallback_qpn2(5120, False) == (16, 2) != QPN2_TABLE[(5120, 8704, False)]


# fp8.md §3.3: PP2/TP4 layers, by (K, N) (the grouped wo_a per group).
PP2_TP4_TABLE = {
    (4096, 1536): (32, 2, False),
    (1024, 8192): (8, 2, False),
    (2048, 4096): (16, 2, False),
    (4096, 1024): (32, 2, False),
    (512, 4096): (16, 2, False),
}


def test_pp2_tp4_tuning_table_is_the_contracts() -> None:
    assert fs.PP2_TP4_TUNING == PP2_TP4_TABLE


@pytest.mark.parametrize(
    ("n", "tile", "expected"),
    [(4120, 32, 4128), (4128, 32, 4128), (4097, 32, 4128), (4096, 32, 4096), (33, 32, 64),
     (32, 32, 32), (0, 32, 0), (4128, 64, 4160), (96, 64, 128)],
)  # fmt: skip
def test_n_padding_to_the_tile(n: int, tile: int, expected: int) -> None:
    # core.md §2.1: N padded to a multiple of 32; 4128 tells a 32 tile from a 64 one.
    assert padded(n, tile) == expected


@pytest.mark.parametrize(
    ("role", "threshold"),
    [("qkv_proj", 8000), ("in_proj_qkvz", 8000), ("o_proj", 3920), ("gate_up_proj", 3920),
     ("down_proj", 3920)],
)  # fmt: skip
def test_exact_dense_thresholds_by_role(role: str, threshold: int) -> None:
    # fp8.md §3.5.
    assert fs.exact_dense_threshold(role) == threshold


@pytest.mark.parametrize(
    ("seqs", "spec", "copy"),
    [(8, 0, False), (9, 0, True), (4, 1, False), (3, 2, True), (1, 7, False), (1, 8, True)],
)
def test_block_qpn8_turbomind_copy_boundary_at_8(seqs: int, spec: int, copy: bool) -> None:
    # fp8.md §2.3: unset, the copy is kept when max_num_seqs * (spec tokens + 1) > 8.
    engine = EngineConfig(max_num_seqs=seqs, spec_tokens=spec)
    policy = PROJECT.resolve(None, {}, Hardware(70), engine, emit_warnings=False)
    assert block_qpn8_turbomind_copy(policy, engine) is copy


@pytest.mark.parametrize(
    ("k", "n", "elements"),
    [(5120, 8704, 44_564_480), (5120, 8705, 44_569_600), (4096, 4096, 44_564_480),
     (8192, 8192, 67_108_864)],
)  # fmt: skip
def test_exact_dense_workspace_floor(k: int, n: int, elements: int) -> None:
    # core.md §2.3 / fp8.md §4.2: max(44,564,480, K*N) FP16 elements.
    assert awq.exact_dense_workspace_elements(_awq(k=k, n=n - n % 8, group=128)) == max(
        44_564_480, k * (n - n % 8)
    )
    assert fs.exact_dense_workspace_elements(BlockFp8Layer.of("m.o_proj", k, n)) == elements
