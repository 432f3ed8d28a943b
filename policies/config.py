"""KernelConfig: the user's intent, generated from the field table (every field optional)."""

from policies.variables import FIELDS
from routectl.policy.configmodel import build_config_model

KernelConfig = build_config_model(FIELDS, "KernelConfig")
