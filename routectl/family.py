"""The family record: everything routectl needs of one kernel family, declared in one place.

A family is what an engine names when it selects or loads a layer (`routectl.select`,
`EngineSession.load`). Its record says which policy sections it reads and on which hardware
(the policy hash covers them), how it selects and loads a layer, how the startup report
replays a loaded layer on meta tensors (the `LayerLoader`), which snapshot categories prove
its routes, the field table of the policy sections it alone declares and the native ops
modules its kernels call. A project lists its families once (`Project(families=...)`); the
selector and loader maps, the category registry and the hashed sections are derived from that
list, and a project assembles its variable table (`field_table`) and its native catalogue
(`ops_modules`) from it, so adding a family is its own modules plus one entry in that list.

Old spellings of a family's name stay accepted: `replaces` lists them, and a lookup by an old
name warns (FamilyNameWarning) and answers for the new one. An old name that several families
replaced (a family split in two) names them all: looking it up for a single family is an
input error that lists the new names.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from routectl.category import Category
from routectl.errors import InputError
from routectl.policy.fields import Field
from routectl.policy.resolve import ResolvedPolicy
from routectl.reasons import Check
from routectl.workload import EngineConfig, Hardware

if TYPE_CHECKING:
    # Annotations only: `import routectl` (the engine's start-up import) need not build it.
    from routectl.policy.loaders import LayerLoader


class FamilyNameWarning(FutureWarning):
    """A family was named by an old spelling (still accepted; the message names the new)."""


def every_engine(engine: EngineConfig, policy: ResolvedPolicy) -> bool:
    """The default hashing rule: every engine on enabled hardware hashes the sections."""
    return True


@dataclass(frozen=True)
class Family:
    """One kernel family's record: its name, policy sections and where they are hashed, its
    selector and loader, the categories that prove it and its former names."""

    name: str
    # The policy sections (or `section.field` entries) the family reads.
    sections: tuple[str, ...]
    # capability -> whether the family is live there (its sections are hashed there).
    enabled_on: Callable[[int], bool]
    # Whether this engine and policy hash the family's sections (on enabled hardware); a
    # family hashed only for some engines keeps their compile identity out of the others'.
    hashed_when: Callable[[EngineConfig, ResolvedPolicy], bool] = every_engine
    # (layer, policy, hardware, engine, namespace) -> a loaded layer whose `.decision` is the
    # selection; called without tensors. None: the loader's own `load` selects.
    selector: Callable[..., Any] | None = None
    # What the engine loads the family with and the startup report replays it with; None for
    # a family that loads no layer (a policy-only family).
    loader: LayerLoader | None = None
    # The snapshot categories whose rows prove this family's routes (a category may prove
    # several families; it is listed once, where it first appears).
    categories: tuple[Category, ...] = ()
    # Former spellings of the name, accepted with a FamilyNameWarning.
    replaces: tuple[str, ...] = ()
    # (hardware, engine) -> the entries this family adds to the resolution context its
    # computed defaults read (plain data, keys of its own); None: none.
    context: Callable[[Hardware, EngineConfig], Mapping[str, Any]] | None = None
    # (hardware, engine) -> [(rule name, check)]: the whole-model qualification verdicts
    # this family adds to the project's (`routectl config` prints them); None: none.
    qualification: Callable[[Hardware, EngineConfig], list[tuple[str, Check]]] | None = None
    # (engine, environment) -> the engine with the facts this family reads from the given
    # environment (an InputError names an invalid variable); None: none.
    engine_environment: Callable[[EngineConfig, Mapping[str, str]], EngineConfig] | None = None
    # The fields of the policy sections this family declares itself (its own field table,
    # `policies/<family>_variables.py`): `field_table` appends them, in list order, to the
    # project's shared fields (the sections several families read).
    fields: tuple[Field, ...] = ()
    # The native ops modules its kernels require or call (each exports `OPS`, `KERNELS` and
    # optionally `STAGES`, `ABI_GETTERS`; a module shared with other families is listed by
    # each): `ops_modules` gives them to the project's catalogue, each once.
    ops: tuple[ModuleType, ...] = ()

    @property
    def select(self) -> Callable[..., Any] | None:
        """The selection function (`selector`, else the loader's `load`); None: none."""
        if self.selector is not None:
            return self.selector
        return self.loader.load if self.loader is not None else None


def check_families(families: Sequence[Family]) -> None:
    """Names and former names are unique across the list (a ValueError names the clash)."""
    names = [f.name for f in families]
    for family in families:
        if names.count(family.name) > 1:
            raise ValueError(f"family name {family.name!r} is declared twice")
        for old in family.replaces:
            if old in names:
                raise ValueError(f"{family.name!r} replaces {old!r}, which is still a family")


def field_table(shared: Iterable[Field], families: Iterable[Family]) -> tuple[Field, ...]:
    """The project's variable table: the shared fields, then every family's own fields in
    list order (resolution runs in this order). A field key declared twice is a ValueError
    naming both tables (two declarations would answer for the same setting)."""
    out: dict[str, Field] = {f.key: f for f in shared}
    owner = dict.fromkeys(out, "the shared table")
    for family in families:
        for f in family.fields:
            if f.key in out:
                raise ValueError(
                    f"family {family.name!r} redeclares field {f.key!r} of {owner[f.key]}"
                )
            out[f.key], owner[f.key] = f, f"family {family.name!r}"
    return tuple(out.values())


def ops_modules(families: Iterable[Family]) -> tuple[ModuleType, ...]:
    """Every family's native ops modules in list order, each once: what the project's
    catalogue merges."""
    return tuple(dict.fromkeys(m for family in families for m in family.ops))


def selectors(families: Iterable[Family]) -> dict[str, Callable[..., Any]]:
    """Family name -> its selection function, for every family that selects."""
    return {f.name: f.select for f in families if f.select is not None}


def loaders(families: Iterable[Family]) -> dict[str, LayerLoader]:
    """Family name -> its LayerLoader, for every family that loads layers."""
    return {f.name: f.loader for f in families if f.loader is not None}


def categories(families: Iterable[Family]) -> tuple[Category, ...]:
    """Every family's categories in list order, each once (by name)."""
    out: dict[str, Category] = {}
    for family in families:
        for category in family.categories:
            out.setdefault(category.name, category)
    return tuple(out.values())


def category_sections(families: Iterable[Family], category: str) -> tuple[str, ...]:
    """The sections the families a category proves read, in list order, deduplicated."""
    out: dict[str, None] = {}
    for family in families:
        if any(c.name == category for c in family.categories):
            out.update(dict.fromkeys(family.sections))
    return tuple(out)


def active_sections(
    families: Iterable[Family], capability: int, engine: EngineConfig, policy: ResolvedPolicy
) -> list[str]:
    """Sections of every family enabled at `capability` and hashed for this engine and
    policy, deduplicated: first those of the families every engine there hashes, then those
    hashed only for some engines (each group in list order), so that turning a conditional
    family on appends to the hashed list and never reorders it."""
    enabled = [f for f in families if f.enabled_on(capability)]
    always = [f for f in enabled if f.hashed_when is every_engine]
    conditional = [f for f in enabled if f.hashed_when is not every_engine]
    out: dict[str, None] = {}
    for family in [*always, *(f for f in conditional if f.hashed_when(engine, policy))]:
        out.update(dict.fromkeys(family.sections))
    return list(out)


def family_context(
    families: Iterable[Family], hardware: Hardware, engine: EngineConfig
) -> dict[str, Any]:
    """The context entries every family adds, in list order (a key declared twice is a
    ValueError: two families would read each other's defaults)."""
    out: dict[str, Any] = {}
    for family in families:
        if family.context is None:
            continue
        for key, value in family.context(hardware, engine).items():
            if key in out:
                raise ValueError(f"family {family.name!r} redeclares context key {key!r}")
            out[key] = value
    return out


def engine_from_environment(
    families: Iterable[Family], engine: EngineConfig, environ: Mapping[str, str]
) -> EngineConfig:
    """`engine` with every family's engine facts read from `environ`, in list order."""
    for family in families:
        if family.engine_environment is not None:
            engine = family.engine_environment(engine, environ)
    return engine


def replaced_by(families: Iterable[Family]) -> dict[str, tuple[str, ...]]:
    """Former name -> the family names that replaced it."""
    out: dict[str, tuple[str, ...]] = {}
    for family in families:
        for old in family.replaces:
            out[old] = (*out.get(old, ()), family.name)
    return out


def current_name(name: str, known: Mapping[str, Any], families: Iterable[Family]) -> str:
    """`name` as a key of `known` (a family map): itself, or the one family that replaced
    that old spelling (with a FamilyNameWarning). Raises InputError for an unknown name or an
    old one several families replaced."""
    if name in known:
        return name
    new = replaced_by(families).get(name, ())
    if len(new) == 1 and new[0] in known:
        warnings.warn(
            f"kernel family {name!r} is now spelled {new[0]!r}; the old name will be removed",
            FamilyNameWarning,
            stacklevel=4,  # the caller of routectl.select or EngineSession.load_layer
        )
        return new[0]
    if len(new) > 1:
        raise InputError(
            f"kernel family {name!r} was split into {', '.join(new)}: name one of them"
        )
    raise InputError(
        f"unknown kernel family {name!r} (known: {', '.join(sorted(known)) or 'none'})"
    )


__all__ = [
    "Family",
    "FamilyNameWarning",
    "active_sections",
    "categories",
    "category_sections",
    "check_families",
    "current_name",
    "engine_from_environment",
    "every_engine",
    "family_context",
    "field_table",
    "loaders",
    "ops_modules",
    "replaced_by",
    "selectors",
]
