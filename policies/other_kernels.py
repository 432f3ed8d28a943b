"""Kernel names the engine knows besides routectl's catalogue (upstream and reference-fork
linear kernels), accepted in `disabled_kernels` / the disabled-kernels variable. Data,
versioned with the tool.
"""

OTHER_KERNEL_NAMES: tuple[str, ...] = (
    "AiterFp8BlockScaledMMKernel", "AiterInt8ScaledMMLinearKernel",
    "AiterPerTokenFp8ScaledMMLinearKernel", "AiterPreshuffledPerTokenFp8ScaledMMLinearKernel",
    "AllSparkLinearKernel", "CPUFp8BlockScaledMMKernel", "CPUInt8ScaledMMLinearKernel",
    "CPUWNA16LinearKernel", "ChannelWiseTorchFP8ScaledMMLinearKernel", "ConchLinearKernel",
    "CutlassFP8ScaledMMLinearKernel", "CutlassFp8BlockScaledMMKernel",
    "CutlassInt8ScaledMMLinearKernel", "CutlassNvFp4LinearKernel", "CutlassW4A8LinearKernel",
    "DeepGemmFp8BlockScaledMMKernel", "Dynamic4bitLinearKernel", "EmulationMxfp8LinearKernel",
    "EmulationNvFp4LinearKernel", "ExllamaLinearKernel", "FbgemmNvFp4LinearKernel",
    "FlashInferB12xNvFp4LinearKernel", "FlashInferCudnnNvFp4LinearKernel",
    "FlashInferCutlassMxfp8LinearKernel", "FlashInferCutlassNvFp4LinearKernel",
    "FlashInferFP8ScaledMMLinearKernel", "FlashInferFp8DeepGEMMDynamicBlockScaledKernel",
    "FlashInferMxFp4LinearKernel", "FlashInferTrtllmNvFp4LinearKernel", "HummingLinearKernel",
    "MacheteLinearKernel", "MarlinFP8ScaledMMLinearKernel", "MarlinLinearKernel",
    "MarlinMxFp4LinearKernel", "MarlinMxfp8LinearKernel", "MarlinNvFp4LinearKernel",
    "PerTensorTorchFP8ScaledMMLinearKernel", "RDNA3W4A16LinearKernel",
    "RDNAHybridW4A16LinearKernel", "ROCmFP8ScaledMMLinearKernel",
    "RowWiseTorchFP8ScaledMMLinearKernel", "TritonFp8BlockScaledMMKernel",
    "TritonInt8ScaledMMLinearKernel", "TritonW4A16LinearKernel", "XPUFP8ScaledMMLinearKernel",
    "XPUMxFp4LinearKernel", "XPUMxFp8LinearKernel", "XPUW4A8IntLinearKernel",
    "XPUwNa16LinearKernel", "TurboMindFp8LinearKernel", "QPN8Fp8BlockScaledMMLinearKernel",
    "TurboMindGgufAffineKernel", "TurboMindGgufLut4Kernel",
)
