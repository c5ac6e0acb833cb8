"""te.RMSNorm: x / sqrt(mean(x^2) + eps) * gamma in float32, output in the compute dtype (TE's
module/rmsnorm.py); shares te.LayerNorm's machinery (arguments, dtype rule, deferred init)."""
from .layernorm import _Norm

__all__ = ["RMSNorm"]


class RMSNorm(_Norm):
    """TE's RMSNorm: x / sqrt(mean(x^2) + eps) * gamma (gamma + 1 with zero_centered_gamma), over
    the input's last len(normalized_shape) dims."""
    kind = "RMSNorm"
