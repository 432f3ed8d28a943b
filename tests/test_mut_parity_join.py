"""The parity join and its renderings, on hand-made records and rows (`routectl.review.parity`;
docs/observed-routes.md, "`routectl parity`").

test_parity.py drives parity through the CLI on one real row, where each (layer, M) holds one
call; these tests give `join_row` several layers, the load and several M at once, several
records of one row and several calls to pair, and compare whole results: the order of the
items (the load before every M, M in numeric order, layers by name), the pairing rule (the
predicted call of the same op first, else the first one left), the counts merged per record
and per capture state, the verdict with and without `--require-all`, and every line the text,
Markdown and GitHub renderings print (the documented example's lines, the 20-item cap, the
escapes of a GitHub annotation). Written for issue 28's mutation run: mutants of the join's
order, pairing and counters and of the renderers' words survived the CLI tests.
"""

from __future__ import annotations

from typing import Any

from routectl.replay.observed import ParsedRecord
from routectl.review.parity import (
    SHOWN,
    ParityResult,
    RowFacts,
    RowParity,
    join_row,
    predictions,
    problem_lines,
    render_github,
    render_markdown,
    render_text,
    summary_line,
)
from routectl.rows import RowSpec
from routectl.workload import EngineConfig

CATEGORY = "cat"
ROW = "edge:row"
A = "model.layers.0.mlp.experts"
B = "model.layers.1.mlp.experts"
FACTS = RowFacts(
    CATEGORY, RowSpec(ROW, "model", EngineConfig(), 70), EngineConfig().to_json(), frozenset(), {}
)


def call(op: str, **plan: Any) -> dict[str, Any]:
    return {"op": op, "plan": plan}


def entry(layer: str, m: int | None, op: str, plan: dict[str, Any], count: int = 1,
          captured: bool = False) -> dict[str, Any]:  # fmt: skip
    return {"layer": layer, "m": m, "captured": captured, "op": op, "plan": plan, "count": count}


def record(source: str, rank: int, entries: list[dict[str, Any]]) -> ParsedRecord:
    # join_row reads a record's source, its rank and its entries only.
    return ParsedRecord(source, {"rank": rank}, entries)


def row(
    prepare: list[dict[str, Any]], dispatch: list[dict[str, Any]], kernel: str | None = "K"
) -> dict[str, Any]:
    route: dict[str, Any] = {"prepare": prepare, "dispatch": dispatch}
    if kernel is not None:
        route["kernel"] = kernel
    return {"id": ROW, "route": route}


def observed(layer: str, m: int | None, op: str, plan: dict[str, Any], eager: int = 1,
             captured: int = 0) -> dict[str, Any]:  # fmt: skip
    return {"layer": layer, "m": m, "op": op, "plan": plan, "eager": eager, "captured": captured}


def test_predictions_are_unique_in_order_and_dispatch_by_integer_m() -> None:
    route = {
        "prepare": [call("p2", k=2), call("p1", k=1), call("p2", k=2)],
        "dispatch": [
            call("d", m=8, x=1),
            call("e", m=1),
            call("d", m=8, x=1),  # a repeated call: predicted once
            call("f", m=8),
            call("g"),  # no M: predicts nothing at any M
            call("h", m="8"),  # not an integer M
        ],
    }
    prepare, by_m = predictions(route)
    assert prepare == [("p2", (("k", 2),)), ("p1", (("k", 1),))]
    assert by_m == {
        8: [("d", (("m", 8), ("x", 1))), ("f", (("m", 8),))],
        1: [("e", (("m", 1),))],
    }
    assert predictions({}) == ([], {})


def test_the_load_sorts_before_m_0_and_m_in_numeric_order_whatever_the_records_order() -> None:
    # The record writer orders a layer's entries load first, then by M (M None before M 0);
    # the join must too, also when the load comes from another rank's record than M 0 does.
    predicted = row(
        [call("prep", k=1)],
        [call("d", m=0), call("d", m=2), call("d", m=10)],
    )
    records = [
        record(
            "r1",
            1,
            [
                entry(B, 10, "d", {"m": 10}),
                entry(A, 10, "d", {"m": 10}),
                entry(A, 2, "d", {"m": 2}),
                entry(A, 0, "d", {"m": 0}),
            ],
        ),  # fmt: skip
        record("r0", 0, [entry(A, None, "prep", {"k": 1}), entry(B, None, "prep", {"k": 1})]),
    ]
    result = join_row(FACTS, predicted, records)
    assert [(a["layer"], a["m"]) for a in result.agreed] == [
        (A, None),
        (A, 0),
        (A, 2),
        (A, 10),
        (B, None),
        (B, 10),
    ]
    assert result.to_json() == {
        "category": CATEGORY,
        "row": ROW,
        "kernel": "K",
        "records": ["r1", "r0"],
        "ranks": [0, 1],
        "agreed": [
            observed(A, None, "prep", {"k": 1}),
            observed(A, 0, "d", {"m": 0}),
            observed(A, 2, "d", {"m": 2}),
            observed(A, 10, "d", {"m": 10}),
            observed(B, None, "prep", {"k": 1}),
            observed(B, 10, "d", {"m": 10}),
        ],
        "disagreed": [],
        "unobserved": [],
        "unpredicted": [],
        "required": [],
    }
    assert result.qualified == f"{CATEGORY}:{ROW}"


def test_counts_merge_across_records_by_capture_state() -> None:
    predicted = row([], [call("d", m=1)])
    records = [
        record("a", 2, [entry(A, 1, "d", {"m": 1}, 2), entry(A, 1, "d", {"m": 1}, 5, True)]),
        record("b", 0, [entry(A, 1, "d", {"m": 1}, 3)]),
        record("c", 1, [entry(A, 1, "d", {"m": 1}, 7, True)]),
    ]
    result = join_row(FACTS, predicted, records)
    assert result.agreed == [observed(A, 1, "d", {"m": 1}, eager=5, captured=12)]
    assert result.ranks == [0, 1, 2] and result.sources == ["a", "b", "c"]


def test_the_row_json_names_every_list() -> None:
    parity = RowParity(
        CATEGORY,
        ROW,
        None,
        ["s"],
        [2],
        agreed=[{"a": 1}],
        disagreed=[{"d": 1}],
        unobserved=[{"u": 1}],
        unpredicted=[{"p": 1}],
        required=[{"r": 1}],
    )
    assert parity.to_json() == {
        "category": CATEGORY,
        "row": ROW,
        "kernel": None,
        "records": ["s"],
        "ranks": [2],
        "agreed": [{"a": 1}],
        "disagreed": [{"d": 1}],
        "unobserved": [{"u": 1}],
        "unpredicted": [{"p": 1}],
        "required": [{"r": 1}],
    }
    assert ParityResult([parity], ["f"], False).to_json() == {
        "ok": False,
        "require_all": False,
        "rows": [parity.to_json()],
        "failures": ["f"],
    }


def test_disagreed_pairs_the_same_op_first_then_the_first_left() -> None:
    # Predicted at M 4: w13, w2 (plan x=1), w2 (plan x=2), unpermute. Observed: w2 with x=3
    # (paired with the first predicted w2 left), permute (no predicted permute: paired with
    # the first call left, w13), unpermute agreed, and two more calls with nothing predicted
    # left but the second w2 for the first of them.
    predicted = row(
        [],
        [call("w13", m=4), call("w2", m=4, x=1), call("w2", m=4, x=2), call("unpermute", m=4)],
    )
    entries = [
        entry(A, 4, "w2", {"m": 4, "x": 3}),
        entry(A, 4, "permute", {"m": 4}),
        entry(A, 4, "unpermute", {"m": 4}, 2),
        entry(A, 4, "extra", {"m": 4}),
        entry(A, 4, "other", {"m": 4}, 4, True),
    ]
    result = join_row(FACTS, predicted, [record("r", 0, entries)])
    assert result.agreed == [observed(A, 4, "unpermute", {"m": 4}, eager=2)]
    assert result.disagreed == [
        {
            "layer": A,
            "m": 4,
            "predicted": {"op": "w2", "plan": {"m": 4, "x": 1}},
            "observed": observed(A, 4, "w2", {"m": 4, "x": 3}),
        },
        {
            "layer": A,
            "m": 4,
            "predicted": {"op": "w13", "plan": {"m": 4}},
            "observed": observed(A, 4, "permute", {"m": 4}),
        },
        {
            "layer": A,
            "m": 4,
            "predicted": {"op": "w2", "plan": {"m": 4, "x": 2}},
            "observed": observed(A, 4, "extra", {"m": 4}),
        },
    ]
    assert result.unpredicted == [observed(A, 4, "other", {"m": 4}, eager=0, captured=4)]
    assert result.unobserved == []
    assert result.observed_ops() == {"unpermute", "w2", "permute", "extra", "other"}


def test_unobserved_is_what_is_left_of_an_observed_m_and_an_unpredicted_m_is_unpredicted() -> None:
    predicted = row([call("prep", k=1), call("prep", k=2)], [call("a", m=1), call("b", m=1)])
    entries = [
        entry(A, None, "prep", {"k": 2}),
        entry(A, 1, "b", {"m": 1}),
        entry(A, 3, "a", {"m": 3}),  # M 3 is not predicted: nothing to pair it with
    ]
    result = join_row(FACTS, predicted, [record("r", 0, entries)])
    assert result.agreed == [observed(A, None, "prep", {"k": 2}), observed(A, 1, "b", {"m": 1})]
    assert result.unobserved == [
        {"layer": A, "m": None, "op": "prep", "plan": {"k": 1}},
        {"layer": A, "m": 1, "op": "a", "plan": {"m": 1}},
    ]
    assert result.unpredicted == [observed(A, 3, "a", {"m": 3})]
    assert result.disagreed == []


def test_a_route_without_kernel_prepare_or_dispatch() -> None:
    result = join_row(FACTS, row([], [], kernel=None), [record("r", 0, [entry(A, 1, "d", {})])])
    assert result.kernel is None
    assert result.unpredicted == [observed(A, 1, "d", {})]


def _parity(**items: list[dict[str, Any]]) -> RowParity:
    return RowParity(CATEGORY, ROW, "K", ["r"], [0], **items)


AGREED = observed(A, None, "prep", {"k": 1, "m": 5}, eager=1)
DISAGREED: dict[str, Any] = {
    "layer": A,
    "m": 1,
    "predicted": {"op": "qpn", "plan": {"m": 1, "s": 10}},
    "observed": observed(A, 1, "legacy", {"m": 1, "s": 10}, eager=2, captured=1),
}
UNOBSERVED = {"layer": B, "m": 8, "op": "w2", "plan": {"m": 8}}
UNPREDICTED = observed(B, 3, "qpn", {"b": 2, "a": 1, "m": 3}, eager=0, captured=1)


def test_the_verdict() -> None:
    clean = _parity(agreed=[AGREED], unobserved=[UNOBSERVED])
    assert ParityResult([clean], [], False).ok
    assert not ParityResult([clean], [], True).ok  # --require-all: unobserved fails
    assert not ParityResult([clean], ["a failure"], False).ok
    assert not ParityResult([_parity(disagreed=[DISAGREED])], [], False).ok
    assert not ParityResult([clean, _parity(unpredicted=[UNPREDICTED])], [], False).ok
    assert ParityResult([], [], True).ok
    assert ParityResult([clean], [], True).to_json() == {
        "ok": False,
        "require_all": True,
        "rows": [clean.to_json()],
        "failures": [],
    }


def _whole() -> ParityResult:
    parity = _parity(
        agreed=[AGREED], disagreed=[DISAGREED], unobserved=[UNOBSERVED], unpredicted=[UNPREDICTED]
    )
    parity.required.append({"route": "edge:*=K", "ok": False, "reason": "why"})
    other = RowParity("c2", "edge:two", None, ["s1", "s2"], [0, 3], agreed=[AGREED])
    other.required.append({"route": "c2:*=qpn", "ok": True, "reason": "op qpn observed"})
    return ParityResult([parity, other], ["--require-route x: no observed row matches"], True)


def test_problem_and_summary_lines() -> None:
    result = _whole()
    assert problem_lines(result) == [
        f"cat:edge:row: {A} M 1: predicted qpn (s=10), observed legacy (s=10)",
        f"cat:edge:row: {B} M 3: observed qpn (a=1, b=2), not predicted",
        f"cat:edge:row: {B} M 8: predicted w2 (), never observed",
        "--require-route x: no observed row matches",
    ]
    result.require_all = False
    assert problem_lines(result)[2:] == ["--require-route x: no observed row matches"]
    assert summary_line(result) == (
        "parity FAILS: 3 record(s), 2 row(s); 2 agreed, 1 disagreed, 1 predicted but "
        "unobserved, 1 observed but unpredicted"
    )
    assert summary_line(ParityResult([_parity(agreed=[AGREED])], [], False)).startswith(
        "parity holds: 1 record(s), 1 row(s); 1 agreed, 0 disagreed"
    )


def test_render_text_prints_every_outcome_class_and_requirement() -> None:
    assert render_text(_whole()) == "\n".join(
        [
            "cat:edge:row (kernel K; 1 record(s), rank 0)",
            " agreed: 1",
            f"  {A} load: prep (k=1), 1 call",
            " disagreed: 1",
            f"  {A} M 1: predicted qpn (s=10), observed legacy (s=10), 3 calls, "
            "1 captured in a CUDA graph",
            " predicted but unobserved: 1",
            f"  {B} M 8: w2 ()",
            " observed but unpredicted: 1",
            f"  {B} M 3: qpn (a=1, b=2), 1 call, 1 captured in a CUDA graph",
            " require edge:*=K: FAILS (why)",
            "c2:edge:two (kernel none; 2 record(s), rank 0, 3)",
            " agreed: 1",
            f"  {A} load: prep (k=1), 1 call",
            " require c2:*=qpn: ok (op qpn observed)",
            "error: --require-route x: no observed row matches",
            "parity FAILS: 3 record(s), 2 row(s); 2 agreed, 1 disagreed, 1 predicted but "
            "unobserved, 1 observed but unpredicted",
            "",
        ]
    )


def test_render_text_lists_at_most_shown_items_per_class() -> None:
    agreed = [observed(A, m, "d", {"m": m}, eager=2) for m in range(SHOWN + 2)]
    text = render_text(ParityResult([_parity(agreed=agreed)], [], False))
    lines = text.splitlines()
    assert lines[1] == f" agreed: {SHOWN + 2}"
    assert lines[2 : 2 + SHOWN] == [f"  {A} M {m}: d (), 2 calls" for m in range(SHOWN)]
    assert lines[2 + SHOWN] == "... and 2 more (see --format json)"
    assert len(lines) == SHOWN + 4
    exactly = render_text(ParityResult([_parity(agreed=agreed[:SHOWN])], [], False))
    assert "more" not in exactly and len(exactly.splitlines()) == SHOWN + 3


def test_render_markdown() -> None:
    assert render_markdown(_whole()) == "\n".join(
        [
            "## routectl parity",
            "",
            summary_line(_whole()),
            "",
            "| row | kernel | records | agreed | disagreed | unobserved | unpredicted |",
            "|---|---|---|---|---|---|---|",
            "| `cat:edge:row` | K | 1 | 1 | 1 | 1 | 1 |",
            "| `c2:edge:two` | none | 2 | 1 | 0 | 0 | 0 |",
            "",
            "### Problems",
            "",
            *(f"- {p}" for p in problem_lines(_whole())),
            "",
        ]
    )
    assert render_markdown(ParityResult([], [], False)) == "\n".join(
        ["## routectl parity", "", summary_line(ParityResult([], [], False)), ""]
    )


def test_render_github_escapes_and_caps_the_annotations() -> None:
    layer = "a%b\r\nc"
    disagreed = [
        {**DISAGREED, "layer": layer, "m": m, "observed": {**DISAGREED["observed"], "m": m}}
        for m in range(SHOWN + 3)
    ]
    result = ParityResult([_parity(disagreed=disagreed)], [], False)
    lines = render_github(result).splitlines()
    assert len(lines) == SHOWN + 1
    assert lines[0] == (
        "::error title=routectl parity::cat:edge:row: a%25b%0D%0Ac M 0: predicted qpn (s=10), "
        "observed legacy (s=10)"
    )
    assert lines[SHOWN - 1].startswith(
        f"::error title=routectl parity::cat:edge:row: a%25b%0D%0Ac M {SHOWN - 1}:"
    )
    assert lines[SHOWN] == (
        f"::notice title=routectl parity::{summary_line(result)}; 3 more not shown"
    )
    fine = ParityResult([_parity(agreed=[AGREED])], [], False)
    assert render_github(fine) == f"::notice title=routectl parity::{summary_line(fine)}\n"


def test_render_github_at_exactly_shown_problems_says_nothing_is_left_out() -> None:
    disagreed = [
        {**DISAGREED, "m": m, "observed": {**DISAGREED["observed"], "m": m}} for m in range(SHOWN)
    ]
    result = ParityResult([_parity(disagreed=disagreed)], [], False)
    lines = render_github(result).splitlines()
    assert len(lines) == SHOWN + 1
    assert lines[SHOWN] == f"::notice title=routectl parity::{summary_line(result)}"
