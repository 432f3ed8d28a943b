"""The project object and its discovery: routectl reaches `policies`/`native` only through
the object named in `[tool.routectl]` of the nearest pyproject.toml."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routectl.errors import InputError
from routectl.fields import Field, RetiredVariable
from routectl.loaders import LayerLoader
from routectl.ops import OpSpec
from routectl.policy import ResolvedPolicy, resolve_fields
from routectl.reasons import Check
from routectl.workload import EngineConfig, Hardware, ModelFacts

if TYPE_CHECKING:
    # pydantic (with routectl.configmodel) and tomllib are imported where they are used: they
    # are most of `import routectl`, and the engine resolves a typed config only when given one.
    from pydantic import BaseModel


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


@dataclass(frozen=True)
class Project:
    name: str
    config_model: type[BaseModel]
    fields: tuple[Field, ...]
    catalogue: Catalogue
    categories: Sequence[Any]
    # (hardware, engine) -> [(rule name, check)]: whole-model qualification verdicts.
    qualification: Callable[[Hardware, EngineConfig], list[tuple[str, Check]]]
    # (hardware, engine) -> the context computed defaults read (e.g. "qualified").
    context: Callable[[Hardware, EngineConfig], Mapping[str, Any]]
    # (capability, engine, policy) -> the sections the policy hash covers: those of every
    # family enabled there whose hashing rule holds for this engine and policy.
    active_sections: Callable[[int, EngineConfig, ResolvedPolicy], list[str]]
    selectors: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    # Family name -> what `routectl.engine` loads and the startup report replays with.
    loaders: Mapping[str, LayerLoader] = field(default_factory=dict)
    unknown_prefix: str | None = None
    # Known variables without a field (obsolete, removed): they warn, never count as unknown.
    retired: tuple[RetiredVariable, ...] = ()
    # Model scope name -> its facts: what `routectl config --model NAME` fills in.
    models: Mapping[str, ModelFacts] = field(default_factory=dict)
    # Prefix of the policy's environment variables: stripped from the environment of a
    # baseline subprocess so that no caller variable reaches the old program.
    variable_prefix: str | None = None
    root: Path | None = None
    snapshot_dir: Path | None = None

    def load_config(self, value: Any = None) -> BaseModel:
        from routectl.configmodel import load_config

        return load_config(self.config_model, value)

    def resolve(self, config: Any, environ: Mapping[str, str], hardware: Hardware,
                workload: EngineConfig, *, emit_warnings: bool = True) -> ResolvedPolicy:
        """Resolve once: explicit config > variable > default. Pure in its arguments."""
        if config is None:
            typed: dict[str, Any] = {}  # a default config sets no field
        else:
            from routectl.configmodel import typed_values

            model = (config if isinstance(config, self.config_model)
                     else self.load_config(config))
            typed = typed_values(model, self.fields)
        return resolve_fields(self.fields, typed, environ,
                              self.context(hardware, workload),
                              unknown_prefix=self.unknown_prefix, emit_warnings=emit_warnings,
                              retired=self.retired)

    def category(self, name: str) -> Any:
        for c in self.categories:
            if c.name == name:
                return c
        known = ", ".join(c.name for c in self.categories) or "none"
        raise InputError(f"unknown category {name!r} (known: {known})")

    def with_location(self, root: Path, snapshot_dir: Path) -> Project:
        return Project(**{**self.__dict__, "root": root, "snapshot_dir": snapshot_dir})


def find_project_root(start: Path) -> Path:
    import tomllib

    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text())
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise InputError(f"cannot read {candidate}: {exc}") from None
            if "routectl" in data.get("tool", {}):
                return directory
    raise InputError(f"no pyproject.toml with a [tool.routectl] table at or above {start}")


def load_project(directory: Path | None = None) -> Project:
    """Find the project from `directory` (default: the current directory) and import it."""
    import tomllib

    start = (directory or Path.cwd()).resolve()
    root = start if directory is not None else find_project_root(start)
    pyproject = root / "pyproject.toml"
    try:
        table = tomllib.loads(pyproject.read_text())["tool"]["routectl"]
    except FileNotFoundError:
        raise InputError(f"{pyproject} does not exist") from None
    except (KeyError, tomllib.TOMLDecodeError):
        raise InputError(f"{pyproject} has no [tool.routectl] table") from None
    spec = table.get("project")
    if not isinstance(spec, str) or ":" not in spec:
        raise InputError(f"[tool.routectl] project must be 'module:attribute' in {pyproject}")
    module_name, _, attribute = spec.partition(":")
    # The project's own code wins over any installed copy: a baseline worktree must run
    # its own policies, not ours.
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    module = importlib.import_module(module_name)
    project = getattr(module, attribute)
    if not isinstance(project, Project):
        raise InputError(f"{spec} is not a routectl Project")
    snapshots = root / table.get("snapshots", "snapshots")
    return project.with_location(root, snapshots)
