"""The case form of tests/test_wiring_fields.py, shared with the families' expectations
modules (tests/families/), which state the cases of their own sections (`WIRING_CASES`) and
the mappings from a resolved policy to their own kernels' options (`WIRING_MAPPINGS`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class Case:
    key: str  # the field
    value: Any  # typed value, or the variable's text when `variable`
    changes: Mapping[str, Mapping[str, Any]]  # mapping -> option -> new value
    variable: bool = False  # set through the environment (native-read fields must agree)

    @property
    def id(self) -> str:
        return f"{self.key}={self.value!r}"


def c(key: str, value: Any, **changes: Mapping[str, Any]) -> Case:
    return Case(key, value, changes)


def env(key: str, text: str, **changes: Mapping[str, Any]) -> Case:
    return Case(key, text, changes, variable=True)
