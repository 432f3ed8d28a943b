"""Parity: observation records of real runs joined with the retained snapshot rows.

Each record (`routectl.replay.observed`) is matched to the one row it describes: the
category it declares (every category when it declares none), the row id when it declares one,
and otherwise by its header. A row matches when its workload, capability, native build (the
ops its namespace lacks, ABI revisions) and model scope equal the record's and the hash of the
policy resolved from the row's own overlay (rows do not store it) equals the record's; a
record that matches no row is an InputError naming the closest rows and how each differs.
Records of one row (one per rank) are merged, their counts summed.

Then every observed (layer, M) is joined with the row's prediction for that M (its `dispatch`
calls whose plan carries that `m`; its `prepare` calls for the calls made while the layer was
loaded, M None), each call as (op, plan):
- agreed: predicted and observed;
- disagreed: observed but not predicted, while a predicted call of that (layer, M) was not
  observed: the two are paired (the same op first), predicted against observed;
- unobserved: predicted for an M that was observed, never observed (fails only when all
  predictions are required);
- unpredicted: observed, with nothing predicted left to pair it with.
Disagreed and unpredicted calls fail the check (docs/observed-routes.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from routectl.errors import InputError
from routectl.io.jsonread import shorten
from routectl.project import Project
from routectl.replay.harness import FULL_BUILD_ABI_REVISION, PolicyMemo
from routectl.replay.observed import ParsedRecord
from routectl.review.patterns import compile_glob
from routectl.rows import RowSpec

Plan = tuple[tuple[str, Any], ...]
Call = tuple[str, Plan]  # (op, sorted plan items)
# How many closest rows a record that matches none names.
CLOSEST = 3


def _call(item: Mapping[str, Any]) -> Call:
    return (item["op"], tuple(sorted(item["plan"].items())))


# --- finding the row --------------------------------------------------------------------------


@dataclass(frozen=True)
class RowFacts:
    """What a record's header is compared with, for one row."""

    category: str
    spec: RowSpec
    workload: Mapping[str, Any]
    missing: frozenset[str]
    abi: Mapping[str, int | None]


class RowIndex:
    """The rows of the project's categories, their facts computed once, their policy hashes
    on first use (a hash is a resolution)."""

    def __init__(self, project: Project) -> None:
        self._project = project
        self._memo = PolicyMemo(project)
        self._hashes: dict[tuple[str, str], str] = {}
        self._facts: dict[str, list[RowFacts]] = {}

    def facts(self, category: str) -> list[RowFacts]:
        if category not in self._facts:
            getters = [op for op, spec in self._project.catalogue.ops.items() if spec.getter]
            rows = []
            for spec in self._project.category(category).rows():
                if spec.status is not None:
                    continue  # a cell the category does not model predicts nothing
                missing = frozenset(spec.native.remove)
                abi = dict(spec.native.abi)
                rows.append(
                    RowFacts(
                        category,
                        spec,
                        spec.engine.to_json(),
                        missing,
                        {
                            g: abi.get(g, FULL_BUILD_ABI_REVISION)
                            for g in getters
                            if g not in missing
                        },
                    )
                )
            self._facts[category] = rows
        return self._facts[category]

    def policy_hash(self, facts: RowFacts) -> str:
        key = (facts.category, facts.spec.id)
        if key not in self._hashes:
            spec = facts.spec
            policy = self._memo.resolve(spec)
            active = self._project.hashed_sections(spec.capability, spec.engine, policy)
            self._hashes[key] = policy.compute_hash(active)
        return self._hashes[key]


def _differences(index: RowIndex, record: ParsedRecord, facts: RowFacts) -> list[str]:
    """Where the row differs from the record's header (empty: it matches)."""
    header = record.header
    out = []
    model = record.target["model"]
    if model is not None and model != facts.spec.model:
        out.append(f"model {facts.spec.model}")
    workload = header["workload"]
    for key in sorted(set(workload) | set(facts.workload)):
        if workload.get(key) != facts.workload.get(key):
            out.append(f"workload.{key} {shorten(facts.workload.get(key))}")
    if header["capability"] != facts.spec.capability:
        out.append(f"capability {facts.spec.capability}")
    catalogue = index._project.catalogue.ops
    missing = frozenset(catalogue) - set(header["native"]["ops"])
    if missing != facts.missing:
        out.append(f"native ops lacking {sorted(facts.missing) or 'none'}")
    abi = {a["getter"]: a["revision"] for a in header["native"]["abi"]}
    if not missing and abi != dict(facts.abi):
        out.append("native ABI revisions")
    digest = index.policy_hash(facts)
    if digest != header["policy_hash"]:
        out.append(f"policy hash {digest[:12]}")
    return out


def find_row(index: RowIndex, record: ParsedRecord, categories: Sequence[str]) -> RowFacts:
    """The row `record` describes; InputError naming the closest rows when none matches."""
    target = record.target
    declared = target["category"]
    if declared is not None:
        if declared not in categories:
            index._project.category(declared)  # the unknown-category error, with a hint
            raise InputError(f"{record.source}: no retained snapshot of category {declared}")
        searched = [declared]
    else:
        searched = list(categories)
    candidates = [f for c in searched for f in index.facts(c)]
    if target["row"] is not None:
        candidates = [f for f in candidates if f.spec.id == target["row"]]
        if not candidates:
            raise InputError(
                f"{record.source}: declares row {shorten(target['row'])}, which "
                f"{' or '.join(searched)} does not have"
            )
    scored = []
    for facts in candidates:
        differences = _differences(index, record, facts)
        if not differences:
            return facts
        scored.append((len(differences), facts.category, facts.spec.id, differences))
    scored.sort(key=lambda s: s[:3])
    closest = "; ".join(
        f"{category}:{row_id} (differs in {', '.join(diff)})"
        for _, category, row_id, diff in scored[:CLOSEST]
    )
    rank = record.header["rank"]
    raise InputError(
        f"{record.source} (rank {rank}, policy {record.header['policy_hash'][:12]}) matches no "
        f"row of {', '.join(searched)}; closest: {closest or 'none'}"
    )


# --- the join -----------------------------------------------------------------------------


@dataclass
class Seen:
    """One observed call of a (layer, M): its calls, eager and captured in a CUDA graph."""

    eager: int = 0
    captured: int = 0


@dataclass
class RowParity:
    category: str
    row: str
    kernel: str | None
    sources: list[str]
    ranks: list[int]
    agreed: list[dict[str, Any]] = field(default_factory=list)
    disagreed: list[dict[str, Any]] = field(default_factory=list)
    unobserved: list[dict[str, Any]] = field(default_factory=list)
    unpredicted: list[dict[str, Any]] = field(default_factory=list)
    required: list[dict[str, Any]] = field(default_factory=list)

    @property
    def qualified(self) -> str:
        return f"{self.category}:{self.row}"

    def observed_ops(self) -> set[str]:
        ops = {item["op"] for item in (*self.agreed, *self.unpredicted)}
        ops.update(item["observed"]["op"] for item in self.disagreed)
        return ops

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "row": self.row,
            "kernel": self.kernel,
            "records": self.sources,
            "ranks": self.ranks,
            "agreed": self.agreed,
            "disagreed": self.disagreed,
            "unobserved": self.unobserved,
            "unpredicted": self.unpredicted,
            "required": self.required,
        }


def _observed(call: Call, layer: str, m: int | None, seen: Seen) -> dict[str, Any]:
    op, plan = call
    return {
        "layer": layer,
        "m": m,
        "op": op,
        "plan": dict(plan),
        "eager": seen.eager,
        "captured": seen.captured,
    }


def predictions(route: Mapping[str, Any]) -> tuple[list[Call], dict[int, list[Call]]]:
    """A row's predicted prepare calls and dispatch calls by M (unique, in order)."""
    prepare = list(dict.fromkeys(_call(c) for c in route.get("prepare", ())))
    by_m: dict[int, dict[Call, None]] = {}
    for c in route.get("dispatch", ()):
        m = c["plan"].get("m")
        if isinstance(m, int):
            by_m.setdefault(m, {})[_call(c)] = None
    return prepare, {m: list(calls) for m, calls in by_m.items()}


def join_row(facts: RowFacts, row: Mapping[str, Any], records: Sequence[ParsedRecord]) -> RowParity:
    """The merged observations of `records` (one row's) joined with the row's prediction."""
    route = row["route"]
    result = RowParity(
        facts.category,
        facts.spec.id,
        route.get("kernel"),
        [r.source for r in records],
        sorted(r.header["rank"] for r in records),
    )
    # (layer, m) -> call -> Seen: the records merged.
    observed: dict[tuple[str, int | None], dict[Call, Seen]] = {}
    for record in records:
        for entry in record.entries:
            calls = observed.setdefault((entry["layer"], entry["m"]), {})
            seen = calls.get(call := _call(entry))
            if seen is None:
                seen = calls[call] = Seen()
            if entry["captured"]:
                seen.captured += entry["count"]
            else:
                seen.eager += entry["count"]
    prepare, by_m = predictions(route)
    # By layer, then the load (M None) before every M, as the record orders its entries.
    ordered = sorted(observed.items(), key=lambda i: (i[0][0], -1 if i[0][1] is None else i[0][1]))
    for (layer, m), calls in ordered:
        predicted = prepare if m is None else by_m.get(m, [])
        left = [c for c in predicted if c not in calls]
        extra = []
        for call, seen in calls.items():
            if call in predicted:
                result.agreed.append(_observed(call, layer, m, seen))
            else:
                extra.append((call, seen))
        for call, seen in extra:
            if left:
                # The predicted call of the same op first, else the first one left.
                pair = next((p for p in left if p[0] == call[0]), left[0])
                left.remove(pair)
                result.disagreed.append(
                    {
                        "layer": layer,
                        "m": m,
                        "predicted": {"op": pair[0], "plan": dict(pair[1])},
                        "observed": _observed(call, layer, m, seen),
                    }
                )
            else:
                result.unpredicted.append(_observed(call, layer, m, seen))
        for op, plan in left:
            result.unobserved.append({"layer": layer, "m": m, "op": op, "plan": dict(plan)})
    return result


# --- required routes ----------------------------------------------------------------------


@dataclass(frozen=True)
class RequiredRoute:
    """`--require-route PATTERN=KERNEL`: the rows PATTERN matches (a glob of row ids,
    optionally qualified `category:`, as in expected-changes files) ran KERNEL: a kernel
    class the row selected with every observed call agreeing, or a stage or an op of the
    catalogue that was observed."""

    text: str
    category: str | None
    pattern: str
    kernel: str


def parse_required(text: str, project: Project) -> RequiredRoute:
    pattern, eq, kernel = text.rpartition("=")
    if not eq or not pattern or not kernel:
        raise InputError(f"--require-route {shorten(text)}: expected PATTERN=KERNEL")
    names = {c.name for c in project.categories}
    prefix, colon, rest = pattern.partition(":")
    category = prefix if colon and prefix in names else None
    bare = rest if category is not None else pattern
    compile_glob(bare)
    catalogue = project.catalogue
    known = set(catalogue.kernels) | set(catalogue.ops)
    if kernel not in known and not any(k.partition(".")[2] == kernel for k in catalogue.kernels):
        raise InputError(f"--require-route {shorten(text)}: unknown kernel, stage or op {kernel!r}")
    return RequiredRoute(text, category, bare, kernel)


def _ran(project: Project, parity: RowParity, kernel: str) -> tuple[bool, str]:
    ops = parity.observed_ops()
    catalogue = project.catalogue
    if kernel in catalogue.ops:
        return kernel in ops, f"op {kernel} {'observed' if kernel in ops else 'never observed'}"
    if parity.kernel == kernel:
        clean = not parity.disagreed and not parity.unpredicted and bool(parity.agreed)
        agreed = "every observed call agreed" if clean else "not every observed call agreed"
        return clean, f"kernel {kernel} selected, {agreed}"
    stage = next(
        (k for k in catalogue.kernels if "." in k and kernel in (k, k.partition(".")[2])), None
    )
    if stage is not None and catalogue.kernels[stage]:
        needed = catalogue.kernels[stage]
        ok = all(op in ops for op in needed)
        return ok, f"stage {stage}: {', '.join(needed)} {'observed' if ok else 'not observed'}"
    return False, f"ran {parity.kernel or 'no kernel'}, not {kernel}"


def apply_required(
    project: Project, results: Sequence[RowParity], required: Iterable[RequiredRoute]
) -> list[str]:
    """Record each requirement's verdict on the rows it names; the failures' lines."""
    failures = []
    for requirement in required:
        match = compile_glob(requirement.pattern)
        named = [r for r in results if match(r.row) and requirement.category in (None, r.category)]
        if not named:
            failures.append(f"--require-route {requirement.text}: no observed row matches")
        for parity in named:
            ok, why = _ran(project, parity, requirement.kernel)
            parity.required.append({"route": requirement.text, "ok": ok, "reason": why})
            if not ok:
                failures.append(f"{parity.qualified}: --require-route {requirement.text}: {why}")
    return failures


# --- the whole check ----------------------------------------------------------------------


@dataclass
class ParityResult:
    rows: list[RowParity]
    failures: list[str]
    require_all: bool

    @property
    def ok(self) -> bool:
        return not self.failures and all(
            not r.disagreed and not r.unpredicted and not (self.require_all and r.unobserved)
            for r in self.rows
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "require_all": self.require_all,
            "rows": [r.to_json() for r in self.rows],
            "failures": self.failures,
        }


def check_parity(
    project: Project,
    records: Sequence[ParsedRecord],
    snapshot_rows: Mapping[str, Mapping[str, Mapping[str, Any]]],
    *,
    require_all: bool = False,
    required: Sequence[RequiredRoute] = (),
) -> ParityResult:
    """Join `records` with `snapshot_rows` (category -> row id -> retained row)."""
    index = RowIndex(project)
    categories = sorted(snapshot_rows)
    grouped: dict[tuple[str, str], tuple[RowFacts, list[ParsedRecord]]] = {}
    for record in records:
        facts = find_row(index, record, categories)
        key = (facts.category, facts.spec.id)
        grouped.setdefault(key, (facts, []))[1].append(record)
    rows = []
    for (category, row_id), (facts, group) in sorted(grouped.items()):
        retained = snapshot_rows[category].get(row_id)
        if retained is None:
            raise InputError(
                f"{category}:{row_id} is not in the retained snapshot: run routectl check --update"
            )
        rows.append(join_row(facts, retained, group))
    failures = apply_required(project, rows, required)
    return ParityResult(rows, failures, require_all)


# --- rendering ------------------------------------------------------------------------------

# Items listed per outcome class and row in text and markdown (the JSON lists every one).
SHOWN = 20


def _m(m: int | None) -> str:
    return "load" if m is None else f"M {m}"


def _plan(plan: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(plan.items()) if k != "m")


def _calls(item: Mapping[str, Any]) -> str:
    captured = item.get("captured", 0)
    graph = f", {captured} captured in a CUDA graph" if captured else ""
    calls = item.get("eager", 0) + captured
    return f"{calls} call{'' if calls == 1 else 's'}{graph}"


def problem_lines(result: ParityResult) -> list[str]:
    """Every failing item, one line each."""
    out = []
    for row in result.rows:
        for d in row.disagreed:
            p, o = d["predicted"], d["observed"]
            out.append(
                f"{row.qualified}: {d['layer']} {_m(d['m'])}: predicted {p['op']} "
                f"({_plan(p['plan'])}), observed {o['op']} ({_plan(o['plan'])})"
            )
        for u in row.unpredicted:
            out.append(
                f"{row.qualified}: {u['layer']} {_m(u['m'])}: observed {u['op']} "
                f"({_plan(u['plan'])}), not predicted"
            )
        if result.require_all:
            for u in row.unobserved:
                out.append(
                    f"{row.qualified}: {u['layer']} {_m(u['m'])}: predicted {u['op']} "
                    f"({_plan(u['plan'])}), never observed"
                )
    out.extend(result.failures)
    return out


def summary_line(result: ParityResult) -> str:
    counts = {
        name: sum(len(getattr(r, name)) for r in result.rows)
        for name in ("agreed", "disagreed", "unobserved", "unpredicted")
    }
    records = sum(len(r.sources) for r in result.rows)
    verdict = "parity holds" if result.ok else "parity FAILS"
    return (
        f"{verdict}: {records} record(s), {len(result.rows)} row(s); {counts['agreed']} agreed, "
        f"{counts['disagreed']} disagreed, {counts['unobserved']} predicted but unobserved, "
        f"{counts['unpredicted']} observed but unpredicted"
    )


def _listed(items: Sequence[Any], line: Any) -> list[str]:
    out = [line(i) for i in items[:SHOWN]]
    if len(items) > SHOWN:
        out.append(f"... and {len(items) - SHOWN} more (see --format json)")
    return out


def render_text(result: ParityResult) -> str:
    lines = []
    for row in result.rows:
        ranks = ", ".join(str(r) for r in row.ranks)
        lines.append(
            f"{row.qualified} (kernel {row.kernel or 'none'}; {len(row.sources)} record(s), "
            f"rank {ranks})"
        )
        for title, items, line in (
            (
                "agreed",
                row.agreed,
                lambda a: (
                    f"  {a['layer']} {_m(a['m'])}: {a['op']} ({_plan(a['plan'])}), {_calls(a)}"
                ),
            ),
            (
                "disagreed",
                row.disagreed,
                lambda d: (
                    f"  {d['layer']} {_m(d['m'])}: predicted {d['predicted']['op']} "
                    f"({_plan(d['predicted']['plan'])}), observed {d['observed']['op']} "
                    f"({_plan(d['observed']['plan'])}), {_calls(d['observed'])}"
                ),
            ),
            (
                "predicted but unobserved",
                row.unobserved,
                lambda u: f"  {u['layer']} {_m(u['m'])}: {u['op']} ({_plan(u['plan'])})",
            ),
            (
                "observed but unpredicted",
                row.unpredicted,
                lambda u: (
                    f"  {u['layer']} {_m(u['m'])}: {u['op']} ({_plan(u['plan'])}), {_calls(u)}"
                ),
            ),
        ):
            if items:
                lines.append(f" {title}: {len(items)}")
                lines.extend(_listed(items, line))
        for req in row.required:
            lines.append(
                f" require {req['route']}: {'ok' if req['ok'] else 'FAILS'} ({req['reason']})"
            )
    lines.extend(f"error: {f}" for f in result.failures)
    lines.append(summary_line(result))
    return "\n".join(lines) + "\n"


def render_markdown(result: ParityResult) -> str:
    lines = ["## routectl parity", "", summary_line(result), ""]
    if result.rows:
        lines += [
            "| row | kernel | records | agreed | disagreed | unobserved | unpredicted |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in result.rows:
            lines.append(
                f"| `{r.qualified}` | {r.kernel or 'none'} | {len(r.sources)} | {len(r.agreed)} "
                f"| {len(r.disagreed)} | {len(r.unobserved)} | {len(r.unpredicted)} |"
            )
        lines.append("")
    problems = problem_lines(result)
    if problems:
        lines += ["### Problems", ""]
        lines.extend(_listed(problems, lambda p: f"- {p}"))
        lines.append("")
    return "\n".join(lines)


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def render_github(result: ParityResult) -> str:
    """One `::error` line per problem (at most SHOWN), then a `::notice` summary."""
    title = "routectl parity"
    problems = problem_lines(result)
    lines = [f"::error title={title}::{_escape(p)}" for p in problems[:SHOWN]]
    more = f"; {len(problems) - SHOWN} more not shown" if len(problems) > SHOWN else ""
    lines.append(f"::notice title={title}::{_escape(summary_line(result) + more)}")
    return "\n".join(lines) + "\n"
