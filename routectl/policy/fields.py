"""Machinery for policy fields declared as data: one entry per field (section, name,
variable, kind, parser, default). The project's table lives in `policies/`; this module only
knows how to parse and describe entries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from enum import StrEnum
from typing import Any

from routectl.errors import InputError
from routectl.io.jsonread import shorten


class Kind(StrEnum):
    DEPRECATED = "deprecated"  # warns once per process
    LEGACY = "legacy"  # read, never warns
    CURRENT = "current"  # current switch, never warns
    CONFIG = "config"  # no environment variable
    # Known names that no longer feed a field (`RetiredVariable`): never parsed, never
    # reported as unknown.
    OBSOLETE = "obsolete"  # still recognised: warns once when present that it is ignored
    REMOVED = "removed"  # gone: warns once when present that it has no effect


@dataclass(frozen=True)
class Parser:
    """Turns a variable's text into a value; `accepted` describes valid input for messages."""

    name: str
    accepted: str
    parse: Callable[[str], Any]

    def __call__(self, variable: str, text: str) -> Any:
        try:
            return self.parse(text)
        except ValueError:
            raise InputError(
                f"invalid value {shorten(text)} for {variable}: accepted values are {self.accepted}"
            ) from None


def _int_bool(text: str) -> bool:
    return int(text.strip()) != 0


def _strict01(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(text)
    return text == "1"


def _int(text: str) -> int:
    return int(text.strip())


def _positive_int(text: str) -> int:
    value = int(text.strip())
    if value <= 0:
        raise ValueError(text)
    return value


def choice_parser(*choices: Any, normalize: Callable[[str], str] = str.strip) -> Parser:
    by_text = {str(c): c for c in choices}

    def parse(text: str) -> Any:
        key = normalize(text)
        if key not in by_text:
            raise ValueError(text)
        return by_text[key]

    return Parser("choice", "one of " + ", ".join(by_text), parse)


def choice_validator(choices: tuple[Any, ...]) -> Callable[[Any, str], Any]:
    """Refuses a typed or parsed value outside `choices`, naming `where` (InputError)."""

    def check(value: Any, where: str) -> Any:
        if value not in choices:
            raise InputError(
                f"invalid value {value!r} for {where}: accepted values are "
                + ", ".join(str(c) for c in choices)
            )
        return value

    return check


def _name_list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _layer_list(text: str) -> tuple[str, ...]:
    items = _name_list(text)
    for item in items:
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()) or (sep and int(lo) > int(hi)):
            raise ValueError(item)
    return items


INT_BOOL = Parser("int_bool", "integers (0 = false, any other integer = true)", _int_bool)
STRICT_01 = Parser("strict_01", '"0" or "1"', _strict01)
INT = Parser("int", "integers", _int)
POSITIVE_INT = Parser("positive_int", "integers > 0", _positive_int)
NAME_LIST = Parser("name_list", "a comma-separated list of names", _name_list)
LAYER_LIST = Parser(
    "layer_list", "a comma-separated list of layer ids and a-b ranges (e.g. 0,3,10-12)", _layer_list
)


@dataclass(frozen=True)
class Computed:
    """A default computed from the resolution context (named so docs can show it)."""

    description: str
    compute: Callable[[Mapping[str, Any]], Any]

    def __str__(self) -> str:
        return self.description


@dataclass(frozen=True)
class Decided:
    """What a field's `effective` rule returns when another field decided the value (an
    inheritance rule's rollback): the value, and the source that decided it ("alias:<NAME>"
    or "explicit"), so that the field's source names what decided it, not its own variable."""

    value: Any
    source: str


# Keyword-only: a table of eight-odd positional values cannot be read (or reordered) safely.
@dataclass(frozen=True, kw_only=True)
class Field:
    section: str | None  # None for engine-wide fields
    name: str
    type: Any  # python type of the value (bool, int, str, tuple[str, ...])
    default: Any  # a literal or a Computed
    variable: str | None = None
    kind: Kind = Kind.CONFIG
    parser: Parser | None = None
    doc: str = ""
    # Applied to a value that comes from the variable or the default, never to a typed one;
    # a `Decided` also gives the source.
    effective: Callable[[Any, Mapping[str, Any]], Any] | None = None
    # Also read by native code from the environment: typed values must agree with it.
    native_read: bool = False
    # The typed value is merged with the variable's (lists) instead of overriding it.
    merge: bool = False
    # Extra words in the deprecation message, e.g. " for dense linear layers".
    deprecation_scope: str = ""
    # Checks (and may normalise) a typed or parsed value; `where` names the field or the
    # variable in the error. Raises InputError.
    validate: Callable[[Any, str], Any] | None = None
    # A bridge from fields resolved before this one: for an unset field, a value (or None
    # for no bridge) that counts as explicit; the field's own variable is then ignored.
    bridge: Callable[[Mapping[str, Any]], Any] | None = None
    # The accepted values, declared once: they give both the variable's parser and the
    # validator, so neither `parser` nor `validate` is given with them.
    choices: tuple[Any, ...] | None = None

    # "section.name" (or the name of an engine-wide field): set once, read on every lookup.
    key: str = dataclass_field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "key", f"{self.section}.{self.name}" if self.section else self.name
        )
        if self.choices is not None:
            if self.parser is not None or self.validate is not None:
                raise ValueError(
                    f"{self.key}: choices give the parser and the validator; give neither"
                )
            object.__setattr__(self, "parser", choice_parser(*self.choices))
            object.__setattr__(self, "validate", choice_validator(self.choices))

    @property
    def config_path(self) -> str:
        return f"kernel_config.{self.key}"

    def default_text(self) -> str:
        if isinstance(self.default, Computed):
            return self.default.description
        if isinstance(self.default, tuple):
            return ",".join(self.default) if self.default else "(empty)"
        return str(self.default)


@dataclass(frozen=True)
class RetiredVariable:
    """A variable name without a field: presence warns once, the value is never read."""

    variable: str
    kind: Kind  # Kind.OBSOLETE or Kind.REMOVED
    reason: str  # what a maintainer needs to know, e.g. "dense tie ordering is mandatory"

    def __post_init__(self) -> None:
        if self.kind not in (Kind.OBSOLETE, Kind.REMOVED):
            raise ValueError(
                f"{self.variable}: a retired variable is obsolete or removed, not {self.kind}"
            )

    def message(self) -> str:
        if self.kind is Kind.OBSOLETE:
            return (
                f"{self.variable} is obsolete and ignored: {self.reason}; it has no "
                f"replacement and stays recognised for one released cycle."
            )
        return f"{self.variable} was removed and has no effect: {self.reason}."


def _plain(kind: Any, value: Any) -> bool:
    """Whether the strict typed config takes `value` for a field of `kind` as it is."""
    if value is None:
        return True
    if kind in (bool, int, str):
        return type(value) is kind  # strict: no bool for int, no coercion
    if kind == list[str]:
        return type(value) is list and all(type(item) is str for item in value)
    return False


def plain_typed_values(fields: tuple[Field, ...], value: Any) -> dict[str, Any] | None:
    """Field key -> explicit value of a config given as a plain dict that the strict typed
    config (routectl.policy.configmodel) would take unchanged: every key a known section or
    field, every value of its field's exact type (bool, int, str, a list of str) or None.
    None otherwise: the typed config then validates it and words any error. Saves building
    the typed config (and importing pydantic) for the common mapping, at engine start-up
    and in replayed rows."""
    if type(value) is not dict:
        return None
    by_section: dict[str | None, dict[str, Field]] = {}
    for f in fields:
        by_section.setdefault(f.section, {})[f.name] = f
    engine = by_section.get(None, {})
    out: dict[str, Any] = dict.fromkeys((f.key for f in fields), None)
    for key, given in value.items():
        if key in engine:
            if not _plain(engine[key].type, given):
                return None
            out[engine[key].key] = list(given) if type(given) is list else given
            continue
        section = by_section.get(key) if isinstance(key, str) else None
        if section is None or type(given) is not dict:
            return None
        for name, item in given.items():
            known = section.get(name) if isinstance(name, str) else None
            if known is None or not _plain(known.type, item):
                return None
            out[known.key] = list(item) if type(item) is list else item
    return out
