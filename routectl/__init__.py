"""routectl: kernel policy resolution, capability-based selection and route snapshots.

Public names (each receives the project object; none of them imports torch):
- `load_project(directory=None)`: the project named in the nearest `[tool.routectl]`.
- `resolve(project, config, environ, hardware, workload)`: a frozen `ResolvedPolicy`.
- `select(project, family, layer, policy, hardware, workload, namespace)`: the `Decision`
  for one layer (chosen kernel, every verdict, fallbacks, layout) without preparing it.
- `start(project, kernel_config, hardware, workload, *, environ=None)`: the engine's startup
  session (resolve once, load and dispatch layers, the startup report); see
  `routectl.engine.startup`.
- `Hardware`, `EngineConfig` (with optional `ModelFacts`), `InMemoryNamespace`,
  `TorchOpsNamespace`, `ResolvedPolicy`, `Decision`, `InputError`, `SelectionError`.
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

from routectl.errors import InputError, SelectionError
from routectl.io.environ import checked_environ
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
    return project.resolve(config, checked_environ(environ), hardware, workload)


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
    try:
        loader = project.selectors[family]
    except KeyError:
        known = ", ".join(sorted(project.selectors)) or "none"
        raise InputError(f"unknown kernel family {family!r} (known: {known})") from None
    return loader(layer, policy, hardware, workload, namespace).decision


__all__ = [
    "Decision",
    "EngineConfig",
    "EngineSession",
    "Hardware",
    "InMemoryNamespace",
    "InputError",
    "ModelFacts",
    "Project",
    "ResolvedPolicy",
    "SelectionError",
    "TorchOpsNamespace",
    "load_project",
    "resolve",
    "select",
    "start",
]
