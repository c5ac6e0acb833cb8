"""nvfp4.torch: TransformerEngine's PyTorch API on any CPU. A script written for TE runs with

    import nvfp4.torch as te          # instead of: import transformer_engine.pytorch as te

``te.Linear``, ``te.LayerNormLinear``, ``te.LayerNormMLP``, ``te.LayerNorm``, ``te.RMSNorm``,
``te.autocast`` / ``te.fp8_autocast`` and ``te.recipe`` follow TE's names, signatures and defaults;
forward and backward of every Linear run the library's emulation of the GPU recipe (each quantizer
and GEMM bit for bit as TE computes it on the GPU). ``te.optim`` has AdamW and Muon with
low-precision state; ``te.functional`` the quantize / dequantize / GEMM calls on torch tensors. CPU tensors
only. What exists and what does not: docs/python.md, "From PyTorch".
"""
try:
    import torch as _torch
except ImportError as _e:  # pragma: no cover - depends on the machine
    raise ImportError("nvfp4.torch needs PyTorch (Debian / Ubuntu: apt install python3-torch; or pip install torch)") from _e

from . import functional, optim, recipe
from .layernorm import LayerNorm, RMSNorm
from .layernorm_linear import LayerNormLinear
from .layernorm_mlp import LayerNormMLP
from .linear import Linear
from .quantization import autocast, fp8_autocast, get_default_fp8_recipe, get_fp8_recipe, is_fp8_enabled

__all__ = ["Linear", "LayerNormLinear", "LayerNormMLP", "LayerNorm", "RMSNorm", "autocast", "fp8_autocast", "recipe",
           "optim", "functional", "is_fp8_enabled", "get_fp8_recipe", "get_default_fp8_recipe", "is_fp8_available",
           "is_mxfp8_available", "is_fp8_block_scaling_available", "is_nvfp4_available"]


def is_fp8_available(return_reason=False):
    """Always available: the recipes are emulated on the CPU (TE's check_fp8_support analogue)."""
    return (True, "") if return_reason else True


is_mxfp8_available = is_fp8_block_scaling_available = is_nvfp4_available = is_fp8_available
