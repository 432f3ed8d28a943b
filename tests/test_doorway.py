"""The measure of the doorway: a new kernel family costs its own modules plus edits to the
family list (`policies/families.py`), `docs/` and CHANGELOG.md.

Proved two ways. Structurally: no existing file outside those three places names two
families' own things (their names, categories, own sections, own modules, own ops modules),
so no file is a registry that a new family would have to extend, except the files listed
below, each with its reason. And by construction: the project built from the family list
without one family still works, with every other category's rows exactly as retained.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from policies import PROJECT, project_of
from policies.families import FAMILIES
from routectl.family import Family
from routectl.replay.harness import replay_texts
from routectl.review.check import known_rows
from routectl.review.snapshot import read_snapshot
from tests.test_routes_golden import SNAPSHOTS

ROOT = Path(__file__).resolve().parents[1]

# The three places a new family edits, and what it adds anew: its retained snapshots.
ALLOWED = ("policies/families.py", "CHANGELOG.md")
ALLOWED_FOLDERS = ("docs/", "snapshots/")
# The modules that assemble the project from the list (they name no family themselves).
ASSEMBLY = frozenset({"policies", "policies.families"})

# Files that name several families on purpose, with the reason. A new family needs no edit
# in any of them: they name existing families as examples or as measured facts, never as
# the complete list (`test_no_exception_lists_every_family` keeps that true), except the two
# contract-literal files and the engine-API coverage pin, which a family extends on purpose.
CONTRACT_LITERALS = {
    "tests/test_invariances.py": "PROVED, each category's invariances written from the policy "
    "code and proved by replaying rows: a table a new category extends on purpose "
    "(CONTRIBUTING.md, adding a category, step 4)",
    "tests/contract_literals.py": "the contracts' variable names, kinds, defaults and "
    "messages typed out on purpose: a test must not read the code's own tables back, so a "
    "family's variables are added here by hand (CONTRIBUTING.md, step 6)",
    "tests/test_contract_literals.py": "compares the table with those literals, naming the "
    "families whose contract figures it checks",
    "tests/test_engine_api.py": "FAMILY_CASES is a coverage pin written on purpose: every "
    "family that loads layers gets one hand-written engine case (CONTRIBUTING.md, step 6)",
}
SHARED_TABLE = {
    "policies/variables.py": "the shared field table: the sections several families read, "
    "the AWQ dense section of a family older than own tables, and the DFlash2 section the "
    "shared sm70_fp8.qpn8 bridge reads (so it resolves first)",
}
EXAMPLES = {
    "README.md": "the quick start and the review walkthrough run commands on a few "
    "families' categories",
    "benchmarks/MUTATION.md": "a measurement record: the modules mutated then",
    "benchmarks/RESULTS.md": "a measurement record: the categories timed then",
    "benchmarks/mutation/linear.md": "a measurement record",
    "benchmarks/mutation/moe-rest.md": "a measurement record",
    "benchmarks/startup_speed.py": "times two families' start-up as examples",
    "tests/test_cli_newcomer.py": "CLI help and completion examples",
    "tests/test_dflash2_policy.py": "the verifier's bridge into other families' sections",
    "tests/test_family_record.py": "the family record's own tests; its category-order pin is "
    "a prefix of the list, so a new family appended keeps it true",
    "tests/test_fp8_sm70_policy.py": "the FP8 linears' bridge from the verifier's section",
    "tests/test_kernel_config.py": "the contract's sections, a subset of the table's",
    "tests/test_library_api.py": "library examples on two families",
    "tests/test_matrix.py": "matrix goldens of a few categories",
    "tests/test_replay_cache.py": "cache keys of a few categories",
    "tests/test_review_moe_change.py": "a review of an AWQ change across two categories",
    "tests/test_route_schemas.py": "the retained categories' own route shapes",
    "tests/test_routes_golden.py": "route goldens of a few categories",
    "tests/test_selectors.py": "selector examples on two families",
    "tests/test_doorway.py": "this measure's own checks of the scan",
    "benchmarks/check_speed.py": "times exactly the six categories of the measured baseline "
    "commit (a measured fact, not the list)",
    "tests/test_backend_filters.py": "each backend filter's kept candidates, written out per "
    "family on purpose (issue 28: whole lists, not the winner)",
    "tests/test_category_whole_plans.py": "whole dispatch plans of two MoE families' literal "
    "rows, from their contracts",
    "tests/test_coverage.py": "coverage examples on a few categories",
    "tests/test_wiring_fields.py": "the policy-field-to-option mappings of several families, "
    "one case per field (issue 28)",
}
EXCEPTIONS = {**CONTRACT_LITERALS, **SHARED_TABLE, **EXAMPLES}


def _groups(families: Iterable[Family]) -> list[tuple[Family, ...]]:
    """Families that share a category prove their routes together: one group (the Turing
    pair); every other family is a group of its own."""
    out: list[list[Family]] = []
    for family in families:
        names = {c.name for c in family.categories}
        for group in out:
            if any(names & {c.name for c in f.categories} for f in group):
                group.append(family)
                break
        else:
            out.append([family])
    return [tuple(g) for g in out]


def _record_modules(family: Family) -> set[str]:
    """The project modules that define what the record names: its selector, loader,
    categories, rules and hooks, its own fields' functions and its ops modules."""
    objects: list[Any] = [
        family.selector,
        family.context,
        family.qualification,
        family.engine_environment,
        family.hashed_when,
    ]
    if family.loader is not None:
        loader = family.loader
        objects += [loader.load, loader.meta_tensors, loader.call_inputs, loader.last_call]
        objects += [loader.call_shape]
    for f in family.fields:
        objects += [getattr(f.default, "fn", None), f.validate, f.effective, f.bridge]
    modules = {getattr(o, "__module__", None) for o in objects if o is not None}
    modules |= {type(c).__module__ for c in family.categories}
    modules |= {m.__name__ for m in family.ops}
    return {m for m in modules if m and m.split(".")[0] in ("policies", "native")} - ASSEMBLY


def _sections(family: Family) -> set[str]:
    return {s.partition(".")[0] for s in family.sections} | {
        f.section for f in family.fields if f.section
    }


def own_tokens(families: Iterable[Family]) -> dict[str, set[str]]:
    """Group (its first family's name) -> the strings that name it and nothing else: its
    family and category names, former names, the sections and modules no other group has."""
    groups = _groups(families)
    sections = [set().union(*map(_sections, g)) for g in groups]
    modules = [set().union(*map(_record_modules, g)) for g in groups]
    out: dict[str, set[str]] = {}
    for i, group in enumerate(groups):
        others = [j for j in range(len(groups)) if j != i]
        tokens = {n for f in group for n in (f.name, *f.replaces)}
        tokens |= {c.name for f in group for c in f.categories}
        tokens |= sections[i] - set().union(*(sections[j] for j in others))
        for module in modules[i] - set().union(*(modules[j] for j in others)):
            tokens |= {module, module.replace(".", "/") + ".py"}
        out[group[0].name] = tokens
    return out


def _pattern(tokens: Iterable[str]) -> re.Pattern[str]:
    # Whole names only: `sm70_awq` is not named by `sm70_awq_moe`, nor a family by a longer one.
    words = "|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{words})(?![\w-])")


def tracked_files() -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return sorted(set(listed))


def naming(families: Iterable[Family]) -> dict[str, list[str]]:
    """Each text file outside the allowed places and the families' own record modules ->
    the groups it names, where it names two or more."""
    families = tuple(families)
    patterns = {name: _pattern(tokens) for name, tokens in own_tokens(families).items()}
    own = {m.replace(".", "/") + ".py" for f in families for m in _record_modules(f)}
    own |= {m.replace(".", "/") + "/__init__.py" for f in families for m in _record_modules(f)}
    out: dict[str, list[str]] = {}
    for path in tracked_files():
        if path in ALLOWED or path.startswith(ALLOWED_FOLDERS) or path in own:
            continue
        try:
            text = (ROOT / path).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files name nothing
        named = [name for name, pattern in patterns.items() if pattern.search(text)]
        if len(named) >= 2:
            out[path] = named
    return out


@pytest.fixture(scope="module")
def registries() -> dict[str, list[str]]:
    return naming(FAMILIES)


def test_no_file_outside_the_three_places_names_two_families(registries):
    unexplained = {path: named for path, named in registries.items() if path not in EXCEPTIONS}
    assert unexplained == {}


def test_every_exception_is_still_needed(registries):
    assert sorted(set(EXCEPTIONS) - set(registries)) == []


def test_the_shared_table_names_only_the_families_it_explains(registries):
    # A family table spliced back into the shared one would add its family here.
    assert registries["policies/variables.py"] == ["sm70-awq-linear", "sm70-dflash2-verifier"]


def test_no_exception_lists_every_family(registries):
    # A file naming every group is a list of families a new one would extend; only the
    # contract literals and the coverage pin are such lists, on purpose.
    every = len(own_tokens(FAMILIES))
    complete = sorted(p for p, named in registries.items() if len(named) == every)
    assert set(complete) <= set(CONTRACT_LITERALS), complete


def test_the_scan_finds_a_registry():
    # The scan would catch the registries this measure removed: the old catalogue's module
    # list, and the old splice of two families' field tables into the shared table.
    tokens = own_tokens(FAMILIES)
    catalogue_list = "(ops_linear, ops_fp8, ops_moe, native.ops_flash_next, native.ops_fp8_moe)"
    splice = "*FP8_MOE_FIELDS,  # sm70_fp8_moe\n    *FLASH_NEXT_FIELDS,  # sm70_flash_next"
    for text in (catalogue_list, splice):
        named = [n for n, t in tokens.items() if _pattern(t).search(text)]
        assert named == ["sm70-flash-next-batch", "sm70-fp8-moe"], text
    assert "native.ops_flash_next" in tokens["sm70-flash-next-batch"]
    assert "sm70_flash_next" in tokens["sm70-flash-next-batch"]
    assert {"sm70_fp8_moe", "sm70_moe_single_token"} <= tokens["sm70-fp8-moe"]
    # Shared sections name no family: every family reading them would be named at once.
    assert not any("sm70_turbomind" in t or "sm70_fp8" in t for t in tokens.values())


def test_the_turing_pair_is_one_group():
    groups = [tuple(f.name for f in g) for g in _groups(FAMILIES)]
    assert ("sm75-nvfp4-linear", "sm75-fp8-linear") in groups
    assert len(groups) == len(FAMILIES) - 1


def test_the_project_catalogue_is_the_whole_package_catalogue():
    # Every native ops module is named by a family record, and the records name no other:
    # the project's merge (in list order) and the package's (by module name) agree.
    import native.catalogue as whole

    assert PROJECT.catalogue == whole.CATALOGUE
    assert set(whole.KERNEL_NAMES) <= set(PROJECT.catalogue.kernels)
    named = {m.__name__ for f in FAMILIES for m in f.ops}
    assert named == {m.__name__ for m in whole.ops_modules()}


# --- a project without one family ---------------------------------------------------------

FLASH_NEXT = "sm70-flash-next-batch"


@pytest.fixture(scope="module")
def without_flash_next():
    return project_of(tuple(f for f in FAMILIES if f.name != FLASH_NEXT))


def test_a_project_without_a_family_drops_its_table_catalogue_and_category(without_flash_next):
    project = without_flash_next
    family = next(f for f in FAMILIES if f.name == FLASH_NEXT)
    assert [c.name for c in project.categories] == [
        c.name for c in PROJECT.categories if c.name != FLASH_NEXT
    ]
    assert FLASH_NEXT not in project.selectors and len(project.fields) == len(PROJECT.fields) - 18
    assert {f.section for f in project.fields}.isdisjoint({"sm70_flash_next"})
    assert set(family.fields) & set(project.fields) == set()
    own_ops = set(_ops_of(family.ops)) - set(_ops_of(m for f in project.families for m in f.ops))
    assert own_ops and own_ops.isdisjoint(project.catalogue.ops)
    assert set(project.catalogue.ops) == set(PROJECT.catalogue.ops) - own_ops
    # Its KernelConfig has no section for the family, and refuses one.
    assert "sm70_flash_next" not in project.config_class.model_fields
    assert "sm70_flash_next" in PROJECT.config_class.model_fields
    from routectl.errors import InputError

    with pytest.raises(InputError, match="kernel_config.sm70_flash_next: unknown key"):
        project.load_config({"sm70_flash_next": {}})


def _ops_of(modules: Iterable[ModuleType]) -> list[str]:
    return [op for m in modules for op in getattr(m, "OPS", {})]


def test_a_project_without_a_family_keeps_every_other_row(without_flash_next):
    project = without_flash_next
    replayed, _ = replay_texts(project, list(project.categories))
    for category in project.categories:
        path = SNAPSHOTS / f"{category.name}.json"
        retained = known_rows(read_snapshot(path, schema=project.snapshot_schema))
        assert [row_id for row_id, _ in replayed[category.name]] == sorted(retained)
        moved = [i for i, text in replayed[category.name] if text != retained[i][0]]
        assert moved == [], (category.name, moved[:3])
