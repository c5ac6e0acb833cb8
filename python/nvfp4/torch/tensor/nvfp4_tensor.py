"""TE's module path transformer_engine.pytorch.tensor.nvfp4_tensor (the classes live in nvfp4.torch.tensor)."""
from . import NVFP4Quantizer, NVFP4Tensor  # noqa: F401

__all__ = ["NVFP4Quantizer", "NVFP4Tensor"]
