"""The replay cache's keys and entries (`routectl.review.cache`, docs/cache.md), pinned input
by input: a stale cache must never give a wrong answer, so every input the docs say a key
covers changes it, and what the docs say it does not cover (the snapshot folder, hidden,
bytecode, `node_modules` and virtual-environment folders, files of other suffixes, where
the project lies) leaves it alone; a row entry reads back exactly what was stored, and an
entry that is not whole or not of this format reads as a miss.

Why: `tests/test_replay_cache.py` proves the same outputs with and without the cache
through whole commands (minutes); these call the key's parts directly on the toy project
and on this repository (read only), so a refactor that drops one input from a key, or
keys a file by another name, fails here in seconds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

import routectl
from routectl.project import Project, load_project
from routectl.review.cache import (
    CACHE_FORMAT,
    DEPENDENCIES,
    GITIGNORE,
    KEEP_ENTRIES,
    PACKAGE,
    ROWS_MAGIC,
    SOURCE_SUFFIXES,
    VALIDATORS,
    KeyInputs,
    ReplayCache,
    baseline_key,
    cache_directory,
    cache_disabled,
    category_key,
    category_sources,
    dependency_versions,
    engine_digest,
    installed_versions,
    project_sources,
    resolved_sources,
    routectl_sources,
    source_files,
    sources_digest,
    validator_versions,
)
from routectl.rows import RowSpec
from tests.fixtures.toy import make_project

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = (("routectl", "1"), ("python", "3"), ("torch", "2"))


@dataclasses.dataclass(frozen=True)
class Fixed:
    """A category given by its name, basis and rows (what a key reads of a category)."""

    name: str
    basis: str
    specs: tuple[RowSpec, ...]

    def rows(self) -> Sequence[RowSpec]:
        return list(self.specs)


@pytest.fixture
def toy(tmp_path: Path) -> Project:
    """The toy project (no family records: every project source is in each key)."""
    return load_project(make_project(tmp_path / "a", snapshot=False))


def key(project: Project, category: object, **given: object) -> str:
    inputs = KeyInputs(given_versions=given.pop("versions", VERSIONS), **given)  # type: ignore[arg-type]
    return category_key(project, category, inputs)


# --- which files a key reads -----------------------------------------------------------------


def test_source_files_are_the_source_suffixes_outside_skipped_folders(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    for folder in ("pkg/sub", ".hidden", "pkg/__pycache__", "env", "node_modules/x", "snaps"):
        (root / folder).mkdir(parents=True)
    kept = ["pkg/a.py", "pkg/sub/b.pyi", "c.toml", "pkg/d.json", "setup.cfg", "env2.py"]
    left = [".hidden/e.py", "pkg/__pycache__/f.py", "env/g.py", "node_modules/x/h.json"]
    left += ["snaps/i.json", "pkg/j.txt", "pkg/k.pyc", "l.py.bak", "README.md"]
    for name in kept + left:
        (root / name).write_text("x = 1\n")
    (root / "env" / "pyvenv.cfg").write_text("home = /\n")  # a virtual environment
    assert SOURCE_SUFFIXES == {".py", ".pyi", ".toml", ".json", ".cfg"}
    expected = sorted(root / name for name in kept)
    assert source_files(root, exclude=[root / "snaps"]) == expected
    assert sorted(resolved_sources(root, exclude=[root / "snaps"])) == [
        p.resolve() for p in expected
    ]
    # Without the exclusion the snapshot folder's file is a source like any other.
    assert root / "snaps" / "i.json" in source_files(root)
    assert (root / "snaps" / "i.json").resolve() in resolved_sources(root)


def test_project_sources_are_the_project_and_routectl_outside_the_snapshots(
    toy: Project,
) -> None:
    assert toy.root is not None and toy.snapshots is not None
    (toy.snapshots).mkdir(exist_ok=True)
    (toy.snapshots / "toy-a.json").write_text("{}\n")
    found = project_sources(toy)
    root = toy.root.resolve()
    package = PACKAGE.resolve()
    assert found == sorted(set(found))  # sorted, each once
    assert set(found) == {*resolved_sources(root, exclude=[toy.snapshots]), *routectl_sources()}
    assert root / "pyproject.toml" in found and root / "toyproj" / "__init__.py" in found
    assert package / "review" / "cache.py" in found
    assert package / "schemas" / "snapshot.schema.json" in found
    assert not any(p.is_relative_to(toy.snapshots.resolve()) for p in found)
    assert routectl_sources() == source_files(PACKAGE)


def test_a_category_with_a_closure_reads_its_modules_and_every_other_source() -> None:
    """This repository's categories have import closures: each key reads the closure's
    modules, every project source that is not Python and every routectl file; a Python
    module outside the closure (a test) is in no key."""
    project = load_project(ROOT)
    inputs = KeyInputs(given_versions=VERSIONS)
    every = inputs.project_sources(project)
    package = str(PACKAGE.resolve()) + os.sep
    always = {p for p in every if p.suffix not in (".py", ".pyi") or str(p).startswith(package)}
    assert inputs.always_keyed(project) == always
    assert ROOT / "pyproject.toml" in always and PACKAGE / "review" / "cache.py" in always
    closures = inputs.closures(project)
    assert sorted(closures) == sorted(c.name for c in project.categories)
    test_module = ROOT / "tests" / "test_mut_cache_keys.py"
    for category in project.categories:
        modules = closures[category.name]
        assert modules is not None, category.name
        sources = category_sources(project, category, inputs)
        assert sources == [p for p in every if p in set(modules) or p in always]
        assert test_module in every and test_module not in sources
        assert ROOT / "policies" / "variables.py" in sources  # every replay reads it
    # Categories differ in their closures, so their keys' file digests differ too.
    digests = {sources_digest(project, c, inputs) for c in project.categories}
    assert len(digests) > 1
    # A category no family record lists reads every source.
    stranger = Fixed("not-listed", "b", ())
    assert category_sources(project, stranger, inputs) == every


# --- what changes a key ----------------------------------------------------------------------


def test_a_key_is_one_digest_the_same_for_every_run(toy: Project) -> None:
    category = toy.categories[0]
    first = key(toy, category)
    assert len(first) == 40 and int(first, 16) >= 0
    assert key(toy, category) == first  # a fresh KeyInputs: the same key
    inputs = KeyInputs(given_versions=VERSIONS)
    assert category_key(toy, category, inputs) == first
    assert inputs.key_of(toy, category) == first  # remembered for the store
    assert category_key(toy, category, inputs) == first


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "toyproj/__init__.py",
        "toyproj/new.py",
        "data/x.json",
        "setup.cfg",
        "t.pyi",
    ],
)
def test_one_byte_or_one_new_file_of_any_source_changes_the_key(toy: Project, path: str) -> None:
    assert toy.root is not None
    category = toy.categories[0]
    base = key(toy, category)
    target = toy.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    existed = target.exists()
    before = target.read_bytes() if existed else b""
    target.write_bytes(before + b"\n")
    assert key(toy, category) != base
    if existed:
        target.write_bytes(before)
        assert key(toy, category) == base  # the bytes, not the time of a write


@pytest.mark.parametrize(
    "path",
    [
        "snapshots/toy-a.json",
        ".hidden/x.py",
        "toyproj/__pycache__/x.py",
        "node_modules/x.json",
        "venv/x.py",
        "notes.txt",
    ],
)
def test_files_outside_the_sources_leave_the_key(toy: Project, path: str) -> None:
    assert toy.root is not None
    category = toy.categories[0]
    (toy.root / "venv").mkdir()
    (toy.root / "venv" / "pyvenv.cfg").write_text("home = /\n")
    base = key(toy, category)
    target = toy.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("x = 1\n")
    assert key(toy, category) == base


def test_a_file_renamed_with_the_same_bytes_changes_the_key(toy: Project) -> None:
    assert toy.root is not None
    category = toy.categories[0]
    (toy.root / "one.json").write_text("{}\n")
    base = key(toy, category)
    (toy.root / "one.json").rename(toy.root / "two.json")
    assert key(toy, category) != base
    # Bytes moved from one file to another (the same concatenation) change it too.
    (toy.root / "two.json").write_text("{}\n{}\n")
    (toy.root / "three.json").write_text("")
    moved = key(toy, category)
    (toy.root / "two.json").write_text("{}\n")
    (toy.root / "three.json").write_text("{}\n")
    assert key(toy, category) != moved


def test_the_key_does_not_depend_on_where_the_project_lies(toy: Project, tmp_path: Path) -> None:
    """Files inside the project are named relative to its root: a copy elsewhere (a second
    checkout) has the same keys, and the routectl files (outside it) are named alike."""
    assert toy.root is not None
    category = toy.categories[0]
    other = tmp_path / "elsewhere" / "deeper"
    shutil.copytree(toy.root, other, ignore=shutil.ignore_patterns("__pycache__"))
    moved = toy.with_location(other, other / "snapshots")
    assert key(moved, category) == key(toy, category)
    (other / "pyproject.toml").write_bytes((other / "pyproject.toml").read_bytes() + b" ")
    assert key(moved, category) != key(toy, category)


def test_the_routectl_sources_are_in_the_key(toy: Project, tmp_path: Path) -> None:
    package = tmp_path / "engine" / "routectl"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    category = toy.categories[0]
    base = key(toy, category, package=package)
    assert key(toy, category, package=package) == base
    for name in ("review/cache.py", "schemas/report.schema.json"):
        path = package / name
        data = path.read_bytes()
        path.write_bytes(data + b" ")
        assert key(toy, category, package=package) != base, name
        path.write_bytes(data)
    (package / "review" / "notes.txt").write_text("no source")
    assert key(toy, category, package=package) == base
    # The digest of the engine a tree without routectl runs: the same files.
    inputs = KeyInputs(given_versions=VERSIONS, package=package)
    before = engine_digest(inputs)
    (package / "extra.py").write_text("")
    assert engine_digest(KeyInputs(given_versions=VERSIONS, package=package)) != before


def test_every_version_and_the_category_change_the_key(toy: Project) -> None:
    category = toy.categories[0]
    base = key(toy, category)
    for i in range(len(VERSIONS)):
        name, value = VERSIONS[i]
        for changed in ((name, value + "0"), (name + "x", value)):
            versions = (*VERSIONS[:i], changed, *VERSIONS[i + 1 :])
            assert key(toy, category, versions=versions) != base, changed
    assert key(toy, category, versions=(*VERSIONS, ("x", "1"))) != base
    assert key(toy, category, versions=VERSIONS[::-1]) != base
    specs = tuple(category.rows())
    same = Fixed(category.name, category.basis, specs)
    assert key(toy, same) == base
    assert key(toy, Fixed(category.name + "x", category.basis, specs)) != base
    assert key(toy, Fixed(category.name, category.basis + "x", specs)) != base
    assert key(toy, Fixed(category.name, category.basis, specs[:-1])) != base
    assert key(toy, Fixed(category.name, category.basis, specs[::-1])) != base
    # Every field of a row: one changed in one row changes the key.
    first = specs[0]
    for edited in (
        dataclasses.replace(first, capability=first.capability + 1),
        dataclasses.replace(first, model=first.model + "x"),
        dataclasses.replace(first, variables=(*first.variables, ("X", "1"))),
        dataclasses.replace(first, config={**first.config, "x": 1}),
        dataclasses.replace(first, status=("not_modelled", "x")),
    ):
        assert key(toy, Fixed(category.name, category.basis, (edited, *specs[1:]))) != base
    # Name and basis are separate inputs: moving a character across them changes the key.
    assert key(toy, Fixed("ab", "c", specs)) != key(toy, Fixed("a", "bc", specs))


def test_installed_versions() -> None:
    found = installed_versions(["orjson", "surely-not-installed-routectl-x"])
    assert found == [("orjson", orjson.__version__), ("surely-not-installed-routectl-x", "absent")]
    versions = dependency_versions()
    assert [n for n, _ in versions] == ["routectl", "python", *DEPENDENCIES]
    assert versions[0] == ("routectl", str(routectl.__version__))
    python = versions[1][1]
    assert sys.version in python and sys.implementation.cache_tag in python
    assert python.endswith(" " + sys.platform)
    assert validator_versions() == tuple(installed_versions(VALIDATORS))
    assert KeyInputs().versions == versions


# --- the entries -----------------------------------------------------------------------------


ROWS = [("b/x/tp1/none/c1/q1", '{"id":"b","é":"\\t"}'), ("edge:a", "{}"), ("edge:ü", '"x"')]


def entry(project: Project, cache: ReplayCache, category: Any) -> Path:
    """The entry file of `category`'s rows under its key (docs/cache.md's layout)."""
    name = f"{category_key(project, category, cache.inputs)}.rows"
    return cache.directory / "rows" / category.name / name


def test_stored_rows_read_back_exactly(toy: Project, tmp_path: Path) -> None:
    warnings: list[str] = []
    directory = tmp_path / "cache"
    category = toy.categories[0]
    cache = ReplayCache(directory, warnings.append)
    assert cache.load_rows(toy, category) is None  # no entry: a miss
    cache.store_rows(toy, category, ROWS)
    assert (directory / ".gitignore").read_text() == GITIGNORE
    again = ReplayCache(directory, warnings.append)
    assert again.load_rows(toy, category) == ROWS
    found, missing = again.rows(toy, list(toy.categories))
    assert found == {category.name: ROWS} and missing == list(toy.categories[1:])
    assert again.hits == [category.name] and again.replayed == [c.name for c in missing]
    # The entry's layout (docs/cache.md): a header with its body's digest, a row a line.
    data = entry(toy, again, category).read_bytes()
    header, body = data.split(b"\n", 1)
    digest = hashlib.blake2b(body, digest_size=20).hexdigest()
    assert header == b"%s %d %d %s" % (ROWS_MAGIC, CACHE_FORMAT, len(ROWS), digest.encode())
    assert body.decode().splitlines()[0] == '"b/x/tp1/none/c1/q1"\t{"id":"b","é":"\\t"}'
    assert warnings == []
    # An empty row set is an entry too.
    cache.store_rows(toy, toy.categories[1], [])
    assert ReplayCache(directory, warnings.append).load_rows(toy, toy.categories[1]) == []


def header(count: int, body: bytes, *, magic: bytes = ROWS_MAGIC, fmt: int = CACHE_FORMAT) -> bytes:
    digest = hashlib.blake2b(body, digest_size=20).hexdigest().encode()
    return b"%s %d %d %s\n" % (magic, fmt, count, digest)


GOOD = b'"edge:a"\t{}\n'


@pytest.mark.parametrize(
    "data",
    [
        header(2, GOOD) + GOOD,  # fewer rows than the header says
        header(0, GOOD) + GOOD,
        header(1, GOOD, magic=b"routectl-rows") + GOOD,
        header(1, GOOD, fmt=CACHE_FORMAT + 1) + GOOD,
        header(1, GOOD) + GOOD[:-1],  # cut short: the digest no longer matches
        header(1, GOOD[:-1]) + GOOD[:-1],  # no final newline
        header(1, b'"edge:a" {}\n') + b'"edge:a" {}\n',  # no tab
        header(1, b"7\t{}\n") + b"7\t{}\n",  # an id that is not a string
        header(1, b"edge:a\t{}\n") + b"edge:a\t{}\n",  # an id that is not JSON
        header(1, b'"edge:a"\t\xff\n') + b'"edge:a"\t\xff\n',  # not UTF-8
        header(1, GOOD).rstrip(b"\n"),  # a header only
        header(1, GOOD).replace(b" 1 ", b" x ") + GOOD,
        header(1, GOOD).replace(b" 1 ", b" -1 ") + GOOD,
        header(1, GOOD)[:-1] + b" extra\n" + GOOD,
        header(1, GOOD).replace(b" ", b"  ", 1) + GOOD,  # words apart by two spaces
        header(1, GOOD).replace(b" ", b"\t", 1) + GOOD,  # or by a tab
        b"",
    ],
)
def test_an_entry_not_whole_or_not_of_this_format_is_a_miss_with_one_warning(
    toy: Project, tmp_path: Path, data: bytes
) -> None:
    warnings: list[str] = []
    category = toy.categories[0]
    cache = ReplayCache(tmp_path / "cache", warnings.append)
    cache.store_rows(toy, category, [("edge:a", "{}")])
    path = entry(toy, cache, category)
    assert path.read_bytes() == header(1, GOOD) + GOOD  # the well-formed entry
    path.write_bytes(data)
    again = ReplayCache(tmp_path / "cache", warnings.append)
    assert again.load_rows(toy, category) is None
    assert len(warnings) == 1 and str(path) in warnings[0] and category.name in warnings[0]


def test_entries_are_kept_per_key_and_pruned_to_the_newest(toy: Project, tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    category = toy.categories[0]
    written = []
    for i in range(KEEP_ENTRIES + 2):
        cache = ReplayCache(directory, pytest.fail)
        cache.inputs.given_versions = (("routectl", str(i)),)
        cache.store_rows(toy, category, [("edge:a", str(i))])
        path = entry(toy, cache, category)
        os.utime(path, ns=(10**18 + i, 10**18 + i))  # written in this order
        written.append(path)
    kept = sorted((directory / "rows" / category.name).glob("*.rows"))
    # The last write prunes before its own mtime is set: the newest KEEP_ENTRIES stay.
    assert len(kept) == KEEP_ENTRIES and written[-1] in kept and written[0] not in kept


# --- the baseline's key and the switches --------------------------------------------------------


def test_every_input_of_a_baseline_key_changes_it() -> None:
    inputs = KeyInputs(given_versions=VERSIONS)
    base = baseline_key("tree1", Path("tools/toy"), None, inputs)
    assert base == baseline_key(
        "tree1", Path("tools/toy"), None, KeyInputs(given_versions=VERSIONS)
    )
    assert len(base) == 40
    assert baseline_key("tree2", Path("tools/toy"), None, inputs) != base
    assert baseline_key("tree1", Path("tools"), None, inputs) != base
    assert baseline_key("tree1", Path("tools/toy"), "abc", inputs) != base
    assert baseline_key("tree1", Path("tools/toy"), "abd", inputs) != baseline_key(
        "tree1", Path("tools/toy"), "abc", inputs
    )
    other = KeyInputs(given_versions=(*VERSIONS[:-1], ("torch", "3")))
    assert baseline_key("tree1", Path("tools/toy"), None, other) != base


def test_the_switches_and_the_folder(toy: Project) -> None:
    assert not cache_disabled({}) and not cache_disabled({"ROUTECTL_NO_CACHE": ""})
    assert not cache_disabled({"ROUTECTL_NO_CACHE": "0"})
    for value in ("1", "yes", "00", "false"):
        assert cache_disabled({"ROUTECTL_NO_CACHE": value}), value
    assert toy.snapshots is not None
    assert cache_directory(toy) == toy.snapshots.parent / ".routectl_cache"
    assert ReplayCache.for_project(toy, pytest.fail) is not None


def test_a_run_keys_a_category_once_from_the_state_before_its_replay(
    toy: Project, tmp_path: Path
) -> None:
    """The key a run stores rows under is the one it looked up with (docs/cache.md: computed
    from the state before the replay), even where the category's rows() would say
    otherwise by then; and it is kept per project, so another project's category of the
    same name (a baseline's) is keyed by its own sources."""
    assert toy.root is not None
    category = toy.categories[0]
    specs = list(category.rows())

    @dataclasses.dataclass(frozen=True)
    class Changing:
        name: str
        basis: str
        specs: list[RowSpec]

        def rows(self) -> Sequence[RowSpec]:
            return list(self.specs)

    changing = Changing(category.name, category.basis, specs)
    inputs = KeyInputs(given_versions=VERSIONS)
    first = category_key(toy, changing, inputs)
    specs.pop()  # what a later lookup would key
    assert category_key(toy, changing, inputs) == first
    assert category_key(toy, changing, KeyInputs(given_versions=VERSIONS)) != first
    other = tmp_path / "other"
    shutil.copytree(toy.root, other, ignore=shutil.ignore_patterns("__pycache__"))
    (other / "extra.json").write_text("{}\n")
    moved = toy.with_location(other, other / "snapshots")
    assert category_key(moved, changing, inputs) == category_key(
        moved, changing, KeyInputs(given_versions=VERSIONS)
    )
    assert category_key(moved, changing, inputs) != first
