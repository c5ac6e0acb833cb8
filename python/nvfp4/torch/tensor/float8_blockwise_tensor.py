"""TE's module path transformer_engine.pytorch.tensor.float8_blockwise_tensor (the classes live in nvfp4.torch.tensor)."""
from . import Float8BlockQuantizer, Float8BlockwiseQTensor  # noqa: F401

__all__ = ["Float8BlockQuantizer", "Float8BlockwiseQTensor"]
