"""The observer an engine session installs with one call (`EngineSession.observe`): a
`RouteObserver` on the session's native op namespace, active from that call on, and the
session's observation record (`routectl.replay.observed`) written on demand (`write`) and at
process exit. One record per session: a second `observe` on the same session is refused.

Importing this module imports torch (the observer is a torch dispatch mode).
"""

from __future__ import annotations

import atexit
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from routectl.namespaces.native_ns import NativeNamespace
from routectl.project import Project
from routectl.replay.observe import RouteObserver
from routectl.replay.observed import Header, NativeBuild, ObservationRecord, Target, write_record

if TYPE_CHECKING:
    from routectl.engine.startup import EngineSession


def native_build(project: Project, namespace: NativeNamespace) -> NativeBuild:
    """The catalogue ops `namespace` has and its ABI getters' revisions."""
    catalogue = project.catalogue
    ops = tuple(sorted(op for op in catalogue.ops if namespace.has_op(op)))
    abi = tuple(
        (op, namespace.abi_revision(op))
        for op, spec in sorted(catalogue.ops.items())
        if spec.getter and op in ops
    )
    return NativeBuild(namespace.name, ops, abi)


class SessionObserver:
    """One session's observer and record. `record()` and `write()` may be called at any
    time; `close()` stops observing (and writes once more when a path was given)."""

    def __init__(
        self,
        session: EngineSession,
        op_namespace: str,
        native: NativeNamespace,
        path: Path | None,
        *,
        target: Target,
        rank: int,
        is_capturing: Callable[[], bool] | None,
    ) -> None:
        from routectl import __version__

        self.path = None if path is None else Path(path)
        self.observer = RouteObserver(
            session.project.catalogue, op_namespace, is_capturing=is_capturing
        )
        self.header = Header(
            routectl=__version__,
            project=session.project.name,
            target=target,
            workload=session.workload.to_json(),
            capability=session.hardware.capability,
            policy_hash=session.policy_hash,
            native=native_build(session.project, native),
            rank=rank,
        )
        self._active = False

    def start(self) -> None:
        self.observer.__enter__()
        self._active = True
        if self.path is not None:
            atexit.register(self._at_exit)

    def record(self) -> ObservationRecord:
        return self.observer.record(self.header)

    def write(self, path: Path | None = None) -> Path:
        """Write the record so far to `path` (default: the session's) atomically."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("no path to write the observation record to")
        write_record(target, self.record())
        return target

    def close(self) -> None:
        if self._active:
            self._active = False
            self.observer.__exit__(None, None, None)
            if self.path is not None:
                atexit.unregister(self._at_exit)
                self.write()

    def _at_exit(self) -> None:
        if self.path is not None:
            self.write()
