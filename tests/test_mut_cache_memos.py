"""The replay cache's memos (`routectl.review.cache`, docs/cache.md): the retained-file
memo, the kept import closures and the cached `diff --baseline-ref` folders, each through
the `ReplayCache` / `KeyInputs` calls the check makes.

What is pinned, from the docs: a retained file's rows are taken from a hit's entry only
where a memo says a file of these very bytes, read in this very way (`context`), by these
validators, held exactly that entry's rows; in every other case the file is read as always
(None here). The closures are read back only when they are about this tree's sources and
categories. A cached baseline is used only when every file matches its manifest. Why: each
of these spares a read or a computation, and a memo trusted where it does not fit would
show rows no file holds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from routectl.io.jsonread import Limits, using_limits
from routectl.project import Project, load_project
from routectl.review.cache import (
    CACHE_FORMAT,
    GITIGNORE,
    KEEP_ENTRIES,
    MANIFEST,
    KeyInputs,
    ReplayCache,
)
from routectl.review.snapshot import Snapshot
from tests.fixtures.toy import make_project

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = (("routectl", "1"), ("python", "3"))
CONTEXT = "rebuild it"


def text_of(row_id: str, value: int) -> str:
    return orjson.dumps({"id": row_id, "route": {"n": value}}).decode()


# Stored in id order b, a: a snapshot holds its rows sorted by id.
TEXTS = [("edge:b", text_of("edge:b", 2)), ("edge:a", text_of("edge:a", 1))]


def known_of(texts: Sequence[tuple[str, str]]) -> dict[str, tuple[str, Any]]:
    return {row_id: (text, orjson.loads(text)) for row_id, text in texts}


@pytest.fixture
def toy(tmp_path: Path) -> Project:
    return load_project(make_project(tmp_path / "t", snapshot=False))


def new_cache(directory: Path, warnings: list[str] | None = None) -> ReplayCache:
    cache = ReplayCache(directory, (warnings if warnings is not None else []).append)
    cache.inputs.given_versions = VERSIONS
    return cache


class Retained:
    """One category's entry stored, and a retained file noted as holding its rows."""

    def __init__(self, project: Project, directory: Path, file: Path) -> None:
        self.project = project
        self.directory = directory
        self.category = project.categories[0]
        self.name = self.category.name
        self.file = file
        file.write_bytes(b'{"the": "file bytes"}\n')
        self.snapshot = Snapshot(self.name, "the basis", tuple(orjson.loads(t) for _, t in TEXTS))
        cache = new_cache(directory)
        cache.store_rows(project, self.category, TEXTS)
        cache.remember_retained(
            project, self.name, CONTEXT, file.read_bytes(), self.snapshot, known_of(TEXTS)
        )

    def hit(self, **changes: Any) -> ReplayCache:
        """A later run's cache, its entry of the category read (a hit)."""
        cache = new_cache(self.directory)
        for name, value in changes.items():
            setattr(cache.inputs, name, value)
        assert cache.load_rows(self.project, self.category) == TEXTS
        return cache

    def memos(self) -> list[Path]:
        return sorted((self.directory / "retained" / self.name).glob("*.json"))


@pytest.fixture
def retained(toy: Project, tmp_path: Path) -> Retained:
    return Retained(toy, tmp_path / "cache", tmp_path / "toy-a.json")


def test_a_file_noted_as_holding_a_hits_rows_is_read_from_the_entry(retained: Retained) -> None:
    assert len(retained.memos()) == 1
    memo = json.loads(retained.memos()[0].read_text())
    entry = next((retained.directory / "rows" / retained.name).glob("*.rows"))
    digest = entry.read_bytes().split(b"\n", 1)[0].split(b" ")[3].decode()
    assert memo == {"format": CACHE_FORMAT, "basis": "the basis", "rows": digest}
    cache = retained.hit()
    found = cache.retained_shortcut(retained.project, retained.name, retained.file, CONTEXT)
    assert found is not None
    snapshot, known = found
    rows = (orjson.loads(TEXTS[1][1]), orjson.loads(TEXTS[0][1]))  # sorted by id
    assert snapshot == Snapshot(retained.name, "the basis", rows) and snapshot.validated
    assert known == known_of(TEXTS)
    assert cache.retained_hits == [retained.name]
    # Prefetched digests give the same answer.
    cache = retained.hit()
    cache.prefetch_retained([retained.file])
    assert cache.retained_shortcut(retained.project, retained.name, retained.file, CONTEXT) == (
        snapshot,
        known,
    )
    # A file not prefetched is hashed when asked for.
    cache = retained.hit()
    cache.prefetch_retained([])
    assert cache.retained_shortcut(retained.project, retained.name, retained.file, CONTEXT) == (
        snapshot,
        known,
    )


def test_no_memo_applies_without_a_hit(retained: Retained) -> None:
    cache = new_cache(retained.directory)  # the entry not read this run
    assert cache.retained_shortcut(retained.project, retained.name, retained.file, CONTEXT) is None
    other = retained.project.categories[1].name
    assert retained.hit().retained_shortcut(retained.project, other, retained.file, CONTEXT) is None


@pytest.mark.parametrize("change", ["context", "bytes", "layout", "validators", "versions"])
def test_a_memo_applies_to_the_very_bytes_reader_and_validators(
    retained: Retained, change: str
) -> None:
    context = CONTEXT
    changes: dict[str, Any] = {}
    if change == "context":
        context = ""  # the same file read as retained instead of as a baseline
    elif change == "bytes":
        retained.file.write_bytes(retained.file.read_bytes().replace(b"file", b"fila"))
    elif change == "layout":
        retained.file.write_bytes(retained.file.read_bytes() + b" ")
    elif change == "validators":
        changes["validator_versions"] = (("jsonschema-rs", "0"), ("jsonschema", "0"))
    cache = retained.hit(**changes)
    if change == "versions":
        # Other versions key another entry (a miss); the memo names the versions too.
        cache = new_cache(retained.directory)
        cache.inputs.given_versions = (*VERSIONS, ("torch", "9"))
        cache.store_rows(retained.project, retained.category, TEXTS)
    assert cache.retained_shortcut(retained.project, retained.name, retained.file, context) is None
    assert cache.retained_hits == []


@pytest.mark.parametrize(
    "document",
    [
        b"not json",
        b"[]",
        b'{"format": 1, "basis": "b", "rows": "ROWS"}',
        b'{"basis": "b", "rows": "ROWS"}',
        b'{"format": FORMAT, "basis": "b", "rows": "another"}',
        b'{"format": FORMAT, "basis": 7, "rows": "ROWS"}',
        b'{"format": FORMAT, "rows": "ROWS"}',
    ],
)
def test_a_memo_that_does_not_fit_is_no_memo(retained: Retained, document: bytes) -> None:
    (memo,) = retained.memos()
    rows = json.loads(memo.read_text())["rows"]
    memo.write_bytes(document.replace(b"ROWS", rows.encode()).replace(b"FORMAT", b"%d" % 2))
    cache = retained.hit()
    assert cache.retained_shortcut(retained.project, retained.name, retained.file, CONTEXT) is None


def test_a_file_the_reader_refuses_is_no_memo(retained: Retained) -> None:
    # Over the run's size limit: the reader refuses it, so no memo may stand in for it.
    cache = retained.hit()
    with using_limits(Limits(max_bytes=5)):
        found = cache.retained_shortcut(retained.project, retained.name, retained.file, CONTEXT)
        assert found is None
        cache.prefetch_retained([retained.file])
        found = cache.retained_shortcut(retained.project, retained.name, retained.file, CONTEXT)
    assert found is None
    gone = retained.file.parent / "gone.json"
    assert cache.retained_shortcut(retained.project, retained.name, gone, CONTEXT) is None


@pytest.mark.parametrize(
    "known",
    [
        known_of(TEXTS[:1]),  # a row missing
        known_of([*TEXTS, ("edge:c", text_of("edge:c", 3))]),  # a row more
        known_of([TEXTS[0], ("edge:a", text_of("edge:a", 9))]),  # a row's text differs
        known_of([TEXTS[0], ("edge:z", TEXTS[1][1])]),  # another id
    ],
)
def test_a_file_that_does_not_hold_the_entrys_rows_gets_no_memo(
    toy: Project, tmp_path: Path, known: dict[str, tuple[str, Any]]
) -> None:
    directory = tmp_path / "cache"
    cache = new_cache(directory)
    category = toy.categories[0]
    cache.store_rows(toy, category, TEXTS)
    snapshot = Snapshot(category.name, "b", ())
    cache.remember_retained(toy, category.name, CONTEXT, b"raw", snapshot, known)
    assert not (directory / "retained").exists()
    # Without any entry of the category this run: nothing is noted either.
    new_cache(directory).remember_retained(
        toy, category.name, CONTEXT, b"raw", snapshot, known_of(TEXTS)
    )
    assert not (directory / "retained").exists()


def test_memos_are_pruned_to_the_newest(toy: Project, tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    category = toy.categories[0]
    for i in range(KEEP_ENTRIES + 2):
        cache = new_cache(directory)
        cache.store_rows(toy, category, TEXTS)
        snapshot = Snapshot(category.name, "b", ())
        cache.remember_retained(toy, category.name, str(i), b"raw", snapshot, known_of(TEXTS))
    assert len(list((directory / "retained" / category.name).glob("*.json"))) == KEEP_ENTRIES


# --- the kept closures -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def repository() -> Project:
    return load_project(ROOT)


def closure_memo(directory: Path) -> Path:
    (memo,) = (directory / "closures").glob("*.json")
    return memo


def test_the_closures_are_kept_and_read_back(repository: Project, tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    fresh = KeyInputs(given_versions=VERSIONS).closures(repository)
    inputs = KeyInputs(given_versions=VERSIONS, memo_dir=directory)
    assert inputs.closures(repository) == fresh
    assert (directory / ".gitignore").read_text() == GITIGNORE
    memo = closure_memo(directory)
    assert memo.name == f"{inputs.every_digest(repository)}.json"
    document = json.loads(memo.read_text())
    assert document["format"] == CACHE_FORMAT
    assert document["categories"] == {
        name: None if files is None else [p.relative_to(ROOT).as_posix() for p in files]
        for name, files in fresh.items()
    }
    # A later run reads them back instead of building the graph: shown by an edited memo.
    name = repository.categories[0].name
    document["categories"][name] = document["categories"][name][:1]
    memo.write_text(json.dumps(document))
    again = KeyInputs(given_versions=VERSIONS, memo_dir=directory).closures(repository)
    assert again == {**fresh, name: [ROOT / document["categories"][name][0]]}
    document["categories"][name] = None  # "every source" is kept as such
    memo.write_text(json.dumps(document))
    again = KeyInputs(given_versions=VERSIONS, memo_dir=directory).closures(repository)
    assert again == {**fresh, name: None}


@pytest.mark.parametrize(
    "damage",
    [
        "json",
        "format",
        "categories",
        "a category less",
        "a category more",
        "files",
        "a number",
        "outside",
    ],
)
def test_closures_not_about_these_sources_are_built_again(
    repository: Project, tmp_path: Path, damage: str
) -> None:
    directory = tmp_path / "cache"
    fresh = KeyInputs(given_versions=VERSIONS, memo_dir=directory).closures(repository)
    memo = closure_memo(directory)
    document = json.loads(memo.read_text())
    name = repository.categories[0].name
    if damage == "json":
        memo.write_bytes(b"{")
    else:
        if damage == "format":
            document["format"] = CACHE_FORMAT - 1
        elif damage == "categories":
            document["categories"] = list(document["categories"])
        elif damage == "a category less":
            del document["categories"][name]
        elif damage == "a category more":
            document["categories"]["another"] = None
        elif damage == "files":
            document["categories"][name] = "policies/variables.py"
        elif damage == "a number":
            document["categories"][name] = [*document["categories"][name], 7]
        else:  # a file that is no source of this tree
            document["categories"][name] = [*document["categories"][name], "tests/gone.py"]
        memo.write_text(json.dumps(document))
    assert KeyInputs(given_versions=VERSIONS, memo_dir=directory).closures(repository) == fresh


# --- cached baselines ------------------------------------------------------------------------


def baseline_source(tmp_path: Path) -> Path:
    source = tmp_path / "out"
    source.mkdir()
    (source / "toy-a.json").write_bytes(b'{"a": 1}\n')
    (source / "toy-b.json").write_bytes(b'{"b": 2}\n')
    (source / "notes.txt").write_text("not a snapshot")
    return source


def test_a_cached_baseline_is_its_snapshot_files(tmp_path: Path) -> None:
    warnings: list[str] = []
    cache = new_cache(tmp_path / "cache", warnings)
    assert cache.baseline_folder("k") is None and cache.baseline_hit is False
    cache.store_baseline("k", baseline_source(tmp_path))
    folder = cache.baseline_folder("k")
    assert folder == tmp_path / "cache" / "baselines" / "k" and cache.baseline_hit is True
    assert sorted(p.name for p in folder.iterdir()) == [MANIFEST, "toy-a.json", "toy-b.json"]
    assert (folder / "toy-b.json").read_bytes() == b'{"b": 2}\n'
    assert (tmp_path / "cache" / ".gitignore").read_text() == GITIGNORE
    assert cache.baseline_folder("other") is None
    assert warnings == []
    # Stored again (a rebuilt baseline) it replaces the old folder whole.
    (tmp_path / "out" / "toy-b.json").unlink()
    cache.store_baseline("k", tmp_path / "out")
    assert sorted(p.name for p in folder.iterdir()) == [MANIFEST, "toy-a.json"]
    assert cache.baseline_folder("k") == folder
    assert [p.name for p in (tmp_path / "cache" / "baselines").iterdir()] == ["k"]


@pytest.mark.parametrize("damage", ["edited", "missing", "extra", "manifest", "format", "files"])
def test_a_damaged_cached_baseline_is_not_used(tmp_path: Path, damage: str) -> None:
    warnings: list[str] = []
    cache = new_cache(tmp_path / "cache", warnings)
    cache.store_baseline("k", baseline_source(tmp_path))
    folder = tmp_path / "cache" / "baselines" / "k"
    manifest = json.loads((folder / MANIFEST).read_text())
    if damage == "edited":
        (folder / "toy-a.json").write_bytes(b'{"a": 2}\n')
    elif damage == "missing":
        (folder / "toy-b.json").unlink()
    elif damage == "extra":
        (folder / "toy-c.json").write_bytes(b"{}")
    elif damage == "manifest":
        (folder / MANIFEST).write_bytes(b"{")
    elif damage == "format":
        (folder / MANIFEST).write_text(json.dumps({**manifest, "format": 1}))
    else:
        (folder / MANIFEST).write_text(json.dumps({**manifest, "files": list(manifest["files"])}))
    cache.baseline_hit = True
    assert cache.baseline_folder("k") is None and cache.baseline_hit is False
    assert len(warnings) == 1 and str(folder) in warnings[0] and "rebuilding" in warnings[0]


def test_cached_baselines_are_pruned_to_the_newest(tmp_path: Path) -> None:
    cache = new_cache(tmp_path / "cache")
    source = baseline_source(tmp_path)
    parent = tmp_path / "cache" / "baselines"
    for i in range(KEEP_ENTRIES + 2):
        cache.store_baseline(f"k{i}", source)
        os.utime(parent / f"k{i}", ns=(10**18 + i, 10**18 + i))
    kept = sorted(p.name for p in parent.iterdir())
    assert len(kept) == KEEP_ENTRIES and f"k{KEEP_ENTRIES + 1}" in kept and "k0" not in kept
