"""The replay cache: each category's replayed rows (id and canonical text, as
`routectl.replay.harness.replay_texts` returns them), and each `diff --baseline-ref` baseline
folder, kept in `.routectl_cache/` beside the project's snapshot folder (docs/cache.md).

An entry is found by a key over every input that can change what it holds (`category_key`,
`baseline_key`), so a hit holds exactly what a replay would produce; the caller still compares
the rows with the baseline as it always does. The cache only ever saves the replay: an entry
that cannot be read (a wrong format, a digest that does not match, a file system error) is
ignored with a one-line warning and rebuilt, and a failed write costs the next run a replay,
nothing else. Entries are written atomically (temp file or folder, then a rename).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import shutil
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from routectl.errors import RoutectlError
from routectl.io.jsonread import Limits, current_limits, read_bytes
from routectl.project import Project
from routectl.replay.harness import RowText
from routectl.review.snapshot import Row, Snapshot, remove_stale_temp_files, temp_path
from routectl.runtime.workers import in_background

CACHE_DIR_NAME = ".routectl_cache"
# Bumped whenever an entry's layout or the key's recipe changes: older entries then miss.
CACHE_FORMAT = 2
# `ROUTECTL_NO_CACHE` set to anything but empty or "0" turns the cache off, as --no-cache does.
NO_CACHE_VARIABLE = "ROUTECTL_NO_CACHE"
# Entries kept per category (and baselines kept): enough for a few branches or a bisect.
KEEP_ENTRIES = 4
# The dependencies whose versions shape the rows' bytes: torch (meta tensors' shapes and
# dtypes), orjson (the canonical texts), pydantic with its core (typed configs).
DEPENDENCIES = ("torch", "orjson", "pydantic", "pydantic-core")
# The schema validators: their versions name a retained snapshot's memo (`retained_shortcut`).
VALIDATORS = ("jsonschema-rs", "jsonschema")
RETAINED = "retained"
# The files whose bytes count as project sources (code and the data or settings it reads).
SOURCE_SUFFIXES = frozenset({".py", ".pyi", ".toml", ".json", ".cfg"})
# Of those, the ones an import graph follows; the others are keyed for every category.
PYTHON_SUFFIXES = frozenset({".py", ".pyi"})
GITIGNORE = "# Created by routectl automatically (docs/cache.md).\n*\n"
ROWS_MAGIC = b"routectl-row-cache"
# Beside a cached baseline's snapshot files, each file's digest; not `*.json`, which names
# a snapshot in a baseline folder.
MANIFEST = "manifest"
PICKLE_PROTOCOL = 5  # fixed: the default may change with Python (whose version is keyed)

Warn = Callable[[str], None]


def cache_disabled(environ: Mapping[str, str]) -> bool:
    return environ.get(NO_CACHE_VARIABLE, "") not in ("", "0")


def cache_directory(project: Project) -> Path | None:
    """`.routectl_cache/` beside the snapshot folder; None for a project without one."""
    if project.snapshots is None:
        return None
    return project.snapshots.parent / CACHE_DIR_NAME


# --- the key -------------------------------------------------------------------------------


def _skipped_dir(path: Path) -> bool:
    # Hidden folders (.git, .venv, the cache itself), bytecode and virtual environments hold
    # no source the project imports from its own tree.
    return (
        path.name.startswith(".")
        or path.name == "__pycache__"
        or path.name == "node_modules"
        or (path / "pyvenv.cfg").is_file()
    )


def source_files(root: Path, *, exclude: Sequence[Path] = ()) -> list[Path]:
    """Every source file under `root` (SOURCE_SUFFIXES), sorted, outside `exclude` (the
    snapshot folder: retained rows are compared with, never read by, a replay)."""
    excluded = {p.resolve() for p in exclude}
    found: list[Path] = []
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        dirs[:] = sorted(
            d for d in dirs if not _skipped_dir(here / d) and (here / d).resolve() not in excluded
        )
        found.extend(here / f for f in files if Path(f).suffix in SOURCE_SUFFIXES)
    return sorted(found)


def installed_versions(names: Sequence[str]) -> list[tuple[str, str]]:
    """Each distribution's installed version (from its metadata: nothing imported), or
    "absent"."""
    from importlib import metadata

    versions = []
    for name in names:
        try:
            versions.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            versions.append((name, "absent"))
    return versions


def validator_versions() -> tuple[tuple[str, str], ...]:
    """The versions of the schema validators, which decide whether a snapshot file is valid
    but never shape a replayed row."""
    return tuple(installed_versions(VALIDATORS))


def dependency_versions() -> tuple[tuple[str, str], ...]:
    """Python's and every DEPENDENCY's version (from installed metadata: torch not imported)."""
    # The package above every layer is imported already (this module is inside it); its
    # sources are in the key as well.
    version = getattr(sys.modules["routectl"], "__version__", "unknown")
    versions = [
        ("routectl", str(version)),
        ("python", f"{sys.version} {sys.implementation.cache_tag} {sys.platform}"),
    ]
    return (*versions, *installed_versions(DEPENDENCIES))


@dataclass
class SourceDigests:
    """The digest of each file read for a key, each file read once per run."""

    _digests: dict[Path, str] = field(default_factory=dict)

    def digest(self, path: Path) -> str:
        found = self._digests.get(path)
        if found is None:
            try:
                found = hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
            except OSError as exc:  # a file gone between the walk and the read: its own key
                found = f"unreadable: {exc.strerror or exc}"
            self._digests[path] = found
        return found


# The routectl package this code runs from (its own sources are in every key).
PACKAGE = Path(__file__).resolve().parents[1]


def routectl_sources(package: Path = PACKAGE) -> list[Path]:
    """routectl's own files (code and its JSON schemas), wherever it is installed."""
    return source_files(package)


def project_sources(project: Project, package: Path = PACKAGE) -> list[Path]:
    """Every project source (outside the snapshot folder) and every routectl source."""
    assert project.root is not None
    exclude = [project.snapshots] if project.snapshots is not None else []
    files = set(resolved_sources(project.root, exclude=exclude))
    files |= set(resolved_sources(package))
    return sorted(files)


def resolved_sources(root: Path, *, exclude: Sequence[Path] = ()) -> list[Path]:
    """`source_files(root, exclude=exclude)`, each path resolved: each folder is resolved
    once and a file only where it is a link (what `Path.resolve` of each file gives, without
    its lookups of every component of every file)."""
    excluded = {p.resolve() for p in exclude}
    found: list[Path] = []

    def walk(folder: Path, real: str) -> None:
        with os.scandir(folder) as scan:
            entries = list(scan)
        for entry in entries:
            here = folder / entry.name
            # Classified as os.walk does: a link to a folder is a folder, never entered.
            if entry.is_dir():
                if not entry.is_symlink() and not _skipped_dir(here):
                    if here.resolve() not in excluded:
                        walk(here, os.path.join(real, entry.name))
            elif os.path.splitext(entry.name)[1] in SOURCE_SUFFIXES:
                found.append(here.resolve() if entry.is_symlink() else Path(real, entry.name))

    walk(root, os.path.realpath(root))
    return found


def category_sources(project: Project, category: Any, inputs: KeyInputs) -> list[Path]:
    """The files whose bytes can change `category`'s rows: the project modules its replay can
    run (`routectl.review.closure`: the import closure of what its family records and the
    project object reach), every project source that is not Python (data and settings are
    read by path, which no import graph follows) and every routectl source. Where the
    closure is unknown (no family record lists the category, a computed import, a tree the
    graph cannot read), every project source (`project_sources`)."""
    every = inputs.project_sources(project)
    modules = inputs.closures(project).get(category.name)
    if modules is None:
        return every
    always = inputs.always_keyed(project)
    kept = set(modules)
    return [p for p in every if p in kept or p in always]


@dataclass
class KeyInputs:
    """What a run computes once for all its keys: file digests, versions, the source walk."""

    digests: SourceDigests = field(default_factory=SourceDigests)
    # The versions and the routectl package keyed (None: the installed versions); tests give
    # others to see each input change the key.
    given_versions: tuple[tuple[str, str], ...] | None = None
    package: Path = PACKAGE
    # Where the closures of a tree are kept (the cache folder; None: computed every run).
    memo_dir: Path | None = None
    # Memos of this run: source walks by project root, file-list digests, category keys.
    _sources: dict[Path, list[Path]] = field(default_factory=dict)
    _files: dict[tuple[Path, tuple[Path, ...]], str] = field(default_factory=dict)
    _keys: dict[tuple[int, str], str] = field(default_factory=dict)
    _closures: dict[Path, dict[str, list[Path] | None]] = field(default_factory=dict)
    _always: dict[Path, frozenset[Path]] = field(default_factory=dict)
    _lines: dict[tuple[Path, Path], bytes] = field(default_factory=dict)

    @property
    def versions(self) -> tuple[tuple[str, str], ...]:
        if self.given_versions is None:
            self.given_versions = dependency_versions()
        return self.given_versions

    @functools.cached_property
    def validator_versions(self) -> tuple[tuple[str, str], ...]:
        return validator_versions()

    def key_of(self, project: Project, category: Any) -> str | None:
        return self._keys.get((id(project), category.name))

    def remember_key(self, project: Project, category: Any, key: str) -> str:
        self._keys[(id(project), category.name)] = key
        return key

    def project_sources(self, project: Project) -> list[Path]:
        assert project.root is not None
        if project.root not in self._sources:
            self._sources[project.root] = project_sources(project, self.package)
        return self._sources[project.root]

    def always_keyed(self, project: Project) -> frozenset[Path]:
        """The sources in every category's key (`category_sources`): those no import graph
        follows (not Python) and routectl's own. Worked out once a run: a path test per file
        per category cost more than the rest of a category's key."""
        assert project.root is not None
        found = self._always.get(project.root)
        if found is None:
            package = _inside(self.package.resolve())
            found = self._always[project.root] = frozenset(
                p
                for p in self.project_sources(project)
                if p.suffix not in PYTHON_SUFFIXES or str(p).startswith(package)
            )
        return found

    def every_digest(self, project: Project) -> str:
        """The digest of every project and routectl source (`project_sources`)."""
        assert project.root is not None
        return self.files_digest(project.root.resolve(), self.project_sources(project))

    def closures(self, project: Project) -> dict[str, list[Path] | None]:
        """Each category's project modules (`routectl.review.closure.category_modules`),
        kept in the cache folder under the digest of every project and routectl source:
        an unchanged tree reads them back instead of building the import graph again."""
        assert project.root is not None
        root = project.root.resolve()
        found = self._closures.get(root)
        if found is not None:
            return found
        every = self.project_sources(project)
        memo = None
        if self.memo_dir is not None:
            memo = self.memo_dir / "closures" / f"{self.every_digest(project)}.json"
            found = _read_closures(memo, root, every, [c.name for c in project.categories])
        if found is None:
            from routectl.review.closure import category_modules

            found = category_modules(project)
            if memo is not None:
                _write_closures(memo, root, found)
        self._closures[root] = found
        return found

    def files_digest(self, root: Path, paths: Sequence[Path]) -> str:
        """One digest over the names (relative to `root` where inside it) and the bytes of
        `paths`: categories that share a source list share its digest."""
        memo = (root, tuple(paths))
        found = self._files.get(memo)
        if found is None:
            h = hashlib.blake2b(digest_size=20)
            h.update(b"".join(self._line(root, path) for path in paths))
            found = self._files[memo] = h.hexdigest()
        return found

    def _line(self, root: Path, path: Path) -> bytes:
        """What `files_digest` hashes for one file: its name (relative to `root` where
        inside it, as POSIX) and its bytes' digest; made once a run for each file, since
        every category's list repeats most of them."""
        found = self._lines.get((root, path))
        if found is None:
            text = str(path)
            inside = _inside(root)
            # A string test, not PurePath.relative_to: the same answer for the resolved
            # paths held here, at a hundredth of the cost.
            name = text[len(inside) :].replace(os.sep, "/") if text.startswith(inside) else text
            found = f"file {name} {self.digests.digest(path)}\n".encode()
            self._lines[(root, path)] = found
        return found


def _inside(folder: Path) -> str:
    """The prefix of every path strictly inside `folder` (resolved, absolute)."""
    text = str(folder)
    return text if text.endswith(os.sep) else text + os.sep


def _read_closures(
    path: Path, root: Path, every: Sequence[Path], names: Sequence[str]
) -> dict[str, list[Path] | None] | None:
    """The kept closures, or None when absent, unreadable or not about these sources."""
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        return None
    kept = data.get("categories")
    if not isinstance(kept, dict) or sorted(kept) != sorted(names):
        return None
    known = set(every)
    out: dict[str, list[Path] | None] = {}
    for name, files in kept.items():
        if files is None:
            out[name] = None
            continue
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            return None
        paths = [root / f for f in files]
        if not known.issuperset(paths):
            return None
        out[name] = paths
    return out


def _write_closures(path: Path, root: Path, closures: Mapping[str, list[Path] | None]) -> None:
    """Keep the closures; a failure costs the next run the import graph, nothing else."""
    document = {
        "format": CACHE_FORMAT,
        "categories": {
            name: None if files is None else [f.relative_to(root).as_posix() for f in files]
            for name, files in closures.items()
        },
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ignore = path.parent.parent / ".gitignore"  # the folder ignores itself (as _prepare)
        if not ignore.is_file():
            _write_atomic(ignore, GITIGNORE.encode())
        _write_atomic(path, orjson.dumps(document, option=orjson.OPT_SORT_KEYS))
        _prune(path.parent.glob("*.json"), KEEP_ENTRIES)
    except OSError:
        pass


def category_key(project: Project, category: Any, inputs: KeyInputs) -> str:
    """The one key of a category's replayed rows: the bytes of every file in
    `category_sources`, the versions of routectl, Python and DEPENDENCIES, the category's
    name and basis and its row set (every field of every RowSpec)."""
    found = inputs.key_of(project, category)
    if found is not None:  # asked again to store what was replayed
        return found
    key = _row_key(category, inputs.versions, sources_digest(project, category, inputs))
    return inputs.remember_key(project, category, key)


def sources_digest(project: Project, category: Any, inputs: KeyInputs) -> str:
    """The part of `category`'s key that reads files and walks objects only (the digest of
    its `category_sources`): no project code runs for it, so a forked process may compute
    it (`ReplayCache.keying`)."""
    assert project.root is not None
    sources = category_sources(project, category, inputs)
    return inputs.files_digest(project.root.resolve(), sources)


def _row_key(category: Any, versions: tuple[tuple[str, str], ...], sources: str) -> str:
    """The key of `category` from the versions and its sources' digest: those, its name,
    basis and row set (the project's own `rows()`, called in the caller's process)."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"routectl row cache {CACHE_FORMAT}\n".encode())
    h.update(orjson.dumps([list(v) for v in versions]))
    h.update(f"\nfiles {sources}".encode())
    h.update(f"\ncategory {category.name}\n{category.basis}\n".encode())
    # The row set as pickle writes it: every field of every RowSpec (a fifth of the time
    # repr takes). Equal rows built alike pickle alike; rows that pickle otherwise (a set
    # in another order) cost a replay, never a wrong hit.
    h.update(pickle.dumps(list(category.rows()), protocol=PICKLE_PROTOCOL))
    return h.hexdigest()


# --- the store -----------------------------------------------------------------------------


def _prune(entries: Iterator[Path], keep: int) -> None:
    """Remove all but the `keep` most recently written entries (files or folders)."""
    dated = []
    for entry in entries:
        try:
            dated.append((entry.stat().st_mtime_ns, entry.name, entry))
        except OSError:
            continue
    for _, _, entry in sorted(dated, reverse=True)[keep:]:
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


class ReplayCache:
    """The cache folder of one project for one run. `replayed` and `hits` name the
    categories whose rows came from a replay and from the cache (`check -v` shows them);
    `warn` receives the one line each unreadable entry or failed write is worth."""

    def __init__(self, directory: Path, warn: Warn) -> None:
        self.directory = directory
        self._warn = warn
        self.inputs = KeyInputs(memo_dir=directory)
        self.replayed: list[str] = []
        self.hits: list[str] = []
        # The rows each hit read and its entry's body digest (`retained_shortcut`).
        self._found: dict[str, tuple[list[RowText], str]] = {}
        self._digests: _FileDigests | None = None
        # The categories whose retained (or baseline) file a memo matched (`check -v`).
        self.retained_hits: list[str] = []
        # Whether `diff --baseline-ref`'s baseline came from the cache (None: no such diff).
        self.baseline_hit: bool | None = None
        self._write_failed = False

    @classmethod
    def for_project(cls, project: Project, warn: Warn) -> ReplayCache | None:
        directory = cache_directory(project)
        if directory is None or project.root is None:
            return None
        return cls(directory, warn)

    def _rows_path(self, category: str, key: str) -> Path:
        return self.directory / "rows" / category / f"{key}.rows"

    def _prepare(self) -> None:
        """The folder with its `.gitignore` (as pytest and ruff make theirs)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        ignore = self.directory / ".gitignore"
        if not ignore.is_file():
            _write_atomic(ignore, GITIGNORE.encode())

    def _failed_write(self, what: Path, exc: OSError) -> None:
        if not self._write_failed:  # one line per run: the cause is the same every time
            self._warn(f"cannot write the replay cache {what}: {exc.strerror or exc}")
            self._write_failed = True

    def _holds_entries(self, category: str) -> bool:
        """Whether the folder of `category` holds any entry (an error reading it: yes)."""
        try:
            with os.scandir(self.directory / "rows" / category) as entries:
                return any(entry.name.endswith(".rows") for entry in entries)
        except FileNotFoundError:
            return False
        except OSError:
            return True

    def load_rows(self, project: Project, category: Any) -> list[RowText] | None:
        """The cached rows of `category`, or None (a miss, or an unreadable entry). A
        category without any entry misses whatever its key: the key is left to be
        computed when the rows are stored (`keying`)."""
        if not self._holds_entries(category.name):
            return None
        path = self._rows_path(category.name, category_key(project, category, self.inputs))
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self._warn(f"ignoring the unreadable replay cache {path} ({exc.strerror or exc})")
            return None
        rows = _parse_rows(data)
        if rows is None:
            self._warn(f"ignoring the unreadable replay cache {path}: replaying {category.name}")
            return None
        self._found[category.name] = (rows, _entry_digest(data))
        return rows

    @contextlib.contextmanager
    def keying(
        self, project: Project, categories: Sequence[Any], *, background: bool
    ) -> Iterator[None]:
        """The keys of `categories` (those about to be replayed), ready when the block
        ends. With `background`, a forked process computes their costly part (the import
        closures and the source digests, `sources_digest`: about a tenth of the torch
        import) while the block runs (the torch import and the replay), and this process
        adds the row sets when it ends; otherwise they are computed here first. Either way
        they are computed from the state this process had before the replay, the state a
        later run's lookup computes them from.

        The forked process runs no project code (each category's `rows()` is called
        here): project code that records the process it runs in sees this one, which its
        own parent stops and reaps (`diff`'s baseline on Ctrl-C), never a child of it that
        only init would reap once this process is killed."""
        inputs = self.inputs
        todo = [c for c in categories if inputs.key_of(project, c) is None]

        def digests() -> tuple[tuple[tuple[str, str], ...], dict[str, str]]:
            return inputs.versions, {c.name: sources_digest(project, c, inputs) for c in todo}

        if not todo or not background:
            for category in todo:
                category_key(project, category, inputs)
            yield
            return
        pending = in_background(digests)
        try:
            yield
            versions, by_name = pending.result()
        finally:
            pending.cancel()  # stopped if the block (or the wait) failed: nothing else
        for category in todo:
            key = _row_key(category, versions, by_name[category.name])
            inputs.remember_key(project, category, key)

    def store_rows(self, project: Project, category: Any, rows: Sequence[RowText]) -> None:
        path = self._rows_path(category.name, category_key(project, category, self.inputs))
        try:
            self._prepare()
            path.parent.mkdir(parents=True, exist_ok=True)
            data = _format_rows(rows)
            _write_atomic(path, data)
            _prune(path.parent.glob("*.rows"), KEEP_ENTRIES)
        except OSError as exc:
            self._failed_write(path, exc)
            return
        # A retained file found to hold these rows is noted under this entry (`run_check`).
        self._found[category.name] = (list(rows), _entry_digest(data))

    def rows(
        self, project: Project, categories: Sequence[Any]
    ) -> tuple[dict[str, list[RowText]], list[Any]]:
        """The cached rows of `categories` by name, and the categories to replay."""
        found: dict[str, list[RowText]] = {}
        missing: list[Any] = []
        for category in categories:
            rows = self.load_rows(project, category)
            if rows is None:
                missing.append(category)
            else:
                found[category.name] = rows
        self.hits.extend(found)
        self.replayed.extend(c.name for c in missing)
        return found, missing

    # --- retained snapshots that hold exactly a hit's rows -----------------------------------

    def retained_shortcut(
        self, project: Project, name: str, path: Path, context: str
    ) -> tuple[Snapshot, dict[str, tuple[str, Row]]] | None:
        """The snapshot file `path` of category `name` as `SnapshotFiles.load` would read it,
        with its rows' canonical texts (`known_rows`), from this run's cached rows of `name`
        instead of the file: only where a memo (`remember_retained`) says a file of these
        very bytes, read by these very sources and versions, parsed, validated and held
        exactly the rows of this cache entry. None otherwise, also for a file that cannot
        be read: the caller reads it as always, and raises what it raises.

        Parsing an unchanged 18 MB snapshot folder cost more than half of an unchanged
        tree's check; its digest costs a fifth of that."""
        found = self._found.get(name)
        if found is None:
            return None
        texts, entry = found
        try:
            memo = self._memo_path(project, name, context, self._file_digest(path))
            document = orjson.loads(memo.read_bytes())
        except (RoutectlError, OSError, orjson.JSONDecodeError):
            return None
        if (
            not isinstance(document, dict)
            or document.get("format") != CACHE_FORMAT
            or document.get("rows") != entry
            or not isinstance(document.get("basis"), str)
        ):
            return None
        # Texts routectl wrote from rows a file it validated holds: plain JSON within the
        # 64-bit range, which orjson reads back exactly.
        parsed = [orjson.loads(text) for _, text in texts]
        known = {row_id: (text, row) for (row_id, text), row in zip(texts, parsed, strict=True)}
        rows = tuple(sorted(parsed, key=lambda r: r["id"]))
        self.retained_hits.append(name)
        return Snapshot(name, document["basis"], rows, validated=True), known

    def remember_retained(
        self,
        project: Project,
        name: str,
        context: str,
        raw: bytes,
        snapshot: Snapshot,
        known: Mapping[str, tuple[str, Row]],
    ) -> None:
        """Note that the file of bytes `raw`, read as `snapshot` with rows of canonical
        texts `known`, holds exactly the rows this run read from or stored in the entry of
        `name` (nothing when it does not: a changed category's file is read every run).
        The memo is named by the very bytes that were parsed."""
        found = self._found.get(name)
        if found is None:
            return
        texts, entry = found
        if len(texts) != len(known) or any(
            known.get(row_id, ("",))[0] != text for row_id, text in texts
        ):
            return
        document = {"format": CACHE_FORMAT, "basis": snapshot.basis, "rows": entry}
        digest = hashlib.blake2b(raw, digest_size=20).digest()
        try:
            memo = self._memo_path(project, name, context, digest)
            memo.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(memo, orjson.dumps(document))
            _prune(memo.parent.glob("*.json"), KEEP_ENTRIES)
        except (RoutectlError, OSError):
            pass  # a memo lost costs the next run a parse, nothing else

    def _memo_path(self, project: Project, name: str, context: str, digest: bytes) -> Path:
        """The memo of one snapshot file: named by the digest of its bytes, the category,
        the reader's `context` (the baseline's advice), every project and routectl source
        (the schema and the parser are among them) and the versions of the dependencies
        and of the schema validators."""
        h = hashlib.blake2b(digest_size=20)
        h.update(f"routectl retained {CACHE_FORMAT}\n{name}\n{context}\n".encode())
        versions = (*self.inputs.versions, *self.inputs.validator_versions)
        h.update(orjson.dumps([list(v) for v in versions]))
        h.update(f"\nsources {self.inputs.every_digest(project)}\n".encode())
        h.update(digest)
        return self.directory / RETAINED / name / f"{h.hexdigest()}.json"

    def holds_entries(self, categories: Sequence[str]) -> bool:
        """Whether the folder of every category in `categories` holds an entry: a run that
        will most likely be served from the cache whole."""
        return all(self._holds_entries(name) for name in categories)

    def prefetch_retained(self, paths: Sequence[Path]) -> None:
        """Start reading and hashing the snapshot files `paths` in a thread, for
        `retained_shortcut`: hashing releases the interpreter lock, so on a second CPU
        the digests of the retained files cost nothing beside the keys computed meanwhile.
        For a run expected to hit only (`holds_entries`): beside a torch import and a
        replay, the thread slowed an empty-cache check by a tenth."""
        self._digests = _FileDigests(paths, current_limits())

    def _file_digest(self, path: Path) -> bytes:
        if self._digests is not None:
            found = self._digests.get(path)
            if found is not None:
                return found
        return _digest_file(path, current_limits())

    # --- baselines computed at a git ref ---------------------------------------------------

    def baseline_folder(self, key: str) -> Path | None:
        """The cached baseline folder of `key` when every file in it is intact, else None."""
        folder = self.directory / "baselines" / key
        self.baseline_hit = False
        try:
            manifest = orjson.loads((folder / MANIFEST).read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, orjson.JSONDecodeError) as exc:
            self._warn(f"ignoring the unreadable cached baseline {folder} ({exc}); rebuilding it")
            return None
        if _baseline_intact(folder, manifest):
            self.baseline_hit = True
            return folder
        self._warn(f"ignoring the unreadable cached baseline {folder}; rebuilding it")
        return None

    def store_baseline(self, key: str, source: Path) -> None:
        """Copy the snapshot files of `source` (a baseline's output folder) into the cache."""
        parent = self.directory / "baselines"
        target = parent / key
        temp = parent / f".{key}.routectl-{os.getpid()}-{os.urandom(6).hex()}.tmp"
        try:
            self._prepare()
            parent.mkdir(parents=True, exist_ok=True)
            temp.mkdir()
            files: dict[str, str] = {}
            for path in sorted(source.glob("*.json")):
                data = path.read_bytes()
                (temp / path.name).write_bytes(data)
                files[path.name] = hashlib.blake2b(data, digest_size=20).hexdigest()
            manifest = {"format": CACHE_FORMAT, "files": files}
            (temp / MANIFEST).write_bytes(orjson.dumps(manifest))
            shutil.rmtree(target, ignore_errors=True)  # an unreadable one being replaced
            os.rename(temp, target)
            _prune((p for p in parent.iterdir() if not p.name.startswith(".")), KEEP_ENTRIES)
        except OSError as exc:
            self._failed_write(target, exc)
        finally:
            shutil.rmtree(temp, ignore_errors=True)


def _digest_file(path: Path, limits: Limits) -> bytes:
    """The digest of a snapshot file read as its reader reads it (under `limits`); an
    InputError for a file that reader refuses."""
    return hashlib.blake2b(read_bytes(path, "snapshot", limits), digest_size=20).digest()


class _FileDigests:
    """`_digest_file` of some files, computed by a thread started at once. The run's JSON
    limits are passed in: a thread does not inherit the caller's context variables."""

    def __init__(self, paths: Sequence[Path], limits: Limits) -> None:
        self._done: dict[Path, bytes | RoutectlError] = {}
        self._thread = threading.Thread(target=self._run, args=(list(paths), limits), daemon=True)
        self._thread.start()

    def _run(self, paths: list[Path], limits: Limits) -> None:
        for path in paths:
            try:
                self._done[path] = _digest_file(path, limits)
            except RoutectlError as exc:
                self._done[path] = exc
            except Exception:  # noqa: BLE001 - the caller then reads the file itself
                return

    def get(self, path: Path) -> bytes | None:
        """The digest of `path` (its reader's error raised), None if it was not asked for."""
        self._thread.join()
        found = self._done.get(path)
        if isinstance(found, RoutectlError):
            raise found
        return found


def _baseline_intact(folder: Path, manifest: Any) -> bool:
    if not isinstance(manifest, dict) or manifest.get("format") != CACHE_FORMAT:
        return False
    files = manifest.get("files")
    if not isinstance(files, dict):
        return False
    try:
        present = {p.name for p in folder.glob("*.json")}
        if present != set(files):
            return False
        for name, digest in files.items():
            data = (folder / name).read_bytes()
            if hashlib.blake2b(data, digest_size=20).hexdigest() != digest:
                return False
    except OSError:
        return False
    return True


def baseline_key(
    tree: str, project_path: Path, engine_digest: str | None, inputs: KeyInputs
) -> str:
    """The key of a baseline computed at a git ref: the commit's tree (every file the old
    program runs from, its routectl included when the tree holds one), the project's path
    in it, the digest of the engine it falls back to otherwise, and the versions."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"routectl baseline cache {CACHE_FORMAT}\n".encode())
    h.update(orjson.dumps([list(v) for v in inputs.versions]))
    h.update(f"\ntree {tree}\nproject {project_path.as_posix()}\n".encode())
    h.update(f"engine {engine_digest or 'the tree own'}\n".encode())
    return h.hexdigest()


def engine_digest(inputs: KeyInputs) -> str:
    """The digest of routectl's own sources (the engine a tree without routectl runs)."""
    return inputs.files_digest(inputs.package, routectl_sources(inputs.package))


def ref_baseline_key(
    project: Project, ref: str, *, environ: Mapping[str, str], inputs: KeyInputs
) -> tuple[str, str]:
    """The commit `ref` names and the cache key of the baseline its code computes
    (`baseline_key`); git failures are the InputErrors `routectl diff` gives anyway."""
    from routectl.review.git import file_at, git_error, locate_ref, run_git

    assert project.root is not None
    root = project.root.resolve()
    repository, project_path, commit = locate_ref(root, ref, environ)
    done = run_git(repository, ["rev-parse", "--verify", f"{commit}^{{tree}}"], environ)
    if done.returncode != 0 or not done.stdout.strip():
        raise git_error(f"cannot read the tree of {ref} ({commit[:12]})", done)
    # The baseline runs the tree's own routectl when it holds one (RefBaseline.start).
    own = file_at(repository, commit, "routectl/__init__.py", environ) is not None
    engine = None if own else engine_digest(inputs)
    # The caller's PYTHONPATH follows the worktree on the baseline's path (baseline_environ).
    engine = f"{engine} path {environ.get('PYTHONPATH', '')}"
    return commit, baseline_key(done.stdout.strip(), project_path, engine, inputs)


# --- entry files ---------------------------------------------------------------------------


def _format_rows(rows: Sequence[RowText]) -> bytes:
    """A header line (magic, format, count, the body's digest), then one line per row: its
    id as a JSON string, a tab, its canonical text (JSON texts hold no raw newline or tab)."""
    body = b"".join(
        orjson.dumps(row_id) + b"\t" + text.encode("utf-8") + b"\n" for row_id, text in rows
    )
    digest = hashlib.blake2b(body, digest_size=20).hexdigest()
    header = b"%s %d %d %s\n" % (ROWS_MAGIC, CACHE_FORMAT, len(rows), digest.encode())
    return header + body


def _entry_digest(data: bytes) -> str:
    """The body digest of a row entry (`_format_rows`): its header's fourth word."""
    return data.partition(b"\n")[0].split(b" ")[3].decode()


def _parse_rows(data: bytes) -> list[RowText] | None:
    header, newline, body = data.partition(b"\n")
    parts = header.split(b" ")
    if not newline or len(parts) != 4 or parts[0] != ROWS_MAGIC:
        return None
    if parts[1] != str(CACHE_FORMAT).encode() or not parts[2].isdigit():
        return None
    if hashlib.blake2b(body, digest_size=20).hexdigest().encode() != parts[3]:
        return None
    lines = body.split(b"\n")
    if lines.pop() != b"" or len(lines) != int(parts[2]):
        return None
    rows: list[RowText] = []
    try:
        for line in lines:
            row_id, tab, text = line.partition(b"\t")
            name = orjson.loads(row_id)
            if not tab or not isinstance(name, str):
                return None
            rows.append((name, text.decode("utf-8")))
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        return None
    return rows


def _write_atomic(path: Path, data: bytes) -> None:
    """A temp file beside `path`, renamed over it. Not fsynced: a cache entry lost to a
    crash is a replay, and an entry cut short fails its digest."""
    remove_stale_temp_files(path.parent)
    temp = temp_path(path)
    try:
        with open(temp, "xb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
