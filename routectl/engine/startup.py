"""The engine-facing API: resolve the policy once at startup, load each layer (select and
prepare its weights through the engine's native namespace), dispatch calls per token count
and produce the startup report.

    session = start(project, kernel_config, Hardware(70), EngineConfig(tp=4))
    layer = session.load_layer("sm70-awq-moe", spec, checkpoint, namespace)
    out = layer(x, topk_ids, topk_weights)       # the route for M = x.shape[0]
    print(session.report().to_text())

`start` is the one place besides the CLI entry that reads `os.environ`, and only when no
`environ` mapping is given. Messages go to the `routectl` logger (`logging.getLogger
("routectl")`); routectl installs no handler, the engine configures logging. Each load-time
fallback is logged once per session, with the reason text the snapshot rows carry.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routectl.engine.startup_report import StartupReport, build_report
from routectl.errors import InputError, SelectionError
from routectl.io.environ import checked_environ
from routectl.namespaces.native_ns import NativeNamespace
from routectl.policy.loaded import Decision, Fallback, PreparedLayer
from routectl.policy.resolve import PolicyDeprecationWarning, ResolvedPolicy, variable_notices
from routectl.project import Project
from routectl.reasons import reason_text
from routectl.workload import EngineConfig, Hardware

if TYPE_CHECKING:
    from routectl.engine.observing import SessionObserver
    from routectl.engine.profile import Profile, Requirement
    from routectl.replay.observe import RouteObserver

LOGGER_NAME = "routectl"
log = logging.getLogger(LOGGER_NAME)


class NotDispatchedError(RuntimeError):
    """A call reached a layer whose chosen method routectl does not dispatch (e.g. MoeWNA16,
    served by the engine's own code)."""


class ObserverSlot:
    """The session's observer, shared by its layers (None until `EngineSession.observe`):
    a layer loaded before the observer was installed is observed from then on."""

    __slots__ = ("observer",)

    def __init__(self) -> None:
        self.observer: RouteObserver | None = None


@dataclass(frozen=True)
class EngineLayer:
    """One loaded layer. Calling it dispatches one call of M = x.shape[0] tokens through the
    namespace it was loaded with; the family's route for that M decides the op(s)."""

    name: str
    family: str
    spec: Any
    prepared: PreparedLayer
    namespace: NativeNamespace
    workspace: int | None = None
    slot: ObserverSlot | None = None

    @property
    def decision(self) -> Decision:
        return self.prepared.decision

    @property
    def kernel(self) -> str | None:
        return self.prepared.decision.kernel

    @property
    def dispatched(self) -> bool:
        """Whether routectl dispatches this layer's calls (False: the engine's own code)."""
        return self.prepared.apply is not None

    def __call__(self, x: Any, *args: Any) -> Any:
        apply = self.prepared.apply
        if apply is None:
            raise NotDispatchedError(
                f"{self.name}: {self.kernel or 'no kernel'} serves this "
                "layer; routectl dispatches none of its calls"
            )
        observer = self.slot.observer if self.slot is not None else None
        if observer is None:
            return apply(x, *args)
        with observer.in_layer(self.name, int(x.shape[0])):
            return apply(x, *args)


def _layer_name(spec: Any, family: str, index: int) -> str:
    prefix = spec.get("prefix") if isinstance(spec, Mapping) else getattr(spec, "prefix", None)
    return str(prefix) if prefix else f"{family}#{index}"


def _shown(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool | int | float | None) else str(value)


class EngineSession:
    """The policy resolved once for one engine process, and the layers loaded under it."""

    def __init__(
        self,
        project: Project,
        policy: ResolvedPolicy,
        hardware: Hardware,
        workload: EngineConfig,
        profile: Profile | None = None,
    ) -> None:
        self._profile = profile
        self._project = project
        self._policy = policy
        self._hardware = hardware
        self._workload = workload
        self._layers: list[EngineLayer] = []
        self._logged_fallbacks: set[tuple[str, str, str]] = set()
        self._slot = ObserverSlot()
        self._observing: SessionObserver | None = None

    @property
    def project(self) -> Project:
        return self._project

    @property
    def policy(self) -> ResolvedPolicy:
        return self._policy

    @property
    def hardware(self) -> Hardware:
        return self._hardware

    @property
    def workload(self) -> EngineConfig:
        return self._workload

    @property
    def policy_hash(self) -> str:
        """The resolved policy's hash over the sections active for this hardware and workload
        (what snapshot rows and observation records are matched by)."""
        active = self._project.hashed_sections(
            self._hardware.capability, self._workload, self._policy
        )
        return self._policy.compute_hash(active)

    @property
    def observing(self) -> SessionObserver | None:
        return self._observing

    def observe(
        self,
        path: Path | str | None,
        namespace: NativeNamespace,
        op_namespace: str,
        *,
        category: str | None = None,
        row: str | None = None,
        model: str | None = None,
        rank: int = 0,
        is_capturing: Any = None,
    ) -> SessionObserver:
        """Install the session's observer (one call at start-up): from now on every catalogue
        call in torch op namespace `op_namespace` is counted per layer, op, plan, M and
        graph capture, and the observation record is written to `path` at exit (and by
        `.write()`). `namespace`: the engine's native build (its ops and ABI revisions go
        in the record's header); `category`, `row`, `model`: the snapshot row the engine
        declares it runs as, as far as it knows; `is_capturing`: the engine's CUDA graph
        capture predicate (e.g. torch's `cuda.is_current_stream_capturing`; None: no call is
        marked captured, routectl never asks the host about a GPU). Imports torch."""
        if self._observing is not None:
            raise InputError("this engine session already has an observer (one record a session)")
        from routectl.engine.observing import SessionObserver
        from routectl.replay.observed import Target

        observing = SessionObserver(
            self,
            op_namespace,
            namespace,
            None if path is None else Path(path),
            target=Target(category, row, model),
            rank=rank,
            is_capturing=is_capturing,
        )
        observing.start()
        self._observing = observing
        self._slot.observer = observing.observer
        return observing

    @property
    def layers(self) -> tuple[EngineLayer, ...]:
        return tuple(self._layers)

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(sorted(self._project.loaders))

    def load_layer(
        self,
        family: str,
        layer: Any,
        tensors: Any,
        namespace: NativeNamespace,
        *,
        name: str | None = None,
        workspace: int | None = None,
    ) -> EngineLayer:
        """Select the layer's kernel and prepare `tensors` (the family's checkpoint tensors;
        None: meta tensors) through `namespace`. `workspace`: FP16 elements the engine can
        lend the layer (families that take one). Raises SelectionError when nothing can
        serve the layer or an explicit request cannot be served (logged first)."""
        family = self._project.family_name(family, self._project.loaders)
        loader = self._project.loaders[family]
        label = name or _layer_name(layer, family, len(self._layers))
        if tensors is None:
            tensors = loader.meta_tensors(layer)
        kwargs = loader.load_kwargs(family, tensors, workspace)
        observer = self._slot.observer
        try:
            if observer is None:
                prepared = loader.load(
                    layer, self._policy, self._hardware, self._workload, namespace, **kwargs
                )
            else:
                with observer.in_layer(label, None):
                    prepared = loader.load(
                        layer, self._policy, self._hardware, self._workload, namespace, **kwargs
                    )
        except SelectionError as exc:
            log.error("%s [%s]: %s", label, family, reason_text(exc.code, exc.message))
            raise
        loaded = EngineLayer(label, family, layer, prepared, namespace, workspace, self._slot)
        self._layers.append(loaded)
        decision = prepared.decision
        if decision.kernel is None and decision.status is not None:
            log.info("%s [%s]: not served by this family (%s)", label, family, decision.status[1])
        else:
            log.info(
                "%s [%s]: %s, prepared layout %s", label, family, decision.kernel, decision.layout
            )
        for fallback in decision.fallbacks:
            self._log_fallback(label, family, fallback)
        return loaded

    def _log_fallback(self, label: str, family: str, fallback: Fallback) -> None:
        key = (family, fallback.field, fallback.reason)
        if key in self._logged_fallbacks:
            return
        self._logged_fallbacks.add(key)
        log.warning(
            "%s [%s]: %s falls back from %s to %s: %s",
            label,
            family,
            fallback.field,
            _shown(fallback.requested),
            _shown(fallback.effective),
            fallback.reason,
        )

    @property
    def profile(self) -> Profile | None:
        return self._profile

    def profile_check(self) -> tuple[list[Requirement], list[str]]:
        """The deployment profile's requirements judged against the layers loaded so far,
        and the mismatches (both empty without a profile)."""
        if self._profile is None:
            return [], []
        from routectl.engine.profile import check_layers

        return check_layers(
            self._profile,
            (
                (layer.name, layer.kernel, [f.field for f in layer.decision.fallbacks])
                for layer in self._layers
            ),
        )

    def verify_profile(self) -> None:
        """Refuse the start-up when the loaded layers' selection does not meet the
        deployment profile: one ContractError (code contract_mismatch) naming every
        mismatch, logged first. Call it once the engine has loaded its layers."""
        _, mismatches = self.profile_check()
        if mismatches:
            from routectl.engine.profile import ContractError

            error = ContractError(mismatches)
            log.error("%s", reason_text(error.code, error.message))
            raise error

    def report(self) -> StartupReport:
        """The startup report of every layer loaded so far (replayed on meta tensors)."""
        profile = None
        if self._profile is not None:
            judged, mismatches = self.profile_check()
            profile = {
                "source": self._profile.source,
                "requirements": [r.to_json() for r in judged],
                "mismatches": mismatches,
            }
        return build_report(
            self._project,
            self._policy,
            self._hardware,
            self._workload,
            self._layers,
            profile=profile,
        )


def _resolve(
    project: Project,
    kernel_config: Any,
    environ: Mapping[str, str],
    hardware: Hardware,
    workload: EngineConfig,
) -> ResolvedPolicy:
    """Resolve once, emitting the warnings of deprecated, obsolete and removed variables
    (once per process) to the logger instead of the warnings machinery; other resolution
    notes (unknown variables) are logged on every start."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PolicyDeprecationWarning)
        policy = project.resolve(kernel_config, environ, hardware, workload, emit_warnings=True)
    emitted = [str(w.message) for w in caught]
    once = {message for _, _, message in variable_notices(project.fields, project.retired, environ)}
    for message in emitted:
        log.warning("%s", message)
    for message in policy.warnings:
        if message not in once and message not in emitted:
            log.warning("%s", message)
    return policy


def start(
    project: Project,
    kernel_config: Any,
    hardware: Hardware,
    workload: EngineConfig,
    *,
    environ: Mapping[str, str] | None = None,
    profile: Any = None,
) -> EngineSession:
    """Resolve the policy once and open the engine's session.

    `profile`: a deployment profile (a JSON file's path, a parsed document or a `Profile`;
    `routectl.engine.profile`) the selection must meet: `EngineSession.verify_profile()`
    refuses the start-up with one error naming every mismatch.

    `kernel_config`: a KernelConfig, a mapping, JSON text, `@file` or None (the engine's
    `--kernel-config` value). `environ`: the variables to resolve against; None reads the
    process environment (a copy: nothing is written back); a mapping of str to str (anything
    else is an InputError naming the key)."""
    env: Mapping[str, str] = dict(os.environ) if environ is None else checked_environ(environ)
    workload = project.engine_from(workload, env)
    required = None
    if profile is not None:
        from routectl.engine.profile import load_profile

        required = load_profile(profile)
    policy = _resolve(project, kernel_config, env, hardware, workload)
    log.info(
        "policy %s resolved for capability %d",
        policy.compute_hash(project.hashed_sections(hardware.capability, workload, policy))[:12],
        hardware.capability,
    )
    return EngineSession(project, policy, hardware, workload, required)


__all__ = ["LOGGER_NAME", "EngineLayer", "EngineSession", "NotDispatchedError", "start"]
