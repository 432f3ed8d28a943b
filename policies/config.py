"""KernelConfig: the user's intent, generated from the project's whole field table (the shared
fields and the families' own, `policies.variables.FIELDS`; every field optional)."""

from policies.variables import whole_table
from routectl.policy.configmodel import build_config_model

KernelConfig = build_config_model(whole_table(), "KernelConfig")
