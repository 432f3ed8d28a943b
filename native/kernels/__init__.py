"""The linear kernel capability classes, by family (CONTRACTS 2). Torch-free at import."""

from native.kernels.awq_dense import (
    AWQ_DENSE_KERNELS,
    TritonAwqLinearKernel,
    TurboMindAwqLinearKernel,
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

LINEAR_KERNELS = (*NVFP4_SM70_KERNELS, *TURING_KERNELS, *AWQ_DENSE_KERNELS)

__all__ = [
    "LINEAR_KERNELS",
    "Qpn2NvFp4LinearKernel",
    "Qpn4NvFp4LinearKernel",
    "TritonAwqLinearKernel",
    "TuringQpn2NvFp4LinearKernel",
    "TuringQpn8Fp8LinearKernel",
    "TurboMindAwqLinearKernel",
    "TurboMindNvFp4LinearKernel",
]
