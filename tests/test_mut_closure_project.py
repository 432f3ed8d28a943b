"""`category_modules` on variants of the real project, each built in process with
`dataclasses.replace`, for the branches the real project alone never takes: a family named
by another category's code (its modules join that closure), a family whose selector, loader
or hashing rule lies outside its categories' reach, a selector in a module that imports by a
computed name (that category keyed by every source, the others not), categories only a
baseline has (no family: every source), a snapshots folder over the project's modules, and
no snapshots folder. Also: each closure holds its category's own module and the native
spine, and computing closures writes no grimp cache. Written for issue 28's mutation run of
`routectl.review.closure` (its `_closures` survivors).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import native.catalogue
import policies.awq_moe_admission
from routectl.project import Project, load_project
from routectl.review.closure import category_modules

ROOT = Path(__file__).resolve().parents[1]
# grimp keeps a cache in the working directory unless told not to; looked at before the
# first closure of this module is computed.
GRIMP_CACHE = Path.cwd() / ".grimp_cache"
HAD_GRIMP_CACHE = GRIMP_CACHE.exists()
PROJECT = load_project(ROOT)
REAL = category_modules(PROJECT)
ADMISSION = ROOT / "policies" / "awq_moe_admission.py"
ATTENTION_POLICY = ROOT / "policies" / "v100_attention.py"


def family(project: Project, name: str) -> Any:
    return next(f for f in project.families if f.name == name)


def with_family(project: Project, name: str, **changes: Any) -> Project:
    families = tuple(
        dataclasses.replace(f, **changes) if f.name == name else f for f in project.families
    )
    return dataclasses.replace(project, families=families)


def files(closures: dict[str, list[Path] | None], name: str) -> set[Path]:
    found = closures[name]
    assert found is not None, name
    return set(found)


def test_each_closure_holds_its_category_module_and_the_native_spine() -> None:
    spine = {ROOT / "native" / "__init__.py", ROOT / "native" / "kernels" / "common.py"}
    for category in PROJECT.categories:
        own = Path(__import__(type(category).__module__, fromlist=["_"]).__file__ or "")
        assert {own.resolve(), *spine} <= files(REAL, category.name), category.name


def test_a_family_named_by_a_category_s_code_joins_that_closure() -> None:
    # The attention policy spells "Refusal" in quotes; a family that answers to that name
    # is one the attention category's code may look up, so its modules key that category.
    assert b'"Refusal"' in ATTENTION_POLICY.read_bytes()
    moe = family(PROJECT, "sm70-awq-moe")
    named = with_family(PROJECT, "sm70-awq-moe", replaces=(*moe.replaces, "Refusal"))
    closures = category_modules(named)
    attention = files(closures, "sm70-attention")
    assert ADMISSION not in files(REAL, "sm70-attention")
    assert attention >= files(REAL, "sm70-attention") | {ADMISSION}
    # The category keeps its own modules, and no other closure moves.
    assert {k: v for k, v in closures.items() if k != "sm70-attention"} == {
        k: v for k, v in REAL.items() if k != "sm70-attention"
    }


def test_a_family_s_selector_loader_and_hashing_rule_are_followed() -> None:
    admit = policies.awq_moe_admission.__dict__
    function = next(
        v
        for v in admit.values()
        if callable(v) and getattr(v, "__module__", "") == "policies.awq_moe_admission"
    )
    by_selector = category_modules(with_family(PROJECT, "sm70-attention", selector=function))
    assert files(by_selector, "sm70-attention") == files(REAL, "sm70-attention") | {ADMISSION}
    moe_loader = family(PROJECT, "sm70-awq-moe").loader
    by_loader = category_modules(with_family(PROJECT, "sm70-attention", loader=moe_loader))
    assert ADMISSION in files(by_loader, "sm70-attention")
    assert files(by_loader, "sm70-attention") >= files(REAL, "sm70-attention")
    # A hashing rule is read for every category: its module keys them all.
    by_rule_in_module = category_modules(
        with_family(PROJECT, "sm70-attention", hashed_when=function)
    )
    for name in REAL:
        assert ADMISSION in files(by_rule_in_module, name), name


def test_a_selector_that_imports_by_a_computed_name_keys_its_category_by_every_source() -> None:
    dynamic = with_family(PROJECT, "sm70-fp8-linear", selector=native.catalogue.ops_modules)
    closures = category_modules(dynamic)
    assert closures["sm70-fp8-linear"] is None
    assert {k: v for k, v in closures.items() if k != "sm70-fp8-linear"} == {
        k: v for k, v in REAL.items() if k != "sm70-fp8-linear"
    }


def test_categories_only_a_baseline_has_are_keyed_by_every_source() -> None:
    first = PROJECT.categories[0]
    orphans = [dataclasses.replace(first, name=n) for n in ("gone-a", "gone-b")]  # type: ignore[type-var]
    closures = category_modules(PROJECT.with_categories(orphans))
    assert closures == {**REAL, "gone-a": None, "gone-b": None}


def test_the_snapshots_folder_is_never_a_source() -> None:
    # A snapshots folder over the native package: its modules are not the project's
    # sources (the key never reads them), so no closure lists them; the rest stays.
    over = category_modules(dataclasses.replace(PROJECT, snapshots=ROOT / "native"))
    for name in REAL:
        kept = files(over, name)
        assert not any(f.is_relative_to(ROOT / "native") for f in kept), name
        assert kept == {f for f in files(REAL, name) if not f.is_relative_to(ROOT / "native")}
    # Without a snapshots folder the closures are the same as with one outside them.
    assert category_modules(dataclasses.replace(PROJECT, snapshots=None)) == REAL


def test_computing_closures_writes_no_grimp_cache() -> None:
    category_modules(dataclasses.replace(PROJECT, snapshots=None))
    assert GRIMP_CACHE.exists() is HAD_GRIMP_CACHE
