"""The project object and its discovery: routectl reaches `policies`/`native` only through
the object named in `[tool.routectl]` of the nearest pyproject.toml."""

from __future__ import annotations

import copy
import functools
import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routectl import family as family_module
from routectl.category import Category
from routectl.errors import InputError
from routectl.family import Family
from routectl.io.jsonread import QUOTE_CHARS, read_bytes, shorten
from routectl.policy.fields import plain_typed_values
from routectl.policy.resolve import ResolvedPolicy, resolve_fields
from routectl.reasons import Check
from routectl.suggest import closest, did_you_mean
from routectl.workload import EngineConfig, Hardware, ModelFacts

if TYPE_CHECKING:
    # pydantic (with routectl.policy.configmodel) and tomllib are imported where they are used: they
    # are most of `import routectl`, and the engine resolves a typed config only when given one.
    from pydantic import BaseModel

    # Annotations only: `import routectl` (the engine's start-up import) need not build
    # these modules' classes.
    from routectl.io.schemas import LoadedSchema
    from routectl.namespaces.ops import OpSpec
    from routectl.policy.fields import Field, RetiredVariable
    from routectl.policy.loaders import LayerLoader
    from routectl.policy.text import PolicyView


@dataclass(frozen=True)
class Catalogue:
    """Native facts: every op's spec and every kernel's (or stage's) required ops."""

    ops: Mapping[str, OpSpec]
    kernels: Mapping[str, tuple[str, ...]]
    # Kernels/stages whose compact-scale ABI revision the probe reports: name -> getter op.
    abi_getters: Mapping[str, str] = field(default_factory=dict)

    def op(self, name: str) -> OpSpec:
        try:
            return self.ops[name]
        except KeyError:
            raise KeyError(f"op {name!r} is not in the native catalogue") from None


@dataclass(frozen=True, kw_only=True)
class Project:
    """What routectl receives of a project: its typed config, variable table, native
    catalogue, qualification rules and kernel families (from which the selectors, loaders,
    categories and hashed sections are derived), and where its retained snapshots live."""

    name: str
    # The typed config's class, or a function that builds it: a project whose model is built
    # on first use (pydantic and the model cost about 0.13 s) lets a check whose rows give no
    # typed config, and the forked workers' parent, go without them.
    config_model: type[BaseModel] | Callable[[], type[BaseModel]]
    fields: tuple[Field, ...]
    catalogue: Catalogue
    # (hardware, engine) -> [(rule name, check)]: whole-model qualification verdicts.
    qualification: Callable[[Hardware, EngineConfig], list[tuple[str, Check]]]
    # (hardware, engine) -> the context computed defaults read (e.g. "qualified").
    context: Callable[[Hardware, EngineConfig], Mapping[str, Any]]
    # The kernel families, in the order `routectl list` shows their categories. Given, they
    # are the one source of `categories`, `selectors`, `loaders` and `active_sections`
    # (which must then be left out); a project without families declares those directly.
    families: Sequence[Family] = ()
    categories: Sequence[Category] = ()
    # (capability, engine, policy) -> the sections the policy hash covers: those of every
    # family enabled there whose hashing rule holds for this engine and policy.
    active_sections: Callable[[int, EngineConfig, ResolvedPolicy], list[str]] | None = None
    # Family name -> loader; `routectl.select` calls it without tensors (selection only).
    selectors: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    # Family name -> what `routectl.engine.startup` loads and the startup report replays with.
    loaders: Mapping[str, LayerLoader] = field(default_factory=dict)
    unknown_prefix: str | None = None
    # Known variables without a field (obsolete, removed): they warn, never count as unknown.
    retired: tuple[RetiredVariable, ...] = ()
    # Model scope name -> its facts: what `routectl config --model NAME` fills in.
    models: Mapping[str, ModelFacts] = field(default_factory=dict)
    # Prefix of the policy's environment variables: stripped from the environment of a
    # baseline subprocess so that no caller variable reaches the old program.
    variable_prefix: str | None = None
    # The project root (its code is imported from there) and the retained snapshot folder.
    # An installed project states its folder here (beside its package, as package data);
    # discovery through `[tool.routectl]` sets both from the table.
    root: Path | None = None
    snapshots: Path | None = None
    # Set once the maps are derived from `families`: `dataclasses.replace` of such a project
    # derives them again from its (possibly new) families instead of refusing them as given.
    derived: bool = field(default=False, repr=False, compare=False)

    def engine_from(self, engine: EngineConfig, environ: Mapping[str, str]) -> EngineConfig:
        """`engine` with the facts the project's families read from `environ` (e.g.
        engine-wide batch invariance); an invalid value is an InputError naming its
        variable."""
        return family_module.engine_from_environment(self.families, engine, environ)

    def resolution_context(self, hardware: Hardware, engine: EngineConfig) -> dict[str, Any]:
        """What computed defaults read: the project's `context` and every family's entries
        (a family may not redeclare a project key)."""
        base = dict(self.context(hardware, engine))
        extra = family_module.family_context(self.families, hardware, engine)
        clash = sorted(set(base) & set(extra))
        if clash:
            raise ValueError(f"project {self.name!r}: context keys declared twice: {clash}")
        return {**base, **extra}

    def __post_init__(self) -> None:
        if not self.families:
            if self.active_sections is None:
                raise ValueError(f"project {self.name!r}: give families or active_sections")
            return
        given = (
            []
            if self.derived
            else [
                name
                for name, value in (
                    ("categories", self.categories),
                    ("selectors", self.selectors),
                    ("loaders", self.loaders),
                    ("active_sections", self.active_sections),
                )
                if value
            ]
        )
        if given:
            raise ValueError(
                f"project {self.name!r}: {', '.join(given)} are derived from families; "
                f"declare them in the family records instead"
            )
        families = tuple(self.families)
        family_module.check_families(families)
        # Frozen: the derived maps are set once, here, from the one list.
        derived: dict[str, Any] = {
            "families": families,
            "categories": family_module.categories(families),
            "selectors": family_module.selectors(families),
            "loaders": family_module.loaders(families),
            "active_sections": functools.partial(family_module.active_sections, families),
            "derived": True,
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    def family_name(self, name: str, known: Mapping[str, Any]) -> str:
        """`name` as a key of `known` (`selectors` or `loaders`): old spellings warn and
        answer for the new one; an unknown name is an InputError listing the known ones."""
        return family_module.current_name(name, known, self.families)

    def policy_sections(self, category: Category) -> tuple[str, ...] | None:
        """The sections `routectl explain` shows for a row of `category` by default: those
        its families read; None (every section) for a project without families."""
        if not self.families:
            return None
        return family_module.category_sections(self.families, category.name) or None

    def hashed_sections(
        self, capability: int, engine: EngineConfig, policy: ResolvedPolicy
    ) -> list[str]:
        """The sections the policy hash covers on this hardware for this engine."""
        assert self.active_sections is not None  # set by __post_init__
        return self.active_sections(capability, engine, policy)

    @cached_property
    def config_class(self) -> type[BaseModel]:
        """The typed config's class (built now when `config_model` is its builder)."""
        model = self.config_model
        return model if isinstance(model, type) else model()

    def load_config(self, value: Any = None) -> BaseModel:
        from routectl.policy.configmodel import load_config

        return load_config(self.config_class, value)

    def resolve(
        self,
        config: Any,
        environ: Mapping[str, str],
        hardware: Hardware,
        workload: EngineConfig,
        *,
        emit_warnings: bool = True,
    ) -> ResolvedPolicy:
        """Resolve once: explicit config > variable > default. Pure in its arguments."""
        if config is None:
            typed: dict[str, Any] = {}  # a default config sets no field
        elif (plain := plain_typed_values(self.fields, config)) is not None:
            typed = plain  # what the typed config would hold, without building it
        else:
            from routectl.policy.configmodel import typed_values

            model = config if isinstance(config, self.config_class) else self.load_config(config)
            typed = typed_values(model, self.fields)
        return resolve_fields(
            self.fields,
            typed,
            environ,
            self.resolution_context(hardware, workload),
            unknown_prefix=self.unknown_prefix,
            emit_warnings=emit_warnings,
            retired=self.retired,
        )

    def policy_view(
        self, config: Any, environ: Mapping[str, str], hardware: Hardware, workload: EngineConfig
    ) -> PolicyView:
        """The policy resolved for `hardware` and `workload`, with the model-qualification
        verdicts and the hash over the active sections (`routectl config`)."""
        policy = self.resolve(config, environ, hardware, workload)
        active = self.hashed_sections(hardware.capability, workload, policy)
        rules = list(self.qualification(hardware, workload))
        for family in self.families:
            if family.qualification is not None:
                rules.extend(family.qualification(hardware, workload))
        verdicts = tuple((name, ok, reason) for name, (ok, reason) in rules)
        digest = policy.compute_hash(active)
        # Imported here: the rendering is for `routectl config`, not the engine's start-up.
        from routectl.policy.text import PolicyView

        return PolicyView(hardware.capability, workload, policy, verdicts, tuple(active), digest)

    def category(self, name: str) -> Any:
        for c in self.categories:
            if c.name == name:
                return c
        names = [c.name for c in self.categories]
        known = ", ".join(names) or "none"
        raise InputError(
            f"unknown category {shorten(name)}{did_you_mean(name, names)} (known: {known})"
        )

    @cached_property
    def snapshot_schema(self) -> LoadedSchema:
        """The snapshot schema this project's snapshots are validated with: routectl's
        generic one with every category's own route shape (`Category.route_schema`)
        composed in."""
        from routectl.io.schemas import compose_snapshot_schema, load_schema, schema_of

        fragments = {c.name: f for c in self.categories if (f := c.route_schema()) is not None}
        if not fragments:
            return load_schema("snapshot")
        label = Path(f"<snapshot schema of project {self.name}>")
        return schema_of(compose_snapshot_schema(fragments), label)

    def _with(self, **changes: Any) -> Project:
        # A copy with some fields set, the maps derived from the family records kept as
        # they are (`replace` would derive them again and refuse them as given); what the
        # cached properties computed is left behind.
        copied = copy.copy(self)
        for computed in ("config_class", "snapshot_schema"):
            copied.__dict__.pop(computed, None)
        for name, value in changes.items():
            object.__setattr__(copied, name, value)
        return copied

    def with_location(self, root: Path, snapshots: Path) -> Project:
        """This project found at `root`, its retained snapshots in `snapshots`."""
        return self._with(root=root, snapshots=snapshots)

    def with_categories(self, extra: Sequence[Category]) -> Project:
        """This project judging `extra` categories too (those only a baseline has)."""
        return self._with(categories=(*self.categories, *extra))


# Every key `[tool.routectl]` accepts: key -> what its value is (the table is declarative so
# that a key added later is refused by no older check).
TABLE_KEYS: Mapping[str, str] = {
    "project": "'module:attribute' naming the routectl Project object",
    "snapshots": "the retained snapshot folder, relative to the project root",
}
PROJECT_FILE_WHAT = "project file"


def _read_pyproject(path: Path) -> dict[str, Any]:
    """A pyproject.toml parsed: bounded, regular file, UTF-8; one InputError line."""
    import tomllib

    raw = read_bytes(path, PROJECT_FILE_WHAT)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"cannot read {path}: not UTF-8 ({exc.reason} at byte {exc.start})"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"cannot read {path}: {exc}") from None


def _routectl_table(data: Mapping[str, Any], path: Path) -> Mapping[str, Any] | None:
    """`[tool.routectl]` of a parsed pyproject.toml; None when absent, an InputError when
    it is not a table."""
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        raise InputError(f"{path}: [tool] must be a table, got {shorten(tool)}")
    if "routectl" not in tool:
        return None
    table = tool["routectl"]
    if not isinstance(table, dict):
        raise InputError(f"{path}: [tool.routectl] must be a table, got {shorten(table)}")
    return table


def find_project_root(start: Path) -> Path:
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            if _routectl_table(_read_pyproject(candidate), candidate) is not None:
                return directory
    raise InputError(f"no pyproject.toml with a [tool.routectl] table at or above {start}")


def check_table(table: Mapping[str, Any], path: Path) -> tuple[str, str, str]:
    """(module, attribute, snapshot folder) of a `[tool.routectl]` table, every problem an
    InputError naming the file, the key and what is wrong."""
    for key in table:
        if key not in TABLE_KEYS:
            close = closest(str(key), TABLE_KEYS)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InputError(
                f"{path}: [tool.routectl] has an unknown key {shorten(key)} "
                f"(known: {', '.join(TABLE_KEYS)}){hint}"
            )
    where = f"{path}: [tool.routectl] project"
    if "project" not in table:
        raise InputError(f"{where} is missing: it must be {TABLE_KEYS['project']}")
    spec = table["project"]
    if not isinstance(spec, str):
        raise InputError(f"{where} must be a string 'module:attribute', got {shorten(spec)}")
    module_name, colon, attribute = spec.partition(":")
    module_name, attribute = module_name.strip(), attribute.strip()
    if not colon or not module_name or not attribute:
        raise InputError(
            f"{where} = {shorten(spec)} must be 'module:attribute' (e.g. 'policies:PROJECT')"
        )
    if module_name.startswith("."):
        raise InputError(
            f"{where} = {shorten(spec)}: the module must be an absolute name, not a relative one"
        )
    if not all(part.isidentifier() for part in module_name.split(".")):
        raise InputError(f"{where} = {shorten(spec)}: {shorten(module_name)} is not a module name")
    if not attribute.isidentifier():
        raise InputError(
            f"{where} = {shorten(spec)}: {shorten(attribute)} is not an attribute name"
        )
    snapshots = table.get("snapshots", "snapshots")
    if not isinstance(snapshots, str) or not snapshots.strip():
        raise InputError(
            f"{path}: [tool.routectl] snapshots must be a folder name (a "
            f"non-empty string), got {shorten(snapshots)}"
        )
    return module_name, attribute, snapshots


# Frames of Python's import machinery and of routectl: the place named is the user's code.
_NOT_THE_USERS = (
    "<frozen ",
    str(Path(importlib.__file__).parent),
    str(Path(__file__).resolve().parent),
)


def describe_import_failure(exc: BaseException) -> str:
    """`ExceptionType: message (file, line N)` for an exception raised by importing a module:
    where a syntax error is, or the innermost frame outside Python's import machinery."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, SyntaxError) and exc.filename:
        text = exc.msg
        place = f"{exc.filename}, line {exc.lineno}"
    else:
        import traceback  # only for a project that fails to import

        frames = [
            f
            for f in traceback.extract_tb(exc.__traceback__)
            if not f.filename.startswith(_NOT_THE_USERS)
        ]
        place = f"{frames[-1].filename}, line {frames[-1].lineno}" if frames else ""
    shown = text if len(text) <= QUOTE_CHARS else f"{text[:QUOTE_CHARS]}..."
    return f"{type(exc).__name__}: {shown}" + (f" ({place})" if place else "")


def import_module(name: str) -> Any:
    """Import `name`; any failure (a missing module, an error raised while importing it) is
    an InputError chained to it (`--debug` shows its traceback)."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - whatever the module raises is the user's code
        raise InputError(f"cannot import {name}: {describe_import_failure(exc)}") from exc


# The entry-point group an installed engine registers its project object in (the Python
# packaging convention for plugins): `name = "module:attribute"`.
ENTRY_POINT_GROUP = "routectl.projects"


def installed_projects() -> dict[str, Any]:
    """The entry points of group `routectl.projects` of the installed distributions, by
    name (not loaded)."""
    from importlib.metadata import entry_points  # only for discovery by name

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def load_installed_project(name: str) -> Project:
    """The project an installed distribution registers as `name` in `routectl.projects`.

    Its retained snapshots are where the project object says (`Project.snapshots`); it has no
    project root unless it names one (`routectl diff --baseline-ref` needs a git checkout)."""
    found = installed_projects()
    if name not in found:
        names = sorted(found)
        known = ", ".join(names) or "none installed"
        raise InputError(
            f"no installed routectl project named {shorten(name)}{did_you_mean(name, names)} "
            f"(entry point group {ENTRY_POINT_GROUP}: {known})"
        )
    entry = found[name]
    where = f"entry point {shorten(name)} = {shorten(entry.value)} (group {ENTRY_POINT_GROUP})"
    try:
        project = entry.load()
    except Exception as exc:  # noqa: BLE001 - whatever the module raises is the engine's code
        raise InputError(f"{where}: cannot load it: {describe_import_failure(exc)}") from exc
    if not isinstance(project, Project):
        raise InputError(
            f"{where} names an object of type {type(project).__name__}, not a routectl Project"
        )
    return project


def load_project(
    directory: str | os.PathLike[str] | None = None, *, name: str | None = None
) -> Project:
    """The project to work on, found one of three ways:

    - `name`: the project an installed engine registers under that name in the entry-point
      group `routectl.projects` (no pyproject.toml needed);
    - `directory` (a str or a path): the nearest pyproject.toml with a `[tool.routectl]`
      table at or above it;
    - neither: the same walk upward from the current directory.
    """
    if name is not None:
        if directory is not None:
            raise InputError("give a project directory or a project name, not both")
        return load_installed_project(name)
    start = (Path.cwd() if directory is None else Path(directory)).resolve()
    root = find_project_root(start)
    pyproject = root / "pyproject.toml"
    table = _routectl_table(_read_pyproject(pyproject), pyproject)
    assert table is not None  # find_project_root found it
    module_name, attribute, snapshots = check_table(table, pyproject)
    spec = f"{module_name}:{attribute}"
    # The project's own code wins over any installed copy: a baseline worktree must run
    # its own policies, not ours.
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        module = import_module(module_name)
    except InputError as exc:
        raise InputError(
            f"{pyproject}: [tool.routectl] project = {shorten(spec)}: {exc}"
        ) from exc.__cause__
    try:
        project = getattr(module, attribute)
    except AttributeError:
        raise InputError(
            f"{pyproject}: [tool.routectl] project = {shorten(spec)}: module "
            f"{module_name} has no attribute {shorten(attribute)}"
        ) from None
    except Exception as exc:  # noqa: BLE001 - a module __getattr__ is the user's code
        raise InputError(
            f"{pyproject}: [tool.routectl] project = {shorten(spec)}: "
            f"{describe_import_failure(exc)}"
        ) from exc
    if not isinstance(project, Project):
        raise InputError(
            f"{pyproject}: [tool.routectl] project = {shorten(spec)} names an "
            f"object of type {type(project).__name__}, not a routectl Project"
        )
    return project.with_location(root, root / snapshots)
