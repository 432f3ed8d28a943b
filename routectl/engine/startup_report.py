"""The startup report: for every layer an engine loaded, the chosen kernel (or stages) and the
native op(s) of each token-count class, every rejected candidate's reason, the fallbacks, the
prepared layout and resident bytes, and the policy values with their sources.

Per-class ops come from a replay, never from the real run: the same layer is loaded again on
meta tensors through a `RecordingNamespace` that mirrors the engine's namespace (the catalogue
ops it has, their ABI revisions) and dispatched at representative token counts of each class
within the token budget. That is the code path route snapshots take, so the report and the
snapshots describe one behaviour, and the engine's tensors and namespace are never touched.
The replay's decision and resident bytes are compared with the real load's
(`replay_matches_load`).

The JSON document validates against `routectl/schemas/startup-report.schema.json`; the text
is a rendering of that document.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from routectl.errors import InputError, SelectionError
from routectl.namespaces.native_ns import NativeNamespace
from routectl.policy.loaded import PreparedLayer
from routectl.policy.loaders import LayerLoader
from routectl.policy.resolve import ResolvedPolicy
from routectl.policy.text import ignored_text, value_lines
from routectl.project import Catalogue, Project
from routectl.reasons import Verdict, reason_text, refusal_text
from routectl.workload import EngineConfig, Hardware

if TYPE_CHECKING:
    from routectl.replay.harness import RecordingNamespace

REPORT_FORMAT = 1
SCHEMA_NAME = "startup-report"


@dataclass(frozen=True)
class TokenClass:
    """Token counts low..high (None: unbounded). `representatives` are the counts replayed
    (both ends of a bounded class; 128 and 4096, the usual prefill chunk, for the open one,
    which also gets the token budget); counts above the budget are skipped."""

    name: str
    low: int
    high: int | None
    representatives: tuple[int, ...]

    def samples(self, budget: int) -> list[int]:
        counts = set(self.representatives)
        if self.high is None:
            counts.add(budget)
        return sorted(
            m for m in counts if self.low <= m <= budget and (self.high is None or m <= self.high)
        )


TOKEN_CLASSES: tuple[TokenClass, ...] = (
    TokenClass("0", 0, 0, (0,)),
    TokenClass("1", 1, 1, (1,)),
    TokenClass("2-8", 2, 8, (2, 8)),
    TokenClass("9-127", 9, 127, (9, 127)),
    TokenClass(">=128", 128, None, (128, 4096)),
)


class LoadedLayer(Protocol):
    """What the report reads of one engine layer (`routectl.engine.startup.EngineLayer` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def family(self) -> str: ...

    @property
    def spec(self) -> Any: ...

    @property
    def prepared(self) -> PreparedLayer: ...

    @property
    def namespace(self) -> NativeNamespace: ...

    @property
    def workspace(self) -> int | None: ...


# --- replay ---------------------------------------------------------------------------------


def mirror_namespace(catalogue: Catalogue, ns: NativeNamespace) -> RecordingNamespace:
    """A recording double with exactly the catalogue ops `ns` has and its ABI revisions."""
    from routectl.replay.harness import RecordingNamespace

    missing = [op for op in catalogue.ops if not ns.has_op(op)]
    abi: dict[str, int] = {}
    for op, spec in catalogue.ops.items():
        if spec.getter and ns.has_op(op):
            revision = ns.abi_revision(op)
            if revision is not None:
                abi[op] = revision
    return RecordingNamespace(catalogue, remove=missing, abi=abi, name=f"replay of {ns.name}")


def _verdict(v: Verdict) -> dict[str, Any]:
    return {**v.to_json(), "stage": v.stage}


def _sample(
    loader: LayerLoader, layer: LoadedLayer, replayed: PreparedLayer, ns: RecordingNamespace, m: int
) -> dict[str, Any]:
    assert replayed.apply is not None
    inputs = loader.call_inputs(layer.spec, replayed, m)
    mark = ns.mark()
    error = None
    try:
        replayed.apply(*inputs)
    except SelectionError as exc:
        error = {"code": exc.code, "message": exc.message}
    # As in snapshots: every dispatch plan carries the token count of its apply call.
    ops = [{"op": c["op"], "plan": {"m": m, **c["plan"]}} for c in ns.since(mark)]
    last = loader.last_call(replayed) if loader.last_call is not None and error is None else None
    return {
        "m": m,
        "stages": list(last["stages"]) if last else None,
        "rejected": [dict(v) for v in last["rejected"]] if last else [],
        "ops": ops,
        "error": error,
    }


# Replayed calls kept for one report: (family, call shape, namespace, workspace) -> the
# (decision, bytes, classes) of each layer replayed with that key.
CallMemo = dict[tuple[Any, ...], list[tuple[Any, Any, list[dict[str, Any]]]]]


def replay_layer(
    project: Project,
    policy: ResolvedPolicy,
    hardware: Hardware,
    workload: EngineConfig,
    layer: LoadedLayer,
    memo: CallMemo | None = None,
) -> dict[str, Any]:
    """Prepare calls, per-class samples and whether the replay agrees with the real load.
    With `memo`, a layer whose family gives a call shape, equal to an earlier layer's, with
    an equal replayed decision and bytes, shares that layer's samples instead of replaying
    its calls (its load is still replayed, and compared with its own)."""
    loader = project.loaders[layer.family]
    ns = mirror_namespace(project.catalogue, layer.namespace)
    mark = ns.mark()
    replayed = loader.load(
        layer.spec,
        policy,
        hardware,
        workload,
        ns,
        **loader.load_kwargs(layer.family, loader.meta_tensors(layer.spec), layer.workspace),
    )
    prepare = ns.since(mark)
    agrees = (
        replayed.decision == layer.prepared.decision
        and replayed.bytes_json() == layer.prepared.bytes_json()
    )
    shape = loader.call_shape(layer.spec, replayed) if loader.call_shape is not None else None
    key = (layer.family, shape, id(layer.namespace), layer.workspace)
    earlier = memo.setdefault(key, []) if memo is not None and shape is not None else None
    for decision, size, classes in earlier or ():
        if decision == replayed.decision and size == replayed.bytes_json():
            return {"prepare": prepare, "classes": copy.deepcopy(classes), **_agrees(agrees)}
    classes = _replay_classes(loader, layer, replayed, ns, workload)
    if earlier is not None and not _any_error(classes):  # an error may name the layer
        earlier.append((replayed.decision, replayed.bytes_json(), copy.deepcopy(classes)))
    return {"prepare": prepare, "classes": classes, **_agrees(agrees)}


def _agrees(agrees: bool) -> dict[str, Any]:
    return {"replay_matches_load": agrees}


def _any_error(classes: list[dict[str, Any]]) -> bool:
    return any(sample["error"] for c in classes for sample in c["samples"])


def _replay_classes(
    loader: LayerLoader,
    layer: LoadedLayer,
    replayed: PreparedLayer,
    ns: RecordingNamespace,
    workload: EngineConfig,
) -> list[dict[str, Any]]:
    """Each token class's samples: the calls of `replayed` at its representative counts."""
    classes = []
    budget = workload.max_num_batched_tokens
    for token_class in TOKEN_CLASSES:
        counts = token_class.samples(budget)
        skipped = None
        if replayed.apply is None:
            counts = []
            skipped = (
                f"{replayed.decision.kernel or 'no kernel'}: routectl dispatches no "
                "call of this layer"
            )
        elif not counts:
            skipped = f"above the token budget (max_num_batched_tokens = {budget})"
        classes.append(
            {
                "name": token_class.name,
                "skipped": skipped,
                "samples": [_sample(loader, layer, replayed, ns, m) for m in counts],
            }
        )
    return classes


# --- the document ---------------------------------------------------------------------------


def _namespace_json(catalogue: Catalogue, ns: NativeNamespace) -> dict[str, Any]:
    abi = []
    for op, spec in sorted(catalogue.ops.items()):
        if spec.getter and ns.has_op(op):
            abi.append({"getter": op, "revision": ns.abi_revision(op)})
    return {
        "name": ns.name,
        "missing": sorted(op for op in catalogue.ops if not ns.has_op(op)),
        "abi": abi,
    }


def layer_json(
    project: Project,
    policy: ResolvedPolicy,
    hardware: Hardware,
    workload: EngineConfig,
    layer: LoadedLayer,
    memo: CallMemo | None = None,
) -> dict[str, Any]:
    decision = layer.prepared.decision
    replay = replay_layer(project, policy, hardware, workload, layer, memo)
    return {
        "name": layer.name,
        "family": layer.family,
        "kernel": decision.kernel,
        "status": (
            {"code": decision.status[0], "message": decision.status[1]} if decision.status else None
        ),
        "capability": decision.capability,
        "candidates": [_verdict(v) for v in decision.selection.verdicts],
        "fallbacks": [f.to_json() for f in decision.fallbacks],
        "flags": dict(sorted(decision.flags.items())),
        "prepared_layout": decision.layout,
        "bytes": layer.prepared.bytes_json(),
        "namespace": _namespace_json(project.catalogue, layer.namespace),
        **replay,
    }


def policy_json(
    project: Project, policy: ResolvedPolicy, hardware: Hardware, workload: EngineConfig
) -> dict[str, Any]:
    data = policy.to_json()
    return {
        "hash": policy.compute_hash(project.hashed_sections(hardware.capability, workload, policy)),
        "values": [
            {"key": key, "value": value, "source": data["sources"][key]}
            for key, value in sorted(data["values"].items())
        ],
        "warnings": list(data["warnings"]),
        "ignored": [{"variable": variable, "key": key} for variable, key in policy.ignored],
    }


def build_report(
    project: Project,
    policy: ResolvedPolicy,
    hardware: Hardware,
    workload: EngineConfig,
    layers: Sequence[LoadedLayer],
    *,
    profile: Mapping[str, Any] | None = None,
) -> StartupReport:
    """`profile`: the deployment profile's requirements against the selection (the
    `profile` entry of the document; None without a profile)."""
    budget = workload.max_num_batched_tokens
    memo: CallMemo = {}  # one report: the layers share the calls of equal shapes
    document = {
        "schema_version": REPORT_FORMAT,
        "project": project.name,
        "hardware": {"capability": hardware.capability},
        "engine": workload.to_json(),
        "policy": policy_json(project, policy, hardware, workload),
        "token_classes": [
            {"name": c.name, "low": c.low, "high": c.high, "samples": c.samples(budget)}
            for c in TOKEN_CLASSES
        ],
        "layers": [
            layer_json(project, policy, hardware, workload, layer, memo) for layer in layers
        ],
        "profile": None if profile is None else dict(profile),
    }
    return StartupReport(document)


def validate_report(document: Mapping[str, Any], project: Project | None = None) -> None:
    """Raise InputError unless `document` validates against the startup-report schema."""
    from routectl.io.schemas import load_schema

    schema = load_schema(SCHEMA_NAME)
    try:
        if schema.fast.is_valid(document):
            return
    except ValueError as exc:  # a value JSON cannot hold
        raise InputError(f"invalid startup report: {exc}") from None
    # jsonschema-rs decides; jsonschema phrases the error when it sees one too.
    errors = sorted(schema.validator.iter_errors(document), key=lambda e: list(e.path))
    path, message = (
        (errors[0].path, errors[0].message)
        if errors
        else next((e.instance_path, e.message) for e in schema.fast.iter_errors(document))
    )
    where = "/".join(str(p) for p in path) or "(root)"
    raise InputError(f"invalid startup report at {where}: {message}")


# --- text -----------------------------------------------------------------------------------


def _value(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _plan(plan: Mapping[str, Any]) -> str:
    return "{" + " ".join(f"{k}={_text(v)}" for k, v in sorted(plan.items())) + "}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else _value(value)


def _call(call: Mapping[str, Any]) -> str:
    plan = dict(call["plan"])
    experts = plan.pop("experts", None)
    times = f" x{experts}" if experts is not None else ""
    return f"{call['op']}{times} {_plan(plan)}"


def _bytes(size: Mapping[str, Any]) -> str:
    parts = ", ".join(f"{name} {count:,}" for name, count in size.get("tensors", {}).items())
    text = f"{size.get('total', 0):,} B"
    return f"{text} ({parts})" if parts else text


def _layer_text(layer: Mapping[str, Any]) -> list[str]:
    lines = [
        f"layer {layer['name']} [{layer['family']}]: "
        f"{layer['kernel'] or 'not served by this family'}"
    ]
    if layer["status"]:
        status = layer["status"]
        lines.append(f"  status {reason_text(status['code'], status['message'])}")
    for v in layer["candidates"]:
        if not v["ok"]:
            refusal = refusal_text(v["name"], v["code"], v["message"])
            lines.append(f"  rejected {refusal} (stage {v['stage']})")
    for f in layer["fallbacks"]:
        lines.append(
            f"  fallback {f['field']}: {_value(f['requested'])} -> "
            f"{_value(f['effective'])}: {f['reason']}"
        )
    if not layer["fallbacks"]:
        lines.append("  fallbacks: none")
    lines.append(
        f"  prepared layout {layer['prepared_layout'] or 'none'}; resident {_bytes(layer['bytes'])}"
    )
    ns = layer["namespace"]
    missing = ", ".join(ns["missing"]) or "none"
    lines.append(f"  namespace {ns['name']}; catalogue ops missing: {missing}")
    for call in layer["prepare"]:
        lines.append(f"  prepare {_call(call)}")
    for token_class in layer["classes"]:
        head = f"  M {token_class['name']}"
        if token_class["skipped"]:
            lines.append(f"{head}: skipped ({token_class['skipped']})")
        for sample in token_class["samples"]:
            stages = " + ".join(sample["stages"]) if sample["stages"] else ""
            ops = ", ".join(_call(c) for c in sample["ops"]) or "no native call"
            route = f"{stages} -> {ops}" if stages else ops
            if sample["error"]:
                route = f"error {reason_text(sample['error']['code'], sample['error']['message'])}"
            lines.append(f"{head} at {sample['m']}: {route}")
            for v in sample["rejected"]:
                lines.append(f"      rejected {refusal_text(v['name'], v['code'], v['message'])}")
    lines.append(f"  replay matches load: {'yes' if layer['replay_matches_load'] else 'NO'}")
    return lines


def render_text(document: Mapping[str, Any]) -> str:
    engine = " ".join(f"{k}={_text(v)}" for k, v in document["engine"].items())
    policy = document["policy"]
    lines = [
        f"routectl startup report (project {document['project']}, "
        f"capability {document['hardware']['capability']})",
        f"engine: {engine}",
        f"policy {policy['hash']}:",
    ]
    lines.extend(
        value_lines({item["key"]: item for item in policy["values"]}),
    )
    for message in policy["warnings"]:
        lines.append(f"  warning: {message}")
    for item in policy["ignored"]:
        lines.append(f"  {ignored_text(item['variable'], item['key'])}")
    classes = "; ".join(
        f"{c['name']} at {', '.join(map(str, c['samples'])) or 'none'}"
        for c in document["token_classes"]
    )
    lines.append(f"token classes (replayed counts): {classes}")
    for layer in document["layers"]:
        lines.extend(_layer_text(layer))
    profile = document.get("profile")
    if profile is not None:
        verdict = "met" if not profile["mismatches"] else "NOT met"
        lines.append(f"deployment profile {profile['source']}: {verdict}")
        for r in profile["requirements"]:
            mark = "ok" if r["ok"] else "MISMATCH"
            lines.append(
                f"  {r['layer']} ({r['pattern']}): required {r['required']}, "
                f"selected {r['selected']}: {mark}"
            )
        lines.extend(
            f"  mismatch: {m}"
            for m in profile["mismatches"]
            if m.endswith("matches no loaded layer")
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class StartupReport:
    document: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """A copy of the document. It holds JSON values (`validate_report`), which orjson's
        round trip copies in a third of deepcopy's time; the copy read back equal proves it
        held nothing else (a tuple, NaN), and deepcopy copies any document that is not."""
        import orjson

        try:
            copied = orjson.loads(orjson.dumps(self.document))
        except orjson.JSONEncodeError:  # an integer beyond 64 bits, a non-string key
            return copy.deepcopy(self.document)
        return copied if copied == self.document else copy.deepcopy(self.document)

    def to_text(self) -> str:
        return render_text(self.document)

    @property
    def layers(self) -> list[dict[str, Any]]:
        return self.document["layers"]

    def layer(self, name: str) -> dict[str, Any]:
        for layer in self.document["layers"]:
            if layer["name"] == name:
                return layer
        raise KeyError(f"no layer {name!r} in the startup report")
