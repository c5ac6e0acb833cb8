"""TE 1.x's module path for the autocast API (``transformer_engine.pytorch.fp8``): the same objects
as ``nvfp4.torch.quantization``."""
from .quantization import autocast, fp8_autocast, get_default_fp8_recipe, get_fp8_recipe, is_fp8_enabled

__all__ = ["autocast", "fp8_autocast", "is_fp8_enabled", "get_fp8_recipe", "get_default_fp8_recipe"]
