"""The replay cache's writes that fail, its cached baselines' folder, the digests of the
retained files read in a thread, and the key of a `diff --baseline-ref` baseline
(`routectl.review.cache`, docs/cache.md).

What is pinned: a write that fails costs one warning naming the entry and the cause, and
leaves no temporary folder behind; another run's temporary baseline folder is neither
pruned nor counted as an entry; a cached baseline whose file cannot be read is not used;
the thread's digests are a file's reader's (its limits, its refusals); the baseline key
reads the ref's tree, the project's path in it, the engine (the tree's own routectl, or
the digest of this one wherever it lies) and the caller's PYTHONPATH. Why: a baseline key
that missed one of these would let a cached baseline computed by other code stand in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
from pathlib import Path

import pytest

from routectl.errors import InputError
from routectl.io.jsonread import Limits
from routectl.project import Project, load_project
from routectl.review.cache import (
    KEEP_ENTRIES,
    PACKAGE,
    KeyInputs,
    ReplayCache,
    _FileDigests,
    _prune,
    baseline_key,
    cache_directory,
    category_key,
    engine_digest,
    ref_baseline_key,
)
from routectl.review.sources import read_baseline_snapshot
from tests.fixtures.limits import at_the_open_files_limit
from tests.fixtures.toy import make_project
from tests.project_files import GIT_IDENTITY, git, git_environ

VERSIONS = (("routectl", "1"), ("python", "3"))
ROWS = [("edge:a", "{}")]


def new_cache(directory: Path, warnings: list[str]) -> ReplayCache:
    cache = ReplayCache(directory, warnings.append)
    cache.inputs.given_versions = VERSIONS
    return cache


def baseline_source(tmp_path: Path) -> Path:
    source = tmp_path / "out"
    source.mkdir()
    (source / "toy-a.json").write_bytes(b'{"a": 1}\n')
    (source / "toy-b.json").write_bytes(b'{"b": 2}\n')
    return source


@pytest.fixture
def toy(tmp_path: Path) -> Project:
    return load_project(make_project(tmp_path / "t", snapshot=False))


# --- the cache of a project ---------------------------------------------------------------


def test_only_a_project_with_a_root_and_a_snapshot_folder_has_a_cache(toy: Project) -> None:
    warnings: list[str] = []
    cache = ReplayCache.for_project(toy, warnings.append)
    assert cache is not None and cache.directory == cache_directory(toy)
    # Its warnings go where the caller said.
    (cache.directory / "baselines" / "k").mkdir(parents=True)
    (cache.directory / "baselines" / "k" / "manifest").write_bytes(b"{")
    assert cache.baseline_folder("k") is None
    assert len(warnings) == 1 and "ignoring the unreadable cached baseline" in warnings[0]
    assert ReplayCache.for_project(dataclasses.replace(toy, root=None), pytest.fail) is None
    assert ReplayCache.for_project(dataclasses.replace(toy, snapshots=None), pytest.fail) is None


def test_the_cache_folder_is_made_with_its_parents(toy: Project, tmp_path: Path) -> None:
    directory = tmp_path / "not" / "yet" / "cache"
    category = toy.categories[0]
    warnings: list[str] = []
    new_cache(directory, warnings).store_rows(toy, category, ROWS)
    assert warnings == []
    assert new_cache(directory, warnings).load_rows(toy, category) == ROWS
    # A baseline stored first (no key computed before it) makes them too.
    other = tmp_path / "also" / "not" / "cache"
    cache = new_cache(other, warnings)
    cache.store_baseline("k", baseline_source(tmp_path))
    assert warnings == [] and cache.baseline_folder("k") == other / "baselines" / "k"


# --- writes that fail ---------------------------------------------------------------------


def test_a_cache_that_cannot_be_written_warns_once_naming_the_entry_and_the_cause(
    toy: Project, tmp_path: Path
) -> None:
    directory = tmp_path / "cache"
    directory.write_text("a file where the folder would be\n")
    warnings: list[str] = []
    cache = new_cache(directory, warnings)
    category = toy.categories[0]
    cache.store_rows(toy, category, ROWS)
    key = category_key(toy, category, cache.inputs)
    entry = directory / "rows" / category.name / f"{key}.rows"
    assert warnings == [f"cannot write the replay cache {entry}: File exists"]
    cache.store_baseline("k", baseline_source(tmp_path))
    assert len(warnings) == 1  # one line a run: the cause is the same
    other: list[str] = []
    new_cache(directory, other).store_baseline("k", tmp_path / "out")
    assert other == [f"cannot write the replay cache {directory / 'baselines' / 'k'}: File exists"]


def test_a_baseline_that_cannot_be_copied_leaves_no_temporary_folder(tmp_path: Path) -> None:
    source = baseline_source(tmp_path)
    (source / "toy-c.json").mkdir()  # a folder named as a snapshot: unreadable
    warnings: list[str] = []
    cache = new_cache(tmp_path / "cache", warnings)
    cache.store_baseline("k", source)
    parent = tmp_path / "cache" / "baselines"
    assert warnings == [f"cannot write the replay cache {parent / 'k'}: Is a directory"]
    assert list(parent.iterdir()) == []
    assert cache.baseline_folder("k") is None and warnings[1:] == []


def test_another_runs_temporary_baseline_folder_is_neither_pruned_nor_counted(
    tmp_path: Path,
) -> None:
    parent = tmp_path / "cache" / "baselines"
    temp = parent / ".k9.routectl-1-0a0b.tmp"  # another run's copy, half written
    temp.mkdir(parents=True)
    os.utime(temp, ns=(10**9, 10**9))  # older than any entry
    cache = new_cache(tmp_path / "cache", [])
    source = baseline_source(tmp_path)
    for i in range(KEEP_ENTRIES):
        cache.store_baseline(f"k{i}", source)
    assert sorted(p.name for p in parent.iterdir()) == sorted(
        [temp.name, *(f"k{i}" for i in range(KEEP_ENTRIES))]
    )


def test_a_cached_baseline_whose_file_cannot_be_read_is_not_used(tmp_path: Path) -> None:
    warnings: list[str] = []
    cache = new_cache(tmp_path / "cache", warnings)
    cache.store_baseline("k", baseline_source(tmp_path))
    folder = tmp_path / "cache" / "baselines" / "k"
    (folder / "toy-a.json").unlink()
    (folder / "toy-a.json").mkdir()  # named in the manifest, present, not readable
    assert cache.baseline_folder("k") is None and cache.baseline_hit is False
    assert warnings == [f"ignoring the unreadable cached baseline {folder}; rebuilding it"]


# --- the retained files' digests, read in a thread ----------------------------------------


def test_the_digests_read_in_a_thread_are_their_readers(tmp_path: Path) -> None:
    small = tmp_path / "small.json"
    small.write_bytes(b"{}\n")
    large = tmp_path / "large.json"
    large.write_bytes(b'{"x": 12345}\n')
    digests = _FileDigests([small, large, tmp_path / "gone.json"], Limits(max_bytes=5))
    assert digests.get(small) == hashlib.blake2b(b"{}\n", digest_size=20).digest()
    with pytest.raises(InputError, match=r"^snapshot .*large\.json is 13 bytes"):
        digests.get(large)  # over the limits it was given: refused as its reader refuses it
    with pytest.raises(InputError, match=r"^cannot read snapshot .*gone\.json"):
        digests.get(tmp_path / "gone.json")
    assert digests.get(tmp_path / "other.json") is None  # not asked for
    roomy = _FileDigests([large], Limits(max_bytes=100))
    assert roomy.get(large) == hashlib.blake2b(b'{"x": 12345}\n', digest_size=20).digest()


# --- the key of a baseline at a git ref --------------------------------------------------


def test_the_engine_digest_does_not_depend_on_where_routectl_lies(tmp_path: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__")
    first = tmp_path / "a" / "routectl"
    second = tmp_path / "elsewhere" / "deeper" / "routectl"
    shutil.copytree(PACKAGE, first, ignore=ignore)
    shutil.copytree(PACKAGE, second, ignore=ignore)
    digest = engine_digest(KeyInputs(given_versions=VERSIONS, package=first))
    assert engine_digest(KeyInputs(given_versions=VERSIONS, package=second)) == digest
    (second / "review" / "cache.py").write_bytes(b"")
    assert engine_digest(KeyInputs(given_versions=VERSIONS, package=second)) != digest


def test_a_ref_baseline_is_keyed_by_its_tree_path_engine_and_pythonpath(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    root = make_project(repo / "tools")  # the project at tools/proj in its repository
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, *GIT_IDENTITY, "commit", "-q", "-m", "base")
    project = load_project(root)
    inputs = KeyInputs(given_versions=VERSIONS)
    environ = git_environ()
    commit = git(repo, "rev-parse", "HEAD").strip()
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    engine = engine_digest(inputs)
    path = Path("tools/proj")
    found = ref_baseline_key(project, "main", environ=environ, inputs=inputs)
    assert found == (commit, baseline_key(tree, path, f"{engine} path ", inputs))
    with_path = ref_baseline_key(
        project, "main", environ={**environ, "PYTHONPATH": "/x"}, inputs=inputs
    )
    assert with_path == (commit, baseline_key(tree, path, f"{engine} path /x", inputs))
    # A tree with a routectl of its own runs that one: this engine's digest is not keyed.
    (repo / "routectl").mkdir()
    (repo / "routectl" / "__init__.py").write_text("")
    git(repo, "add", "-A")
    git(repo, *GIT_IDENTITY, "commit", "-q", "-m", "own")
    commit = git(repo, "rev-parse", "HEAD").strip()
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    found = ref_baseline_key(project, "main", environ=environ, inputs=inputs)
    assert found == (commit, baseline_key(tree, path, "None path ", inputs))


# --- a baseline file too old to read ------------------------------------------------------


def test_a_baseline_file_too_old_names_itself(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text('{"schema_version": 0, "category": "x", "basis": "b", "rows": []}\n')
    with pytest.raises(InputError) as caught:
        read_baseline_snapshot(path, advice="rebuild it")
    assert str(caught.value) == (
        f"{path} has schema_version 0, older than 1, and this routectl has no migration "
        "from version 0: rebuild it"
    )


# --- which folders hold entries ---------------------------------------------------------


def test_a_category_holds_entries_once_one_is_stored(toy: Project, tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    cache = new_cache(directory, [])
    first, second = (c.name for c in toy.categories[:2])
    assert not cache.holds_entries([first]) and cache.holds_entries([])
    assert cache.load_rows(toy, toy.categories[0]) is None
    assert cache.inputs.key_of(toy, toy.categories[0]) is None  # a miss computes no key
    cache.store_rows(toy, toy.categories[0], ROWS)
    assert cache.holds_entries([first]) and not cache.holds_entries([first, second])


def test_a_category_folder_that_cannot_be_listed_is_read_and_warned_about(
    toy: Project, tmp_path: Path
) -> None:
    directory = tmp_path / "cache"
    category = toy.categories[0]
    (directory / "rows").mkdir(parents=True)
    (directory / "rows" / category.name).write_text("a file where the folder would be\n")
    warnings: list[str] = []
    cache = new_cache(directory, warnings)
    assert cache.holds_entries([category.name])  # an error reading it: yes
    assert cache.load_rows(toy, category) is None
    key = category_key(toy, category, cache.inputs)
    path = directory / "rows" / category.name / f"{key}.rows"
    assert warnings == [f"ignoring the unreadable replay cache {path} (Not a directory)"]


# --- pruning, beside other runs -----------------------------------------------------------


def test_pruning_skips_an_entry_gone_and_one_another_run_removed_first(tmp_path: Path) -> None:
    files = [tmp_path / f"{i}.rows" for i in range(4)]
    folders = [tmp_path / f"b{i}" for i in range(2)]
    for i, path in enumerate(files):
        path.write_text("")
        os.utime(path, ns=(10**18 + i, 10**18 + i))
    for i, folder in enumerate(folders):
        (folder / "x").mkdir(parents=True)
        os.utime(folder, ns=(10**17 + i, 10**17 + i))
    # An entry listed, then gone before its date was read: skipped, the rest still pruned.
    _prune(iter([tmp_path / "gone.rows", *files]), 2)
    assert sorted(tmp_path.glob("*.rows")) == files[2:]
    # The same entries listed twice (two runs pruning at once): each removed once, no error.
    _prune(iter([*folders, *folders, files[2], files[2]]), 0)
    assert sorted(tmp_path.iterdir()) == [files[3]]
    # A folder entry that cannot be removed (a link to a folder: rmtree refuses links) is
    # left as it is: a failed removal costs the next run nothing.
    target = tmp_path / "elsewhere"
    (target / "kept").mkdir(parents=True)
    (tmp_path / "b9").symlink_to(target, target_is_directory=True)
    _prune(iter([tmp_path / "b9"]), 0)
    assert (tmp_path / "b9" / "kept").is_dir()


def test_a_new_cache_keeps_its_closures_and_has_no_baseline_yet(
    toy: Project, tmp_path: Path
) -> None:
    directory = tmp_path / "cache"
    cache = new_cache(directory, [])
    assert cache.baseline_hit is None  # no diff --baseline-ref in this run
    cache.store_rows(toy, toy.categories[0], ROWS)
    (memo,) = (directory / "closures").glob("*.json")
    assert memo.name == f"{cache.inputs.every_digest(toy)}.json"


def test_an_entry_write_that_fails_before_its_temp_exists_keeps_its_own_error(
    tmp_path: Path,
) -> None:
    # At the open-files limit the temp file is never created: the cleanup must not replace the
    # cause (the one warning names it) by the missing temp file. A child process, so the limit
    # is its own.
    imports = "from routectl.review.cache import _write_atomic\n"
    body = (
        "try:\n"
        "    _write_atomic(target, b'entry')\n"
        "except OSError as exc:\n"
        "    print(exc.errno, exc.strerror)\n"
    )
    target = tmp_path / "key.rows"
    assert at_the_open_files_limit(imports, body, target) == f"24 {os.strerror(24)}\n"
    assert list(tmp_path.iterdir()) == []
