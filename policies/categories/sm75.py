"""Category sm75-linear: Turing QPN2 NVFP4 and QPN8 FP8 linears (docs/contracts/core.md §2.2, §5).

The probes hit every rejection reason of both Turing kernels at least once; the README lists
them.
"""

from __future__ import annotations

from typing import Any

from native.kernels import turing as tu
from policies.categories.basis import LINEAR_BASIS
from policies.categories.linear import LinearCategory, layer
from policies.categories.matrix import KV_NEVER_READ, NOT_APPLICABLE, ModelScope, row_id
from policies.categories.sites import DISABLED_CODE, field_keys, kernel_sites
from policies.variables import env_var as var
from routectl.rows import Invariance, Probe
from routectl.sites import DecisionSites, Site, op_sites, recorded_only, variable_sites

NAME = "sm75-linear"
TOKEN_COUNTS = (1, 8, 9, 32, 64, 1024)
GDN = "in_proj_qkvz"
FP8_N_GLOBAL = 14336


def gdn_layer(tp: int) -> dict[str, Any]:
    return layer("nvfp4", GDN, 5120, 4120 if tp == 4 else 8240)


def fp8_layer(tp: int) -> dict[str, Any]:
    return layer("fp8", "qkv_proj", 5120, FP8_N_GLOBAL // tp)


MODELS = (
    ModelScope("27b_dflash2_nvfp4", layer=gdn_layer),
    ModelScope("flash_next_mtp4_nvfp4", layer=gdn_layer),
    ModelScope("35b_a3b_awq", status=(NOT_APPLICABLE, "AWQ checkpoint: no Turing QPN linear")),
    ModelScope("27b_fp8", layer=fp8_layer),
)

NVFP4_BASE = row_id("27b_dflash2_nvfp4", "fp8_e4m3", 4, "dflash", 4, 8192)
FP8_BASE = row_id("27b_fp8", "fp8_e4m3", 4, "none", 4, 8192)


def nvfp4(name: str, **changes: Any) -> Probe:
    return Probe(f"qpn2_{name}", NVFP4_BASE, **changes)


def fp8(name: str, **changes: Any) -> Probe:
    return Probe(f"qpn8_{name}", FP8_BASE, **changes)


def _nvfp4_shape(k: int, n: int) -> dict[str, Any]:
    return layer("nvfp4", GDN, k, n)


PROBES = (
    nvfp4(
        "dense_off",
        config={"sm70_nvfp4": {"dense_qpn2": False}},
        doc="dense QPN2 disabled by KernelConfig",
    ),
    nvfp4(
        "backend_override",
        variables={var("sm70_turbomind.nvfp4"): "0"},
        doc="legacy quantization backend override",
    ),
    nvfp4(
        "marlin_backend",
        variables={var("sm70_turbomind.quant_backend"): "marlin"},
        doc="legacy backend marlin also disables the provider",
    ),
    nvfp4("capability_80", capability=80, doc="requires Turing SM75"),
    nvfp4("bf16_activations", layer={"override": {"act_dtype": "bfloat16"}}),
    nvfp4("rank3_codes", layer={"override": {"weight_shape": (1, 4120, 2560)}}),
    nvfp4("zero_n", layer=_nvfp4_shape(5120, 0)),
    nvfp4("zero_k", layer=_nvfp4_shape(0, 4120)),
    nvfp4("misaligned_k", layer=_nvfp4_shape(5000, 4120)),
    nvfp4("wrong_dtypes", layer={"override": {"weight_dtype": "int8"}}),
    nvfp4("wrong_scale_shape", layer={"override": {"scale_shape": (4120, 160)}}),
    nvfp4("native_missing", remove_ops=("nvfp4_qpn2_prepare_sm70", "nvfp4_qpn2_gemm_sm70_out")),
    nvfp4(
        "linear_backend",
        config={"linear_backend": "marlin"},
        doc="a non-TurboMind linear backend: kernel null, backend_not_selected",
    ),
    fp8("disabled", variables={var("sm70_fp8.enabled"): "0"}),
    fp8("marlin_backend", variables={var("sm70_turbomind.quant_backend"): "marlin"}),
    fp8("capability_80", capability=80),
    fp8("bf16_io", layer={"override": {"act_dtype": "bfloat16"}}),
    fp8("per_channel", layer={"override": {"weight_scheme": "static_per_channel"}}),
    fp8("rank3", layer={"override": {"weight_shape": (1, 3584, 5120)}}),
    fp8("zero_n", layer=layer("fp8", "qkv_proj", 5120, 0)),
    fp8("zero_k", layer=layer("fp8", "qkv_proj", 0, 3584)),
    fp8("misaligned_n", layer=layer("fp8", "qkv_proj", 5120, 3590)),
    fp8("misaligned_k", layer=layer("fp8", "qkv_proj", 5000, 3584)),
    fp8("native_missing", remove_ops=("fp8_qpn8_prefill_sm70_out",)),
    fp8("linear_backend", config={"linear_backend": "cutlass"}),
)


INVARIANCES = (
    Invariance(
        "turing_route_ignores_kv_spec_c_q",
        ("kv", "spec", "c", "q"),
        ("route",),
        why=f"{KV_NEVER_READ}; the Turing policy reads no engine field (the kernel depends "
        "on the layer, its TP split, the capability and the build) and every token count "
        "fits every budget",
    ),
)
# Both candidates pass disabled_kernels first (policies/linear_turing.py); their own policy
# gate, capability and layer codes are the classes' (`policy_codes`, `reason_codes`).
# (The QPN8 prefill op is a required op the native dispatcher calls, never a recorded call.)
OPS = (tu.QPN2_PREPARE_OP, tu.QPN2_GEMM_OP, tu.QPN8_PREPARE_OP, tu.QPN8_DISPATCH_OP)
# The loaders answer a linear_backend other than auto or turbomind before selection.
POLICY_CODES = (DISABLED_CODE, "backend_not_selected")
VARIABLES = (
    "sm70_nvfp4.dense_qpn2",
    "sm70_turbomind.nvfp4",
    "sm70_turbomind.quant_backend",
    "sm70_fp8.enabled",
    "linear_backend",
    "disabled_kernels",
)
DISABLED_REASON = (
    "disabling a Turing kernel by name is proved by a resolution test: the probes keep to "
    "the rejections a row's verdicts show (457 rows, tests/test_cli_newcomer.py)"
)
DISABLED_TEST = "tests/test_selectors.py::test_turing_disabled_kernel_and_missing_ops"


def decision_sites() -> DecisionSites:
    sites: list[Site] = []
    for kernel in tu.TURING_KERNELS:
        sites += kernel_sites(kernel, POLICY_CODES)
    sites += op_sites(OPS)
    sites += variable_sites(field_keys(*VARIABLES))
    declarations = {
        Site("reason", kernel.name, DISABLED_CODE): recorded_only(DISABLED_REASON, DISABLED_TEST)
        for kernel in tu.TURING_KERNELS
    }
    declarations[Site("set", "disabled_kernels")] = recorded_only(DISABLED_REASON, DISABLED_TEST)
    for kernel, code in (
        (tu.TuringQpn2NvFp4LinearKernel, "not_turing_nvfp4_layer"),
        (tu.TuringQpn8Fp8LinearKernel, "not_turing_fp8_layer"),
    ):
        declarations[Site("reason", kernel.name, code)] = recorded_only(
            "a layer of the other kernel's format: each family's loader is given only its "
            "own layer kind, as the engine routes by checkpoint format",
            "tests/test_capability_turing.py::test_layers_of_the_other_kernel_are_refused",
        )
    return DecisionSites(tuple(sites), declarations)


def category(loaders: dict[str, Any]) -> LinearCategory:
    return LinearCategory(
        name=NAME,
        basis=LINEAR_BASIS,
        capability=75,
        models=MODELS,
        probes=PROBES,
        loaders=loaders,
        token_counts=TOKEN_COUNTS,
        description="Turing QPN2 NVFP4 and QPN8 FP8 linears",
        declared_invariances=INVARIANCES,
        sites=decision_sites,
    )
