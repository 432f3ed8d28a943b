"""The snapshot categories, in the order `routectl list` shows them."""

from policies.categories import awq_sm70, nvfp4_sm70, sm75
from policies.categories.awq_moe import AWQ_MOE_CATEGORY
from policies.categories.dflash2_policy import DFLASH2_POLICY_CATEGORY
from policies.categories.fp8_sm70 import FP8_CATEGORY
from policies.linear_awq import load_awq_dense
from policies.linear_nvfp4 import load_nvfp4_sm70
from policies.linear_turing import load_turing_fp8, load_turing_nvfp4

CATEGORIES: tuple = (
    nvfp4_sm70.category({"nvfp4": load_nvfp4_sm70}),
    awq_sm70.category({"awq": load_awq_dense}),
    sm75.category({"nvfp4": load_turing_nvfp4, "fp8": load_turing_fp8}),
    AWQ_MOE_CATEGORY,
    DFLASH2_POLICY_CATEGORY,
    FP8_CATEGORY,
)
