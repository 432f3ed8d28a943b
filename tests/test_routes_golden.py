"""Golden rows of the shipped categories and the retained snapshots themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policies import PROJECT
from routectl.replay.harness import find_row, replay_row
from routectl.review.check import run_check
from routectl.review.snapshot import read_snapshot
from routectl.review.sources import SnapshotFiles
from routectl.rows import ROW_ID
from tests.fixtures.toy import invoke, ok

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOTS = ROOT / "snapshots"
GOLDEN_27B = "27b_dflash2_nvfp4/fp8_e4m3/tp4/dflash/c4/q8192"


def route(category: str, row_id: str) -> dict:
    cat = PROJECT.category(category)
    return replay_row(PROJECT, cat, find_row(cat, row_id))[0]["route"]


def test_qualified_27b_row_dispatches_the_shared_qpn2_entry():
    r = route("sm70-nvfp4-linear", GOLDEN_27B)
    assert r["kernel"] == "Qpn2NvFp4LinearKernel"
    assert [(c["op"], c["plan"]["m"]) for c in r["dispatch"]] == [
        ("nvfp4_qpn2_tm_dispatch_sm70_out", m) for m in (1, 8, 32, 64, 1024)
    ]
    for call in r["dispatch"]:
        assert call["plan"] == {
            "m": call["plan"]["m"],
            "split_k": 16,
            "nacc": 2,
            "gated": False,
            "prefill_min_m": 1024,
        }
    assert r["flags"]["shared_weight"] is True and r["fallback"] is False


def test_misaligned_k_falls_back_to_turbomind_with_the_k_reason():
    r = route("sm70-nvfp4-linear", "edge:misaligned_k")
    assert r["kernel"] == "TurboMindNvFp4LinearKernel"
    qpn2 = next(v for v in r["verdicts"] if v["name"] == "Qpn2NvFp4LinearKernel")
    assert qpn2["ok"] is False and "K % 128 != 0 (K=5000)" in qpn2["message"]
    assert r["fallback"] is True and r["dispatch"] == []


def test_separate_codes_have_no_compact_scales():
    r = route("sm70-nvfp4-linear", "edge:separate_codes")
    assert r["kernel"] == "Qpn2NvFp4LinearKernel"
    assert r["flags"]["compact_scales"] is False and r["flags"]["shared_weight"] is False
    assert {c["op"] for c in r["dispatch"]} == {"nvfp4_qpn2_prefill_dispatch_sm70_out"}
    # A second code copy is resident: more bytes than the shared layout.
    assert (
        r["bytes"]["total"] > route("sm70-nvfp4-linear", "edge:compact_enabled")["bytes"]["total"]
    )


def test_compact_enabled_and_batch_supersedes_compact():
    assert route("sm70-nvfp4-linear", "edge:compact_enabled")["flags"]["compact_scales"] is True
    batch = route("sm70-nvfp4-linear", "edge:batch_supersedes_compact")["flags"]
    assert batch["compact_scales"] is False and batch["batch_prescale"] is True


def test_awq_non_sm70_takes_the_triton_route():
    r = route("sm70-awq-linear", "edge:non_sm70")
    assert r["kernel"] == "TritonAwqLinearKernel"
    assert r["verdicts"][0]["message"].startswith("not SM70")


def test_awq_native_missing_is_an_error_row():
    r = route("sm70-awq-linear", "edge:native_missing")
    assert set(r) == {"error", "verdicts"}
    assert "awq_sm70_prepare" in r["error"]["message"]


def test_awq_exact_dense_prefill_only_at_4096():
    r = route("sm70-awq-linear", "edge:group128_prefill")
    ops = [(c["op"], c["plan"]["m"]) for c in r["dispatch"]]
    assert ("awq_sm70_dequantize_out", 4096) in ops and ("torch.mm", 4096) in ops
    assert ("awq_gemm_sm70_out", 4096) not in ops and ("awq_gemm_sm70_out", 8192) in ops


def test_every_turing_rejection_reason_is_hit_by_a_probe():
    # Fresh rows, not the retained file: only the check tests compare retained snapshots.
    cat = PROJECT.category("sm75-linear")
    hit: dict[str, set[str]] = {}
    for spec in cat.rows():
        if spec.id.startswith("edge:"):
            for v in replay_row(PROJECT, cat, spec)[0]["route"].get("verdicts", []):
                if not v["ok"]:
                    hit.setdefault(v["name"], set()).add(v["code"])
    expected = {
        "dense_qpn2_disabled",
        "legacy_backend_override",
        "requires_sm75",
        "activation_not_fp16",
        "packed_weight_rank",
        "n_not_positive",
        "k_not_positive",
        "k_not_multiple_of_128",
        "nvfp4_dtypes",
        "scale_shape",
        "missing_native_ops",
        "backend_not_selected",
    }
    assert hit["TuringQpn2NvFp4LinearKernel"] == expected
    assert hit["TuringQpn8Fp8LinearKernel"] == {
        "qpn8_disabled",
        "requires_sm75",
        "input_output_not_fp16",
        "not_static_per_tensor_e4m3",
        "weight_rank",
        "n_not_positive",
        "k_not_positive",
        "n_not_multiple_of_32",
        "k_not_multiple_of_128",
        "missing_native_ops",
        "backend_not_selected",
    }


@pytest.mark.parametrize("category, count", [("sm70-nvfp4-linear", 342), ("sm70-awq-linear", 334)])
def test_row_counts(category, count):
    assert len(PROJECT.category(category).rows()) == count


def test_every_retained_file_validates_and_has_well_formed_ids():
    names = sorted(p.name for p in SNAPSHOTS.iterdir() if p.is_file())
    assert names == sorted(f"{c.name}.json" for c in PROJECT.categories)
    for path in SNAPSHOTS.glob("*.json"):
        snap = read_snapshot(path, schema=PROJECT.snapshot_schema)
        assert all(ROW_ID.match(i) for i in snap.ids())


def test_retained_snapshots_equal_a_fresh_run():
    # The library's check, which writes nothing: the CLI's failing check would leave
    # `.json.new` files in the repository's folder (the CLI is tested on copies).
    before = sorted(SNAPSHOTS.iterdir())
    result = run_check(
        PROJECT, baseline=SnapshotFiles.retained(SNAPSHOTS, schema=PROJECT.snapshot_schema)
    )
    moved = {
        name: sorted({*c.comparison.added, *c.comparison.removed, *c.comparison.changed})[:3]
        for name, c in result.outcome.categories.items()
        if not c.comparison.identical
    }
    assert result.ok, moved
    assert sorted(SNAPSHOTS.iterdir()) == before


def test_explain_of_an_moe_row_prints_the_model_totals():
    row = "sm70-awq-moe:qwen38_awq_moe/fp8_e4m3/tp4/none/c8/q8192"
    text = ok(invoke(["explain", row], cwd=ROOT))
    assert text.code == 0, text.stderr
    assert "model totals per rank over 48 layers" in text.stdout
    assert "compact_saving 943,718,400" in text.stdout
    assert "M=1: lane.legacy_single_token" in text.stdout
    data = json.loads(ok(invoke(["explain", row, "--format", "json"], cwd=ROOT)).stdout)
    assert data["model_totals"]["compact_saving"] == 943_718_400
    assert data["model_totals"]["metadata"] == 48 * 58_982_400
    linear = json.loads(
        ok(
            invoke(["explain", f"sm70-nvfp4-linear:{GOLDEN_27B}", "--format", "json"], cwd=ROOT)
        ).stdout
    )
    assert linear["model_totals"] is None
