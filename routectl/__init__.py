"""routectl: kernel policy resolution, capability-based selection and route snapshots.

The public names are those of `__all__`, each documented where it is defined:
- finding a project: `load_project(directory=None, *, name=None)` (the nearest
  `[tool.routectl]` table, or an installed engine's project by name: docs/discovery.md),
  `Project`;
- declaring one: `Family` (a kernel family's record), `Category` (the snapshot category base),
  `FamilyNameWarning` (a family named by its former spelling);
- deciding (none of these imports torch): `resolve(project, config, environ, hardware,
  workload)` -> `ResolvedPolicy`; `select(project, family, layer, policy, hardware, workload,
  namespace)` -> `Decision` (chosen kernel, every verdict, fallbacks, layout) without
  preparing the layer; `start(project, kernel_config, hardware, workload, *, environ=None)`
  -> `EngineSession` (resolve once, load and dispatch layers, the startup report);
- their inputs: `Hardware`, `EngineConfig` (with optional `ModelFacts`), the injected
  `NativeNamespace` (`TorchOpsNamespace` at run time, `InMemoryNamespace` in tests);
- their errors: `InputError` (bad input, exit 2), `SelectionError` (no kernel can serve a
  layer, with every verdict).
"""

from __future__ import annotations

import sys

from routectl.runtime import interrupt as _interrupt

# The program's first code, before the imports below (pydantic, click, ...): Ctrl-C from here
# on is one line and exit 130. Only when this process is the routectl program.
if _interrupt.is_cli_start(getattr(sys, "argv", [])):
    _interrupt.early_start()

from collections.abc import Mapping
from typing import Any

from routectl.category import Category
from routectl.errors import InputError, SelectionError
from routectl.family import Family, FamilyNameWarning
from routectl.io.environ import checked_environ as _checked_environ
from routectl.policy.loaded import Decision
from routectl.namespaces.native_ns import InMemoryNamespace, NativeNamespace, TorchOpsNamespace
from routectl.policy.resolve import ResolvedPolicy
from routectl.project import Project, load_project
from routectl.workload import EngineConfig, Hardware, ModelFacts

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The engine's session (and its startup report) is imported on first use: a CLI command
    # that never starts an engine does not pay for it.
    if name in ("start", "EngineSession"):
        from routectl.engine import startup as engine

        return getattr(engine, name)
    raise AttributeError(f"module 'routectl' has no attribute {name!r}")


def resolve(
    project: Project,
    config: Any,
    environ: Mapping[str, str],
    hardware: Hardware,
    workload: EngineConfig,
) -> ResolvedPolicy:
    """Resolve the policy once. `config` is a KernelConfig, a mapping, JSON text or `@file`;
    `environ` a mapping of str to str (anything else is an InputError naming the key)."""
    return project.resolve(config, _checked_environ(environ), hardware, workload)


def select(
    project: Project,
    family: str,
    layer: Any,
    policy: ResolvedPolicy,
    hardware: Hardware,
    workload: EngineConfig,
    namespace: NativeNamespace,
) -> Decision:
    """Which kernel serves `layer` (a plain spec): selection only, no preparation."""
    loader = project.selectors[project.family_name(family, project.selectors)]
    return loader(layer, policy, hardware, workload, namespace).decision


__all__ = [
    "Category",
    "Decision",
    "EngineConfig",
    "EngineSession",
    "Family",
    "FamilyNameWarning",
    "Hardware",
    "InMemoryNamespace",
    "InputError",
    "ModelFacts",
    "NativeNamespace",
    "Project",
    "ResolvedPolicy",
    "SelectionError",
    "TorchOpsNamespace",
    "load_project",
    "resolve",
    "select",
    "start",
]
