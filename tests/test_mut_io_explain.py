"""`routectl explain`'s text, line by line, and how it finds a row (issue 28's mutation run
of `routectl.review.explain` and `routectl.review.listing`).

docs/commands.md states what explain prints: the row's inputs, the policy sections its family
reads (or every section with `--all-policy`), every candidate's verdict in priority order,
the kernel, layout, flags, fallbacks, byte counts with thousands separators, the native calls
and why a row has none; keys a category adds are its own lines, keys nobody renders still
show as JSON. `routectl list` shows one line per category with its counts and description.
The CLI tests check a few of these lines on the toy project; here documents of each route
shape (selected, error, status, an empty kernel) are rendered whole and compared with the
whole text, so that a dropped line, a changed separator or a swapped branch is caught.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from routectl.category import Category
from routectl.errors import InputError
from routectl.project import Catalogue, Project, load_project
from routectl.review.explain import explain, explain_document, explain_text, resolve_row
from routectl.review.listing import category_summary, list_json, list_text
from routectl.rows import NativeChanges, RowSpec
from routectl.workload import EngineConfig
from tests.fixtures.toy import make_project

ENGINE = EngineConfig(tp=2, max_num_batched_tokens=4096)
ENGINE_LINE = "engine " + " ".join(f"{k}={json.dumps(v)}" for k, v in ENGINE.to_json().items())


class Plain(Category):
    """A category that adds nothing to the generic shapes."""

    def __init__(self, name: str = "toy-plain", ids: Sequence[str] = ()) -> None:
        self.name = name
        self.basis = "test"
        self._ids = tuple(ids)

    def rows(self) -> Sequence[RowSpec]:
        return [RowSpec(id=i, model="m", engine=ENGINE, capability=70) for i in self._ids]


class Extra(Plain):
    """A category that renders its own `stages` key and has whole-model figures."""

    def explain_lines(self, route: dict[str, Any]) -> list[str]:
        return [f"stages: {'/'.join(route.pop('stages'))}"] if "stages" in route else []


def inputs(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": "m7",
        "capability": 70,
        "engine": ENGINE.to_json(),
        "variables": {},
        "native": {"remove": [], "abi": {}},
    }
    return {**base, **changes}


def document(route: dict[str, Any], **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "category": "toy-plain",
        "id": "toy-plain:m7/a",
        "inputs": inputs(),
        "policy": None,
        "route": route,
        "model_totals": None,
    }
    return {**base, **changes}


HEAD = ["row toy-plain:m7/a", "model m7, capability 70", ENGINE_LINE]


def text(route: dict[str, Any], category: Category | None = None, **changes: Any) -> list[str]:
    rendered = explain_text(document(route, **changes), category or Plain())
    assert rendered.endswith("\n") and not rendered.endswith("\n\n")
    return rendered[:-1].split("\n")


# --- a selected route, every key --------------------------------------------------------------


def test_a_selected_route_is_rendered_whole() -> None:
    route = {
        "kernel": "TritonQpn2",
        "verdicts": [
            {
                "name": "TurboMind",
                "ok": False,
                "code": "group_size",
                "message": "g=64 unsupported",
                "not_needed": False,
            },
            {"name": "TritonQpn2", "ok": True, "code": None, "message": None, "not_needed": False},
            {"name": "Qpn4", "ok": True, "code": None, "message": None, "not_needed": True},
            {"name": "Dense", "ok": True, "code": None, "message": None, "not_needed": False},
        ],
        "prepared_layout": "compact",
        "capability": 70,
        "fallback": False,
        "flags": {"gated": True, "m_tile": 64},
        "fallbacks": [
            {"field": "sm70.tile", "requested": 128, "effective": 64, "reason": "too wide"},
            {"field": "sm70.mode", "requested": "fast", "effective": None, "reason": "off"},
        ],
        "bytes": {
            "total": 1234567,
            "tensors": {"qweight": 1048576, "scales": 2048},
            "scratch": {"workspace": {"a": 4096, "b": 0}},
            "persistent": 12345,
            "ratio": 0.5,
            "flag": True,
        },
        "prepare": [{"op": "pack", "plan": {"n": 4096, "layout": "compact"}}],
        "dispatch": [
            {"op": "gemm", "plan": {"m": 1, "k": 4096}},
            {"op": "gemm", "plan": {}},
        ],
        "zz_extra": {"b": 1, "a": [2]},
        "aa_note": "kept",
    }
    assert text(route) == [
        *HEAD,
        "candidates (priority order):",
        "  TurboMind   rejected  [group_size] g=64 unsupported",
        "  TritonQpn2  chosen",
        "  Qpn4        ok, not needed",
        "  Dense       ok",
        "kernel: TritonQpn2",
        "prepared layout: compact",
        "capability: 70",
        "fallback: false",
        "flags: gated=true, m_tile=64",
        "fallbacks:",
        "  sm70.tile: requested 128, effective 64 (too wide)",
        '  sm70.mode: requested "fast", effective null (off)',
        "bytes: total 1,234,567",
        "  tensor qweight: 1,048,576",
        "  tensor scales: 2,048",
        "  scratch workspace a: 4,096",
        "  scratch workspace b: 0",
        "  persistent: 12,345",
        "  ratio: 0.5",
        "  flag: true",
        "prepare:",
        '  pack  n=4096  layout="compact"',
        "dispatch:",
        "  gemm  m=1  k=4096",
        "  gemm",
        # Keys nobody renders, in the route's order, as sorted JSON.
        'zz_extra: {"a": [2], "b": 1}',
        'aa_note: "kept"',
    ]


def test_the_renderer_does_not_change_the_document() -> None:
    route = {"kernel": "K", "verdicts": [], "bytes": {"total": 1, "tensors": {"w": 1}}}
    doc = document(json.loads(json.dumps(route)))
    before = json.dumps(doc, sort_keys=True)
    explain_text(doc, Plain())
    assert json.dumps(doc, sort_keys=True) == before


def test_empty_parts_say_none() -> None:
    route: dict[str, Any] = {
        "kernel": None,
        "verdicts": [],
        "prepared_layout": None,
        "flags": {},
        "fallbacks": [],
        "bytes": {"tensors": {}, "scratch": {}},
        "prepare": [],
        "dispatch": [],
    }
    assert text(route) == [
        *HEAD,
        "candidates: none",
        "kernel: none",
        "prepared layout: none",
        "flags: none",
        "fallbacks: none",
        'bytes: total "?"',
        "prepare: none",
        "dispatch: none (no kernel was chosen)",
    ]


def test_a_route_of_no_generic_keys_still_says_prepare_and_dispatch() -> None:
    assert text({}) == [*HEAD, "prepare: none", "dispatch: none (no kernel was chosen)"]


def test_a_chosen_kernel_without_calls_says_so() -> None:
    assert text({"kernel": "Qpn4", "dispatch": []}) == [
        *HEAD,
        "kernel: Qpn4",
        "prepare: none",
        "dispatch: none (Qpn4 makes no call to a catalogued native op at the replayed token "
        "counts)",
    ]


def test_a_verdict_name_wider_than_the_rest_sets_the_column() -> None:
    verdicts = [
        {"name": "A", "ok": True, "code": None, "message": None, "not_needed": False},
        {"name": "LongerName", "ok": False, "code": "c", "message": "m", "not_needed": False},
    ]
    assert text({"kernel": "A", "verdicts": verdicts})[3:6] == [
        "candidates (priority order):",
        "  A           chosen",
        "  LongerName  rejected  [c] m",
    ]


def test_a_rejected_candidate_named_like_the_kernel_is_rejected() -> None:
    # The verdict decides: a failed verdict is "rejected" whatever the kernel's name.
    verdicts = [{"name": "K", "ok": False, "code": "x", "message": "no", "not_needed": True}]
    assert text({"kernel": "K", "verdicts": verdicts})[3:5] == [
        "candidates (priority order):",
        "  K  rejected  [x] no",
    ]


# --- error and status routes -----------------------------------------------------------------


def test_an_error_route_says_it_fails_closed() -> None:
    route = {
        "error": {"code": "nothing_can_serve", "message": "no kernel for q_proj"},
        "verdicts": [
            {"name": "K", "ok": False, "code": "dtype", "message": "bf16", "not_needed": False}
        ],
    }
    assert text(route) == [
        *HEAD,
        "error [nothing_can_serve] no kernel for q_proj",
        "candidates (priority order):",
        "  K  rejected  [dtype] bf16",
        "prepare: none",
        "dispatch: none (the layer fails closed at load: nothing is prepared or dispatched)",
    ]


def test_an_error_route_with_a_kernel_key_still_fails_closed() -> None:
    route = {"error": {"code": "e", "message": "m"}, "kernel": "K"}
    assert text(route)[-1] == (
        "dispatch: none (the layer fails closed at load: nothing is prepared or dispatched)"
    )


def test_a_status_route_without_a_kernel_names_the_status() -> None:
    route = {"status": {"code": "not_modelled", "message": "TP 3 is not served"}, "kernel": None}
    assert text(route) == [
        *HEAD,
        "kernel: none",
        "status [not_modelled] TP 3 is not served",
        "prepare: none",
        "dispatch: none (no kernel serves this row (TP 3 is not served))",
    ]
    assert text({"status": {"code": "s", "message": "out of scope"}}) == [
        *HEAD,
        "status [s] out of scope",
        "prepare: none",
        "dispatch: none (no kernel serves this row (out of scope))",
    ]


def test_a_status_route_with_a_kernel_names_the_kernel() -> None:
    route = {"status": {"code": "s", "message": "partial"}, "kernel": "Dense"}
    assert text(route) == [
        *HEAD,
        "kernel: Dense",
        "status [s] partial",
        "prepare: none",
        "dispatch: none (Dense makes no call to a catalogued native op at the replayed token "
        "counts)",
    ]


# --- inputs and policy -----------------------------------------------------------------------


def test_variables_and_the_native_build_are_listed() -> None:
    changed = inputs(
        variables={"VLLM_SM70_A": "1", "VLLM_SM70_B": "off"},
        native={"remove": ["op_a", "op_b"], "abi": {"op_c": 2, "op_d": 3}},
    )
    assert text({}, inputs=changed)[3:5] == [
        "variables VLLM_SM70_A=1 VLLM_SM70_B=off",
        "native build: removed op_a, op_b; ABI revisions op_c=2, op_d=3",
    ]


def test_a_native_build_of_one_kind_of_change_says_none_or_default() -> None:
    removed = inputs(native={"remove": ["op_a"], "abi": {}})
    assert text({}, inputs=removed)[3] == "native build: removed op_a; ABI revisions default"
    abi = inputs(native={"remove": [], "abi": {"op_c": 1}})
    assert text({}, inputs=abi)[3] == "native build: removed none; ABI revisions op_c=1"
    # Neither: no line at all.
    assert text({}, inputs=inputs())[3] == "prepare: none"


def policy(sections: list[str] | None, warnings: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "values": {
            "sm70.enabled": {"value": True, "source": "default"},
            "sm70.tile_m": {"value": 64, "source": "alias:VLLM_SM70_TILE"},
        },
        "sections": sections,
        "warnings": list(warnings),
        "ignored": [],
    }


def test_the_policy_of_the_rows_sections_names_them() -> None:
    lines = text({}, policy=policy(["sm70", "sm75"], ["VLLM_OLD is deprecated"]))
    assert lines[3:7] == [
        "policy (value, source; sections sm70, sm75 and engine-wide; --all-policy shows every "
        "section):",
        "  sm70.enabled = true  (default)",
        "  sm70.tile_m  = 64  (alias:VLLM_SM70_TILE)",
        "  warning: VLLM_OLD is deprecated",
    ]


def test_the_whole_policy_says_every_section() -> None:
    lines = text({}, policy=policy(None))
    assert lines[3:6] == [
        "policy (value, source; every section):",
        "  sm70.enabled = true  (default)",
        "  sm70.tile_m  = 64  (alias:VLLM_SM70_TILE)",
    ]
    assert lines[6] == "prepare: none"


# --- what the category adds ------------------------------------------------------------------


def test_the_categorys_lines_come_before_the_keys_left_over_and_the_totals() -> None:
    route = {"kernel": "K", "stages": ["a", "b"], "other": 1}
    totals = {"layers": 48, "bytes": 1234567, "scratch": 1000}
    assert text(route, Extra(), model_totals=totals) == [
        *HEAD,
        "kernel: K",
        "prepare: none",
        "dispatch: none (K makes no call to a catalogued native op at the replayed token counts)",
        "stages: a/b",
        "other: 1",
        "model totals per rank over 48 layers: bytes 1,234,567, scratch 1,000",
    ]
    # Without the category's renderer the key is left over, as JSON.
    assert text(route)[-1] == "other: 1"
    assert text(route)[-2] == 'stages: ["a", "b"]'


def test_no_model_totals_no_line() -> None:
    assert text({}, model_totals={}) == [
        *HEAD,
        "prepare: none",
        "dispatch: none (no kernel was chosen)",
    ]
    assert text({}, model_totals=None) == text({}, model_totals={})


# --- the document ----------------------------------------------------------------------------


def test_the_document_carries_the_rows_inputs_and_route() -> None:
    spec = RowSpec(
        id="m7/x",
        model="m7",
        engine=ENGINE,
        capability=75,
        variables=(("VLLM_B", "2"), ("VLLM_A", "1")),
        native=NativeChanges(remove=("op_z",), abi=(("op_c", 2),)),
    )
    route = {"kernel": "K"}
    doc = explain_document(Plain("toy-x"), spec, {"id": "m7/x", "route": route}, None)
    assert doc == {
        "category": "toy-x",
        "id": "toy-x:m7/x",
        "inputs": {
            "model": "m7",
            "capability": 75,
            "engine": ENGINE.to_json(),
            "variables": {"VLLM_B": "2", "VLLM_A": "1"},
            "native": {"remove": ["op_z"], "abi": {"op_c": 2}},
        },
        "policy": None,
        "route": route,
        "model_totals": None,
    }


# --- finding a row ---------------------------------------------------------------------------


def project(*categories: Category) -> Project:
    return Project(
        name="toy",
        config_model=BaseModel,
        fields=(),
        catalogue=Catalogue(ops={}, kernels={}),
        qualification=lambda hardware, engine: [],
        context=lambda hardware, engine: {},
        categories=categories,
        active_sections=lambda capability, engine, policy: [],
    )


A = Plain("cat-a", ["m/x/tp1/none/c1/q64", "m/both/tp1/none/c1/q64"])
B = Plain("cat-b", ["m/y/tp1/none/c1/q64", "m/both/tp1/none/c1/q64"])
PROJECT = project(A, B)


def test_a_bare_id_in_one_category_is_found_there() -> None:
    category, spec = resolve_row(PROJECT, "m/y/tp1/none/c1/q64", None)
    assert category is B and spec.id == "m/y/tp1/none/c1/q64"


def test_a_qualified_id_or_a_category_option_picks_the_category() -> None:
    category, spec = resolve_row(PROJECT, "cat-b:m/both/tp1/none/c1/q64", None)
    assert category is B and spec.id == "m/both/tp1/none/c1/q64"
    category, spec = resolve_row(PROJECT, "m/both/tp1/none/c1/q64", "cat-a")
    assert category is A and spec.id == "m/both/tp1/none/c1/q64"
    category, spec = resolve_row(PROJECT, "cat-a:m/both/tp1/none/c1/q64", "cat-a")
    assert category is A and spec.id == "m/both/tp1/none/c1/q64"


def test_a_qualifier_and_a_category_option_that_disagree_are_refused() -> None:
    with pytest.raises(InputError) as info:
        resolve_row(PROJECT, "cat-b:m/y/tp1/none/c1/q64", "cat-a")
    assert str(info.value) == "cat-b:m/y/tp1/none/c1/q64 is qualified by cat-b, but -c names cat-a"


def test_a_bare_id_in_several_categories_asks_for_one() -> None:
    with pytest.raises(InputError) as info:
        resolve_row(PROJECT, "m/both/tp1/none/c1/q64", None)
    assert str(info.value) == (
        "row id 'm/both/tp1/none/c1/q64' is in several categories (cat-a, cat-b): pass -c "
        "CATEGORY or qualify it as CATEGORY:m/both/tp1/none/c1/q64"
    )


def test_an_unknown_bare_id_suggests_the_closest() -> None:
    with pytest.raises(InputError) as info:
        resolve_row(PROJECT, "m/x/tp1/none/c1/q65", None)
    message = str(info.value)
    assert message.startswith(
        "unknown row id 'm/x/tp1/none/c1/q65': no category has it; did you mean "
    )
    assert message.endswith("? (routectl list --rows shows every id)")
    assert "m/x/tp1/none/c1/q64" in message
    with pytest.raises(InputError) as info:
        resolve_row(PROJECT, "zzzzzz/qqqq/tp9/abc/c7/q1", None)
    assert str(info.value) == (
        "unknown row id 'zzzzzz/qqqq/tp9/abc/c7/q1': no category has it (routectl list --rows "
        "shows every id)"
    )


def test_an_unknown_id_in_a_named_category_is_refused_there() -> None:
    with pytest.raises(InputError) as info:
        resolve_row(PROJECT, "m/y/tp1/none/c1/q64", "cat-a")
    assert str(info.value).startswith("unknown row id 'm/y/tp1/none/c1/q64' in category cat-a")
    with pytest.raises(InputError) as info:
        resolve_row(PROJECT, "cat-a:m/y/tp1/none/c1/q64", None)
    assert str(info.value).startswith("unknown row id 'm/y/tp1/none/c1/q64' in category cat-a")


# --- routectl list ---------------------------------------------------------------------------


def test_a_category_summary_counts_rows_and_probes() -> None:
    category = Plain(
        "cat-p", ["m/b/tp1/none/c1/q64", "edge:zeta", "m/a/tp1/none/c1/q64", "edge:alpha"]
    )
    category.description = "What it covers"
    assert category_summary(category, with_rows=False) == {
        "name": "cat-p",
        "description": "What it covers",
        "rows": 4,
        "matrix_rows": 2,
        "probes": ["alpha", "zeta"],
    }
    assert category_summary(category, with_rows=True)["ids"] == [
        "edge:alpha",
        "edge:zeta",
        "m/a/tp1/none/c1/q64",
        "m/b/tp1/none/c1/q64",
    ]
    # An empty description is none; an id merely holding "edge:" later is no probe.
    bare = Plain("cat-q", ["m/edge:x"])
    assert category_summary(bare, with_rows=False) == {
        "name": "cat-q",
        "description": None,
        "rows": 1,
        "matrix_rows": 1,
        "probes": [],
    }


def test_list_text_aligns_names_and_groups_thousands() -> None:
    summaries: list[dict[str, Any]] = [
        {
            "name": "short",
            "description": "S things",
            "rows": 1342,
            "matrix_rows": 1324,
            "probes": ["a"] * 18,
        },
        {"name": "a-longer-one", "description": None, "rows": 3, "matrix_rows": 3, "probes": []},
        {
            "name": "mid",
            "description": "",
            "rows": 2,
            "matrix_rows": 1,
            "probes": ["p"],
            "ids": ["edge:p", "m/x"],
        },
    ]
    assert list_text(summaries) == (
        "short         1,342 rows (1,324 + 18 probes)  S things\n"
        "a-longer-one  3 rows (3 + 0 probes)\n"
        "mid           2 rows (1 + 1 probes)\n"
        "  mid:edge:p\n"
        "  mid:m/x\n"
    )
    assert list_text([]) == ""


def test_list_json_is_versioned() -> None:
    summary: dict[str, Any] = {
        "name": "c",
        "description": None,
        "rows": 0,
        "matrix_rows": 0,
        "probes": [],
    }
    assert json.loads(list_json([summary])) == {"schema_version": 1, "categories": [summary]}
    assert json.loads(list_json([])) == {"schema_version": 1, "categories": []}


def test_at_most_three_closest_ids_are_suggested_best_first() -> None:
    ids = [f"m/x/tp1/none/c1/q6{i}" for i in (4, 6, 7, 8, 9)]
    with pytest.raises(InputError) as info:
        resolve_row(project(Plain("cat-a", ids)), "m/x/tp1/none/c1/q65", None)
    assert str(info.value) == (
        "unknown row id 'm/x/tp1/none/c1/q65': no category has it; did you mean "
        "m/x/tp1/none/c1/q69 or m/x/tp1/none/c1/q68 or m/x/tp1/none/c1/q67? "
        "(routectl list --rows shows every id)"
    )


# --- byte counts and calls a category's own shape may leave out -------------------------------


def test_bytes_list_tensors_then_scratch_then_the_rest_and_skip_what_is_absent() -> None:
    route = {
        "bytes": {
            "per_layer": {"w": 10},
            "scratch": {"ws": 2048},
            "total": 4096,
            "tensors": {"q": 1024},
        }
    }
    assert text(route)[3:7] == [
        "bytes: total 4,096",
        "  tensor q: 1,024",
        "  scratch ws: 2,048",
        "  per_layer w: 10",
    ]
    # A shape of its own with neither tensors nor scratch: no line for either.
    assert text({"bytes": {"total": 5, "extra": 1}})[3:5] == ["bytes: total 5", "  extra: 1"]


def test_a_call_without_a_plan_is_its_op_alone() -> None:
    assert text({"dispatch": [{"op": "k_run"}]})[3:5] == ["prepare: none", "dispatch:"]
    assert text({"dispatch": [{"op": "k_run"}]})[5] == "  k_run"


# --- the whole explain, replayed ----------------------------------------------------------------


def test_explain_replays_the_row_with_the_policy_of_its_sections_or_all() -> None:
    from tests.test_parity import CATEGORY, PROJECT  # the example project (a slow import)

    row_id = "edge:example_qpn_m1"
    category = PROJECT.category(CATEGORY)
    spec = {s.id: s for s in category.rows()}[row_id]
    sections = list(PROJECT.policy_sections(category))
    assert len(sections) >= 2
    doc = explain(PROJECT, row_id, CATEGORY)
    assert (doc["category"], doc["id"]) == (CATEGORY, f"{CATEGORY}:{row_id}")
    assert doc["inputs"]["engine"] == spec.engine.to_json()
    assert PROJECT.snapshots is not None
    retained = json.loads((PROJECT.snapshots / f"{CATEGORY}.json").read_text())
    assert doc["route"] == next(r for r in retained["rows"] if r["id"] == row_id)["route"]
    # The sections its family reads, and engine-wide values; --all-policy: every section.
    assert doc["policy"]["sections"] == sections
    read = {name.split(".")[0] for name in doc["policy"]["values"]}
    assert read == {*sections, "disabled_kernels", "linear_backend"}
    everything = explain(PROJECT, row_id, CATEGORY, all_policy=True)["policy"]
    assert everything["sections"] is None
    assert set(doc["policy"]["values"]) < set(everything["values"])
    assert all(everything["values"][k] == v for k, v in doc["policy"]["values"].items())
    # The whole-model figures come from this row's spec and route.
    totals = doc["model_totals"]
    assert totals == category.model_totals(spec, doc["route"])
    assert totals["layers"] == 48 and totals["total"] == totals["weights"] + totals["metadata"]


def test_explain_finds_a_row_of_several_categories_in_the_one_named(tmp_path: Path) -> None:
    toy = load_project(make_project(tmp_path, snapshot=False))
    # `edge:slow` is a probe of both toy categories: the category given picks toy-b's.
    doc = explain(toy, "edge:slow", "toy-b")
    assert (doc["id"], doc["inputs"]["model"]) == ("toy-b:edge:slow", "toy_other")
    assert doc["policy"]["values"]["toy.fast"] == {"value": False, "source": "alias:TOY_FAST"}
    # A cell the category does not model: its status, and no policy was resolved.
    na = explain(toy, "toy_na/float16/tp1/none/c1/q64", "toy-a")
    assert (na["policy"], na["route"]["status"]["code"]) == (None, "not_applicable")
