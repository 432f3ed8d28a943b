"""The QPN M1 kernels compiled (not launched) for a named CUDA compute capability, run as a
child: `python -m tests.qpn_ptx_targets KERNELS_FILE CAPABILITY` prints, as JSON, for each
compiled variant the number of grid-dependency (`griddepcontrol`) and bulk-copy
(`cp.async.bulk`) instructions in its PTX, or the compiler's error (ptxas rejects both below
capability 9.0). `python -m tests.qpn_ptx_targets KERNELS_FILE 90 structure` prints instead,
for the variants of STRUCTURE_VARIANTS compiled for capability 9.0, where in the PTX the
instructions that no result shows are (tests/test_triton_compiled_structure.py's rules).

Why a child: Triton's `tl.target_info.cuda_capability_geq`, which guards those instructions,
reads the *active driver's* target, not the target a kernel is compiled for; so the child
makes active a driver that stands for a GPU of that capability (Triton's
`driver.set_active`, its hook for choosing the driver) and compiles for the same target,
which is what an sm_70 or sm_80 machine does. The setting is process-wide and cannot be
undone on a machine without a GPU (`reset_active` then raises), so it must not happen in
the suite's own process, whose interpreter tests need the capability checks false.

KERNELS_FILE is loaded from its path (so that a mutated copy of native/reference/
triton_qpn.py can be compiled the same way)."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import ModuleType
from typing import Any

import triton
from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase
from triton.compiler import ASTSource
from triton.runtime import driver

# A reduced geometry (tests/test_mut_triton_interp.py's), which compiles in seconds: the
# capability blocks do not depend on the shapes.
EXPERTS, TOPK, ROUTES = 3, 10, 16
W13_K, W13_N, W2_K, W2_N, GROUP, SLICES = 256, 64, 32, 64, 8, 16

# Every W13 block guarded by the capability: the trigger before the wait (PDL with
# TRIGGER_FIRST), the wait with its speculation and input prefetches (WAIT, SPECULATE,
# SPECULATE_W2, PREFETCH_INPUTS), and the L2 prefetches after it (PREFETCH, PREFETCH_W2).
W13_CONSTANTS: dict[str, Any] = dict(
    EXPERTS=EXPERTS, K=W13_K, N=W13_N, GROUP=GROUP, SLICES=SLICES, PAIRS=16, COMPACT=False,
    HW_FMA=True, PDL=True, X_FIRST=True, WAIT=True, GATE_UP=True, PREFETCH=True,
    PREFETCH_W2=True, WORDS_FIRST=False, W2_K=W2_K, W2_N=W2_N, ONE_SHIFT=True,
    WORD_BATCHES=0, PREFETCH_INPUTS=True, SPECULATE=True, WIDE_META=True,
    TRIGGER_FIRST=True, SPECULATE_W2=True,
)  # fmt: skip
W13_POINTERS = {
    "x_ptr": "*i32", "w_ptr": "*i32", "meta_ptr": "*i32", "ids_ptr": "*i32",
    "inter_ptr": "*fp16", "w2_ptr": "*i32", "s2_ptr": "*i32",
}  # fmt: skip
W2_BASE: dict[str, Any] = dict(
    EXPERTS=EXPERTS, TOPK=TOPK, ROUTES=ROUTES, K=W2_K, N=W2_N, GROUP=GROUP, COLUMNS=32,
    COMPACT=False, HW_FMA=True, PDL=True, PREDECODE=True, TRIGGER=True, PAIRED=True,
    ONE_SHIFT=True, WEIGHTS_FIRST=True, WIDE_META=True, RECHECK=False, REDO=False, PACK=0,
    WIDEN=False,
)  # fmt: skip
# W2's three waits (each behind the capability): after the widened decode, after the
# decode, and before the decode; each with the trigger for the next kernel (TRIGGER).
W2_VARIANTS: dict[str, dict[str, Any]] = {
    "w2-widen": {**W2_BASE, "PAIRED": False, "PACK": 4, "WIDEN": True},
    "w2-predecode": W2_BASE,
    "w2-decode-after-wait": {**W2_BASE, "PREDECODE": False},
}
W2_POINTERS = {
    "inter_ptr": "*i32", "w_ptr": "*i32", "meta_ptr": "*i32", "ids_ptr": "*i32",
    "topk_ptr": "*fp32", "out_ptr": "*fp16",
}  # fmt: skip


class TargetDriver(DriverBase):
    """The active driver as far as compiling goes: a CUDA GPU of one capability. Nothing is
    launched, so the rest is never called."""

    def __init__(self, capability: int) -> None:
        super().__init__()
        self.target = GPUTarget("cuda", capability, 32)

    @classmethod
    def is_active(cls) -> bool:
        return False

    def map_python_to_cpp_type(self, ty: str) -> str:
        raise NotImplementedError("compile only")

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_active_torch_device(self) -> Any:
        raise NotImplementedError("compile only")

    def get_benchmarker(self) -> Any:
        raise NotImplementedError("compile only")


def load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("qpn_kernels_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def compiled_ptx(kernel: Any, pointers: dict[str, str], constants: dict[str, Any],
                 capability: int = 90, warps: int = 1) -> str:  # fmt: skip
    signature = {name: pointers.get(name, "constexpr") for name in kernel.arg_names}
    source = ASTSource(kernel, signature, constexprs=constants)
    target = GPUTarget("cuda", capability, 32)
    return str(triton.compile(source, target=target, options={"num_warps": warps}).asm["ptx"])


def findings(kernel: Any, pointers: dict[str, str], constants: dict[str, Any], capability: int,
             warps: int) -> dict[str, Any]:  # fmt: skip
    try:
        ptx = compiled_ptx(kernel, pointers, constants, capability, warps)
    except Exception as error:  # ptxas's rejection is the finding, not a crash of the child
        return {"error": f"{type(error).__name__}: {str(error)[-600:]}"}
    return {
        "error": None,
        "griddepcontrol.wait": ptx.count("griddepcontrol.wait"),
        "griddepcontrol.launch_dependents": ptx.count("griddepcontrol.launch_dependents"),
        "cp.async.bulk": ptx.count("cp.async.bulk"),
    }


def lines_of(ptx: str) -> dict[str, list[int]]:
    """Line numbers, in the PTX's text order, of the instructions the structure rules place:
    the grid-dependency wait and trigger, loads through L2 only (`ld.global.cg`, which is
    what `cache_modifier=".cg"` and the recheck's inline loads become), the 16-byte
    activation loads (`ld.global.v4.b32`, _activations' inline assembly), FP32 multiply-adds,
    and conditional branches."""
    found: dict[str, list[int]] = {
        "wait": [], "trigger": [], "load.cg": [], "load.v4": [], "fma": [], "branch": [],
    }  # fmt: skip
    for number, line in enumerate(ptx.splitlines()):
        text = line.strip()
        if "griddepcontrol.wait" in text:
            found["wait"].append(number)
        if "griddepcontrol.launch_dependents" in text:
            found["trigger"].append(number)
        if "ld.global.cg" in text:
            found["load.cg"].append(number)
        if "ld.global.v4.b32" in text:
            found["load.v4"].append(number)
        if text.startswith("fma.rn.f32"):
            found["fma"].append(number)
        if text.startswith("@") and " bra" in text:
            found["branch"].append(number)
    return found


# W13 in each of its trigger placements (PDL: W2 is launched early, so W13 triggers; WAIT:
# W13 itself was launched early and waits; TRIGGER_FIRST: before that wait), and W2 in each
# of its three waits without the recheck, with it, and with the redo forced.
STRUCTURE_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    **{
        f"w13 pdl={pdl} wait={wait} trigger-first={first}": (
            "w13",
            {**W13_CONSTANTS, "PDL": pdl, "WAIT": wait, "TRIGGER_FIRST": first},
        )
        for pdl in (True, False)
        for wait in (True, False)
        for first in (True, False)
        if pdl or first
    },
    **{
        f"{name} {mode}": (
            "w2",
            {**constants, "RECHECK": mode != "fast", "REDO": mode == "redo"},
        )
        for name, constants in W2_VARIANTS.items()
        for mode in ("fast", "recheck", "redo")
    },
}


def structure(path: str) -> dict[str, dict[str, list[int]]]:
    driver.set_active(TargetDriver(90))
    kernels = load(path)
    found = {}
    for name, (kernel, constants) in STRUCTURE_VARIANTS.items():
        if kernel == "w13":
            ptx = compiled_ptx(kernels._w13_kernel, W13_POINTERS, constants)
        else:
            ptx = compiled_ptx(kernels._w2_kernel, W2_POINTERS, constants)
        found[name] = lines_of(ptx)
    return found


def main(path: str, capability: int) -> dict[str, dict[str, Any]]:
    driver.set_active(TargetDriver(capability))
    kernels = load(path)
    found = {"w13": findings(kernels._w13_kernel, W13_POINTERS, W13_CONSTANTS, capability, 1)}
    for name, constants in W2_VARIANTS.items():
        found[name] = findings(kernels._w2_kernel, W2_POINTERS, constants, capability, 1)
    return found


if __name__ == "__main__":
    if sys.argv[3:] == ["structure"]:
        assert sys.argv[2] == "90", "the structure rules are for capability 9.0"
        print(json.dumps(structure(sys.argv[1])))
    else:
        print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))
