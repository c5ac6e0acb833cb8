"""TE's module path transformer_engine.pytorch.tensor.float8_tensor (the classes live in nvfp4.torch.tensor)."""
from . import Float8Quantizer, Float8CurrentScalingQuantizer, Float8Tensor  # noqa: F401

__all__ = ["Float8Quantizer", "Float8CurrentScalingQuantizer", "Float8Tensor"]
