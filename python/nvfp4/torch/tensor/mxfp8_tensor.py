"""TE's module path transformer_engine.pytorch.tensor.mxfp8_tensor (the classes live in nvfp4.torch.tensor)."""
from . import MXFP8Quantizer, MXFP8Tensor  # noqa: F401

__all__ = ["MXFP8Quantizer", "MXFP8Tensor"]
