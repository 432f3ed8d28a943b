"""`category_modules` on variants of the real project, each built in process with
`dataclasses.replace`, for the branches the real project alone never takes: a family named
by another category's code (its modules join that closure), a family whose selector, loader
or hashing rule lies outside its categories' reach, a selector in a module that imports by a
computed name (that category keyed by every source, the others not), categories only a
baseline has (no family: every source), a snapshots folder over the project's modules, and
no snapshots folder. Also: each closure holds its category's own module and the native
spine, and computing closures writes no grimp cache. No family is named here (the doorway
rule): the families and modules each case needs are chosen from the project as it stands.
Written for issue 28's mutation run of `routectl.review.closure` (its `_closures` survivors).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

import native.catalogue
from routectl.project import Project, load_project
from routectl.review.closure import category_modules

ROOT = Path(__file__).resolve().parents[1]
# grimp keeps a cache in the working directory unless told not to; looked at before the
# first closure of this module is computed.
GRIMP_CACHE = Path.cwd() / ".grimp_cache"
HAD_GRIMP_CACHE = GRIMP_CACHE.exists()
PROJECT = load_project(ROOT)
REAL = category_modules(PROJECT)


def module_file(obj: Any) -> Path:
    return Path(sys.modules[obj.__module__].__file__ or "").resolve()


def files(closures: dict[str, list[Path] | None], name: str) -> set[Path]:
    found = closures[name]
    assert found is not None, name
    return set(found)


def with_family(project: Project, name: str, **changes: Any) -> Project:
    families = tuple(
        dataclasses.replace(f, **changes) if f.name == name else f for f in project.families
    )
    return dataclasses.replace(project, families=families)


def outside_pair() -> tuple[Any, Any, Path]:
    """A family G with one category, and another family F whose loader's module is in no
    closure of G's category: (G, F, that module's file)."""
    for g in PROJECT.families:
        if len(g.categories) != 1:
            continue
        mine = files(REAL, g.categories[0].name)
        for f in PROJECT.families:
            if f is not g and f.loader is not None and module_file(f.loader.load) not in mine:
                return g, f, module_file(f.loader.load)
    raise AssertionError("no family's loader lies outside another family's closure")


def test_each_closure_holds_its_category_module_and_the_native_spine() -> None:
    spine = {ROOT / "native" / "__init__.py", ROOT / "native" / "kernels" / "common.py"}
    for category in PROJECT.categories:
        assert {module_file(type(category)), *spine} <= files(REAL, category.name)


def test_a_family_named_by_a_category_s_code_joins_that_closure() -> None:
    g, f, outside = outside_pair()
    name = g.categories[0].name
    # A quoted word of a module only G's category imports, spelled by no other closure's
    # modules: a family answering to it is one G's code may look up, so its modules key
    # G's category alone.
    others = {p for n, v in REAL.items() if n != name for p in v or ()}
    spelled = b"".join(p.read_bytes() for p in others)
    word = next(
        w
        for p in sorted(files(REAL, name) - others)
        for w in re.findall(rb'"([A-Za-z_][A-Za-z0-9_]{3,})"', p.read_bytes())
        if b'"' + w + b'"' not in spelled and b"'" + w + b"'" not in spelled
    ).decode()
    named = with_family(PROJECT, f.name, replaces=(*f.replaces, word))
    closures = category_modules(named)
    assert files(closures, name) >= files(REAL, name) | {outside}
    assert {k: v for k, v in closures.items() if k != name} == {
        k: v for k, v in REAL.items() if k != name
    }


def test_a_family_s_selector_loader_and_hashing_rule_are_followed() -> None:
    g, f, outside = outside_pair()
    name = g.categories[0].name
    by_selector = category_modules(with_family(PROJECT, g.name, selector=f.loader.load))
    assert files(by_selector, name) >= files(REAL, name) | {outside}
    by_loader = category_modules(with_family(PROJECT, g.name, loader=f.loader))
    assert files(by_loader, name) >= files(REAL, name) | {outside}
    # A hashing rule is read for every category: its module keys them all.
    by_rule = category_modules(with_family(PROJECT, g.name, hashed_when=f.loader.load))
    for category in REAL:
        assert outside in files(by_rule, category), category


def test_a_selector_that_imports_by_a_computed_name_keys_its_category_by_every_source() -> None:
    g = PROJECT.families[0]
    mine = {c.name for c in g.categories}
    closures = category_modules(with_family(PROJECT, g.name, selector=native.catalogue.ops_modules))
    assert {k: closures[k] for k in mine} == dict.fromkeys(mine)
    assert {k: v for k, v in closures.items() if k not in mine} == {
        k: v for k, v in REAL.items() if k not in mine
    }


def test_categories_only_a_baseline_has_are_keyed_by_every_source() -> None:
    first = next(c for c in PROJECT.categories if dataclasses.is_dataclass(c))
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
