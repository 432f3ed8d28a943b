"""A resolved policy as people and programs read it: the one JSON shape (`policy_document`,
for `config` and `explain`), the one text form of a resolved value (`value_line`) and of an
ignored variable (`ignored_text`), and the tables and document of `routectl config`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from routectl.policy.resolve import ResolvedPolicy
from routectl.reasons import Reason, reason_text
from routectl.workload import EngineConfig

# (name, ok, reason) of one qualification rule, as the project answers it.
Qualification = tuple[str, bool, Reason | None]


def value_line(name: str, value: Any, source: str, width: int = 0) -> str:
    """A resolved value: `name = <JSON value>  (source)`, the name padded to `width`."""
    return f"{name:<{width}} = {json.dumps(value, sort_keys=True)}  ({source})"


def value_lines(values: dict[str, dict[str, Any]], indent: str = "  ") -> list[str]:
    """`value_line` for each `{name: {"value", "source"}}`, names aligned."""
    width = max((len(name) for name in values), default=0)
    return [
        indent + value_line(name, item["value"], item["source"], width)
        for name, item in values.items()
    ]


def ignored_text(variable: str, key: str) -> str:
    """A variable an explicit field overrode."""
    return f"ignored {variable}: {key} is explicit"


def shows_key(key: str, sections: Sequence[str] | None) -> bool:
    """Whether a policy key is among `sections` (section names or `section.field` entries;
    None: every key). Engine-wide keys (no section) matter to every family."""
    section, dot, _ = key.partition(".")
    return sections is None or not dot or section in sections or key in sections


def policy_document(
    policy: ResolvedPolicy, sections: Sequence[str] | None = None
) -> dict[str, Any]:
    """The one JSON shape of a resolved policy (`config` and `explain`): flat dotted keys, as
    `ResolvedPolicy.value(key)` takes them, each with its value and source."""
    data = policy.to_json()
    return {
        "values": {
            k: {"value": v, "source": data["sources"][k]}
            for k, v in data["values"].items()
            if shows_key(k, sections)
        },
        "sections": None if sections is None else list(sections),
        "warnings": list(policy.warnings),
        "ignored": [{"variable": v, "field": k} for v, k in policy.ignored],
    }


def policy_table(
    policy: ResolvedPolicy, sections: Sequence[str] | None = None
) -> dict[str, dict[str, dict[str, Any]]]:
    """{section (or "engine"): {field: {"value", "source"}}}: the text display's grouping."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key, item in policy_document(policy, sections)["values"].items():
        section, dot, name = key.partition(".")
        if not dot:
            section, name = "engine", key
        out.setdefault(section, {})[name] = item
    return out


def render_policy_text(policy: ResolvedPolicy, sections: Sequence[str] | None = None) -> list[str]:
    """Each section's values as a `[section]` table, then the ignored variables."""
    lines: list[str] = []
    for section, values in policy_table(policy, sections).items():
        lines.append(f"[{section}]")
        lines.extend(value_lines(values))
    lines.extend(f"{ignored_text(var, key)}" for var, key in policy.ignored)
    return lines


def qualification_text(name: str, ok: bool, reason: Reason | None) -> str:
    """A qualification rule's verdict: `name: yes`, or `name: no [code] message`."""
    if ok or reason is None:
        return f"{name}: {'yes' if ok else 'no'}"
    return f"{name}: no {reason_text(reason.code, reason.message)}"


@dataclass(frozen=True)
class PolicyView:
    """What `routectl config` shows: a resolved policy for one capability and workload, the
    model-qualification verdicts and the hash over the active sections."""

    capability: int
    workload: EngineConfig
    policy: ResolvedPolicy
    verdicts: tuple[Qualification, ...]
    active: tuple[str, ...]
    digest: str

    def document(self) -> dict[str, Any]:
        """`routectl config --format json`."""
        return {
            "capability": self.capability,
            "workload": self.workload.to_json(),
            "policy": policy_document(self.policy),
            "qualification": [
                {
                    "name": n,
                    "ok": ok,
                    "code": r.code if r else None,
                    "message": r.message if r else None,
                }
                for n, ok, r in self.verdicts
            ],
            "active_sections": list(self.active),
            "hash": self.digest,
        }

    def text(self) -> str:
        """The policy tables, the qualification verdicts, the hash."""
        lines = render_policy_text(self.policy)
        lines.append("qualification:")
        lines.extend(f"  {qualification_text(*verdict)}" for verdict in self.verdicts)
        lines.append(f"hash ({', '.join(self.active) or 'no active sections'}): {self.digest}")
        return "\n".join(lines) + "\n"
