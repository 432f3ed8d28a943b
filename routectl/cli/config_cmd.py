"""`routectl config`: explain a resolved policy."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import click

from routectl.cli import CheckFailed, cli, project_option, state, warn
from routectl.cli.profile_check import profile_option, profile_verdict, row_layer_name
from routectl.errors import InputError
from routectl.io.jsonread import is_decimal, shorten
from routectl.project import Project
from routectl.workload import (
    KV_DTYPES,
    SHIPPED_CAPABILITIES,
    SPEC_METHODS,
    EngineConfig,
    Hardware,
    ModelFacts,
)

# Speculative defaults of the engine double when only the method is given.
SPEC_TOKENS = {"none": 0, "mtp": 4, "dflash": 7}
SELECTOR_TOP_K = {"none": 0, "mtp": 0, "dflash": 16}


# The model facts (each unknown unless given or filled by --model; an explicit option wins
# over the scope's value): (option, EngineConfig.model attribute, click type, help).
MODEL_FACT_OPTIONS: tuple[tuple[str, str, Any, str], ...] = (
    ("--dtype", "dtype", str, "Model dtype (e.g. float16)."),
    ("--hidden-size", "hidden_size", click.IntRange(min=1), "Model hidden size."),
    ("--attention-heads", "num_attention_heads", click.IntRange(min=1), "Model attention heads."),
    ("--kv-heads", "num_key_value_heads", click.IntRange(min=1), "Model KV heads."),
    ("--head-dim", "head_dim", click.IntRange(min=1), "Model head dim."),
)

model_options = [
    click.option(
        "--model",
        "model_scope",
        default=None,
        metavar="SCOPE",
        help="A model scope of the project whose facts fill the model options.",
    ),
    click.option(
        "--architecture",
        "architectures",
        multiple=True,
        metavar="NAME",
        help="Model architecture (repeatable).",
    ),
    *(
        click.option(flag, attr, type=kind, default=None, help=text)
        for flag, attr, kind, text in MODEL_FACT_OPTIONS
    ),
]


def build_model(
    project: Project, scope: str | None, architectures: tuple[str, ...], facts: dict[str, Any]
) -> ModelFacts | None:
    """The model facts of the options: a scope's, overridden by explicit options; None when
    nothing is known."""
    base = ModelFacts()
    if scope is not None:
        if scope not in project.models:
            known = ", ".join(sorted(project.models)) or "none"
            raise InputError(f"unknown model scope {scope!r} (known: {known})")
        base = project.models[scope]
    given = {k: v for k, v in facts.items() if v is not None}
    if architectures:
        given["architectures"] = tuple(architectures)
    if scope is None and not given:
        return None
    return dataclasses.replace(base, **given)


class CapabilityType(click.ParamType):
    """A compute capability NVIDIA has shipped (`SHIPPED_CAPABILITIES`), as an int."""

    name = "CC"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if is_decimal(text, 4) and int(text) in SHIPPED_CAPABILITIES:
            return int(text)
        self.fail(
            f"{shorten(value)} is not a compute capability NVIDIA has shipped (one of "
            f"{', '.join(map(str, SHIPPED_CAPABILITIES))})",
            param,
            ctx,
        )


def workload_options(function: Any) -> Any:
    options = [
        click.option(
            "--kernel-config",
            "kernel_config",
            default=None,
            metavar="JSON|@FILE",
            help="KernelConfig as JSON text or @path to a JSON file.",
        ),
        click.option(
            "--capability",
            type=CapabilityType(),
            default=70,
            show_default=True,
            help="Compute capability NVIDIA shipped (70 Volta, 75 Turing, ...).",
        ),
        click.option("--tp", type=click.IntRange(min=1), default=1, show_default=True),
        click.option("--pp", type=click.IntRange(min=1), default=1, show_default=True),
        click.option(
            "--spec",
            type=click.Choice(SPEC_METHODS),
            default="none",
            show_default=True,
            help="Speculative method.",
        ),
        click.option(
            "--spec-tokens",
            type=click.IntRange(min=0),
            default=None,
            help="Speculative tokens (default: 4 for mtp, 7 for dflash).",
        ),
        click.option(
            "--selector-top-k",
            type=click.IntRange(min=0),
            default=None,
            help="Draft selector top-k (default: 16 for dflash).",
        ),
        click.option("--max-num-seqs", type=click.IntRange(min=1), default=1, show_default=True),
        click.option(
            "--budget",
            type=click.IntRange(min=1),
            default=8192,
            show_default=True,
            help="max_num_batched_tokens.",
        ),
        click.option(
            "--kv",
            type=click.Choice(KV_DTYPES),
            default="float16",
            show_default=True,
            help="KV cache dtype.",
        ),
        *model_options,
    ]
    for option in reversed(options):
        function = option(function)
    return function


def build_workload(
    tp: int,
    pp: int,
    spec: str,
    spec_tokens: int | None,
    selector_top_k: int | None,
    max_num_seqs: int,
    budget: int,
    kv: str,
    model: ModelFacts | None = None,
) -> EngineConfig:
    """The engine double the options describe; speculative options without a speculative
    method describe no engine and are a usage error."""
    if spec == "none":
        given = [
            name
            for name, value in (
                ("--spec-tokens", spec_tokens),
                ("--selector-top-k", selector_top_k),
            )
            if value is not None
        ]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise click.UsageError(
                f"{' and '.join(given)} only {verb} with a speculative "
                f"method (--spec {' or --spec '.join(SPEC_METHODS[1:])})"
            )
    return EngineConfig(
        tp=tp,
        pp=pp,
        spec_method=spec,
        spec_tokens=SPEC_TOKENS[spec] if spec_tokens is None else spec_tokens,
        selector_top_k=SELECTOR_TOP_K[spec] if selector_top_k is None else selector_top_k,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=budget,
        kv_dtype=kv,
        model=model,
    )


@cli.command("config")
@workload_options
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@profile_option()
@click.option(
    "--row",
    "row_id",
    default=None,
    metavar="CATEGORY:ROW-ID",
    help="With --profile: the snapshot row (replayed now) the profile is checked against, "
    "instead of printing the policy.",
)
@project_option
@click.pass_context
def config_command(
    ctx: click.Context,
    kernel_config: str | None,
    capability: int,
    tp: int,
    pp: int,
    spec: str,
    spec_tokens: int | None,
    selector_top_k: int | None,
    max_num_seqs: int,
    budget: int,
    kv: str,
    model_scope: str | None,
    architectures: tuple[str, ...],
    fmt: str,
    profile_path: Path | None,
    row_id: str | None,
    project_dir: Any,
    **facts: Any,
) -> None:
    """Print a resolved policy: values, sources, warnings, hash.

    Every section's resolved values with their sources, the ignored variables, the warnings,
    the qualification verdicts and the policy hash."""
    st = state(ctx)
    project = st.project(project_dir)
    if (profile_path is None) != (row_id is None):
        raise click.UsageError("--profile and --row go together (check a profile against a row)")
    if profile_path is not None and row_id is not None:
        check_profile(project, profile_path, row_id, fmt)
        return
    model = build_model(project, model_scope, architectures, facts)
    workload = build_workload(
        tp, pp, spec, spec_tokens, selector_top_k, max_num_seqs, budget, kv, model
    )
    workload = project.engine_from(workload, st.environ)
    view = project.policy_view(kernel_config, st.environ, Hardware(capability), workload)
    for message in view.policy.warnings:
        warn(message)
    if fmt == "json":
        click.echo(json.dumps(view.document(), indent=2, sort_keys=True))
        return
    click.echo(view.text(), nl=False)


def check_profile(project: Project, profile_path: Path, row_id: str, fmt: str) -> None:
    """`config --profile FILE --row ID`: the profile judged against the row's selection."""
    from routectl.replay.harness import replay_row
    from routectl.review.explain import resolve_row

    category, spec = resolve_row(project, row_id, None)
    row, _ = replay_row(project, category, spec)
    layer = row_layer_name(category.name, spec)
    verdict, text = profile_verdict(profile_path, f"{category.name}:{spec.id}", layer, row["route"])
    click.echo(json.dumps(verdict, indent=2, sort_keys=True) if fmt == "json" else text, nl=False)
    if verdict["mismatches"]:
        raise CheckFailed()
