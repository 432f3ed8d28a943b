"""The measure of the doorway: a new kernel family costs its own modules (its tests and
their expectations included) plus edits to the family list (`policies/families.py`),
`docs/` and CHANGELOG.md.

Proved three ways. Structurally: no existing file outside those places names two families'
own things (their names, categories, own sections, own modules, own ops modules), so no file
is a registry that a new family would have to extend, except the files listed below, each
with its reason. Strictly: no family's names appear outside its own files at all (each
family's test expectations are its own module, `tests/families/<family>.py`, which every
family must have), the founding families' worked examples excepted where listed. And by
construction: the project built from the family list without one family still works, with
every other category's rows exactly as retained, and so does a copy of the tree with the
family's files and entry taken out.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
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
from tests import families
from tests.project_files import git_environ
from tests.test_routes_golden import SNAPSHOTS

ROOT = Path(__file__).resolve().parents[1]

# The three places a new family edits, and what it adds anew: its retained snapshots.
ALLOWED = ("policies/families.py", "CHANGELOG.md")
ALLOWED_FOLDERS = ("docs/", "snapshots/")
# The modules that assemble the project from the list (they name no family themselves).
ASSEMBLY = frozenset({"policies", "policies.families"})

# Files that name several families on purpose, with the reason. A new family needs no edit
# in any of them: they name existing families as examples or as measured facts, never as
# the complete list (`test_no_exception_lists_every_family` keeps that true). A family's
# literal expectations are its own module's (tests/families/), merged by the shared tests.
CONTRACT_LITERALS = {
    "tests/contract_literals.py": "the founding families' variable names, kinds, defaults and "
    "messages, typed out before each family had its module; every module's are merged in",
    "tests/test_contract_literals.py": "compares the table with those literals, naming the "
    "founding families whose contract figures it checks",
    "tests/test_engine_api.py": "engine examples on the AWQ families (each family's own "
    "engine case is in its module)",
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
    "tests/test_family_record.py": "the family record's own tests; its category-order pin is "
    "a prefix of the list, so a new family appended keeps it true",
    "tests/test_fp8_sm70_policy.py": "the FP8 linears' bridge from the verifier's section",
    "tests/test_library_api.py": "library examples on two families",
    "tests/test_matrix.py": "matrix goldens of a few categories",
    "tests/test_replay_cache.py": "cache keys of a few categories",
    "tests/test_review_moe_change.py": "a review of an AWQ change across two categories",
    "tests/test_routes_golden.py": "route goldens of a few categories",
    "tests/test_selectors.py": "selector examples on two families",
    "tests/test_doorway.py": "this measure's own checks of the scan",
    "benchmarks/check_speed.py": "times exactly the six categories of the measured baseline "
    "commit (a measured fact, not the list)",
    "tests/test_backend_filters.py": "each backend filter's kept candidates, written out per "
    "family on purpose (issue 28: whole lists, not the winner)",
    "tests/test_coverage.py": "coverage examples on a few categories",
    "tests/test_wiring_fields.py": "the policy-field-to-option mappings of several families, "
    "one case per field (issue 28)",
    "benchmarks/planted_bugs.py": "an audit's planted bugs, each in one family's file (issue 28)",
    "tests/test_mut_closure_walk.py": "the closure walk on two categories, one module each "
    "(issue 28)",
    "tests/test_mut_parity_required.py": "--require-route examples on two categories (issue 28)",
}
EXCEPTIONS = {**CONTRACT_LITERALS, **SHARED_TABLE, **EXAMPLES}
RECORDS = frozenset(p for p, why in EXAMPLES.items() if why.startswith("a measurement record"))


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
    # contract literals and the coverage pin are such lists, on purpose. A measurement
    # record names what was measured then (a mutation run over every family's modules),
    # which a new family never edits to be found.
    every = len(own_tokens(FAMILIES))
    complete = sorted(
        p
        for p, named in registries.items()
        if len(named) == every and p not in ANYWHERE and p not in RECORDS
    )
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


# --- each family's names stay in its own files --------------------------------------------
#
# The stricter form of the measure: no file outside a family's own names any of its things
# (its names, categories, own sections, own modules and their stems), except the places a
# new family edits or adds (`PLACES`), the files below that may name any family, and the
# founding families' worked examples. A family's own files are its record's modules, every
# tracked file whose name (less a `test_` prefix) starts with one of its module stems
# (`tests/test_fp8_moe_contract.py`, `native/kernels/fp8_moe.py`), its expectations module
# `tests/families/<name>.py` and the further files that module lists in `OWN_FILES`.

PLACES = ("policies/families.py", "CHANGELOG.md", "CONTRIBUTING.md")
PLACE_FOLDERS = ("docs/", "snapshots/", "benchmarks/")
# Files that may name any family, with the reason.
ANYWHERE = {
    "tests/test_doorway.py": "this measure's own checks: the scan's cases and the Flash-Next "
    "retrospective name the families they measure",
}
# Module stems that are also another contract's word, not the family's name.
NOT_NAMES = {
    "dflash2": "the attention contract's speculation method in row ids and trace cases "
    "(docs/contracts/attention.md §6.1); the verifier family is named by its record",
}
# The families that predate their expectations modules: the README and the generic tests
# show routectl on them, and the shared-section literals and wiring cases still name them.
# Their names may also appear in the files of FOUNDING_EXAMPLES; a later family's never do.
FOUNDING = frozenset(
    {
        "sm70-nvfp4-linear",
        "sm70-awq-linear",
        "sm75-nvfp4-linear",
        "sm70-awq-moe",
        "sm70-dflash2-verifier",
        "sm70-fp8-linear",
    }
)
_EXAMPLE = "a generic routectl behaviour shown on a founding family (a new family edits nothing)"
_SHARED = "the shared sections' literals and cases, which name the founding families' options"
_USES = "builds on a founding family's kernels or categories (an import, not a list)"
FOUNDING_EXAMPLES: dict[str, str] = {
    "README.md": "the quick start and the review walkthrough run commands on them",
    "examples/engine_startup.py": "the engine start-up example loads an AWQ MoE layer",
    "routectl/engine/startup.py": "the module docstring's usage example",
    "routectl/policy/configmodel.py": "a docstring example of a dotted config key",
    "native/kernels/__init__.py": _USES,
    "native/moe_stages.py": "the AWQ MoE stage names it builds",
    "policies/categories/awq_sm70.py": "the AWQ linear category of the shared linear module",
    "policies/categories/nvfp4_sm70.py": "the NVFP4 linear category of the shared module",
    "policies/categories/sm75.py": "the Turing category of the shared linear module",
    "policies/variables.py": "the shared field table (and the AWQ dense and verifier sections "
    "it still holds)",
    "policies/categories/fp8_moe.py": _USES,
    "policies/fp8_moe.py": _USES,
    "native/kernels/fp8_moe.py": _USES,
    "tests/contract_literals.py": _SHARED,
    "tests/test_contract_literals.py": _SHARED,
    "tests/test_wiring_fields.py": _SHARED,
    "tests/test_fp8_sm70_policy.py": "the FP8 linears' bridge from the verifier's section",
    "tests/test_policy_resolution.py": _SHARED,
    "tests/test_backend_filters.py": _EXAMPLE,
    "tests/test_capability_turing.py": _EXAMPLE,
    "tests/test_category_whole_plans.py": _EXAMPLE,
    "tests/test_cli_newcomer.py": _EXAMPLE,
    "tests/test_config_cli.py": _EXAMPLE,
    "tests/test_coverage.py": _EXAMPLE,
    "tests/test_did_you_mean.py": _EXAMPLE,
    "tests/test_discriminating_samples.py": _EXAMPLE,
    "tests/test_engine_api.py": _EXAMPLE,
    "tests/test_engine_startup_cost.py": _EXAMPLE,
    "tests/test_engine_startup_example.py": _EXAMPLE,
    "tests/test_family_record.py": _EXAMPLE,
    "tests/test_fp8_load_edges.py": _EXAMPLE,
    "tests/test_invariances.py": _EXAMPLE,
    "tests/test_kernel_lifecycle.py": _EXAMPLE,
    "tests/test_library_api.py": _EXAMPLE,
    "tests/test_library_inputs.py": _EXAMPLE,
    "tests/test_matrix.py": _EXAMPLE,
    "tests/test_mutation_fp8.py": _EXAMPLE,
    "tests/test_mutation_linear.py": _EXAMPLE,
    "tests/test_mut_closure_walk.py": _EXAMPLE,
    "tests/test_mut_coverage_states.py": _EXAMPLE,
    "tests/test_mut_parity_required.py": _EXAMPLE,
    "tests/test_mut_parity_rows.py": _EXAMPLE,
    "tests/test_native_probe.py": _EXAMPLE,
    "tests/test_parity.py": _EXAMPLE,
    "tests/test_plain_config.py": _EXAMPLE,
    "tests/test_profile.py": _EXAMPLE,
    "tests/test_replay_cache.py": _EXAMPLE,
    "tests/test_review_moe_change.py": _EXAMPLE,
    "tests/test_route_schemas.py": _EXAMPLE,
    "tests/test_routes_golden.py": _EXAMPLE,
    "tests/test_selectors.py": _EXAMPLE,
    "tests/test_snapshot_files.py": _EXAMPLE,
}


def _stems(modules: Iterable[str]) -> set[str]:
    # `policies.categories.fp8_moe` -> `fp8_moe`; an ops module's stem less its `ops_` too.
    stems = {m.rsplit(".", 1)[-1] for m in modules}
    return stems | {s.removeprefix("ops_") for s in stems}


def confinement_tokens(families: Iterable[Family]) -> dict[str, tuple[set[str], set[str]]]:
    """Group -> (the names that are its own, the stems its own file names start with)."""
    families = tuple(families)
    groups = _groups(families)
    modules = {g[0].name: set().union(*map(_record_modules, g)) for g in groups}
    tokens = own_tokens(families)
    out: dict[str, tuple[set[str], set[str]]] = {}
    for group in groups:
        name = group[0].name
        others = set().union(*(m for n, m in modules.items() if n != name))
        stems = _stems(modules[name] - others)
        out[name] = ((tokens[name] | stems) - set(NOT_NAMES), stems)
    return out


def own_files(group: Iterable[Family], stems: set[str], paths: Iterable[str]) -> set[str]:
    """A family group's own files among `paths`: its record modules, the files named after
    its module stems, its expectations modules and the files they list in `OWN_FILES`."""
    group = tuple(group)
    modules = set().union(*map(_record_modules, group))
    out = {m.replace(".", "/") + suffix for m in modules for suffix in (".py", "/__init__.py")}
    for family in group:
        out.add(f"tests/families/{families.module_name(family.name)}.py")
        out |= set(getattr(families.modules().get(family.name), "OWN_FILES", ()))
    for path in paths:
        base = path.rsplit("/", 1)[-1].removeprefix("test_")
        if any(base.startswith((f"{s}_", f"{s}.")) for s in stems):
            out.add(path)
    return out


def named_outside(
    families_: Iterable[Family], examples: Mapping[str, str] = FOUNDING_EXAMPLES
) -> dict[str, list[str]]:
    """Group -> `path:line: text` for each line outside its own files and the allowed
    places that names one of its things (word-bounded); a founding family's names may also
    appear in `examples`."""
    families_ = tuple(families_)
    paths = tracked_files()
    texts: dict[str, list[str]] = {}
    for path in paths:
        if path in PLACES or path.startswith(PLACE_FOLDERS) or path in ANYWHERE:
            continue
        try:
            texts[path] = (ROOT / path).read_text(encoding="utf-8").splitlines()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files name nothing
    groups = {g[0].name: g for g in _groups(families_)}
    out: dict[str, list[str]] = {}
    for name, (tokens, stems) in confinement_tokens(families_).items():
        pattern = _pattern(tokens)
        own = own_files(groups[name], stems, paths)
        founding = name in FOUNDING
        out[name] = [
            f"{path}:{number}: {line.strip()}"
            for path, lines in texts.items()
            if path not in own and not (founding and path in examples)
            for number, line in enumerate(lines, 1)
            if pattern.search(line)
        ]
    return out


@pytest.fixture(scope="module")
def outside() -> dict[str, list[str]]:
    return named_outside(FAMILIES)


@pytest.mark.parametrize("group", [g[0].name for g in _groups(FAMILIES)])
def test_a_family_is_named_only_in_its_own_files(group, outside):
    assert outside[group] == [], (
        f"{group}'s names appear outside its own files:\n  "
        + "\n  ".join(outside[group])
        + f"\nMove each expectation into tests/families/{families.module_name(group)}.py (the "
        "shared tests merge it from there); a test file of the family's own is named after one "
        f"of its module stems ({', '.join(sorted(confinement_tokens(FAMILIES)[group][1]))}) or "
        "listed in that module's OWN_FILES; a generic test takes a family-neutral example. "
        "CONTRIBUTING.md, adding a family, step 7."
    )


def unmatched_expectations(families_: Iterable[Family]) -> list[str]:
    """The families with no expectations module and the modules of no family, by name."""
    names = {f.name for f in families_}
    return sorted(names ^ set(families.modules()))


def test_every_family_has_an_expectations_module():
    assert unmatched_expectations(FAMILIES) == []
    for family in FAMILIES:
        module = families.modules()[family.name]
        assert module.__name__ == f"tests.families.{families.module_name(family.name)}"
        assert isinstance(module.SECTIONS, frozenset) and module.SECTIONS, family.name


def test_a_family_without_an_expectations_module_is_caught():
    # A new record whose module was forgotten, and a module whose record was removed.
    extra = Family("sm80-example-linear", ("sm80_example",), lambda cc: cc == 80)
    assert unmatched_expectations((*FAMILIES, extra)) == ["sm80-example-linear"]
    assert unmatched_expectations(FAMILIES[1:]) == [FAMILIES[0].name]


def test_every_founding_example_is_still_needed():
    # A file that stops naming the founding families leaves the list.
    found = {
        line.split(":", 1)[0] for lines in named_outside(FAMILIES, {}).values() for line in lines
    }
    assert sorted(set(FOUNDING_EXAMPLES) - found) == []


def test_the_confinement_scan_finds_a_newer_familys_name_in_a_shared_file():
    tokens = confinement_tokens(FAMILIES)
    line = '    "sm70-attention": [],  # the old PROVED table of tests/test_invariances.py'
    assert [n for n, (t, _) in tokens.items() if _pattern(t).search(line)] == ["sm70-attention"]
    # Stems are whole words: a model name that begins with one is not the family.
    assert not _pattern(tokens["sm70-flash-next-batch"][0]).search("flash_next_mtp4_nvfp4")
    assert {"flash_next", "flash_next_batch"} <= tokens["sm70-flash-next-batch"][1]


# --- the tree without a family (the retrospective measure) ---------------------------------
#
# A copy of the tracked tree with one family taken out: its own files deleted (as the
# confinement scan counts them, its retained snapshots with them) and its entry and imports
# cut from the family list. What is left must import, check and pass the shared tests that
# merge the families' expectations; the files a re-add touches are then the family list plus
# the allowed places that still name it (docs/, CHANGELOG.md, CONTRIBUTING.md's examples).

RETROSPECTIVE = ("sm70-flash-next-batch", "sm70-attention")
# The shared tests that merge every family's expectations module (tests/families/), and the
# measure itself (less its checks of the family taken out and its slow replay).
MERGING_TESTS = (
    "tests/test_kernel_config.py",
    "tests/test_route_schemas.py",
    "tests/test_contract_literals.py",
    "tests/test_wiring_fields.py",
    "tests/test_dflash2_policy.py",
    "tests/test_doorway.py::test_a_family_is_named_only_in_its_own_files",
    "tests/test_doorway.py::test_every_family_has_an_expectations_module",
    "tests/test_doorway.py::test_every_founding_example_is_still_needed",
)


def family_list_without(text: str, name: str, modules: set[str]) -> str:
    """policies/families.py without the family `name`'s entry (and the comment above it) and
    without its imports of `modules` (dotted names)."""
    tree = ast.parse(text)
    cut: set[int] = set()  # 1-based line numbers
    stems = {m.rsplit(".", 1)[-1] for m in modules}
    lines = text.splitlines(keepends=True)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in modules:
            cut |= set(range(node.lineno, node.end_lineno + 1))
        elif isinstance(node, ast.ImportFrom) and any(a.name in stems for a in node.names):
            kept = [a.name for a in node.names if a.name not in stems]
            lines[node.lineno - 1] = f"from {node.module} import {', '.join(kept)}\n"
            cut |= set(range(node.lineno + 1, node.end_lineno + 1))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "Family"
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == name
        ):
            first = node.lineno
            while lines[first - 2].lstrip().startswith("#"):
                first -= 1
            cut |= set(range(first, node.end_lineno + 1))
    return "".join(line for number, line in enumerate(lines, 1) if number not in cut)


def tree_without(root: Path, name: str) -> dict[str, Any]:
    """Copy the tracked tree to `root` without the family group `name`; returns what was
    taken out and which existing files still name it."""
    groups = {g[0].name: g for g in _groups(FAMILIES)}
    tokens, stems = confinement_tokens(FAMILIES)[name]
    paths = tracked_files()
    own = own_files(groups[name], stems, paths) & set(paths)
    own |= {f"snapshots/{c.name}.json" for f in groups[name] for c in f.categories}
    for path in paths:
        if path in own or not (ROOT / path).is_file():
            continue
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, root / path)
    # The modules taken out: every removed Python file, as a dotted name.
    modules = {
        p.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for p in own
        if p.endswith(".py")
    }
    # A repository of its own, so that the scan lists the copy's files.
    for args in (("init", "-q"), ("add", "-A")):
        subprocess.run(["git", "-C", str(root), *args], check=True, env=git_environ())
    listing = root / "policies" / "families.py"
    before = listing.read_text(encoding="utf-8")
    after = family_list_without(before, name, modules)
    listing.write_text(after, encoding="utf-8")
    pattern = _pattern(tokens)
    naming_it = sorted(
        path
        for path in paths
        if path not in own and (root / path).is_file() and _names(pattern, root / path)
    )
    return {
        "removed": sorted(own),
        "list_lines": len(before.splitlines()) - len(after.splitlines()),
        "naming": naming_it,
    }


def _names(pattern: re.Pattern[str], path: Path) -> bool:
    try:
        return pattern.search(path.read_text(encoding="utf-8")) is not None
    except UnicodeDecodeError:
        return False


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, *args], cwd=root, env=environ, capture_output=True, text=True
    )


@pytest.mark.parametrize("name", RETROSPECTIVE)
def test_the_tree_without_a_family_imports_checks_and_passes_the_shared_tests(name, tmp_path):
    root = tmp_path / "tree"
    taken = tree_without(root, name)
    assert f"tests/families/{families.module_name(name)}.py" in taken["removed"]
    imported = _run(root, "-c", "import policies, native.catalogue, tests.contract_literals")
    assert imported.returncode == 0, imported.stderr
    checked = _run(root, "-m", "routectl", "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert name not in checked.stdout
    shared = _run(
        root,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        *MERGING_TESTS,
    )
    assert shared.returncode == 0, shared.stdout[-3000:]
    # A re-add writes the entry back into the family list and touches, besides, only the
    # allowed places that still describe the family.
    assert taken["list_lines"] > 0
    outside = [p for p in taken["naming"] if p not in PLACES and not p.startswith(PLACE_FOLDERS)]
    assert outside == sorted(ANYWHERE)
