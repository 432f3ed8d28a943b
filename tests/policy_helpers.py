"""Shared builders for policy tests."""

from __future__ import annotations

from typing import Any

from policies import PROJECT
from policies.awq_moe_routes import LoadedRoute
from routectl.policy.fields import Field
from routectl.workload import EngineConfig, Hardware

QUALIFIED = EngineConfig(
    tp=4,
    spec_method="dflash",
    spec_tokens=7,
    selector_top_k=16,
    max_num_seqs=4,
    max_num_batched_tokens=8192,
    kv_dtype="fp8_e4m3",
)
UNQUALIFIED = EngineConfig(tp=4, spec_method="none", max_num_seqs=4)


def resolve(
    env: dict[str, str] | None = None,
    config: Any = None,
    *,
    capability: int = 70,
    workload: EngineConfig = QUALIFIED,
):
    return PROJECT.resolve(config, env or {}, Hardware(capability), workload)


def sample(field: Field) -> tuple[str, Any]:
    """A valid variable text whose value differs from the default, with its parsed value."""
    parser = field.parser
    assert parser is not None
    if parser.name in ("int_bool", "strict_01"):
        default = field.default if isinstance(field.default, bool) else True
        return ("0", False) if default else ("1", True)
    if parser.name in ("eq1", "ne0"):  # the attention section's raw switches
        return ("0", False) if field.default else ("1", True)
    if parser.name == "threshold":
        return ("5", 5)
    if parser.name == "partition":
        return ("512", 512)
    if parser.name == "text":
        return ("routing", "routing")
    if parser.name == "positive_int":
        return ("9", 9)
    if parser.name == "int":
        return ("5", 5)
    if parser.name == "choice":
        choices = [c.strip() for c in parser.accepted.removeprefix("one of ").split(",")]
        text = next(c for c in choices if c != str(field.default))
        return (text, parser.parse(text))
    if parser.name == "name_list":
        return (
            " TritonW4A16LinearKernel, ,MarlinLinearKernel ",
            ("TritonW4A16LinearKernel", "MarlinLinearKernel"),
        )
    if parser.name == "layer_list":
        return ("0,3,10-12", ("0", "3", "10-12"))
    raise AssertionError(parser.name)


def typed_config(field: Field, value: Any) -> dict[str, Any]:
    shown = list(value) if isinstance(value, tuple) else value
    if field.section is None:
        return {field.name: shown}
    return {field.section: {field.name: shown}}


# A Qwen3.8 layer loaded with the default MoE policy on SM70 (batched legacy lane, grouped
# decode, indexed prefill, no chunk, no exact W2): the route tests vary it with `replace`.
QWEN38_LOADED = LoadedRoute(
    capability=70,
    batched=True,
    legacy_lane=True,
    legacy_lane_reason=None,
    qpn_m1=False,
    grouped_decode=True,
    indexed_prefill=True,
    chunk_tokens=0,
    strict_w13=False,
    exact_w2=False,
    active_exact_w2=False,
    token_cap=0,
    hidden=2560,
    w2_n=2560,
    experts=512,
)

# The model-level layer spec of one Qwen3.8 AWQ MoE layer, as an engine passes it to
# `EngineSession.load_layer` (a TP4 rank holds 160 of the 640 intermediate columns).
QWEN38_AWQ_MOE: dict[str, Any] = {
    "prefix": "model.layers.0.mlp.experts",
    "layer_id": 0,
    "experts": 512,
    "top_k": 10,
    "hidden": 2560,
    "intermediate": 640,
    "group": 32,
}
