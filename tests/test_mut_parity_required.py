"""`--require-route PATTERN=KERNEL` (`routectl.review.parity`; docs/observed-routes.md): how
the requirement is parsed, and each verdict and reason `_ran` gives, on hand-made join
results and the project's real catalogue (its kernel classes, stages and ops).

test_parity.py checks six requirements through the CLI by exit code only; these tests pin
the parsed requirement (category, bare pattern, kernel), every refusal, and each verdict's
outcome and reason: an op observed or never observed; the selected kernel class with every
observed call agreeing, or not, or nothing agreed; a stage by its full or short name, every
one of its ops observed or not; a stage with no ops and a kernel the row did not select
(`ran ..., not ...`); which rows a pattern names (category-qualified or not) and the failure
lines. Written for issue 28's mutation run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from routectl import load_project
from routectl.errors import InputError
from routectl.io.jsonread import shorten
from routectl.review.parity import RowParity, _ran, apply_required, parse_required

ROOT = Path(__file__).resolve().parents[1]
PROJECT = load_project(ROOT)
QPN_OP = "awq_moe_qpn_m1_sm70_out"
PERMUTE = "moe_permute_metadata_with_scratch"
INDEXED_W13 = "awq_moe_indexed_dense_w13_sm70_out"
KERNEL = "TurboMindAwqMoE"


def item(op: str) -> dict[str, Any]:
    return {"layer": "l", "m": 1, "op": op, "plan": {}, "eager": 1, "captured": 0}


def parity(
    category: str = "sm70-awq-moe",
    row: str = "edge:example_qpn_m1",
    kernel: str | None = KERNEL,
    **items: list[dict[str, Any]],
) -> RowParity:
    return RowParity(category, row, kernel, ["r"], [0], **items)


def test_the_catalogue_holds_what_these_tests_name() -> None:
    # The stages below as the catalogue declares them (kernel.stage -> its ops).
    kernels = PROJECT.catalogue.kernels
    assert kernels["awq_moe.qpn_m1"] == (QPN_OP,)
    assert set(kernels["awq_moe.indexed_prefill_w13"]) == {INDEXED_W13, PERMUTE}
    assert kernels["awq_moe.zero_output"] == ()
    assert KERNEL in kernels and QPN_OP in PROJECT.catalogue.ops


@pytest.mark.parametrize(
    ("text", "category", "pattern", "kernel"),
    [
        (f"edge:example_*={KERNEL}", None, "edge:example_*", KERNEL),
        (f"sm70-awq-moe:edge:*={QPN_OP}", "sm70-awq-moe", "edge:*", QPN_OP),
        ("nosuch:edge:x=qpn_m1", None, "nosuch:edge:x", "qpn_m1"),  # not a category name
        ("a=b=awq_moe.qpn_m1", None, "a=b", "awq_moe.qpn_m1"),  # the last `=` splits
        ("sm70-awq-moe:*=zero_output", "sm70-awq-moe", "*", "zero_output"),
    ],
)
def test_a_requirement_is_parsed(
    text: str, category: str | None, pattern: str, kernel: str
) -> None:
    required = parse_required(text, PROJECT)
    assert (required.text, required.category, required.pattern, required.kernel) == (
        text,
        category,
        pattern,
        kernel,
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("edge:x", "expected PATTERN=KERNEL"),
        (f"={KERNEL}", "expected PATTERN=KERNEL"),
        ("edge:x=", "expected PATTERN=KERNEL"),
        ("edge:x=NoSuchKernel", "unknown kernel, stage or op 'NoSuchKernel'"),
        ("edge:x=qpn", "unknown kernel, stage or op 'qpn'"),  # a part of a stage name
        ("edge:x=awq_moe", "unknown kernel, stage or op 'awq_moe'"),  # a stage's kernel part
    ],
)
def test_a_bad_requirement_is_an_input_error(text: str, words: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_required(text, PROJECT)
    # The text as the one-line errors quote a value (`shorten`).
    assert str(caught.value).startswith(f"--require-route {shorten(text)}: ")
    assert words in str(caught.value)


def test_an_op_is_observed_or_never_observed() -> None:
    seen = parity(agreed=[item(QPN_OP)])
    assert _ran(PROJECT, seen, QPN_OP) == (True, f"op {QPN_OP} observed")
    assert _ran(PROJECT, parity(unpredicted=[item("other")]), QPN_OP) == (
        False,
        f"op {QPN_OP} never observed",
    )
    # Observed counts a disagreed call's observed op and an unpredicted one, never a
    # prediction left unobserved.
    disagreed = {"predicted": item("p"), "observed": item(QPN_OP)}
    assert _ran(PROJECT, parity(disagreed=[disagreed]), QPN_OP)[0]
    assert _ran(PROJECT, parity(unpredicted=[item(QPN_OP)]), QPN_OP)[0]
    assert not _ran(PROJECT, parity(disagreed=[disagreed]), "p")[0]
    assert not _ran(PROJECT, parity(unobserved=[item(QPN_OP)]), QPN_OP)[0]


def test_the_selected_kernel_class_needs_every_observed_call_to_agree() -> None:
    good = f"kernel {KERNEL} selected, every observed call agreed"
    bad = f"kernel {KERNEL} selected, not every observed call agreed"
    assert _ran(PROJECT, parity(agreed=[item(QPN_OP)]), KERNEL) == (True, good)
    both = parity(agreed=[item(QPN_OP)], unobserved=[item("w2")])
    assert _ran(PROJECT, both, KERNEL) == (True, good)  # unobserved predictions do not count
    disagreed = {"predicted": item("p"), "observed": item("q")}
    assert _ran(PROJECT, parity(agreed=[item(QPN_OP)], disagreed=[disagreed]), KERNEL) == (
        False,
        bad,
    )
    extra = parity(agreed=[item(QPN_OP)], unpredicted=[item("q")])
    assert _ran(PROJECT, extra, KERNEL) == (False, bad)
    assert _ran(PROJECT, parity(), KERNEL) == (False, bad)  # nothing observed agreed


def test_a_stage_by_either_name_needs_every_one_of_its_ops() -> None:
    qpn = parity(kernel="Other", agreed=[item(QPN_OP)])
    for name in ("qpn_m1", "awq_moe.qpn_m1"):
        assert _ran(PROJECT, qpn, name) == (True, f"stage awq_moe.qpn_m1: {QPN_OP} observed")
    assert _ran(PROJECT, parity(), "qpn_m1") == (
        False,
        f"stage awq_moe.qpn_m1: {QPN_OP} not observed",
    )
    ops = ", ".join(PROJECT.catalogue.kernels["awq_moe.indexed_prefill_w13"])
    half = parity(agreed=[item(INDEXED_W13)])
    assert _ran(PROJECT, half, "indexed_prefill_w13") == (
        False,
        f"stage awq_moe.indexed_prefill_w13: {ops} not observed",
    )
    whole = parity(agreed=[item(INDEXED_W13)], unpredicted=[item(PERMUTE)])
    assert _ran(PROJECT, whole, "indexed_prefill_w13") == (
        True,
        f"stage awq_moe.indexed_prefill_w13: {ops} observed",
    )


def test_a_stage_without_ops_and_a_kernel_not_selected_did_not_run() -> None:
    assert _ran(PROJECT, parity(agreed=[item(QPN_OP)]), "zero_output") == (
        False,
        f"ran {KERNEL}, not zero_output",
    )
    assert _ran(PROJECT, parity(kernel=None), "TurboMindAwqLinearKernel") == (
        False,
        "ran no kernel, not TurboMindAwqLinearKernel",
    )


def test_apply_required_names_the_rows_each_pattern_matches() -> None:
    moe = parity(agreed=[item(QPN_OP)])
    other = parity("sm70-awq-linear", "edge:example_qpn_m1", "TurboMindAwqLinearKernel")
    third = parity(row="edge:qpn_m1_on", agreed=[item(QPN_OP)])
    required = [
        parse_required(f"edge:example_*={QPN_OP}", PROJECT),  # both categories' example row
        parse_required(f"sm70-awq-moe:edge:*={KERNEL}", PROJECT),  # the MoE rows only
        parse_required(f"qwen*={KERNEL}", PROJECT),  # no row
    ]
    failures = apply_required(PROJECT, [moe, other, third], required)
    assert failures == [
        f"sm70-awq-linear:edge:example_qpn_m1: --require-route edge:example_*={QPN_OP}: "
        f"op {QPN_OP} never observed",
        f"--require-route qwen*={KERNEL}: no observed row matches",
    ]
    assert moe.required == [
        {"route": f"edge:example_*={QPN_OP}", "ok": True, "reason": f"op {QPN_OP} observed"},
        {
            "route": f"sm70-awq-moe:edge:*={KERNEL}",
            "ok": True,
            "reason": f"kernel {KERNEL} selected, every observed call agreed",
        },
    ]
    assert other.required == [
        {
            "route": f"edge:example_*={QPN_OP}",
            "ok": False,
            "reason": f"op {QPN_OP} never observed",
        }
    ]
    assert [r["route"] for r in third.required] == [f"sm70-awq-moe:edge:*={KERNEL}"]
    assert apply_required(PROJECT, [moe], []) == []
