"""`routectl parity`: observation records joined with the retained rows, on records written
by the record module from an engine session's header (the policy hash computed by the
engine, never by parity) and entries as a real run of the example produces them."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from routectl import EngineConfig, Hardware, load_project
from routectl.cli import run
from routectl.engine.startup import start
from routectl.replay.harness import RecordingNamespace
from routectl.replay.observed import (
    Header,
    ObservationRecord,
    Target,
    entry_key,
    parse_record,
    write_record,
)
from routectl.review.parity import check_parity
from routectl.review.snapshot import read_snapshot

ROOT = Path(__file__).resolve().parents[1]
PROJECT = load_project(ROOT)
CATEGORY = "sm70-awq-moe"
# The workload and configuration of examples/engine_startup.py's default session.
WORKLOAD = EngineConfig(tp=4, max_num_seqs=8, max_num_batched_tokens=8192)
QPN_ON = {"sm70_awq_moe": {"qpn_m1": True}}
LAYER = "model.layers.0.mlp.experts"
QPN_OP = "awq_moe_qpn_m1_sm70_out"
LEGACY_OP = "awq_moe_single_token_sm70_out"
QPN_PLAN = {"m": 1, "metadata": "3-byte", "routed_slots": 10}


def header(config: Any = QPN_ON, *, rank: int = 0, target: Target | None = None) -> Header:
    from routectl.engine.observing import native_build

    session = start(PROJECT, config, Hardware(70), WORKLOAD, environ={})
    return Header(
        routectl="0.1.0",
        project=PROJECT.name,
        target=target or Target(CATEGORY),
        workload=WORKLOAD.to_json(),
        capability=70,
        policy_hash=session.policy_hash,
        native=native_build(PROJECT, RecordingNamespace(PROJECT.catalogue)),
        rank=rank,
    )


def entry(op: str, plan: dict[str, Any], *, m: int | None = 1, layer: str = LAYER, count: int = 1,
          captured: bool = False) -> dict[str, Any]:  # fmt: skip
    return {"layer": layer, "m": m, "captured": captured, "op": op, "plan": plan, "count": count}


def write(path: Path, entries: list[dict[str, Any]], **kwargs: Any) -> Path:
    record = ObservationRecord(header(**kwargs))
    for e in entries:
        record.counts[entry_key(e)] = e["count"]
    write_record(path, record)
    return path


def parity(*args: Any, capsys: Any) -> tuple[int, str, str]:
    code = run(["--project", str(ROOT), "parity", *map(str, args)], {})
    out, err = capsys.readouterr()
    return code, out, err


def as_json(*args: Any, capsys: Any) -> tuple[int, dict[str, Any]]:
    code, out, _ = parity(*args, "--format", "json", capsys=capsys)
    return code, json.loads(out)


def test_agreed_names_the_row_by_category_workload_and_policy(tmp_path, capsys):
    path = write(tmp_path / "r.json", [entry(QPN_OP, QPN_PLAN, count=3)])
    code, result = as_json(path, capsys=capsys)
    assert code == 0 and result["ok"]
    [row] = result["rows"]
    assert (row["category"], row["row"]) == (CATEGORY, "edge:example_qpn_m1")
    assert [(a["op"], a["eager"], a["m"]) for a in row["agreed"]] == [(QPN_OP, 3, 1)]
    assert row["disagreed"] == row["unpredicted"] == row["unobserved"] == []


def test_disagreed_pairs_predicted_with_observed(tmp_path, capsys):
    legacy = {"m": 1, "group": 32, "metadata": "3-byte", "routed_slots": 10}
    path = write(tmp_path / "r.json", [entry(LEGACY_OP, legacy)])
    code, out, _ = parity(path, capsys=capsys)
    assert code == 1
    assert f"{LAYER} M 1: predicted {QPN_OP}" in out and f"observed {LEGACY_OP}" in out
    code, result = as_json(path, capsys=capsys)
    [d] = result["rows"][0]["disagreed"]
    assert d["predicted"] == {"op": QPN_OP, "plan": QPN_PLAN}
    assert (d["observed"]["op"], d["layer"], d["m"]) == (LEGACY_OP, LAYER, 1)


def test_unobserved_is_reported_and_fails_only_with_require_all(tmp_path, capsys):
    # M = 8 takes four calls (permute, W13, W2, unpermute); only the permute was observed.
    path = write(
        tmp_path / "r.json", [entry("moe_permute_with_scratch", {"m": 8, "routed_slots": 80}, m=8)]
    )
    code, result = as_json(path, capsys=capsys)
    assert code == 0
    row = result["rows"][0]
    assert len(row["agreed"]) == 1 and len(row["unobserved"]) == 3
    assert {u["m"] for u in row["unobserved"]} == {8}
    code, _, _ = parity(path, "--require-all", capsys=capsys)
    assert code == 1


def test_unpredicted_an_m_the_row_never_replayed_and_an_extra_call(tmp_path, capsys):
    path = write(
        tmp_path / "r.json",
        [
            entry(QPN_OP, {**QPN_PLAN, "m": 3}, m=3),
            entry(QPN_OP, QPN_PLAN),
            entry("moe_unpermute", {"m": 1, "routed_slots": 10}),
        ],
    )
    code, result = as_json(path, capsys=capsys)
    assert code == 1
    row = result["rows"][0]
    assert sorted((u["m"], u["op"]) for u in row["unpredicted"]) == [
        (1, "moe_unpermute"),
        (3, QPN_OP),
    ]
    assert [a["op"] for a in row["agreed"]] == [QPN_OP]


def test_records_of_several_ranks_are_merged(tmp_path, capsys):
    a = write(tmp_path / "rank0.json", [entry(QPN_OP, QPN_PLAN, count=2)], rank=0)
    b = write(tmp_path / "rank1.json", [entry(QPN_OP, QPN_PLAN, count=3, captured=True)], rank=1)
    code, result = as_json(a, b, capsys=capsys)
    assert code == 0
    [row] = result["rows"]
    assert row["ranks"] == [0, 1] and len(row["records"]) == 2
    [agreed] = row["agreed"]
    assert (agreed["eager"], agreed["captured"]) == (2, 3)


def test_a_record_of_another_policy_names_the_closest_rows(tmp_path, capsys):
    other = {"sm70_awq_moe": {"qpn_m1": True, "exact_w2": True}}
    path = write(tmp_path / "r.json", [entry(QPN_OP, QPN_PLAN)], config=other)
    code, out, err = parity(path, capsys=capsys)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert "matches no row of sm70-awq-moe" in err
    assert "closest: sm70-awq-moe:edge:example_qpn_m1 (differs in policy hash" in err


def test_a_declared_row_is_used_and_must_match(tmp_path, capsys):
    declared = Target(CATEGORY, "edge:qpn_m1_on")  # the same policy, another workload
    path = write(tmp_path / "r.json", [entry(QPN_OP, QPN_PLAN)], target=declared)
    code, _, err = parity(path, capsys=capsys)
    assert code == 2 and "edge:qpn_m1_on (differs in workload.kv_dtype" in err


@pytest.mark.parametrize(
    ("route", "code"),
    [
        (f"edge:example_*={QPN_OP}", 0),
        ("sm70-awq-moe:edge:example_qpn_m1=qpn_m1", 0),
        ("edge:example_qpn_m1=TurboMindAwqMoE", 0),
        (f"edge:example_*={LEGACY_OP}", 1),
        ("edge:example_*=TurboMindAwqLinearKernel", 1),
        (f"qwen38_*={QPN_OP}", 1),  # names no observed row
    ],
)
def test_require_route(tmp_path, capsys, route, code):
    path = write(tmp_path / "r.json", [entry(QPN_OP, QPN_PLAN)])
    got, out, err = parity(path, "--require-route", route, capsys=capsys)
    assert got == code, out + err


def test_require_route_refuses_an_unknown_kernel(tmp_path, capsys):
    path = write(tmp_path / "r.json", [entry(QPN_OP, QPN_PLAN)])
    code, _, err = parity(path, "--require-route", "edge:*=NoSuchKernel", capsys=capsys)
    assert code == 2 and "unknown kernel" in err


def test_markdown_and_github_formats(tmp_path, capsys):
    path = write(
        tmp_path / "r.json",
        [entry(LEGACY_OP, {"m": 1, "group": 32, "metadata": "3-byte", "routed_slots": 10})],
    )
    code, out, _ = parity(path, "--format", "github", capsys=capsys)
    assert code == 1
    errors = [line for line in out.splitlines() if line.startswith("::error ")]
    assert len(errors) == 1 and f"{LAYER} M 1: predicted {QPN_OP}" in errors[0]
    assert out.splitlines()[-1].startswith("::notice title=routectl parity::parity FAILS")
    code, out, _ = parity(path, "--format", "markdown", capsys=capsys)
    assert (
        code == 1
        and "| `sm70-awq-moe:edge:example_qpn_m1` | TurboMindAwqMoE | 1 | 0 | 1 | 0 | 0 |" in out
    )


def _valid(tmp_path: Path) -> dict[str, Any]:
    path = write(tmp_path / "valid.json", [entry(QPN_OP, QPN_PLAN)])
    return json.loads(path.read_text())


@pytest.mark.parametrize(
    ("name", "mutate", "words"),
    [
        ("truncated", lambda text: text[: len(text) // 2], "valid JSON"),
        (
            "wrong version",
            lambda text: text.replace('"schema_version": 1', '"schema_version": 2'),
            "schema_version 2 is not 1",
        ),
        (
            "huge count",
            lambda text: text.replace('"count": 1', '"count": 100000000000000000000'),
            "does not fit in 64 bits",
        ),
        (
            "count past 2**53",
            lambda text: text.replace('"count": 1', '"count": 1152921504606846976'),
            "count",
        ),
        ("negative count", lambda text: text.replace('"count": 1', '"count": 0'), "count"),
        (
            "unknown op",
            lambda text: text.replace(QPN_OP, "awq_moe_no_such_op"),
            "is not in the native catalogue",
        ),
        ("not an object", lambda text: "[1, 2]", "not an observation record"),
    ],
)
def test_hostile_records_exit_2_with_one_line(tmp_path, capsys, name, mutate, words):
    text = json.dumps(_valid(tmp_path), indent=2, sort_keys=True)
    path = tmp_path / "hostile.json"
    path.write_text(mutate(text))
    code, out, err = parity(path, capsys=capsys)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert words in err, err


def test_a_missing_record_file_exits_2(tmp_path, capsys):
    code, _, err = parity(tmp_path / "none.json", capsys=capsys)
    assert code == 2 and len(err.splitlines()) == 1


def test_records_are_deterministic(tmp_path):
    entries = [entry(QPN_OP, QPN_PLAN, layer=f"model.layers.{i}.mlp.experts") for i in (3, 1, 2)]
    a = write(tmp_path / "a.json", entries).read_bytes()
    b = write(tmp_path / "b.json", list(reversed(entries))).read_bytes()
    assert a == b
    layers = [e["layer"] for e in json.loads(a)["entries"]]
    assert layers == sorted(layers)


# A record of 100,000 layers' observations: its join must hold no more than a bounded multiple
# of what the parsed record itself holds (no per-row or per-prediction blow-up).
ENTRIES = 100_000
PEAK_BYTES = 256 * 1024 * 1024


def test_a_100000_entry_record_joins_in_bounded_memory(tmp_path):
    entries = [
        entry(QPN_OP, QPN_PLAN, layer=f"model.layers.{i}.mlp.experts", count=i + 1)
        for i in range(ENTRIES)
    ]
    document = {**_valid(tmp_path), "entries": entries}
    record = parse_record(document, "big", PROJECT.catalogue.ops)
    rows = {
        CATEGORY: read_snapshot(
            PROJECT.snapshots / f"{CATEGORY}.json", schema=PROJECT.snapshot_schema
        ).by_id()
    }
    tracemalloc.start()
    try:
        result = check_parity(PROJECT, [record], rows)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.ok
    assert len(result.rows[0].agreed) == ENTRIES
    assert peak < PEAK_BYTES, peak


AT_EXIT_SCRIPT = """
import sys
from policies import PROJECT
from routectl.engine.startup import start
from routectl.replay.harness import RecordingNamespace
from routectl.workload import EngineConfig, Hardware
session = start(PROJECT, None, Hardware(70), EngineConfig(tp=4), environ={})
ns = RecordingNamespace(PROJECT.catalogue, remove=["awq_sm70_prepare_compact"])
session.observe(sys.argv[1], ns, "routectl", category="sm70-awq-moe", rank=3)
try:
    session.observe(sys.argv[1], ns, "routectl")
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def test_the_record_is_written_at_exit_and_one_observer_a_session(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "at-exit.json"
    proc = subprocess.run(
        [sys.executable, "-c", AT_EXIT_SCRIPT, str(path)],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("InputError this engine session already has an observer")
    record = parse_record(json.loads(path.read_text()), "at exit", PROJECT.catalogue.ops)
    assert record.header["rank"] == 3 and record.entries == []
    assert "awq_sm70_prepare_compact" not in record.header["native"]["ops"]
    assert record.header["workload"]["tp"] == 4
