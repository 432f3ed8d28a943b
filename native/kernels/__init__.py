"""The linear kernel capability classes, by family (docs/contracts/core.md §2). Torch-free at
import."""

from native.kernels.awq_dense import (
    AWQ_DENSE_KERNELS,
    TritonAwqLinearKernel,
    TurboMindAwqLinearKernel,
)
from native.kernels.fp8_sm70 import (
    FP8_SM70_KERNELS,
    QPN8Fp8BlockScaledMMLinearKernel,
    TurboMindFp8LinearKernel,
)
from native.kernels.nvfp4_sm70 import (
    NVFP4_SM70_KERNELS,
    Qpn2NvFp4LinearKernel,
    Qpn4NvFp4LinearKernel,
    TurboMindNvFp4LinearKernel,
)
from native.kernels.turing import (
    TURING_KERNELS,
    TuringQpn2NvFp4LinearKernel,
    TuringQpn8Fp8LinearKernel,
)

LINEAR_KERNELS = (*NVFP4_SM70_KERNELS, *TURING_KERNELS, *AWQ_DENSE_KERNELS, *FP8_SM70_KERNELS)

__all__ = [
    "FP8_SM70_KERNELS",
    "LINEAR_KERNELS",
    "QPN8Fp8BlockScaledMMLinearKernel",
    "Qpn2NvFp4LinearKernel",
    "Qpn4NvFp4LinearKernel",
    "TritonAwqLinearKernel",
    "TuringQpn2NvFp4LinearKernel",
    "TuringQpn8Fp8LinearKernel",
    "TurboMindAwqLinearKernel",
    "TurboMindFp8LinearKernel",
    "TurboMindNvFp4LinearKernel",
]
