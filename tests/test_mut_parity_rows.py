"""Which retained row a record describes (`routectl.review.parity.find_row`,
`check_parity`; docs/observed-routes.md, "`routectl parity`"): every header fact compared
and each difference named, on records written by the record module from an engine
session's header (tests/test_parity.py's helpers) and then changed one fact at a time.

test_parity.py matches one record and refuses one of another policy; these tests give a
record that declares its row each single difference the docs list (model scope, workload,
capability, the ops its build lacks, ABI revisions, policy hash) and all of them at once, in
the order the message names them; a declared category the snapshot rows do not hold, an
unknown one, a declared row the category lacks; the closest rows named (at most three,
fewest differences first); and records of one row merged while records of two rows stay two
rows, sorted. Written for issue 28's mutation run.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from routectl.errors import InputError
from routectl.project import Project
from routectl.replay.observed import ParsedRecord, Target, parse_record
from routectl.review.parity import CLOSEST, RowIndex, check_parity, find_row
from routectl.review.snapshot import read_snapshot
from routectl.rows import RowSpec
from tests.test_parity import CATEGORY, PROJECT, QPN_OP, QPN_PLAN, entry, write

ROW = "edge:example_qpn_m1"
SPEC = {s.id: s for s in PROJECT.category(CATEGORY).rows()}[ROW]
assert PROJECT.snapshots is not None
ROWS = {
    CATEGORY: read_snapshot(
        PROJECT.snapshots / f"{CATEGORY}.json", schema=PROJECT.snapshot_schema
    ).by_id()
}


def document(tmp_path: Path, name: str = "r.json", **kwargs: Any) -> dict[str, Any]:
    """A valid record of the example session, declaring ROW unless told otherwise."""
    kwargs.setdefault("target", Target(CATEGORY, ROW))
    path = write(tmp_path / name, [entry(QPN_OP, QPN_PLAN)], **kwargs)
    return json.loads(path.read_text())


def parsed(data: dict[str, Any], source: str = "rec") -> ParsedRecord:
    return parse_record(data, source, PROJECT.catalogue.ops)


def refusal(data: dict[str, Any], rows: Any = ROWS) -> str:
    with pytest.raises(InputError) as caught:
        check_parity(PROJECT, [parsed(data)], rows)
    return str(caught.value)


def test_the_unchanged_record_matches_its_row(tmp_path: Path) -> None:
    result = check_parity(PROJECT, [parsed(document(tmp_path))], ROWS)
    assert [(r.category, r.row) for r in result.rows] == [(CATEGORY, ROW)]
    assert result.ok
    # --require-all is off unless asked for: the unobserved rest of a row is no failure.
    assert result.require_all is False


def _hash(data: dict[str, Any]) -> str:
    return data["policy_hash"][:12]


def _no_match(data: dict[str, Any], differences: str) -> str:
    return (
        f"rec (rank {data['rank']}, policy {_hash(data)}) matches no row of {CATEGORY}; "
        f"closest: {CATEGORY}:{ROW} (differs in {differences})"
    )


def test_each_header_fact_is_compared_and_named(tmp_path: Path) -> None:
    good = document(tmp_path)
    cases: list[tuple[dict[str, Any], str]] = []
    model = {**good, "target": {**good["target"], "model": "another_model"}}
    cases.append((model, f"model {SPEC.model}"))
    workload = {**good, "workload": {**good["workload"], "max_num_seqs": 16}}
    cases.append((workload, f"workload.max_num_seqs {good['workload']['max_num_seqs']}"))
    capability = {**good, "capability": 75}
    cases.append((capability, f"capability {SPEC.capability}"))
    lacking = [op for op in good["native"]["ops"] if op != "awq_sm70_prepare"]
    ops = {**good, "native": {**good["native"], "ops": lacking}}
    cases.append((ops, "native ops lacking none"))  # the row's build lacks no op
    abi = [{**a, "revision": a["revision"] + 1} for a in good["native"]["abi"]]
    revisions = {**good, "native": {**good["native"], "abi": abi}}
    cases.append((revisions, "native ABI revisions"))
    policy = {**good, "policy_hash": "0" * len(good["policy_hash"])}
    cases.append((policy, f"policy hash {_hash(good)}"))
    for data, differences in cases:
        assert refusal(data) == _no_match(data, differences)


def test_every_difference_at_once_in_the_documented_order(tmp_path: Path) -> None:
    good = document(tmp_path)
    lacking = [op for op in good["native"]["ops"] if op != "awq_sm70_prepare"]
    data = {
        **good,
        "target": {**good["target"], "model": "another_model"},
        "workload": {**good["workload"], "max_num_seqs": 16, "tp": 2},
        "capability": 75,
        "native": {**good["native"], "ops": lacking, "abi": []},
        "policy_hash": "f" * len(good["policy_hash"]),
    }
    # A build that lacks an op is not compared on ABI revisions.
    differences = ", ".join(
        [
            f"model {SPEC.model}",
            f"workload.max_num_seqs {good['workload']['max_num_seqs']}",
            f"workload.tp {good['workload']['tp']}",
            f"capability {SPEC.capability}",
            "native ops lacking none",
            f"policy hash {_hash(good)}",
        ]
    )
    assert refusal(data) == _no_match(data, differences)
    # The model matches when the record names none or the row's own.
    for model in (None, SPEC.model):
        same = {**good, "target": {**good["target"], "model": model}}
        assert check_parity(PROJECT, [parsed(same)], ROWS).rows[0].row == ROW


def test_a_row_that_lacks_an_op_is_matched_by_a_build_that_lacks_it(tmp_path: Path) -> None:
    # A probe that removes ops is matched only by a build that lacks exactly those ops.
    spec = next(s for s in PROJECT.category(CATEGORY).rows() if s.native.remove and not s.status)
    good = document(tmp_path)
    data = {**good, "target": {**good["target"], "row": spec.id}}
    message = refusal(data)
    assert f"native ops lacking {sorted(spec.native.remove)}" in message


def test_the_declared_category_and_row_must_exist(tmp_path: Path) -> None:
    good = document(tmp_path)
    other = {**good, "target": {**good["target"], "category": "sm70-awq-linear"}}
    assert refusal(other) == "rec: no retained snapshot of category sm70-awq-linear"
    unknown = {**good, "target": {**good["target"], "category": "sm70-awq-mo"}}
    assert "did you mean" in refusal(unknown)
    missing = {**good, "target": {**good["target"], "row": "edge:no_such_row"}}
    assert (
        refusal(missing) == f"rec: declares row 'edge:no_such_row', which {CATEGORY} does not have"
    )
    both = {"sm70-awq-linear": {}, **ROWS}
    searched = {**good, "target": {**good["target"], "category": None, "row": "edge:no_such_row"}}
    assert refusal(searched, both) == (
        f"rec: declares row 'edge:no_such_row', which sm70-awq-linear or {CATEGORY} does not have"
    )


def test_the_closest_rows_are_at_most_three_fewest_differences_first(tmp_path: Path) -> None:
    good = document(tmp_path, target=Target(CATEGORY))
    data = {**good, "capability": 75}
    message = refusal(data)
    head = f"rec (rank 0, policy {_hash(good)}) matches no row of {CATEGORY}; closest: "
    assert message.startswith(head)
    named = message[len(head) :].split("; ")
    assert len(named) == CLOSEST
    # The example's own row differs in the capability alone: it is first.
    assert named[0] == f"{CATEGORY}:{ROW} (differs in capability {SPEC.capability})"
    counts = [len(n.split(" (differs in ", 1)[1].split(", ")) for n in named]
    assert counts == sorted(counts) and counts[0] == 1


def test_a_record_without_a_category_names_every_category_searched(tmp_path: Path) -> None:
    good = document(tmp_path, target=Target(None))
    both = {"sm70-awq-linear": {}, **ROWS}
    message = refusal({**good, "capability": 75}, both)
    assert f"matches no row of sm70-awq-linear, {CATEGORY}; closest: " in message


_BASE: Any = type(PROJECT.category(CATEGORY))


class _StatusOnly(_BASE):  # type: ignore[misc]
    """The example's category keeping only the cells it does not model (each has a status)."""

    def rows(self) -> Sequence[RowSpec]:
        return [r for r in super().rows() if r.status is not None]


def _status_only(project: Project) -> Project:
    """The project with CATEGORY's rows cut to its status rows, through the family records
    (the project derives its categories from them)."""
    families = tuple(
        dataclasses.replace(
            f,
            categories=tuple(_StatusOnly() if c.name == CATEGORY else c for c in f.categories),
        )
        for f in project.families
    )
    return dataclasses.replace(project, families=families)


def test_a_category_without_modelled_rows_names_no_closest_row(tmp_path: Path) -> None:
    record = parsed(document(tmp_path, target=Target(CATEGORY)))
    index = RowIndex(_status_only(PROJECT))
    assert index._project.category(CATEGORY).rows()  # status rows only: none predicts
    assert index.facts(CATEGORY) == []
    with pytest.raises(InputError) as caught:
        find_row(index, record, [CATEGORY])
    assert str(caught.value).endswith(f"matches no row of {CATEGORY}; closest: none")


def test_records_of_one_row_merge_and_of_two_rows_stay_apart(tmp_path: Path) -> None:
    a = parsed(document(tmp_path, "a.json", rank=1), "a")
    b = parsed(document(tmp_path, "b.json", rank=0), "b")
    # The example's 4-byte session (compact metadata off): the probe beside ROW.
    four = {"sm70_awq_moe": {"qpn_m1": True, "compact_metadata": False}}
    c = parsed(document(tmp_path, "c.json", config=four, target=Target(CATEGORY)), "c")
    result = check_parity(PROJECT, [a, c, b], ROWS)
    assert [(r.row, r.sources, r.ranks) for r in result.rows] == [
        (ROW, ["a", "b"], [0, 1]),
        (f"{ROW}_4byte", ["c"], [0]),
    ]


def test_a_row_missing_from_the_retained_snapshot_asks_for_an_update(tmp_path: Path) -> None:
    rows = {CATEGORY: {k: v for k, v in ROWS[CATEGORY].items() if k != ROW}}
    assert refusal(document(tmp_path), rows) == (
        f"{CATEGORY}:{ROW} is not in the retained snapshot: run routectl check --update"
    )
