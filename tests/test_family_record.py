"""The family record: one list declares every family, and the project's selectors, engine
loaders, category registry and hashed sections are derived from it; the category base gives
every optional hook a default, so routectl never looks one up by name."""

from __future__ import annotations

import ast
import dataclasses
import warnings
from pathlib import Path

import pytest

from policies import PROJECT
from policies.families import FAMILIES, sections_of
from routectl import select
from routectl.category import Category
from routectl.errors import InputError
from routectl.family import Family, FamilyNameWarning
from routectl.project import Project
from routectl.rows import RowSpec
from routectl.workload import EngineConfig, Hardware

ROOT = Path(__file__).resolve().parents[1]


def test_the_project_maps_are_derived_from_the_one_family_list():
    assert PROJECT.families == FAMILIES
    loading = [f for f in FAMILIES if f.loader is not None]
    assert dict(PROJECT.loaders) == {f.name: f.loader for f in loading}
    assert set(PROJECT.selectors) == {f.name for f in loading}
    # The MoE family selects without preparing its experts; the others select by loading.
    moe = next(f for f in FAMILIES if f.name == "sm70-awq-moe")
    assert PROJECT.selectors["sm70-awq-moe"] is moe.selector is not moe.loader.load
    assert all(PROJECT.selectors[f.name] is f.loader.load for f in loading if f is not moe)
    listed = []
    for family in FAMILIES:
        listed += [c for c in family.categories if c not in listed]
    assert list(PROJECT.categories) == listed
    # Each category is proved by a family of the list, and listed once.
    assert len({c.name for c in PROJECT.categories}) == len(PROJECT.categories)


def test_the_category_order_is_the_listed_order():
    assert [c.name for c in PROJECT.categories] == [
        "sm70-nvfp4-linear",
        "sm70-awq-linear",
        "sm75-linear",
        "sm70-awq-moe",
        "sm70-dflash2-policy",
        "sm70-fp8-linear",
        "sm70-flash-next-batch",
        "sm70-fp8-moe",
        "sm70-attention",
    ]


def test_one_spelling_per_family_name():
    names = [f.name for f in FAMILIES]
    assert len(names) == len(set(names))
    # Family names are the keys of the selector and loader maps, nothing else.
    assert set(PROJECT.loaders) <= set(names) and set(PROJECT.selectors) <= set(names)
    # The category of the two Turing families keeps its name; the old family spelling of it
    # answers for both.
    with pytest.warns(FamilyNameWarning, match="now spelled sm75-nvfp4-linear and sm75-fp8"):
        old = sections_of("sm75-linear")
    assert old == ("sm70_turbomind", "sm70_nvfp4", "sm70_fp8")
    turing = PROJECT.category("sm75-linear")
    assert PROJECT.policy_sections(turing) == old


def _linear_spec():
    from native.layers import Nvfp4Layer

    return Nvfp4Layer.of("model.layers.0.mlp.gate_up_proj", 5120, 17408)


def test_a_replaced_name_warns_and_answers_for_the_new_one():
    from routectl.namespaces.native_ns import InMemoryNamespace

    renamed = dataclasses.replace(FAMILIES[2], name="sm75-qpn2-linear")
    assert FAMILIES[2].name == "sm75-nvfp4-linear"
    renamed = dataclasses.replace(renamed, replaces=("sm75-nvfp4-linear",))
    project = dataclasses.replace(PROJECT, families=(renamed,))
    hardware, engine = Hardware(75), EngineConfig(tp=4)
    policy = project.resolve(None, {}, hardware, engine)
    namespace = InMemoryNamespace(PROJECT.catalogue.ops)
    with pytest.warns(FamilyNameWarning, match="now spelled 'sm75-qpn2-linear'"):
        old = select(
            project, "sm75-nvfp4-linear", _linear_spec(), policy, hardware, engine, namespace
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = select(
            project, "sm75-qpn2-linear", _linear_spec(), policy, hardware, engine, namespace
        )
    assert old == new and new.kernel is not None


def test_a_split_name_is_an_input_error_naming_the_new_ones():
    with pytest.raises(
        InputError, match="'sm75-linear' was split into sm75-nvfp4-linear, sm75-fp8"
    ):
        PROJECT.family_name("sm75-linear", PROJECT.selectors)
    with pytest.raises(InputError, match="unknown kernel family 'sm99-linear' \\(known: "):
        PROJECT.family_name("sm99-linear", PROJECT.loaders)


def test_derived_maps_cannot_also_be_given():
    fields = {f.name: getattr(PROJECT, f.name) for f in dataclasses.fields(Project)}
    with pytest.raises(ValueError, match="categories, selectors, loaders, active_sections are"):
        Project(**{**fields, "derived": False})
    # A copy with other families derives its maps from those.
    one = dataclasses.replace(PROJECT, families=FAMILIES[:1])
    assert [c.name for c in one.categories] == ["sm70-nvfp4-linear"]
    assert set(one.loaders) == set(one.selectors) == {"sm70-nvfp4-linear"}
    twice = (FAMILIES[0], FAMILIES[0])
    with pytest.raises(ValueError, match="declared twice"):
        dataclasses.replace(PROJECT, families=twice)
    stale = dataclasses.replace(FAMILIES[1], replaces=(FAMILIES[0].name,))
    with pytest.raises(ValueError, match="still a family"):
        dataclasses.replace(PROJECT, families=(FAMILIES[0], stale))


def test_a_conditionally_hashed_family_appends_to_the_hashed_sections():
    always = Family("a", ("s_a",), lambda cc: True)
    sometimes = Family("b", ("s_b",), lambda cc: True, hashed_when=lambda e, p: e.tp == 2)
    late = Family("c", ("s_c", "s_a"), lambda cc: cc == 75)
    project = dataclasses.replace(PROJECT, families=(always, sometimes, late))
    policy = PROJECT.resolve(None, {}, Hardware(75), EngineConfig())
    assert project.hashed_sections(75, EngineConfig(tp=1), policy) == ["s_a", "s_c"]
    assert project.hashed_sections(75, EngineConfig(tp=2), policy) == ["s_a", "s_c", "s_b"]
    assert project.hashed_sections(70, EngineConfig(tp=2), policy) == ["s_a", "s_b"]


class Bare(Category):
    name = "bare"
    basis = "a category that states rows and routes only"

    def rows(self):
        return (RowSpec("edge:x", "m", EngineConfig(), 70),)

    def route(self, ctx):
        return {}


def test_the_category_base_defaults_every_optional_hook():
    bare = Bare()
    row = bare.rows()[0]
    assert bare.description == "" and bare.matrix_subject == "kernel"
    assert bare.model_totals(row, {}) is None
    assert bare.matrix_label({}) is None and bare.matrix_reason({}) is None
    route = {"kernel": "K", "own": 1}
    assert bare.explain_lines(route) == [] and route == {"kernel": "K", "own": 1}
    with pytest.raises(NotImplementedError, match="'nameless' declares no rows"):
        type("Nameless", (Category,), {"name": "nameless"})().rows()


def test_every_project_category_is_a_category():
    assert all(isinstance(c, Category) for c in PROJECT.categories)


HOOKS = {
    "description",
    "policy_sections",
    "model_totals",
    "matrix_label",
    "matrix_reason",
    "matrix_subject",
    "explain_lines",
}


def test_routectl_looks_no_category_hook_up_by_name():
    offenders = []
    for path in sorted((ROOT / "routectl").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in HOOKS
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_no_snapshot_dir_parameter_in_routectl():
    offenders = []
    for path in sorted((ROOT / "routectl").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.arg) and node.arg == "snapshot_dir":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_explain_knows_no_family_route_key():
    # The keys the project's categories add to the generic route shapes: explain.py must
    # leave them to the category's own explain_lines.
    # ("layers" is no route key there: it is the layer count every `model_totals` gives.)
    family_keys = {"qualification", "gdn_admission", "gdn_layout", "stages", "workspaces"}
    text = (ROOT / "routectl" / "review" / "explain.py").read_text()
    strings = {
        node.value
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert strings & family_keys == set()


def test_a_project_without_families_states_its_hashed_sections():
    fields = {f.name: getattr(PROJECT, f.name) for f in dataclasses.fields(Project)}
    fields.update(families=(), categories=(), selectors={}, loaders={}, active_sections=None)
    with pytest.raises(ValueError, match="give families or active_sections"):
        Project(**fields)
