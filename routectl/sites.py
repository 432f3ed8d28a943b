"""Decision sites: the places where a family decides something, declared once, and the sites a
replayed route reaches (`routectl coverage`).

A site is one outcome a row can show: a candidate refused with one reason code, a candidate
chosen or rejected, a fallback field taken, a variable left at its default or set, a
qualification rule passing or failing, a native op dispatched. A category declares the sites
its families can produce (`Category.decision_sites`); routectl replays the rows and reports
the declared sites no row reaches. A site no row can reach is declared so, with a written
reason: `unreachable` (no configuration produces it) or `recorded-only` (a resolution test
proves it because the category's row count is pinned).

Nothing here reads a family: the declarations are data the project gives; the walk over a
route knows only routectl's generic route shapes (verdicts, kernel, fallbacks, dispatch and
prepare calls) and the rule shape (`{name, ok, code}`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

# kind -> what the site is (the order reports list kinds in).
KINDS: Mapping[str, str] = {
    "reason": "a candidate refused with this reason code",
    "chosen": "a candidate chosen",
    "rejected": "a candidate rejected",
    "fallback": "a fallback field taken",
    "default": "a variable at its default",
    "set": "a variable set (by a row's variables or config)",
    "pass": "a qualification rule passing",
    "fail": "a qualification rule failing",
    "op": "a native op dispatched or prepared",
}
VARIABLE_KINDS = ("default", "set")
DECLARATION_STATES = ("unreachable", "recorded-only")


class Site(NamedTuple):
    """One decision outcome: `kind` (a KINDS key), its subject (candidate, field, variable,
    rule or op) and, for a reason site, the code."""

    kind: str
    subject: str
    code: str = ""

    @property
    def key(self) -> str:
        """The one spelling of the site in JSON and declarations: `kind:subject[:code]`."""
        return f"{self.kind}:{self.subject}:{self.code}" if self.code else self.text_key

    @property
    def text_key(self) -> str:
        return f"{self.kind}:{self.subject}"

    def text(self) -> str:
        """`reason TurboMindAwqLinearKernel missing_native_ops`, `chosen X`, `op Y`."""
        return (
            f"{self.kind} {self.subject} {self.code}"
            if self.code
            else f"{self.kind} {self.subject}"
        )

    @classmethod
    def parse(cls, key: str) -> Site:
        kind, _, rest = key.partition(":")
        subject, _, code = rest.partition(":")
        if kind not in KINDS or not subject or (kind == "reason") != bool(code):
            raise ValueError(f"not a decision site: {key!r}")
        return cls(kind, subject, code)


class Declaration(NamedTuple):
    """Why a declared site needs no row: `state` is `unreachable` or `recorded-only`;
    `reason` says why in words; `test` (recorded-only) names the test that proves the site,
    as `tests/file.py::function`."""

    state: str
    reason: str
    test: str = ""


def unreachable(reason: str) -> Declaration:
    return Declaration("unreachable", reason)


def recorded_only(reason: str, test: str) -> Declaration:
    return Declaration("recorded-only", reason, test)


@dataclass(frozen=True)
class DecisionSites:
    """What one category declares: every site its rows should reach, and the sites among them
    no row needs to (each with its declaration)."""

    sites: tuple[Site, ...]
    declarations: Mapping[Site, Declaration] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Checked once, where the project builds it: a declaration that names no declared
        # site, has no reason, or has an unknown state is the project's own bug.
        declared = set(self.sites)
        for site, declaration in self.declarations.items():
            if site not in declared:
                raise ValueError(f"declaration for {site.key}, which is not a declared site")
            if declaration.state not in DECLARATION_STATES:
                raise ValueError(f"{site.key}: unknown declaration {declaration.state!r}")
            if not declaration.reason.strip():
                raise ValueError(f"{site.key}: a {declaration.state} declaration needs a reason")
            if declaration.state == "recorded-only" and "::" not in declaration.test:
                raise ValueError(f"{site.key}: a recorded-only declaration names its test")


def candidate_sites(name: str, codes: Iterable[str]) -> list[Site]:
    """A candidate's sites: chosen, rejected, and one reason site per code it can return."""
    return [
        Site("chosen", name),
        Site("rejected", name),
        *reason_sites(name, codes),
    ]


def reason_sites(subject: str, codes: Iterable[str]) -> list[Site]:
    """One reason site per code a candidate or rule can return."""
    return [Site("reason", subject, c) for c in dict.fromkeys(codes)]


def variable_sites(keys: Iterable[str]) -> list[Site]:
    """Each variable (field key) at its default and set."""
    return [Site(kind, key) for key in keys for kind in VARIABLE_KINDS]


def rule_sites(names: Iterable[str]) -> list[Site]:
    """Each qualification rule passing and failing."""
    return [Site(kind, name) for name in names for kind in ("pass", "fail")]


def op_sites(ops: Iterable[str]) -> list[Site]:
    return [Site("op", op) for op in dict.fromkeys(ops)]


def fallback_sites(fields: Iterable[str]) -> list[Site]:
    return [Site("fallback", f) for f in dict.fromkeys(fields)]


# --- what a route reaches --------------------------------------------------------------------

_CALL_LISTS = ("dispatch", "prepare")


def _verdict_sites(node: Mapping[str, Any], verdicts: list[Any]) -> Iterator[Site]:
    chosen = node.get("kernel")
    if isinstance(chosen, str):
        yield Site("chosen", chosen)
    for v in verdicts:
        if not isinstance(v, Mapping) or not isinstance(v.get("name"), str):
            continue
        if v.get("ok") is False:
            yield Site("rejected", v["name"])
            if isinstance(v.get("code"), str):
                yield Site("reason", v["name"], v["code"])


def route_sites(route: Any) -> set[Site]:
    """Every site a route (or any part of it) records in routectl's generic shapes: a
    `verdicts` list (each refusal a rejected candidate and a reason site; the node's `kernel`
    chosen), a `fallbacks` list (each `field` taken), `dispatch` and `prepare` calls (each
    `op`). Nested routes (stages, layers) are walked too."""
    out: set[Site] = set()
    stack: list[Any] = [route]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, Mapping):
            continue
        for key, value in node.items():
            if key == "verdicts" and isinstance(value, list):
                out.update(_verdict_sites(node, value))
            elif key == "fallbacks" and isinstance(value, list):
                out.update(
                    Site("fallback", f["field"])
                    for f in value
                    if isinstance(f, Mapping) and isinstance(f.get("field"), str)
                )
            elif key in _CALL_LISTS and isinstance(value, list):
                out.update(
                    Site("op", c["op"])
                    for c in value
                    if isinstance(c, Mapping) and isinstance(c.get("op"), str)
                )
            if isinstance(value, (list, Mapping)):
                stack.append(value)
    return out


def rule_outcomes(rules: Iterable[tuple[str, bool]]) -> set[Site]:
    """(rule name, ok) pairs as pass/fail sites."""
    return {Site("pass" if ok else "fail", name) for name, ok in rules}


__all__ = [
    "DECLARATION_STATES",
    "KINDS",
    "VARIABLE_KINDS",
    "DecisionSites",
    "Declaration",
    "Site",
    "candidate_sites",
    "fallback_sites",
    "op_sites",
    "reason_sites",
    "recorded_only",
    "route_sites",
    "rule_outcomes",
    "rule_sites",
    "unreachable",
    "variable_sites",
]
