"""Which of a project's Python modules a category's replay can run: the static import closure
(grimp's import graph) of the modules the category object and its family records reach, and of
the modules the project object itself reaches (policy fields, catalogue, qualification, every
family's hashing rules). `category_modules` gives each category's module files, or None where
the closure cannot be trusted; the replay cache (routectl/review/cache.py) then keys that
category by every project source, as it does for a category no family record lists.

The closure never leaves out a module the replay can reach:

- parent packages are in it (importing `a.b` runs `a/__init__.py`);
- imports inside functions and under TYPE_CHECKING count (grimp reports them all);
- a module that imports by a computed name (importlib, `__import__`, entry points, exec,
  eval) makes the closure unknown: the category falls back to every source;
- a string that names a project module, in the category object or its family records, adds
  that module; a string naming another family in a module of the closure adds that family's
  modules (a replay that selects by family name runs them);
- only the module that writes the family records (`Family(...)` calls) is not followed into
  the modules of the other families and categories it lists: they run in a replay only
  through their own records, which are walked for their own categories. Everything else it
  imports is followed.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from routectl.family import Family
from routectl.project import Project

# Names whose use imports by a computed name: a module using one has an unknown closure.
DYNAMIC_NAMES = frozenset(
    {
        "import_module",
        "__import__",
        "entry_points",
        "exec",
        "eval",
        "reload",
        "run_module",
        "run_path",
        "iter_modules",
        "walk_packages",
        "spec_from_file_location",
        "module_from_spec",
    }
)
# Any of DYNAMIC_NAMES as a word of its own in a module's bytes: an identifier the parser
# reads as one of them is spelled so (not inside a longer word such as "evaluate"), so a
# module without a match uses none and is not parsed.
_DYNAMIC_BYTES = tuple(n.encode() for n in sorted(DYNAMIC_NAMES))
_DYNAMIC_WORD = re.compile(
    rb"(?<![A-Za-z0-9_])(?:"
    + b"|".join(re.escape(n) for n in _DYNAMIC_BYTES)
    + rb")(?![A-Za-z0-9_])"
)
# The derived or per-family parts of the project object: walked per category through the
# records instead (walking them here would name every family's modules for every category).
PER_FAMILY_FIELDS = frozenset({"families", "categories", "selectors", "loaders", "root"})
# How deep the object walk follows attributes and containers.
WALK_DEPTH = 8


def _module_file(name: str) -> Path | None:
    """The file a loaded module ran from (None: built in, or not loaded)."""
    origin = getattr(sys.modules.get(name), "__file__", None)
    return Path(origin).resolve() if origin else None


def _source_file(name: str, tops: Mapping[str, Path]) -> Path | None:
    """Where `name` is, found from its top-level package's folder (never imported: finding
    a spec would import its parents, and some import torch)."""
    top, *rest = name.split(".")
    start = tops.get(top)
    if start is None:
        return None
    if start.name != "__init__.py":
        return start if not rest else None
    here = start.parent.joinpath(*rest)
    for candidate in (here / "__init__.py", here.with_suffix(".py")):
        if candidate.is_file():
            return candidate.resolve()
    return None


def _walk(obj: Any, modules: set[str], known: Iterable[str]) -> None:
    """Add to `modules` the module of every function, class and instance reachable from
    `obj` within WALK_DEPTH steps through attributes, closures, defaults and containers
    (routectl's and the project's own objects only), and every string that names a module
    in `known`.

    Breadth first: each object is reached at its least depth, so what is found does not
    depend on the order of the steps, and the walks of several objects together find what
    their walks one by one find (`_Walker` keeps one walk per object)."""
    names = set(known)
    # Level by level, each object taken once, at the first (least) depth that reaches it;
    # kept by id while the walk lives, so that no id is reused within it.
    seen: dict[int, Any] = {id(obj): obj}
    level = [obj]
    for depth in range(WALK_DEPTH + 1):
        following: list[Any] = []
        for item in level:
            kind = type(item)
            # The common exact types first (most of what a category holds), by one type
            # test each; any other type (subclasses too) goes through the isinstance chain.
            if kind is str:
                if item in names:
                    modules.add(item)
                continue
            if kind in _ATOMS:
                continue
            if kind is tuple or kind is list:
                children: Iterable[Any] = item
            elif kind is dict:
                children = [*item.keys(), *item.values()]
            else:
                children = _children(item, modules, names)
            if depth < WALK_DEPTH:
                for child in children:
                    if id(child) not in seen:
                        seen[id(child)] = child
                        following.append(child)
        if not following:
            return
        level = following


# Exact types that hold no code and name no module (a str may: `_walk` looks it up).
_ATOMS = frozenset({bool, int, float, bytes, type(None)})


def _children(item: Any, modules: set[str], names: set[str]) -> list[Any]:
    """What `_walk` follows from `item`, the modules it names added to `modules`."""
    if isinstance(item, str):
        if item in names:
            modules.add(item)
        return []
    if item is None or isinstance(item, (bool, int, float, bytes, Path)):
        return []
    if isinstance(item, Family):  # a record: walked where its categories are keyed
        return []
    children: list[Any] = []
    if isinstance(item, Mapping):
        children.extend(item.keys())
        children.extend(item.values())
    elif isinstance(item, (list, tuple, set, frozenset)):
        children.extend(item)
    elif inspect.ismodule(item):
        modules.add(item.__name__)
    elif inspect.isclass(item):
        modules.update(c.__module__ for c in item.__mro__)
    elif inspect.ismethod(item):
        children.extend([item.__func__, item.__self__])
    elif inspect.isfunction(item):
        modules.add(item.__module__)
        cells = item.__closure__ or ()
        children.extend(c.cell_contents for c in cells if _filled(c))
        children.extend([item.__defaults__, item.__kwdefaults__])
        children.append(getattr(item, "__wrapped__", None))
    elif isinstance(item, functools.partial):
        children.extend([item.func, item.args, item.keywords])
    elif _ours(type(item).__module__, names):
        kind = type(item)
        modules.update(c.__module__ for c in kind.__mro__)
        state = getattr(item, "__dict__", None)
        if isinstance(state, dict):
            children.extend(state.values())
        for slot in getattr(kind, "__slots__", ()):
            if isinstance(slot, str) and hasattr(item, slot):
                children.append(getattr(item, slot))
    # Any other library's object: its code is not the project's, nor is what it holds.
    return children


class _Walker:
    """`_walk` of each object once: the modules several objects reach are the union of
    what each reaches. The objects walked are kept, so that no id is reused while the
    walker lives (a bound method such as `loader.load` is a new object at each access)."""

    def __init__(self, known: Iterable[str]) -> None:
        self._known = set(known)
        self._found: dict[int, frozenset[str]] = {}
        self._kept: list[Any] = []

    def modules(self, *objects: Any) -> set[str]:
        out: set[str] = set()
        for obj in objects:
            found = self._found.get(id(obj))
            if found is None:
                reached: set[str] = set()
                _walk(obj, reached, self._known)
                found = self._found[id(obj)] = frozenset(reached)
                self._kept.append(obj)
            out |= found
        return out


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _ours(module: str, known: set[str]) -> bool:
    return module in known or module.split(".")[0] == "routectl"


def _parents(name: str) -> Iterator[str]:
    parts = name.split(".")
    for i in range(1, len(parts)):
        yield ".".join(parts[:i])


def _names_used(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found.update(a.name.split(".")[-1] for a in node.names)
    return found


class _Sources:
    """Each project module's bytes and parsed names, read once."""

    def __init__(self, files: Mapping[str, Path]) -> None:
        self.files = files
        self._bytes: dict[str, bytes] = {}
        self._names: dict[str, set[str] | None] = {}
        self._dynamic: dict[str, bool] = {}

    def data(self, module: str) -> bytes:
        if module not in self._bytes:
            try:
                self._bytes[module] = self.files[module].read_bytes()
            except OSError:
                self._bytes[module] = b""
        return self._bytes[module]

    def names(self, module: str) -> set[str] | None:
        """The names a module uses (None: it does not parse)."""
        if module not in self._names:
            try:
                self._names[module] = _names_used(ast.parse(self.data(module)))
            except (SyntaxError, ValueError):
                self._names[module] = None
        return self._names[module]

    def dynamic(self, module: str) -> bool:
        """Whether the module imports by a computed name (asked once per module)."""
        found = self._dynamic.get(module)
        if found is None:
            found = self._dynamic[module] = self._uses_dynamic(module)
        return found

    def _uses_dynamic(self, module: str) -> bool:
        data = self.data(module)
        # Cheap first: most modules never spell one, and few spell one as a word of its own.
        if not any(n in data for n in _DYNAMIC_BYTES) or _DYNAMIC_WORD.search(data) is None:
            return False
        names = self.names(module)
        return names is None or bool(names & DYNAMIC_NAMES)

    def writes_records(self, module: str) -> bool:
        if b"Family(" not in self.data(module):
            return False
        names = self.names(module)
        return names is None or "Family" in names


def category_modules(project: Project) -> dict[str, list[Path] | None]:
    """Each category's project module files (sorted), or None: every project source."""
    categories = list(project.categories)
    unknown: dict[str, list[Path] | None] = {c.name: None for c in categories}
    if project.root is None or not project.families:
        return unknown
    try:
        return _closures(project, categories) or unknown
    except Exception:  # noqa: BLE001 - grimp or a walk refused the tree: every source is keyed
        return unknown


def _closures(project: Project, categories: list[Any]) -> dict[str, list[Path] | None] | None:
    import grimp  # only when a key is computed for a tree whose closure is not memoised

    assert project.root is not None
    root = project.root.resolve()
    snapshots = project.snapshots.resolve() if project.snapshots is not None else None

    def inside(path: Path | None) -> bool:
        return (
            path is not None
            and path.is_relative_to(root)
            and not (snapshots is not None and path.is_relative_to(snapshots))
        )

    # The project's modules as loaded (a spec'd file under the root, not routectl's own).
    loaded = {
        name
        for name, module in list(sys.modules.items())
        if getattr(module, "__spec__", None) is not None
        and getattr(module, "__file__", None)
        and name.split(".")[0] != "routectl"
        and inside(_module_file(name))
    }

    walker = _Walker(loaded)

    def walked(*objects: Any) -> set[str]:
        return walker.modules(*objects) & loaded

    families = list(project.families)
    names_of = {f.name: (f.name, *f.replaces) for f in families}
    # What a family's selection runs (for the categories it lists) and everything its
    # record reaches (what the record module's imports stand for).
    selects = {f.name: walked(f.selector, f.loader.load if f.loader else None) for f in families}
    reached = {f.name: walked(f.selector, f.loader, *f.categories) for f in families}
    own = {c.name: walked(c) for c in categories}
    listed_anywhere = set().union(*reached.values(), *own.values())
    spine = walked(
        *(getattr(project, f) for f in project.__dataclass_fields__ if f not in PER_FAMILY_FIELDS),
        *(rule for f in families for rule in (f.enabled_on, f.hashed_when)),
    )
    tops = sorted({name.split(".")[0] for name in listed_anywhere | spine})
    if not tops or any(top not in loaded for top in tops):
        return None  # a namespace package, or a top-level name loaded from elsewhere
    graph = grimp.build_graph(*tops, cache_dir=None)
    top_files = {top: path for top in tops if (path := _module_file(top)) is not None}
    files: dict[str, Path] = {}
    for name in graph.modules:
        path = _source_file(name, top_files)
        if not inside(path):
            return None  # the graph read a copy outside the project: not these sources
        assert path is not None
        files[name] = path
    sources = _Sources(files)
    known = set(files)
    records = {m for m in known if sources.writes_records(m)}
    out: dict[str, list[Path] | None] = {}
    for category in categories:
        mine = [f for f in families if any(c.name == category.name for c in f.categories)]
        if not mine:
            out[category.name] = None
            continue
        entry = own[category.name].union(*(selects[f.name] for f in mine))
        named = {f.name for f in mine}
        while True:
            closure = _closure(graph, spine | entry, records, listed_anywhere - entry)
            if any(sources.dynamic(m) for m in closure):
                out[category.name] = None
                break
            more = {
                f.name
                for f in families
                if f.name not in named
                and any(
                    _mentions(sources.data(m), n)
                    for m in closure - records
                    for n in names_of[f.name]
                )
            }
            if not more:
                out[category.name] = sorted(files[m] for m in closure)
                break
            named |= more
            for name in more:
                entry |= reached[name]
    return out


def _mentions(data: bytes, name: str) -> bool:
    return any(q + name.encode() + q in data for q in (b'"', b"'"))


def _closure(graph: Any, start: set[str], records: set[str], cut: set[str]) -> set[str]:
    """Every module `start` imports, directly or not, with its parent packages; a records
    module's imports of `cut` modules are not followed."""
    modules = graph.modules
    done: set[str] = set()
    todo = list(start)
    while todo:
        module = todo.pop()
        if module in done or module not in modules:
            continue
        done.add(module)
        imported = set(graph.find_modules_directly_imported_by(module))
        if module in records:
            imported -= cut
        todo.extend(imported)
        todo.extend(_parents(module))
    return done
