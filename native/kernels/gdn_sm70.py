"""The Qwen GDN (gated delta net) layer's fused DFlash2 verifier paths on Volta
(docs/contracts/dflash2.md §3): the layer's per-rank projection widths and the combined-split
kernel's local-layout predicate (upstream `_can_implement_sm70_combined_gdn_split`).
Capability facts only: whether the policy enables a path is decided in `policies/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from routectl.reasons import OK, Check, reject

# The combined split kernel is built for exactly one local tail: 8 query rows (a DFlash
# verify block), float16 and the 27B TP4 per-rank widths (qkv, z, ba).
COMBINED_SPLIT_QUERY_ROWS = 8
COMBINED_SPLIT_DTYPE = "float16"
COMBINED_SPLIT_WIDTHS = (2560, 1536, 12)


@dataclass(frozen=True)
class GdnLayout:
    """A GDN layer's heads: key heads, value heads and their head dim (keys and values share
    it in every modelled layer)."""

    key_heads: int
    value_heads: int
    head_dim: int

    def local_widths(self, tp: int) -> tuple[int, int, int]:
        """Per-rank (qkv, z, ba): (2 key_dim + value_dim) / tp, value_dim / tp and value
        heads / tp."""
        key_dim = self.key_heads * self.head_dim
        value_dim = self.value_heads * self.head_dim
        return ((2 * key_dim + value_dim) // tp, value_dim // tp, self.value_heads // tp)

    def to_json(self, tp: int) -> dict[str, Any]:
        qkv, z, ba = self.local_widths(tp)
        return {
            "key_heads": self.key_heads,
            "value_heads": self.value_heads,
            "head_dim": self.head_dim,
            "qkv": qkv,
            "z": z,
            "ba": ba,
        }


# The codes `can_implement_combined_split` can return (declared for `routectl coverage`).
COMBINED_SPLIT_CODES = ("query_rows", "dtype", "local_tail_layout")


def can_implement_combined_split(rows: int, dtype: str, qkv: int, z: int, ba: int) -> Check:
    """The combined split kernel's predicate: query rows, then dtype, then the local
    widths (the order in which upstream's reason codes are pinned)."""
    if rows != COMBINED_SPLIT_QUERY_ROWS:
        return reject(
            "query_rows",
            f"combined GDN split needs exactly "
            f"{COMBINED_SPLIT_QUERY_ROWS} query rows (rows={rows})",
        )
    if dtype != COMBINED_SPLIT_DTYPE:
        return reject("dtype", f"combined GDN split needs {COMBINED_SPLIT_DTYPE} (dtype {dtype})")
    if (qkv, z, ba) != COMBINED_SPLIT_WIDTHS:
        want = ", ".join(str(w) for w in COMBINED_SPLIT_WIDTHS)
        return reject(
            "local_tail_layout",
            f"combined GDN split needs local widths (qkv, z, "
            f"ba) = ({want}) (got ({qkv}, {z}, {ba}))",
        )
    return OK
