"""The kernel families of this project: the one list.

Each record declares a family's name, the policy sections it reads and on which hardware it
is live (the policy hash covers exactly those sections), how it selects and loads a layer and
replays it for the startup report, the snapshot categories that prove its routes, the field
table of the sections it alone declares (`fields`) and the native ops modules its kernels
call (`ops`). `PROJECT` is built from this list: its selectors, engine loaders, category
registry (in the order `routectl list` shows it) and hashed sections are derived from it, and
its variable table, KernelConfig and native catalogue are assembled from it
(`policies.project_of`). Adding a family is its own modules plus one entry here
(CONTRIBUTING.md walks through it).
"""

from __future__ import annotations

import warnings

from native import ops_flash_next, ops_fp8, ops_fp8_moe, ops_linear, ops_moe, ops_v100_attention
from policies.awq_moe import select_awq_moe
from policies.categories import awq_sm70, nvfp4_sm70, sm75
from policies.categories.awq_moe import AWQ_MOE_CATEGORY
from policies.categories.dflash2_policy import DFLASH2_POLICY_CATEGORY
from policies.categories.flash_next_batch import FLASH_NEXT_BATCH_CATEGORY
from policies.categories.fp8_moe import FP8_MOE_CATEGORY
from policies.categories.fp8_sm70 import FP8_CATEGORY
from policies.categories.v100_attention import V100_ATTENTION_CATEGORY
from policies.dflash2 import SECTION as DFLASH2_SECTION
from policies.dflash2 import dflash2_hashed
from policies.engine_loaders import AWQ_MOE_LOADER, linear_loader
from policies.flash_next import (
    engine_environment,
    flash_next_context,
    flash_next_hashed,
    flash_next_verdicts,
)
from policies.flash_next_variables import FLASH_NEXT_FIELDS
from policies.flash_next_variables import SECTION as FLASH_NEXT_SECTION
from policies.fp8_moe import ROUTE_FIELDS as FP8_MOE_ROUTE_FIELDS
from policies.fp8_moe_loader import FP8_MOE_LOADER
from policies.fp8_moe_variables import FP8_MOE_FIELDS
from policies.linear_awq import load_awq_dense
from policies.linear_fp8_sm70 import load_fp8_sm70
from policies.linear_nvfp4 import load_nvfp4_sm70
from policies.linear_turing import load_turing_fp8, load_turing_nvfp4
from policies.v100_attention_variables import SECTION as V100_ATTENTION_SECTION
from policies.v100_attention_variables import V100_ATTENTION_FIELDS
from routectl.family import Family, FamilyNameWarning, category_sections, replaced_by


def _volta(cc: int) -> bool:
    return cc == 70


def _volta_class(cc: int) -> bool:
    # SM70 and SM72 (Xavier): the families whose contracts admit the whole Volta class.
    return 70 <= cc < 75


def _turing(cc: int) -> bool:
    return cc == 75


# The Turing category proves both Turing families.
SM75_CATEGORY = sm75.category({"nvfp4": load_turing_nvfp4, "fp8": load_turing_fp8})

FAMILIES: tuple[Family, ...] = (
    Family(
        "sm70-nvfp4-linear",
        ("sm70_turbomind", "sm70_nvfp4"),
        _volta,
        loader=linear_loader(load_nvfp4_sm70),
        categories=(nvfp4_sm70.category({"nvfp4": load_nvfp4_sm70}),),
        ops=(ops_linear,),
    ),
    Family(
        "sm70-awq-linear",
        ("sm70_turbomind", "sm70_awq", "sm70_awq_moe.tune_small_shapes"),
        _volta,
        loader=linear_loader(load_awq_dense),
        categories=(awq_sm70.category({"awq": load_awq_dense}),),
        ops=(ops_linear,),
    ),
    # The two Turing families read the Volta sections their kernels share
    # (docs/contracts/core.md §2.2); once hashed as one family `sm75-linear` (the name of
    # the category that proves both).
    Family(
        "sm75-nvfp4-linear",
        ("sm70_turbomind", "sm70_nvfp4"),
        _turing,
        loader=linear_loader(load_turing_nvfp4),
        categories=(SM75_CATEGORY,),
        replaces=("sm75-linear",),
        ops=(ops_linear,),
    ),
    Family(
        "sm75-fp8-linear",
        ("sm70_turbomind", "sm70_fp8"),
        _turing,
        loader=linear_loader(load_turing_fp8),
        categories=(SM75_CATEGORY,),
        replaces=("sm75-linear",),
        ops=(ops_linear,),
    ),
    Family(
        "sm70-awq-moe",
        ("sm70_turbomind", "sm70_awq_moe"),
        _volta_class,
        selector=select_awq_moe,
        loader=AWQ_MOE_LOADER,
        categories=(AWQ_MOE_CATEGORY,),
        ops=(ops_linear, ops_moe),
    ),
    # The verifier's options are read whatever the GPU (its GDN guards check capability 70
    # themselves); upstream hashes them under the method/explicit rule alone. It loads no
    # layer: its category evaluates the policy.
    Family(
        "sm70-dflash2-verifier",
        (DFLASH2_SECTION,),
        lambda cc: True,
        hashed_when=dflash2_hashed,
        categories=(DFLASH2_POLICY_CATEGORY,),
    ),
    Family(
        "sm70-fp8-linear",
        ("sm70_turbomind", "sm70_fp8"),
        _volta_class,
        loader=linear_loader(load_fp8_sm70),
        categories=(FP8_CATEGORY,),
        ops=(ops_linear, ops_fp8),
    ),
    # Policy-only like the verifier: its category evaluates the loader's admissions
    # (docs/contracts/flashnext.md §6); hashed on SM70 under the decode contract or when a
    # field is explicit (§1.2).
    Family(
        "sm70-flash-next-batch",
        (FLASH_NEXT_SECTION,),
        _volta,
        hashed_when=flash_next_hashed,
        categories=(FLASH_NEXT_BATCH_CATEGORY,),
        context=flash_next_context,
        qualification=flash_next_verdicts,
        engine_environment=engine_environment,
        fields=FLASH_NEXT_FIELDS,
        ops=(ops_flash_next,),
    ),
    # docs/contracts/fp8moe.md: the loader gates stay in sm70_fp8; of its own section only
    # the 11 route fields are hashed (the diagnostics never are).
    Family(
        "sm70-fp8-moe",
        (
            "sm70_turbomind",
            "sm70_fp8",
            *(f"sm70_fp8_moe.{name}" for name in FP8_MOE_ROUTE_FIELDS),
        ),
        _volta_class,
        loader=FP8_MOE_LOADER,
        categories=(FP8_MOE_CATEGORY,),
        fields=FP8_MOE_FIELDS,
        # The AWQ MoE family's permute and reduce ops and the FP8 linears' prepare and
        # grouped-decode ops, then its own.
        ops=(ops_linear, ops_moe, ops_fp8, ops_fp8_moe),
    ),
    # docs/contracts/attention.md: the FLASH_ATTN_V100 attention routes. Policy-only like the
    # verifier (it loads no linear layer); its category evaluates the selection procedure.
    Family(
        "sm70-attention",
        (V100_ATTENTION_SECTION,),
        _volta,
        categories=(V100_ATTENTION_CATEGORY,),
        fields=V100_ATTENTION_FIELDS,
        ops=(ops_v100_attention,),
    ),
)


def sections_of(family: str) -> tuple[str, ...]:
    """The policy sections (or `section.field` entries) one family reads; a former name
    answers (with a FamilyNameWarning) for every family that replaced it."""
    for f in FAMILIES:
        if f.name == family:
            return f.sections
    new = replaced_by(FAMILIES).get(family)
    if new:
        warnings.warn(
            f"kernel family {family!r} is now spelled {' and '.join(new)}",
            FamilyNameWarning,
            stacklevel=2,
        )
        out: dict[str, None] = {}
        for name in new:
            out.update(dict.fromkeys(sections_of(name)))
        return tuple(out)
    raise KeyError(f"no family {family!r}")


def sections_of_category(category: str) -> tuple[str, ...]:
    """The sections the families a category proves read."""
    return category_sections(FAMILIES, category)


__all__ = ["DFLASH2_SECTION", "FAMILIES", "dflash2_hashed", "sections_of", "sections_of_category"]
