"""A compiled yes/no checker for the JSON Schema subset routectl's schemas use.

jsonschema spends about half a millisecond on one route row; a snapshot of 100,000 rows
must validate in seconds. The checker answers only "valid or not"; when it says no (or meets
a value it is unsure of), jsonschema validates again and phrases the error, so the checker
can make a check slower but never looser than jsonschema. A schema with a keyword outside
the subset gets no checker (`compile_checker` returns None) and jsonschema does all the work.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Checker = Callable[[Any], bool]

ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "$comment", "title", "description",
                         "default", "examples"})


class Unsupported(Exception):
    """A keyword or form the checker does not implement."""


class Unsure(Exception):
    """A value the checker cannot judge exactly (jsonschema decides)."""


def _is_integer(x: Any) -> bool:
    return (isinstance(x, int) and not isinstance(x, bool)) or (
        isinstance(x, float) and x.is_integer())


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


TYPES: Mapping[str, Checker] = {
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
}


# Types isinstance decides alone (bool is an int, so the numeric types are not here).
PLAIN_TYPES: Mapping[str, type] = {"object": dict, "array": list, "string": str,
                                   "boolean": bool, "null": type(None)}


def _json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON Schema defines it for const/enum (true is not 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _all(checks: list[Checker]) -> Checker:
    if not checks:
        return lambda x: True
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda x: first(x) and second(x)

    def check(x: Any) -> bool:
        for c in checks:
            if not c(x):
                return False
        return True

    return check


class _Compiler:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, Checker] = {}
        self.building: dict[str, list[Checker]] = {}

    def ref(self, target: str) -> Checker:
        if not target.startswith("#/$defs/") or "/" in target[len("#/$defs/"):]:
            raise Unsupported(f"$ref {target}")
        name = target[len("#/$defs/"):]
        if name in self.refs:
            return self.refs[name]
        if name in self.building:  # a recursive reference: resolved once built
            holder = self.building[name]
            return lambda x: holder[0](x)
        defs = self.root.get("$defs", {})
        if name not in defs:
            raise Unsupported(f"$ref to a missing definition {target}")
        self.building[name] = []
        checker = self.build(defs[name])
        self.building.pop(name).append(checker)
        self.refs[name] = checker
        return checker

    def build(self, node: Any) -> Checker:
        if node is True:
            return lambda x: True
        if node is False:
            return lambda x: False
        if not isinstance(node, dict):
            raise Unsupported(f"schema {node!r}")
        unknown = set(node) - ANNOTATIONS - set(self.KEYWORDS)
        if unknown:
            raise Unsupported(", ".join(sorted(unknown)))
        checks: list[Checker] = []
        if {"properties", "required", "additionalProperties"} & node.keys():
            checks.append(self.object_(node))
        for key in self.KEYWORDS:
            if key in node and key not in ("properties", "required", "additionalProperties"):
                checks.append(getattr(self, self.KEYWORDS[key])(node[key]))
        return _all(checks)

    KEYWORDS: Mapping[str, str] = {
        "$ref": "ref", "type": "type_", "properties": "", "required": "",
        "additionalProperties": "", "items": "items", "anyOf": "any_of", "oneOf": "one_of",
        "allOf": "all_of", "const": "const", "enum": "enum", "pattern": "pattern",
        "minimum": "minimum", "minLength": "min_length", "maxItems": "max_items",
        "uniqueItems": "unique_items", "propertyNames": "property_names",
    }

    def type_(self, value: Any) -> Checker:
        names = [value] if isinstance(value, str) else list(value)
        if set(names) <= PLAIN_TYPES.keys():
            plain = tuple(PLAIN_TYPES[n] for n in names)
            return lambda x: isinstance(x, plain)
        tests = [TYPES[n] for n in names]
        return lambda x: any(t(x) for t in tests)

    def plain_type(self, node: Any) -> tuple[type, ...] | None:
        """The isinstance tuple of a schema that is a plain `type` and nothing else (checked
        inline by its parent: one call less per value)."""
        if not isinstance(node, dict) or set(node) - ANNOTATIONS != {"type"}:
            return None
        names = [node["type"]] if isinstance(node["type"], str) else list(node["type"])
        if not set(names) <= PLAIN_TYPES.keys():
            return None
        return tuple(PLAIN_TYPES[n] for n in names)

    def object_(self, node: Mapping[str, Any]) -> Checker:
        # Per property: an isinstance tuple (a plain type) or a checker.
        props: dict[str, tuple[type, ...] | Checker] = {
            k: self.plain_type(v) or self.build(v)
            for k, v in node.get("properties", {}).items()}
        required = tuple(node.get("required", ()))
        extra_schema = node.get("additionalProperties", True)
        closed = extra_schema is False
        extra = None if extra_schema is True or closed else self.build(extra_schema)

        names = frozenset(props)

        def check(x: Any) -> bool:
            if not isinstance(x, dict):
                return True
            for key in required:
                if key not in x:
                    return False
            # An unknown key is the cheapest rejection: look before walking the values (a
            # oneOf branch that a row does not take then fails at once).
            if closed and not names.issuperset(x):
                return False
            for key, value in x.items():
                sub = props.get(key)
                if sub is not None:
                    if type(sub) is tuple:
                        if not isinstance(value, sub):
                            return False
                    elif not sub(value):  # type: ignore[operator]
                        return False
                elif closed:
                    return False
                elif extra is not None and not extra(value):
                    return False
            return True

        return check

    def items(self, value: Any) -> Checker:
        plain = self.plain_type(value)
        if plain is not None:
            return lambda x: not isinstance(x, list) or all(isinstance(i, plain) for i in x)
        sub = self.build(value)

        def check(x: Any) -> bool:
            if isinstance(x, list):
                for item in x:
                    if not sub(item):
                        return False
            return True

        return check

    def any_of(self, value: list[Any]) -> Checker:
        subs = [self.build(v) for v in value]
        return lambda x: any(s(x) for s in subs)

    def one_of(self, value: list[Any]) -> Checker:
        subs = [self.build(v) for v in value]
        return lambda x: sum(1 for s in subs if s(x)) == 1

    def all_of(self, value: list[Any]) -> Checker:
        return _all([self.build(v) for v in value])

    def const(self, value: Any) -> Checker:
        return lambda x: _json_equal(x, value)

    def enum(self, value: list[Any]) -> Checker:
        return lambda x: any(_json_equal(x, v) for v in value)

    def pattern(self, value: str) -> Checker:
        search = re.compile(value).search
        return lambda x: not isinstance(x, str) or search(x) is not None

    def minimum(self, value: Any) -> Checker:
        return lambda x: not _is_number(x) or x >= value

    def min_length(self, value: int) -> Checker:
        return lambda x: not isinstance(x, str) or len(x) >= value

    def max_items(self, value: int) -> Checker:
        return lambda x: not isinstance(x, list) or len(x) <= value

    def unique_items(self, value: bool) -> Checker:
        if not value:
            return lambda x: True

        def check(x: Any) -> bool:
            if not isinstance(x, list):
                return True
            if not all(isinstance(i, str) for i in x):
                raise Unsure("uniqueItems over non-strings")
            return len(set(x)) == len(x)

        return check

    def property_names(self, value: Any) -> Checker:
        sub = self.build(value)
        return lambda x: not isinstance(x, dict) or all(sub(k) for k in x)


def compile_checker(schema: Mapping[str, Any]) -> Checker | None:
    """A yes/no checker for `schema`, or None when it uses a keyword outside the subset.
    The checker raises Unsure where jsonschema must decide."""
    try:
        return _Compiler(schema).build(dict(schema))
    except Unsupported:
        return None
