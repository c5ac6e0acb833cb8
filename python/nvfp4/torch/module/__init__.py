"""TE's modules at TE's paths (``transformer_engine.pytorch.module``): ``module.linear.Linear``,
``module.layernorm_linear.LayerNormLinear``, ``module.layernorm_mlp.LayerNormMLP``,
``module.layernorm.LayerNorm``, ``module.rmsnorm.RMSNorm``."""
from .grouped_linear import GroupedLinear
from .layernorm import LayerNorm
from .layernorm_linear import LayerNormLinear
from .layernorm_mlp import LayerNormMLP
from .linear import Linear
from .rmsnorm import RMSNorm

__all__ = ["Linear", "LayerNormLinear", "LayerNormMLP", "LayerNorm", "RMSNorm", "GroupedLinear"]
