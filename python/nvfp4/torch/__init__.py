"""nvfp4.torch: TransformerEngine's PyTorch API on any CPU. A script written for TE runs with

    import nvfp4.torch as te              # instead of: import transformer_engine.pytorch as te
    from nvfp4.common import recipe       # instead of: from transformer_engine.common import recipe

The modules (``te.Linear``, ``te.LayerNormLinear``, ``te.LayerNormMLP``, ``te.LayerNorm``,
``te.RMSNorm``) and the autocast API (``te.autocast`` / ``te.fp8_autocast``) follow TE's names,
signatures, defaults and module paths (``nvfp4.torch.module.linear.Linear``, ...); forward and
backward of every GEMM run the library's emulation of the GPU recipe (each quantizer and GEMM bit
for bit as TE computes it on the GPU). CPU tensors only. What nvfp4 adds beyond TE lives in
``nvfp4.torch.extras`` (optimizers with low-precision state, functional quantize / GEMM calls).
What exists and what does not: docs/python.md, "From PyTorch".
"""
try:
    import torch as _torch
except ImportError as _e:  # pragma: no cover - depends on the machine
    raise ImportError("nvfp4.torch needs PyTorch (Debian / Ubuntu: apt install python3-torch; or pip install torch)") from _e

from . import constants
from .constants import DType
from .module import LayerNorm, LayerNormLinear, LayerNormMLP, Linear, RMSNorm
from .module import GroupedLinear
from .attention import DotProductAttention, MultiheadAttention, RotaryPositionEmbedding
from .transformer import TransformerLayer
from .quantization import (autocast, fp8_autocast, fp8_model_init, get_default_fp8_recipe, get_default_recipe, get_fp8_recipe,
                           is_fp8_available, is_fp8_block_scaling_available, is_fp8_enabled, is_mxfp8_available,
                           is_nvfp4_available, quantized_model_init)
from .distributed import CudaRNGStatesTracker, checkpoint
from ._roles import DelayedScalingRequest, QuantizerRequest, QuantizerRole
from .quantized_tensor import QuantizedTensor, QuantizedTensorStorage, Quantizer, prepare_for_saving, restore_from_saved
from .tensor import (Float8BlockQuantizer, Float8BlockwiseQTensor, Float8BlockwiseQTensorStorage, Float8CurrentScalingQuantizer,
                     Float8Quantizer, Float8Tensor, Float8TensorStorage, MXFP8Quantizer, MXFP8Tensor, MXFP8TensorStorage,
                     NVFP4Quantizer, NVFP4Tensor, NVFP4TensorStorage)

__all__ = ["DType", "constants", "Linear", "LayerNormLinear", "LayerNormMLP", "LayerNorm", "RMSNorm", "GroupedLinear", "DotProductAttention",
           "MultiheadAttention", "RotaryPositionEmbedding", "TransformerLayer", "autocast", "fp8_autocast",
           "is_fp8_enabled", "get_fp8_recipe", "get_default_fp8_recipe", "get_default_recipe", "is_fp8_available",
           "is_mxfp8_available", "is_fp8_block_scaling_available", "is_nvfp4_available", "quantized_model_init",
           "fp8_model_init", "checkpoint", "CudaRNGStatesTracker", "QuantizerRole", "QuantizerRequest",
           "DelayedScalingRequest", "QuantizedTensor", "QuantizedTensorStorage", "Quantizer", "prepare_for_saving",
           "restore_from_saved", "Float8Quantizer", "Float8CurrentScalingQuantizer", "MXFP8Quantizer", "Float8BlockQuantizer",
           "NVFP4Quantizer", "Float8Tensor", "MXFP8Tensor", "Float8BlockwiseQTensor", "NVFP4Tensor", "Float8TensorStorage",
           "MXFP8TensorStorage", "Float8BlockwiseQTensorStorage", "NVFP4TensorStorage"]

