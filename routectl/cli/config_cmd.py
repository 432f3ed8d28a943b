"""`routectl config`: explain a resolved policy."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from routectl.cli import cli, project_option, state, warn
from routectl.policy import ResolvedPolicy
from routectl.workload import SPEC_METHODS, EngineConfig, Hardware

# Speculative defaults of the engine double when only the method is given.
SPEC_TOKENS = {"none": 0, "mtp": 4, "dflash": 7}
SELECTOR_TOP_K = {"none": 0, "mtp": 0, "dflash": 16}


def workload_options(function: Any) -> Any:
    options = [
        click.option("--kernel-config", "kernel_config", default=None, metavar="JSON|@FILE",
                     help="KernelConfig as JSON text or @path to a JSON file."),
        click.option("--capability", type=int, default=70, show_default=True,
                     help="Compute capability (70 Volta, 75 Turing)."),
        click.option("--tp", type=click.IntRange(min=1), default=1, show_default=True),
        click.option("--pp", type=click.IntRange(min=1), default=1, show_default=True),
        click.option("--spec", type=click.Choice(SPEC_METHODS), default="none",
                     show_default=True, help="Speculative method."),
        click.option("--spec-tokens", type=click.IntRange(min=0), default=None,
                     help="Speculative tokens (default: 4 for mtp, 7 for dflash)."),
        click.option("--selector-top-k", type=click.IntRange(min=0), default=None,
                     help="Draft selector top-k (default: 16 for dflash)."),
        click.option("--max-num-seqs", type=click.IntRange(min=1), default=1, show_default=True),
        click.option("--budget", type=click.IntRange(min=1), default=8192, show_default=True,
                     help="max_num_batched_tokens."),
        click.option("--kv", default="float16", show_default=True, help="KV cache dtype."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def build_workload(tp: int, pp: int, spec: str, spec_tokens: int | None,
                   selector_top_k: int | None, max_num_seqs: int, budget: int,
                   kv: str) -> EngineConfig:
    return EngineConfig(
        tp=tp, pp=pp, spec_method=spec,
        spec_tokens=SPEC_TOKENS[spec] if spec_tokens is None else spec_tokens,
        selector_top_k=SELECTOR_TOP_K[spec] if selector_top_k is None else selector_top_k,
        max_num_seqs=max_num_seqs, max_num_batched_tokens=budget, kv_dtype=kv)


def shows_key(key: str, sections: Sequence[str] | None) -> bool:
    """Whether a policy key is among `sections` (section names or `section.field` entries;
    None: every key). Engine-wide keys (no section) matter to every family."""
    section, dot, _ = key.partition(".")
    return sections is None or not dot or section in sections or key in sections


def policy_document(policy: ResolvedPolicy, sections: Sequence[str] | None = None
                    ) -> dict[str, Any]:
    """The one JSON shape of a resolved policy (`config` and `explain`): flat dotted keys, as
    `ResolvedPolicy.value(key)` takes them, each with its value and source."""
    data = policy.to_json()
    return {
        "values": {k: {"value": v, "source": data["sources"][k]}
                   for k, v in data["values"].items() if shows_key(k, sections)},
        "sections": None if sections is None else list(sections),
        "warnings": list(policy.warnings),
        "ignored": [{"variable": v, "field": k} for v, k in policy.ignored],
    }


def policy_table(policy: ResolvedPolicy, sections: Sequence[str] | None = None
                 ) -> dict[str, dict[str, dict[str, Any]]]:
    """{section (or "engine"): {field: {"value", "source"}}}: the text display's grouping."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for key, item in policy_document(policy, sections)["values"].items():
        section, dot, name = key.partition(".")
        if not dot:
            section, name = "engine", key
        out.setdefault(section, {})[name] = item
    return out


def render_policy_text(policy: ResolvedPolicy, sections: Sequence[str] | None = None
                       ) -> list[str]:
    lines: list[str] = []
    for section, values in policy_table(policy, sections).items():
        lines.append(f"[{section}]")
        width = max(len(n) for n in values)
        for name, item in values.items():
            lines.append(f"  {name:<{width}} = {json.dumps(item['value'])}  ({item['source']})")
    if policy.ignored:
        lines.append("ignored variables (an explicit field wins):")
        lines.extend(f"  {var} -> {key}" for var, key in policy.ignored)
    return lines


@cli.command("config")
@workload_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@project_option
@click.pass_context
def config_command(ctx: click.Context, kernel_config: str | None, capability: int, tp: int,
                   pp: int, spec: str, spec_tokens: int | None, selector_top_k: int | None,
                   max_num_seqs: int, budget: int, kv: str, fmt: str,
                   project_dir: Any) -> None:
    """Print a resolved policy: values, sources, warnings, hash.

    Every section's resolved values with their sources, the ignored variables, the warnings,
    the qualification verdicts and the policy hash."""
    st = state(ctx)
    project = st.project(project_dir)
    workload = build_workload(tp, pp, spec, spec_tokens, selector_top_k, max_num_seqs, budget,
                              kv)
    policy = project.resolve(kernel_config, st.environ, Hardware(capability), workload)
    for message in policy.warnings:
        warn(message)
    active = project.active_sections(capability)
    digest = policy.compute_hash(active)
    verdicts = [(name, ok, reason) for name, (ok, reason) in project.qualification(workload)]
    if fmt == "json":
        click.echo(json.dumps({
            "capability": capability,
            "workload": workload.to_json(),
            "policy": policy_document(policy),
            "qualification": [{"name": n, "ok": ok, "code": r.code if r else None,
                               "message": r.message if r else None} for n, ok, r in verdicts],
            "active_sections": active,
            "hash": digest,
        }, indent=2, sort_keys=True))
        return
    for line in render_policy_text(policy):
        click.echo(line)
    click.echo("qualification:")
    for name, ok, reason in verdicts:
        detail = f" ({reason.message})" if reason else ""
        click.echo(f"  {name}: {'yes' if ok else 'no'}{detail}")
    click.echo(f"hash ({', '.join(active) or 'no active sections'}): {digest}")
