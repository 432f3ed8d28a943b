"""The replay cache's digests byte for byte (`routectl.review.cache`, docs/cache.md), and the
kept closures' folder as runs add to it.

What is pinned: a file list's digest is one BLAKE2b-160 over a line per file, `file NAME
DIGEST` (NAME relative to the root as POSIX where inside it, else the absolute path;
DIGEST the BLAKE2b-128 of its bytes, or why it could not be read); a category's key is
one BLAKE2b-160 over the format, the versions, that digest, the category's name and basis
and its row set pickled with protocol 5. Why: an entry is found by this key in later runs,
other Pythons and other checkouts; a recipe that drifted with the interpreter's defaults
(the pickle protocol) or with where the project lies would miss every entry or, worse, let
two inputs share a key. The closures are kept one memo per tree state, four at most.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
import shutil
from pathlib import Path

import orjson
import pytest

from routectl.project import Project, load_project
from routectl.review.cache import (
    CACHE_FORMAT,
    KEEP_ENTRIES,
    KeyInputs,
    SourceDigests,
    _inside,
    category_key,
    project_sources,
    resolved_sources,
    routectl_sources,
    sources_digest,
)
from tests.fixtures.toy import make_project
from tests.test_mut_cache_keys import VERSIONS, Fixed  # the keys tests' category double


@pytest.fixture
def toy(tmp_path: Path) -> Project:
    return load_project(make_project(tmp_path / "a", snapshot=False))


def blake(data: bytes, size: int) -> str:
    return hashlib.blake2b(data, digest_size=size).hexdigest()


def test_a_file_list_digest_is_a_line_per_file(tmp_path: Path) -> None:
    root = (tmp_path / "proj").resolve()
    (root / "a").mkdir(parents=True)
    (root / "a" / "b.py").write_bytes(b"x = 1\n")
    (root / "c.json").write_bytes(b"{}\n")
    # A sibling whose name starts with the root's: outside it, named in full.
    sibling = root.parent / "proj-2" / "d.py"
    sibling.parent.mkdir()
    sibling.write_bytes(b"y = 2\n")
    gone = root / "gone.py"  # listed, then removed before it was read
    paths = [root / "a" / "b.py", root / "c.json", gone, sibling]
    digests = [blake(b"x = 1\n", 16), blake(b"{}\n", 16), "unreadable: No such file or directory"]
    digests.append(blake(b"y = 2\n", 16))

    def digest_of(names: list[str]) -> str:
        lines = "".join(f"file {n} {d}\n" for n, d in zip(names, digests, strict=True))
        return blake(lines.encode(), 20)

    inputs = KeyInputs(given_versions=VERSIONS)
    expected = digest_of(["a/b.py", "c.json", "gone.py", str(sibling)])
    assert inputs.files_digest(root, paths) == expected
    assert inputs.files_digest(root, paths) == expected  # asked again: the same
    assert KeyInputs().files_digest(root, paths[::-1]) != expected  # the order is kept
    # The same list from another root names every file in full.
    assert KeyInputs().files_digest(tmp_path / "x", paths) == digest_of([str(p) for p in paths])


def test_a_file_that_cannot_be_read_is_keyed_by_why(tmp_path: Path) -> None:
    digests = SourceDigests()
    folder = tmp_path / "folder.py"
    folder.mkdir()
    assert digests.digest(tmp_path / "gone.py") == "unreadable: No such file or directory"
    assert digests.digest(folder) == "unreadable: Is a directory"
    (tmp_path / "gone.py").write_bytes(b"")
    # Read once a run: the first answer stands.
    assert digests.digest(tmp_path / "gone.py") == "unreadable: No such file or directory"
    assert SourceDigests().digest(tmp_path / "gone.py") == blake(b"", 16)


def test_the_prefix_inside_a_folder() -> None:
    assert _inside(Path("/")) == os.sep
    assert _inside(Path("/a/b")) == f"{os.sep}a{os.sep}b{os.sep}"


def test_a_category_key_is_its_recipe(toy: Project) -> None:
    specs = tuple(toy.categories[0].rows())
    category = Fixed("cat", "the basis", specs)
    inputs = KeyInputs(given_versions=VERSIONS)
    files = sources_digest(toy, category, KeyInputs(given_versions=VERSIONS))
    data = f"routectl row cache {CACHE_FORMAT}\n".encode()
    data += b'[["routectl","1"],["python","3"],["torch","2"]]'
    data += f"\nfiles {files}\ncategory cat\nthe basis\n".encode()
    data += pickle.dumps(list(specs), protocol=5)
    assert category_key(toy, category, inputs) == blake(data, 20)


def test_a_project_without_a_snapshot_folder_keys_every_source(toy: Project) -> None:
    assert toy.root is not None and toy.snapshots is not None
    toy.snapshots.mkdir(exist_ok=True)
    (toy.snapshots / "toy-a.json").write_text("{}\n")
    bare = dataclasses.replace(toy, snapshots=None)
    found = project_sources(bare)
    assert found == sorted({*resolved_sources(toy.root.resolve()), *routectl_sources()})
    assert (toy.snapshots / "toy-a.json").resolve() in found
    assert (toy.snapshots / "toy-a.json").resolve() not in project_sources(toy)


def test_the_digest_of_every_source_does_not_depend_on_where_the_project_lies(
    toy: Project, tmp_path: Path
) -> None:
    """It names the kept closures and is in each retained-file memo's name: a project
    copied with its cache folder finds them."""
    assert toy.root is not None
    other = tmp_path / "elsewhere" / "deeper"
    shutil.copytree(toy.root, other, ignore=shutil.ignore_patterns("__pycache__"))
    moved = toy.with_location(other, other / "snapshots")
    first = KeyInputs(given_versions=VERSIONS).every_digest(toy)
    assert KeyInputs(given_versions=VERSIONS).every_digest(moved) == first
    (other / "setup.cfg").write_text("[x]\n")
    assert KeyInputs(given_versions=VERSIONS).every_digest(moved) != first


# --- the kept closures, run after run -------------------------------------------------------


def memos(directory: Path) -> list[Path]:
    return sorted((directory / "closures").glob("*.json"))


def test_each_tree_state_keeps_its_closures_four_at_most(toy: Project, tmp_path: Path) -> None:
    assert toy.root is not None
    directory = tmp_path / "cache"
    fresh = KeyInputs(given_versions=VERSIONS).closures(toy)
    assert fresh == {c.name: None for c in toy.categories}  # no family record lists them
    names = []
    for i in range(KEEP_ENTRIES + 2):
        (toy.root / "data.json").write_text(f"{i}\n")  # a new tree state
        inputs = KeyInputs(given_versions=VERSIONS, memo_dir=directory)
        assert inputs.closures(toy) == fresh
        names.append(f"{inputs.every_digest(toy)}.json")
        if i == 1:  # the folder exists already: a second memo beside the first
            assert [p.name for p in memos(directory)] == sorted(names)
    assert len(set(names)) == KEEP_ENTRIES + 2
    kept = memos(directory)
    assert len(kept) == KEEP_ENTRIES and names[-1] in {p.name for p in kept}


@pytest.mark.parametrize("document", [[], "x", 7, {"format": CACHE_FORMAT - 1}])
def test_a_kept_closure_memo_of_another_shape_or_format_is_built_again(
    toy: Project, tmp_path: Path, document: object
) -> None:
    directory = tmp_path / "cache"
    fresh = KeyInputs(given_versions=VERSIONS, memo_dir=directory).closures(toy)
    (memo,) = memos(directory)
    if isinstance(document, dict):  # of another format, its categories edited
        kept = json.loads(memo.read_text())
        document = {**kept, **document, "categories": {c.name: [] for c in toy.categories}}
    memo.write_bytes(orjson.dumps(document))
    assert KeyInputs(given_versions=VERSIONS, memo_dir=directory).closures(toy) == fresh
    # Of this format, the edited memo is read back (the edit shows that it was read).
    if isinstance(document, dict):
        memo.write_bytes(orjson.dumps({**document, "format": CACHE_FORMAT}))
        again = KeyInputs(given_versions=VERSIONS, memo_dir=directory).closures(toy)
        assert again == {c.name: [] for c in toy.categories}
