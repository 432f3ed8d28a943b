"""The replay cache's import closure (`routectl.review.closure`; its module docstring states
the rules): the object walk, the module sources, the graph closure and the real project's
per-category module lists, each on inputs made here.

test_replay_cache.py proves the closure through whole `check` runs on copies of the project
(slow, and each asserts one category line) and pins the walk's depth rule and the
computed-import scan; these tests pin what each helper reaches: a function's module, its
closure cells, defaults, keyword defaults and `__wrapped__`; a bound method's function and
instance; a partial's function, arguments and keywords; a class's whole MRO; a module; both
sides of a mapping; sets; an instance of the project's own classes through `__dict__` and
`__slots__`, never a foreign library's object or a family record; a string only when it is
exactly a known module; the depth limit at both sides. Then `_Sources` (unreadable and
unparsable files, the `Family(` record writer), `_names_used`, `_parents`, `_mentions`,
`_source_file`, `_closure` on a hand-made graph (parents added, a records module's cut), and
`category_modules` on the real project: sorted files, parent packages in, a module one
category imports in that category's list alone, the variable table in every list, and no
closure without a root or families. Written for issue 28's mutation run.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

from routectl.project import load_project
from routectl.review import closure
from routectl.review.closure import (
    WALK_DEPTH,
    _closure,
    _mentions,
    _module_file,
    _names_used,
    _parents,
    _source_file,
    _Sources,
    _walk,
    _Walker,
    category_modules,
)

ROOT = Path(__file__).resolve().parents[1]
HERE = __name__  # this module: "ours" when named among the known modules
# Objects below name these modules by their `__module__`; the walk reports only known ones.
KNOWN = {HERE, "pkg.a", "pkg.b", "pkg.c"}


def walked(obj: Any, known: set[str] = KNOWN) -> set[str]:
    """The known modules `obj` reaches (the closure keeps the loaded project modules of what
    the walk reports: classes also name `builtins`, functions their own module)."""
    found: set[str] = set()
    _walk(obj, found, known)
    return found & known


def _foreign(module: str) -> Any:
    """A function that says it comes from `module` (as a project module's would)."""

    def f() -> None:
        return None

    f.__module__ = module
    return f


class Ours:
    """An instance of a known module's class: followed through `__dict__`."""

    def __init__(self, held: Any) -> None:
        self.held = held


class Slotted:
    __slots__ = ("held", "unset")

    def __init__(self, held: Any) -> None:
        self.held = held


def test_a_function_reaches_its_module_cells_defaults_and_wrapped() -> None:
    a, b, c = _foreign("pkg.a"), _foreign("pkg.b"), _foreign("pkg.c")

    def outer() -> Any:
        def inner(x: Any = b, *, y: Any = c) -> Any:
            return a, x, y

        return inner

    inner = outer()
    assert walked(inner) == {HERE, "pkg.a", "pkg.b", "pkg.c"}

    @functools.wraps(_foreign("pkg.b"))
    def wrapper() -> None:
        return None

    # `wraps` copies the module name too; the wrapped function is followed as well.
    wrapper.__module__ = "pkg.a"
    assert walked(wrapper) == {"pkg.a", "pkg.b"}

    def empty_cell() -> Any:
        later: Any  # local, never bound: the inner function's cell stays empty

        def uses() -> Any:
            return later  # noqa: F821 - never bound: the cell is empty

        return uses

    assert walked(empty_cell()) == {HERE}


def test_methods_partials_classes_and_modules() -> None:
    class Holder(Ours):
        def get(self) -> Any:
            return self.held

    Holder.get.__module__ = "pkg.c"
    # A bound method: its function (pkg.c) and its instance (this module's class, pkg.a held).
    assert walked(Holder(_foreign("pkg.a")).get) == {HERE, "pkg.a", "pkg.c"}
    part = functools.partial(_foreign("pkg.a"), _foreign("pkg.b"), key=_foreign("pkg.c"))
    assert walked(part) == {"pkg.a", "pkg.b", "pkg.c"}

    class Base:
        pass

    Base.__module__ = "pkg.a"

    class Child(Base):
        pass

    Child.__module__ = "pkg.b"
    # A class names every module of its MRO.
    assert walked(Child) == {"pkg.a", "pkg.b"}
    assert walked([closure]) == set()  # a module outside the known ones
    assert walked(closure, {"routectl.review.closure"}) == {"routectl.review.closure"}


def test_containers_strings_and_instances() -> None:
    assert walked({_foreign("pkg.a"): _foreign("pkg.b")}) == {"pkg.a", "pkg.b"}
    assert walked(OrderedDict(k=_foreign("pkg.a"))) == {"pkg.a"}  # any Mapping
    assert walked({_foreign("pkg.a")}) == {"pkg.a"}
    assert walked(frozenset({_foreign("pkg.b")})) == {"pkg.b"}
    assert walked(("pkg.a", "pkg.bb", "pkg", "x pkg.c")) == {"pkg.a"}  # exact names only

    class Text(str):
        pass

    assert walked([Text("pkg.c")]) == {"pkg.c"}  # a str subclass too
    assert walked(Ours(_foreign("pkg.a"))) == {HERE, "pkg.a"}
    slotted = Slotted(_foreign("pkg.b"))
    assert walked(slotted) == {HERE, "pkg.b"}  # an unset slot is skipped
    # An instance of a class no known module defines holds nothing of the project's.
    assert walked(Ours(_foreign("pkg.a")), {"pkg.a"}) == set()
    assert walked([1, 2.0, b"pkg.a", None, True, Path("pkg.a")]) == set()


def test_a_family_record_is_not_followed() -> None:
    project = load_project(ROOT)
    family = next(f for f in project.families if f.selector is not None)
    known = {m for m in sys.modules if m.split(".")[0] in ("policies", "native")}
    assert walked([family], known) == set()
    assert walked([family.selector], known)  # what the record holds is reached directly


def test_the_depth_limit_at_both_sides() -> None:
    def nested(depth: int) -> Any:
        value: Any = "pkg.a"
        for _ in range(depth):
            value = [value]
        return value

    assert walked(nested(WALK_DEPTH)) == {"pkg.a"}
    assert walked(nested(WALK_DEPTH + 1)) == set()
    assert walked("pkg.a") == {"pkg.a"}


def test_the_walker_remembers_each_object() -> None:
    a, b = [_foreign("pkg.a")], [_foreign("pkg.b")]
    walker = _Walker(KNOWN)
    assert walker.modules(a, b) == {"pkg.a", "pkg.b"}
    assert walker.modules(a) == {"pkg.a"}
    a.append(_foreign("pkg.c"))  # a walked object is not walked again
    assert walker.modules(a) == {"pkg.a"}
    assert _Walker(KNOWN).modules(a) == {"pkg.a", "pkg.c"}
    assert walker.modules() == set()


class Holder:
    """A known module's instance whose bound method is a new object at each access."""

    def __init__(self, held: Any) -> None:
        self.held = held

    def method(self) -> Any:
        return self.held


def test_bound_methods_made_for_one_call_each_reach_their_own_instance() -> None:
    # Each bound method and its instance live only for their call; the walker keeps them,
    # so a later one never takes a walked one's id (and its remembered modules).
    walker = _Walker(KNOWN)
    for module in ("pkg.a", "pkg.b", "pkg.c", "pkg.a", "pkg.b"):
        assert walker.modules(Holder(_foreign(module)).method) & KNOWN == {HERE, module}


def test_sources_read_parse_and_scan_once(tmp_path: Path) -> None:
    files = {
        "ok": tmp_path / "ok.py",
        "broken": tmp_path / "broken.py",
        "gone": tmp_path / "gone.py",
        "writer": tmp_path / "writer.py",
        "said": tmp_path / "said.py",
        "evalbroken": tmp_path / "evalbroken.py",
    }
    files["ok"].write_text("import a.b.c\nfrom d import e as f\nx = g.h\n")
    files["broken"].write_text("def (:\n Family(\n")
    files["writer"].write_text("from routectl.family import Family\nF = Family(name='x')\n")
    files["said"].write_text("# Family( is written elsewhere\nX = 1\n")
    files["evalbroken"].write_text("eval(\n")
    # A dynamic name inside a longer word only: not parsed, so not unknown even unparsable.
    files["evaluated"] = tmp_path / "evaluated.py"
    files["evaluated"].write_text("evaluated = (\n")
    # Every dynamic name spelled, one of them used: the cheap scan must not stop it.
    files["every"] = tmp_path / "every.py"
    files["every"].write_text("# " + " ".join(sorted(closure.DYNAMIC_NAMES)) + "\neval(x)\n")
    sources = _Sources(files)
    assert sources.data("gone") == b"" and sources.names("gone") == set()
    assert sources.names("ok") == {"c", "e", "x", "g", "h"}
    assert sources.names("broken") is None
    assert sources.writes_records("writer") and sources.writes_records("broken")
    assert not sources.writes_records("said") and not sources.writes_records("ok")
    assert sources.dynamic("evalbroken")  # it spells eval and does not parse: unknown
    assert not sources.dynamic("ok") and not sources.dynamic("gone")
    assert not sources.dynamic("evaluated") and sources.dynamic("every")
    files["ok"].write_text("eval(x)\n")  # read once: the first bytes are kept
    assert not sources.dynamic("ok") and "eval" not in (sources.names("ok") or set())


def test_names_parents_and_mentions() -> None:
    tree = ast.parse("import a.b.c\nfrom d.e import f as g\nh.i.j = k\n")
    assert _names_used(tree) == {"c", "f", "h", "i", "j", "k"}
    assert list(_parents("a.b.c")) == ["a", "a.b"]
    assert list(_parents("a")) == []
    assert _mentions(b"x = 'sm70_awq'", "sm70_awq") and _mentions(b'["sm70_awq"]', "sm70_awq")
    assert not _mentions(b"sm70_awq = 1", "sm70_awq")
    assert not _mentions(b"'sm70_awq_moe'", "sm70_awq")


def test_source_files_are_found_from_the_top_package(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for path in (package / "__init__.py", package / "sub" / "__init__.py", package / "mod.py"):
        path.write_text("")
    (package / "sub" / "leaf.py").write_text("")
    single = tmp_path / "single.py"
    single.write_text("")
    tops = {"pkg": package / "__init__.py", "single": single}
    assert _source_file("pkg", tops) == (package / "__init__.py").resolve()
    assert _source_file("pkg.mod", tops) == (package / "mod.py").resolve()
    assert _source_file("pkg.sub", tops) == (package / "sub" / "__init__.py").resolve()
    assert _source_file("pkg.sub.leaf", tops) == (package / "sub" / "leaf.py").resolve()
    assert _source_file("pkg.nothing", tops) is None
    assert _source_file("single", tops) == single
    assert _source_file("single.x", tops) is None
    assert _source_file("other.x", tops) is None
    assert _module_file("routectl.review.closure") == Path(closure.__file__).resolve()
    assert _module_file("sys") is None  # built in: no file
    assert _module_file("no.such.module.loaded") is None


class Graph:
    """The two things `_closure` asks of grimp's graph."""

    def __init__(self, imports: dict[str, set[str]]) -> None:
        self.imports = imports
        self.modules = set(imports)

    def find_modules_directly_imported_by(self, module: str) -> set[str]:
        return self.imports[module]


def test_the_closure_follows_imports_and_parents_and_cuts_a_records_module() -> None:
    graph = Graph(
        {
            "p": set(),
            "p.a": {"p.b.c", "ext"},  # ext: not a module of the graph
            "p.b": set(),
            "p.b.c": {"p.d"},
            "p.d": set(),
            "p.rec": {"p.e", "p.f"},
            "p.e": set(),
            "p.f": set(),
            "p.alone": set(),
        }
    )
    assert _closure(graph, {"p.a"}, set(), set()) == {"p", "p.a", "p.b", "p.b.c", "p.d"}
    assert _closure(graph, {"p.rec"}, {"p.rec"}, {"p.e"}) == {"p", "p.rec", "p.f"}
    assert _closure(graph, {"p.rec"}, set(), {"p.e"}) == {"p", "p.rec", "p.e", "p.f"}
    assert _closure(graph, {"p.b.c", "missing"}, set(), set()) == {"p", "p.b", "p.b.c", "p.d"}


def test_the_real_project_closures() -> None:
    project = load_project(ROOT)
    assert project.root is not None
    closures = category_modules(project)
    assert list(closures) == [c.name for c in project.categories]
    root = project.root.resolve()
    admission = root / "policies" / "awq_moe_admission.py"
    variables = root / "policies" / "variables.py"
    for name, files in closures.items():
        assert files is not None, name
        assert files == sorted(files) and len(set(files)) == len(files)
        assert all(f.is_relative_to(root) for f in files)
        assert not any(f.is_relative_to(root / "snapshots") for f in files)
        assert not any(f.is_relative_to(root / "tests") for f in files)
        assert variables in files
        for f in files:  # every package above a module is in it
            for parent in f.relative_to(root).parents[:-1]:
                assert root / parent / "__init__.py" in files, (name, f)
        assert (admission in files) is (name == "sm70-awq-moe"), name
    bare = dataclasses.replace(project, root=None)
    assert category_modules(bare) == dict.fromkeys(closures)
    none = dataclasses.replace(project, families=())
    assert category_modules(none) == dict.fromkeys(closures)
