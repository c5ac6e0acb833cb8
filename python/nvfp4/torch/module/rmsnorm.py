"""te.RMSNorm: x / sqrt(mean(x^2) + eps) * gamma in float32, output in the input's dtype (TE's
module/rmsnorm.py); shares te.LayerNorm's machinery."""
from .layernorm import _Norm

__all__ = ["RMSNorm"]


class RMSNorm(_Norm):
    """TE's RMSNorm: x / sqrt(mean(x^2) + eps) * gamma (gamma + 1 with zero_centered_gamma)."""
    kind = "RMSNorm"
