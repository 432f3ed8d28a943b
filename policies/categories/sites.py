"""What the categories' decision-site declarations share (`routectl coverage`): a candidate's
sites from its class's declared reason codes and the policy gates' codes, and the variables
of the field table a family reads."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from policies import variables
from routectl.sites import Site, candidate_sites

# The policy gate every linear candidate passes first (policies/linear_common.py).
DISABLED_CODE = "disabled_kernel"


def kernel_sites(kernel: Any, policy_codes: Iterable[str] = ()) -> list[Site]:
    """Chosen, rejected, and a reason site for each code the policy gates (`policy_codes`)
    and the class itself (`reason_codes`, `policy_codes`) can return."""
    own = getattr(kernel, "policy_codes", ())
    return candidate_sites(kernel.name, (*policy_codes, *own, *(kernel.reason_codes or ())))


def field_keys(*selectors: str) -> list[str]:
    """The field-table keys a family reads: a whole section (`sm70_nvfp4`) or one key
    (`sm70_turbomind.nvfp4`), in table order."""
    wanted = set(selectors)
    # The whole table is assembled on first use (the family list names its parts): read it
    # here, never at import.
    table = variables.FIELDS
    keys = [f.key for f in table if f.section in wanted or f.key in wanted]
    unknown = wanted - {f.section for f in table} - {f.key for f in table}
    if unknown:
        raise ValueError(f"no such section or field: {sorted(unknown)}")
    return keys
