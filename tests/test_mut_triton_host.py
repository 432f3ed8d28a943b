"""The host side of the Triton QPN M1 kernels (native/reference/triton_qpn.py): the geometry and
launch-config validation, the programmatic-dependent-launch choices and the launchers' tiling
refusals, all without launching a kernel (docs/contracts/core.md §6; the rules are the
docstrings of QpnGeometry, QpnConfig, _pdl, _w13_pdl, launch_w13 and launch_w2).

Why: these are plain Python a refactor touches first (a `<` for `<=` in the top-k window, a
dropped divisibility clause, `or` for `and` in the PDL choice) and the interpreter tests reach
them only at a handful of valid shapes, so each clause is pinned here on both sides of its
boundary. Runs in-process, with or without TRITON_INTERPRET=1 (the PDL expectations follow
the mode, as the docstrings say: compiled only).
"""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from native.awq_schemas import (
    GROUP_SIZE,
    NUM_EXPERTS,
    TOP_K,
    W2_K,
    W2_N,
    W13_K,
    W13_K_SLICES,
    W13_N,
)
from native.reference import triton_qpn
from native.reference.triton_qpn import (
    CONTRACT,
    DEFAULT_CONFIG,
    QpnConfig,
    QpnGeometry,
    launch_qpn_m1,
    launch_w2,
    launch_w13,
)

# A valid reduced geometry (the interpreter tests' shape): 16 slices of 64, groups of 32.
SMALL = {"experts": 6, "w13_k": 16 * 64, "w13_n": 64, "w2_k": 32, "w2_n": 128}
# Triton decides at definition time whether the kernels are interpreted.
COMPILED = os.environ.get("TRITON_INTERPRET") != "1"


def test_the_contract_geometry_is_the_schemas_shapes() -> None:
    # The whole record compared: every field is what docs/contracts/core.md §6 names.
    assert dataclasses.asdict(CONTRACT) == {
        "experts": NUM_EXPERTS,
        "top_k": TOP_K,
        "w13_k": W13_K,
        "w13_n": W13_N,
        "w2_k": W2_K,
        "w2_n": W2_N,
        "group": GROUP_SIZE,
        "slices": W13_K_SLICES,
    }
    assert (TOP_K, W13_N, W2_K, GROUP_SIZE, W13_K_SLICES) == (10, 320, 160, 32, 16)
    assert dataclasses.asdict(QpnGeometry()) == dataclasses.asdict(CONTRACT)


def test_the_reduced_geometry_is_accepted() -> None:
    g = QpnGeometry(**SMALL)
    assert (g.experts, g.top_k, g.group, g.slices) == (6, TOP_K, GROUP_SIZE, 16)


@pytest.mark.parametrize("top_k", [9, 10, 16])
def test_top_k_inside_the_window_is_accepted(top_k: int) -> None:
    # 8 < top_k <= 16: the W2 kernel's 16 route slots hold every route, more than half used.
    assert QpnGeometry(top_k=top_k).top_k == top_k


@pytest.mark.parametrize("top_k", [8, 17, 0, -10])
def test_top_k_outside_the_window_is_refused(top_k: int) -> None:
    with pytest.raises(ValueError, match="unsupported QPN geometry"):
        QpnGeometry(top_k=top_k)


# Each clause of the rule broken alone, from the valid reduced geometry (16 slices of 64,
# groups of 32, 32-column tiles, w13_n = 2 * w2_k); the neighbouring valid value is accepted.
REFUSED = {
    "k not a multiple of the slices": {"w13_k": 16 * 64 + 8},
    "slice not a multiple of the group": {"w13_k": 16 * 48},
    "w2_k not a multiple of the group": {"w2_k": 48, "w13_n": 96},
    "group not a multiple of the word": {"group": 12, "w13_k": 16 * 48, "w2_k": 48, "w13_n": 96},
    "w13_n not a multiple of the tile": {"w13_n": 80, "w2_k": 40, "group": 8},
    "w2_n not a multiple of the tile": {"w2_n": 112},
    "w13_n not twice w2_k": {"w13_n": 128},
    "fewer slices": {"slices": 8},
    "more slices": {"slices": 32, "w13_k": 32 * 64},
}
ACCEPTED = {
    "k a multiple of the slices": {"w13_k": 16 * 96},
    "slice a multiple of the group": {"w13_k": 16 * 32},
    "w2_k a multiple of the group": {"w2_k": 64, "w13_n": 128},
    "group a multiple of the word": {"group": 8, "w13_k": 16 * 48, "w2_k": 48, "w13_n": 96},
    "w13_n a multiple of the tile": {"w13_n": 96, "w2_k": 48, "group": 8},
    "w2_n a multiple of the tile": {"w2_n": 96},
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_each_geometry_clause_refuses_alone(name: str) -> None:
    with pytest.raises(ValueError, match="unsupported QPN geometry"):
        QpnGeometry(**{**SMALL, **REFUSED[name]})


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_the_valid_neighbour_of_each_clause_is_accepted(name: str) -> None:
    fields = {**SMALL, **ACCEPTED[name]}
    g = QpnGeometry(**fields)
    assert {k: getattr(g, k) for k in fields} == fields


def test_the_refusal_names_the_geometry() -> None:
    with pytest.raises(ValueError) as caught:
        QpnGeometry(**{**SMALL, "w2_n": 112})
    assert str(caught.value) == (
        "unsupported QPN geometry QpnGeometry(experts=6, top_k=10, w13_k=1024, w13_n=64,"
        " w2_k=32, w2_n=112, group=32, slices=16)"
    )


def test_the_default_config_is_the_documented_launch() -> None:
    # "100 W13 programs of 8 warps (16 pairs), 160 W2 programs of 4 warps (16 columns)";
    # W2 and W13 with PDL, W13 triggers first, W2 does not recheck, no packing.
    c = DEFAULT_CONFIG
    assert (c.w13_pairs, c.w13_warps, c.w2_columns, c.w2_warps) == (16, 8, 16, 4)
    assert CONTRACT.top_k * (CONTRACT.w2_k // c.w13_pairs) == 100
    assert CONTRACT.w2_n // c.w2_columns == 160
    assert (c.pdl, c.w13_pdl, c.w13_trigger_first, c.w2_recheck, c.w2_redo) == (
        True,
        True,
        True,
        False,
        False,
    )
    assert c.w2_pack_pairs == 0 and c.w13_maxnreg is None and c.w13_word_batches == 0


POWERS = (1, 2, 4, 8, 16, 32)


@pytest.mark.parametrize("field", ["w13_pairs", "w13_warps", "w2_warps"])
@pytest.mark.parametrize("value", POWERS)
def test_powers_of_two_are_accepted(field: str, value: int) -> None:
    assert getattr(QpnConfig(**{field: value}), field) == value  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["w13_pairs", "w13_warps", "w2_warps"])
@pytest.mark.parametrize("value", [0, -1, -2, 3, 6, 12, 24])
def test_other_counts_are_refused(field: str, value: int) -> None:
    with pytest.raises(ValueError, match="unsupported QPN launch config"):
        QpnConfig(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("columns", [2, 4, 8, 16, 32, 64])
def test_w2_columns_in_powers_of_two_pairs_are_accepted(columns: int) -> None:
    assert QpnConfig(w2_columns=columns).w2_columns == columns


@pytest.mark.parametrize("columns", [0, 1, -2, 6, 12, 24])
def test_w2_columns_not_a_power_of_two_pairs_are_refused(columns: int) -> None:
    # Columns are held in pairs: 1 column is no pair, 6 are three.
    with pytest.raises(ValueError, match="unsupported QPN launch config"):
        QpnConfig(w2_columns=columns)


@pytest.mark.parametrize("pack", [0, 1, 2, 4, 8, 16])
def test_packing_off_or_a_power_of_two_is_accepted(pack: int) -> None:
    assert QpnConfig(w2_pack_pairs=pack).w2_pack_pairs == pack


@pytest.mark.parametrize("pack", [-1, -2, -4, 3, 6, 12])
def test_other_packings_are_refused(pack: int) -> None:
    with pytest.raises(ValueError, match="unsupported QPN launch config"):
        QpnConfig(w2_pack_pairs=pack)


def test_the_config_refusal_names_the_config() -> None:
    with pytest.raises(ValueError) as caught:
        QpnConfig(w2_pack_pairs=3)
    # The message names the whole config (its dataclass repr), the offending field with it.
    message = str(caught.value)
    assert message.startswith("unsupported QPN launch config QpnConfig(w13_pairs=16, "), message
    assert ", w2_pack_pairs=3, " in message


@pytest.mark.parametrize("pdl", [False, True])
@pytest.mark.parametrize("w13_pdl", [False, True])
def test_pdl_is_asked_for_and_compiled(pdl: bool, w13_pdl: bool) -> None:
    config = QpnConfig(pdl=pdl, w13_pdl=w13_pdl)
    # W2 with PDL: asked for and compiled; W13 too only when both are asked for.
    assert triton_qpn._pdl(config) is (pdl and COMPILED)
    assert triton_qpn._w13_pdl(config) is (pdl and w13_pdl and COMPILED)


def test_the_interpreted_kernels_use_the_fp32_decode() -> None:
    # _HW_FMA: the FP16 FMA decode and fma.rn.f32 only when compiled.
    assert triton_qpn._HW_FMA is COMPILED


def _tensors(geometry: QpnGeometry) -> dict[str, torch.Tensor]:
    # Meta tensors: the refusals come before any kernel is touched, so nothing is allocated.
    g, meta, i32 = geometry, torch.device("meta"), torch.int32
    return {
        "out": torch.empty((1, g.w2_n), dtype=torch.float16, device=meta),
        "intermediate": torch.empty((g.top_k, g.w2_k), dtype=torch.float16, device=meta),
        "input": torch.empty((1, g.w13_k), dtype=torch.float16, device=meta),
        "w13": torch.empty((g.experts, g.w13_k, g.w13_n // 8), dtype=i32, device=meta),
        "s13": torch.empty((g.experts, g.w13_k // g.group, g.w13_n), dtype=i32, device=meta),
        "w2": torch.empty((g.experts, g.w2_k, g.w2_n // 8), dtype=i32, device=meta),
        "s2": torch.empty((g.experts, g.w2_k // g.group, g.w2_n), dtype=i32, device=meta),
        "ids": torch.empty((1, g.top_k), dtype=i32, device=meta),
        "topk": torch.empty((1, g.top_k), dtype=torch.float32, device=meta),
    }


@pytest.mark.parametrize("pairs", [64, 128])
def test_w13_refuses_pairs_that_do_not_tile_w2_k(pairs: int) -> None:
    # The reduced W2 K of 32 is not a multiple of 64 or 128 pairs a program.
    g = QpnGeometry(**SMALL)
    config = QpnConfig(w13_pairs=pairs)
    t = _tensors(g)
    with pytest.raises(ValueError) as caught:
        launch_w13(
            t["intermediate"], t["input"], t["w13"], t["s13"], t["ids"],
            compact=False, geometry=g, config=config,
        )  # fmt: skip
    assert str(caught.value) == f"launch config {config} does not tile {g}"
    with pytest.raises(ValueError, match="does not tile"):
        launch_qpn_m1(*t.values(), compact=False, geometry=g, config=config)


def test_w13_refuses_the_contracts_w2_k_untiled() -> None:
    # 160 = 5 * 32: 32 pairs tile it, 64 do not.
    t = _tensors(CONTRACT)
    with pytest.raises(ValueError, match="does not tile"):
        launch_w13(
            t["intermediate"], t["input"], t["w13"], t["s13"], t["ids"],
            compact=True, config=QpnConfig(w13_pairs=64),
        )  # fmt: skip


@pytest.mark.parametrize("columns", [256, 512])
def test_w2_refuses_columns_that_do_not_tile_w2_n(columns: int) -> None:
    g = QpnGeometry(**SMALL)
    config = QpnConfig(w2_columns=columns)
    t = _tensors(g)
    with pytest.raises(ValueError) as caught:
        launch_w2(
            t["out"], t["intermediate"], t["w2"], t["s2"], t["ids"], t["topk"],
            compact=False, geometry=g, config=config,
        )  # fmt: skip
    assert str(caught.value) == f"launch config {config} does not tile {g}"


def test_w2_refuses_the_contracts_w2_n_untiled() -> None:
    # 2560 = 5 * 512: 512 columns tile it, 1024 do not.
    t = _tensors(CONTRACT)
    with pytest.raises(ValueError, match="does not tile"):
        launch_w2(
            t["out"], t["intermediate"], t["w2"], t["s2"], t["ids"], t["topk"],
            compact=True, config=QpnConfig(w2_columns=1024),
        )  # fmt: skip
