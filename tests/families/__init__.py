"""Each kernel family's literal test expectations, one module per family.

A family's module is `tests/families/<name>.py`, its name with `-` spelled `_`
(`sm80-example-linear` -> `sm80_example_linear.py`), and states `FAMILY`, the family's
name. What it holds is written from the family's contract, never read back from the code's
tables: the shared tests merge the values of one kind from every module (`table`, `names`)
and compare the code with the merge. So a new family adds its expectations as a new module
here and edits no shared test; `tests/test_doorway.py` fails for a family without a module.

The attributes a module may state (each optional; a shared test that reads one says so):
- contract literals, merged into `tests/contract_literals.py`'s tables of the same name:
  `DEPRECATED_VARIABLES`, `LEGACY_VARIABLES`, `CURRENT_VARIABLES`, `OBSOLETE_VARIABLES`,
  `REMOVED_VARIABLES` (frozensets), `FIELD_VARIABLES`, `QUALIFIED_DEFAULTS`,
  `NON_DEFAULT_TEXT`, `DEPRECATION_MESSAGES` (dicts), `CONTEXT` (the resolution-context
  entries its record adds for the qualified NVFP4 workload without model facts) and any
  other upper-case literal its own tests import through `tests.contract_literals`;
- `SECTIONS`: the policy sections its contract names (`tests/test_kernel_config.py`);
- `INVARIANCES`: category -> the invariances its rows declare (`tests/test_invariances.py`);
- `ROUTE_SHAPES`: category -> (its route schema definition, a key only that shape has)
  (`tests/test_route_schemas.py`);
- `WIRING_CASES`, `WIRING_MAPPINGS`: one case per field of its own sections and the
  mappings from a resolved policy to its kernels' options (`tests/test_wiring_fields.py`);
- `ALWAYS_HASHED`: capability -> the sections its record hashes there for every engine
  (`tests/test_dflash2_policy.py`); `MATRIX_SHOWS`: category -> what its matrix cells show
  where not a kernel (`tests/test_matrix.py`); `ENGINE_CASE`, `ENGINE_LAYER`: its engine
  case, for a family that loads layers (`tests/test_engine_api.py`);
- `OWN_FILES`: further test files of its own whose names do not start with one of its
  module stems (the doorway measure, `tests/test_doorway.py`, counts them as its own).

`FAMILY` and `SECTIONS` are required (`tests/test_doorway.py` checks).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from types import ModuleType
from typing import Any


def module_name(family: str) -> str:
    """The expectations module's name for a family name."""
    return family.replace("-", "_")


@cache
def modules() -> dict[str, ModuleType]:
    """Family name -> its expectations module, for every module in this folder."""
    out: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        out[module.FAMILY] = module
    return out


def stated(attribute: str) -> list[tuple[str, Any]]:
    """(family, value) for every module that states `attribute`, in module-name order."""
    return [(f, getattr(m, attribute)) for f, m in modules().items() if hasattr(m, attribute)]


def table(attribute: str) -> dict[Any, Any]:
    """The union of every module's `attribute` dict; a key two modules state is a ValueError
    (two families would claim the same fact)."""
    out: dict[Any, Any] = {}
    owner: dict[Any, str] = {}
    for family, value in stated(attribute):
        for key, item in value.items():
            if key in out:
                raise ValueError(f"{attribute}[{key!r}] is stated by {owner[key]} and {family}")
            out[key], owner[key] = item, family
    return out


def names(attribute: str) -> frozenset[Any]:
    """The union of every module's `attribute` set (a name two families share is one name)."""
    return frozenset().union(*(value for _, value in stated(attribute)))


def rows(attribute: str) -> list[Any]:
    """Every module's `attribute` sequence, concatenated in module-name order."""
    out: list[Any] = []
    for _, value in stated(attribute):
        out.extend(value)
    return out
