"""Category sm70-dflash2-policy: the DFlash2 verifier policy on Volta
(docs/contracts/dflash2.md §4).

One row per configuration of the standard matrix plus 82 edges. A row is no layer route but
a CPU evaluation of the verifier policy: the verifier qualification, each of the 18
`sm70_dflash2` fields with its source, the four GDN layer admissions, the GDN layer's local
layout and the stable codes of the warnings the row's own variables raise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from native.kernels.gdn_sm70 import COMBINED_SPLIT_CODES, GdnLayout
from policies.categories.basis import DFLASH2_POLICY_BASIS
from policies.categories.matrix import KV_NEVER_READ, ModelScope, matrix_rows, row_id, with_probes
from policies.categories.route_schemas import route_fragment
from policies.categories.sites import field_keys
from policies.dflash2 import (
    COMBINED_SPLIT_GUARD,
    FIELD_NAMES,
    GDN_GUARDS,
    GUARD_CODES,
    SECTION,
    gdn_admissions,
)
from policies.qualification import DFLASH2_VERIFIER_CODES, dflash2_verifier_qualified
from policies.variables import RETIRED, field, whole_table
from routectl.category import Category
from routectl.policy.resolve import variable_notices
from routectl.policy.text import value_lines
from routectl.reasons import Check, reason_text
from routectl.replay.harness import ReplayContext
from routectl.rows import Invariance, Probe, RowSpec
from routectl.sites import (
    DecisionSites,
    Site,
    reason_sites,
    recorded_only,
    rule_outcomes,
    rule_sites,
    variable_sites,
)

NAME = "sm70-dflash2-policy"
CAPABILITY = 70
# The GDN layer double: head dim 128, 16 key / 48 value heads unless an edge says otherwise.
GDN_HEADS = {"key_heads": 16, "value_heads": 48, "head_dim": 128}
MODELS = tuple(
    ModelScope(model, layer=lambda tp: GDN_HEADS)
    for model in ("27b_dflash2_nvfp4", "flash_next_mtp4_nvfp4", "35b_a3b_awq")
)

BASE = row_id("27b_dflash2_nvfp4", "fp8_e4m3", 4, "dflash", 4, 8192)
GDN_EDGE_BASE = row_id("27b_dflash2_nvfp4", "fp8_e4m3", 2, "dflash", 1, 8192)
# Probed alias values and their id spelling.
EDGE_VALUES = (("0", "0"), ("1", "1"), ("2", "2"), ("-1", "m1"))
DENSE_ORDER, ALLOW_CANDIDATE_ORDER = (r.variable for r in RETIRED)
RETIRED_EDGES = (("dense_order", DENSE_ORDER), ("allow_candidate_order", ALLOW_CANDIDATE_ORDER))


def alias(name: str) -> str:
    variable = field(f"{SECTION}.{name}").variable
    assert variable is not None, name
    return variable


PROBES = (
    *(
        Probe(
            f"{name}_{suffix}",
            BASE,
            variables={alias(name): value},
            doc=f"{alias(name)}={value} alone",
        )
        for name in FIELD_NAMES
        for value, suffix in EDGE_VALUES
    ),
    *(
        Probe(
            f"{label}_{suffix}",
            BASE,
            variables={variable: value},
            doc=f"retired {variable}={value}: no field moves",
        )
        for label, variable in RETIRED_EDGES
        for value, suffix in EDGE_VALUES
    ),
    Probe(
        "retired_order_pair",
        BASE,
        variables={ALLOW_CANDIDATE_ORDER: "1", DENSE_ORDER: "0"},
        doc="the retired candidate-order opt-in, both names: no field moves",
    ),
    Probe(
        "gdn_k8_v24_tp2",
        GDN_EDGE_BASE,
        layer={"key_heads": 8, "value_heads": 24},
        doc="8 key / 24 value heads at TP2: the TP4 local widths",
    ),
)


def check_json(check: Check) -> dict[str, Any]:
    ok, reason = check
    return {
        "ok": ok,
        "code": reason.code if reason else None,
        "message": reason.message if reason else None,
    }


def warning_codes(variables: Mapping[str, str]) -> list[dict[str, str]]:
    """Stable codes of the warnings a row's variables raise (not the message texts)."""
    return [
        {"variable": variable, "kind": str(kind)}
        for variable, kind, _ in variable_notices(whole_table(), RETIRED, variables)
    ]


# The GDN guard names share it; the matrix legend drops it.
GUARD_PREFIX = "enable_sm70_dflash2_fused_gdn_"


INVARIANCES = (
    Invariance(
        "verifier_policy_ignores_kv_c_q",
        ("kv", "c", "q"),
        ("route",),
        why=f"{KV_NEVER_READ}; the verifier qualification and the GDN admission read the "
        "model, the TP size and speculation only",
    ),
)
VERIFIER_RULE = "dflash2_verifier"
POLICY_TESTS = "tests/test_dflash2_policy.py::"


def decision_sites() -> DecisionSites:
    """The verifier qualification and the four GDN guards, each passing, failing and
    refusing with each code it can return, and the section's 18 switches."""
    sites = [*rule_sites([VERIFIER_RULE]), *reason_sites(VERIFIER_RULE, DFLASH2_VERIFIER_CODES)]
    for guard, _ in GDN_GUARDS:
        codes = (*GUARD_CODES, *(COMBINED_SPLIT_CODES if guard == COMBINED_SPLIT_GUARD else ()))
        sites += [*rule_sites([guard]), *reason_sites(guard, codes)]
    sites += variable_sites(field_keys(SECTION))
    pinned = (
        "the row count is pinned at 406 (tests/test_dflash2_category.py), so a resolution "
        "test proves it"
    )
    verifier = POLICY_TESTS + "test_verifier_qualification_reports_the_first_failing_rule"
    # The rows reach architecture, hidden size and speculative method (the matrix's models
    # and speculation); the verifier's other rules are proved on the rule itself.
    declarations = {
        Site("reason", VERIFIER_RULE, code): recorded_only(pinned, verifier)
        for code in DFLASH2_VERIFIER_CODES
        if code
        not in ("architecture_not_qwen3_5", "hidden_size_not_5120", "spec_method_not_dflash")
    }
    guards = POLICY_TESTS + "test_guards_check_policy_then_capability_then_selector_engine"
    for guard, _ in GDN_GUARDS:
        for code in ("capability_not_70", "not_dflash_selector"):
            declarations[Site("reason", guard, code)] = recorded_only(pinned, guards)
    # The shipped layouts reach the tail-layout rule; query rows and dtype are the kernel's.
    combined = POLICY_TESTS + "test_combined_split_predicate_checks_rows_then_dtype_then_widths"
    for code in ("query_rows", "dtype"):
        declarations[Site("reason", COMBINED_SPLIT_GUARD, code)] = recorded_only(pinned, combined)
    return DecisionSites(tuple(sites), declarations)


def route_rules(route: Mapping[str, Any]) -> set[Site]:
    """The rules a policy row records: the verifier qualification and each GDN guard."""
    rules = [
        (VERIFIER_RULE, route["qualification"]),
        *((g["name"], g) for g in route["gdn_admission"]),
    ]
    out = rule_outcomes((name, bool(check["ok"])) for name, check in rules)
    out |= {Site("reason", name, check["code"]) for name, check in rules if check["code"]}
    return out


class Dflash2PolicyCategory(Category):
    name = NAME
    basis = DFLASH2_POLICY_BASIS
    description = (
        "DFlash2 verifier policy on SM70: the 18 switches, the verifier qualification, GDN guards"
    )
    # A policy row selects no kernel: the matrix shows the verifier policy's own label.
    matrix_subject = "verifier policy"

    def __init__(self) -> None:
        self._rows = tuple(with_probes(matrix_rows(MODELS, CAPABILITY), PROBES))

    def rows(self) -> Sequence[RowSpec]:
        return self._rows

    def invariances(self) -> Sequence[Invariance]:
        return INVARIANCES

    def decision_sites(self) -> DecisionSites:
        return decision_sites()

    def reached_sites(self, route: Mapping[str, Any]) -> set[Site]:
        return route_rules(route)

    def route(self, ctx: ReplayContext) -> dict[str, Any]:
        engine = ctx.row.engine
        policy = ctx.policy
        layout = GdnLayout(**ctx.row.layer)
        return {
            "capability": ctx.hardware.capability,
            "qualification": check_json(dflash2_verifier_qualified(ctx.hardware, engine)),
            "policy": {
                name: {
                    "value": policy.value(f"{SECTION}.{name}"),
                    "source": policy.source(f"{SECTION}.{name}"),
                }
                for name in FIELD_NAMES
            },
            "gdn_admission": [
                {"name": guard, **check_json(check)}
                for guard, check in gdn_admissions(policy, ctx.hardware, engine, layout)
            ],
            "gdn_layout": layout.to_json(engine.tp),
            "warnings": warning_codes(dict(ctx.row.variables)),
        }

    def matrix_label(self, route: Mapping[str, Any]) -> tuple[str, str]:
        """A row as the route matrix shows it: the verifier qualification, how many of the
        section's options are on, and the GDN guards admitted (a policy row selects no
        kernel)."""
        on = sum(1 for item in route["policy"].values() if item["value"])
        guards = [g["name"].removeprefix(GUARD_PREFIX) for g in route["gdn_admission"] if g["ok"]]
        admitted = ", ".join(guards) if guards else "none"
        qualification = route["qualification"]
        if qualification["ok"]:
            return (f"qualified; {on}/{len(FIELD_NAMES)} on; guards admitted: {admitted}", "value")
        return (
            f"not qualified ({qualification['code']}); {on}/{len(FIELD_NAMES)} on; "
            f"guards admitted: {admitted}",
            "status",
        )

    def matrix_reason(self, route: Mapping[str, Any]) -> str:
        """What decided a policy row, in one line: the qualification when it fails, the
        options that are off with their sources, the refused guards and the warnings."""
        parts: list[str] = []
        qualification = route["qualification"]
        if not qualification["ok"]:
            parts.append(f"[{qualification['code']}] {qualification['message']}")
        else:
            parts += [
                f"{name} off ({item['source']})"
                for name, item in route["policy"].items()
                if not item["value"]
            ]
        parts += [
            f"guard {g['name'].removeprefix(GUARD_PREFIX)} refused [{g['code']}]"
            for g in route["gdn_admission"]
            if not g["ok"] and qualification["ok"]
        ]
        parts += [f"warns {w['variable']} ({w['kind']})" for w in route["warnings"]]
        return "; ".join(parts) or "qualified defaults, every guard admitted"

    def route_schema(self) -> Mapping[str, Any]:
        """`policy_route`: qualification, the section's values, guards, layout, warnings."""
        return route_fragment(__name__)

    def explain_lines(self, route: dict[str, Any]) -> list[str]:
        """The verifier qualification, the section's values with sources, the GDN guards,
        the GDN layout and the warning codes (each popped from `route`)."""
        lines: list[str] = []
        if "qualification" in route:
            lines.append(f"qualification: {_check_text(route.pop('qualification'), 'yes', 'no')}")
        if isinstance(route.get("policy"), dict):
            values = route.pop("policy")
            lines.append("row policy (value, source):")
            lines.extend(value_lines(values))
        if "gdn_admission" in route:
            guards = route.pop("gdn_admission")
            lines.append("guards:")
            width = max((len(g["name"]) for g in guards), default=0)
            lines.extend(
                f"  {g['name']:<{width}}  {_check_text(g, 'admitted', 'refused')}" for g in guards
            )
        if "gdn_layout" in route:
            layout = route.pop("gdn_layout")
            lines.append("GDN layout: " + " ".join(f"{k}={v}" for k, v in layout.items()))
        if isinstance(route.get("warnings"), list):
            codes = route.pop("warnings")
            lines.append(
                "warnings: "
                + (", ".join(f"{w['variable']} ({w['kind']})" for w in codes) or "none")
            )
        return lines


def _check_text(check: Mapping[str, Any], yes: str, no: str) -> str:
    return yes if check["ok"] else f"{no} {reason_text(check['code'], check['message'])}"


DFLASH2_POLICY_CATEGORY = Dflash2PolicyCategory()

__all__ = [
    "BASE",
    "DFLASH2_POLICY_CATEGORY",
    "GDN_EDGE_BASE",
    "MODELS",
    "NAME",
    "PROBES",
    "Dflash2PolicyCategory",
]
