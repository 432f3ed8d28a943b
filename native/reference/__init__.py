"""Reference implementations of the AWQ QPN M1 contract (the only torch-importing part of
`native`). Importing this package registers `routectl::awq_moe_qpn_m1_sm70_out`,
`routectl::awq_sm70_prepare` and `routectl::awq_sm70_prepare_compact`.
"""

from native.awq_schemas import PINNED_SCHEMAS, REFERENCE_NAMESPACE
from native.awq_validate import ArgumentError
from native.reference import ops as _ops  # noqa: F401  (registers the ops)

REFERENCE_OPS: tuple[str, ...] = tuple(PINNED_SCHEMAS)

__all__ = ["REFERENCE_NAMESPACE", "REFERENCE_OPS", "ArgumentError"]
