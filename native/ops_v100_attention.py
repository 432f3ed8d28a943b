"""Native entries of the FLASH_ATTN_V100 backend (docs/contracts/attention.md §2, §5.1): the
nine core entries `_get_flash_ops` returns, the grouped verifiers, the FP8 bridges, the Split-D
D256 wrappers and the optional entries the trace's op set leaves out (scalar tail, split-KV3),
each under its engine callable name, with the label a row records (the trace's fake label).

The attention category never dispatches them through the recording namespace: which are
loaded and which decline are a row's declared inputs (§8.1-2). They are declared here so that
the catalogue names every entry a row can show.
"""

from __future__ import annotations

from collections.abc import Mapping

from routectl.namespaces.ops import OpSpec

_PAGED = "Tensor q, Tensor key_cache, Tensor value_cache, Tensor block_table, Tensor seq_lens"
_DENSE = "Tensor q, Tensor k, Tensor v"

# Row label -> (engine callable, schema arguments, what it is).
_ENTRIES: Mapping[str, tuple[str, str, str]] = {
    "dense": ("flash_attn_func", _DENSE, "dense FP16 attention"),
    "bhmd": ("flash_attn_bhmd_func", _DENSE, "dense attention over BHMD tensors"),
    "decode": ("flash_attn_decode_paged", _PAGED, "scalar paged decode"),
    "xqa": ("flash_attn_decode_paged_xqa", _PAGED, "XQA paged decode"),
    "wmma": ("flash_attn_decode_paged_wmma", _PAGED, "decode through the WMMA wrapper"),
    "paged": ("flash_attn_prefill_paged", _PAGED, "paged prefill"),
    "paged_bhmd": ("flash_attn_prefill_paged_bhmd", _PAGED, "paged prefill, BHMD output"),
    "bfla": ("flash_attn_prefill_paged_bfla", _PAGED, "BFLA sparse paged prefill"),
    "splitkv": ("flash_attn_prefill_paged_splitkv", _PAGED, "split-KV paged prefill"),
    "grouped_verify": ("flash_attn_grouped_verify_paged", _PAGED, "DFlash2 grouped verifier"),
    "grouped_fp16": ("sm70_grouped_fp16_fwd", _PAGED, "FP16 grouped FP32 verifier"),
    "grouped_e4m3": ("grouped_e4m3_fp32", _PAGED, "E4M3 grouped FP32 verifier"),
    "bridge": ("fp8_paged_kv_to_fp16", _PAGED, "FP8 paged KV to FP16 bridge"),
    "splitd_dense": ("sm70_splitd_d256_dense", _DENSE, "Split-D D256 dense prefill"),
    "splitd_paged": ("sm70_splitd_d256_paged", _PAGED, "Split-D D256 paged prefill"),
    "splitkv3": ("sm70_splitd_d256_splitkv3", _DENSE, "Split-D D256 split-KV3 dense prefill"),
    "scalar_tail": ("sm70_e4m3_compact_scalar_tail", _PAGED, "E4M3 compact scalar tail"),
    "triton_unified": ("unified_attention", _PAGED, "the Triton backend's forward"),
}
LABELS: Mapping[str, str] = {label: entry[0] for label, entry in _ENTRIES.items()}
# The DDTree verifier's Triton kernel (a JIT launch, not a native entry).
DDTREE_KERNEL = "_ddtree_paged_attention_kernel"

OPS: dict[str, OpSpec] = {
    # Each writes its output in place (`out`), as the backend's entries do.
    name: OpSpec(f"{name}(Tensor(a!) out, {args}) -> ()", doc=f"{doc} (row label `{label}`)")
    for label, (name, args, doc) in _ENTRIES.items()
}

__all__ = ["DDTREE_KERNEL", "LABELS", "OPS"]
