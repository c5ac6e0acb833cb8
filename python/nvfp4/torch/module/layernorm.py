"""te.LayerNorm (and the normalisation te.RMSNorm and the fused modules share): normalisation in high precision, as TE computes it (statistics and
the affine step in float32, the output in the input's dtype). Not quantized: TE's norms are not
FP8 GEMMs. Ordinary torch operations, so autograd differentiates them."""
import torch

from . import base as _module

__all__ = ["LayerNorm", "normalize"]


def normalize(x, kind, weight, bias, eps, zero_centered_gamma):
    """x normalised over its last dimension ("LayerNorm" or "RMSNorm"), in float32, returned in x's dtype."""
    x32 = x.float()
    gamma = weight.float() + 1.0 if zero_centered_gamma else weight.float()
    if kind == "LayerNorm":
        y = torch.nn.functional.layer_norm(x32, (x32.shape[-1],), gamma, None if bias is None else bias.float(), eps)
    elif kind == "RMSNorm":
        y = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps) * gamma
    else:
        raise ValueError(f"normalization must be 'LayerNorm' or 'RMSNorm', got {kind!r}")
    return y.to(x.dtype)


class _Norm(torch.nn.Module):
    kind = None

    def __init__(self, hidden_size, eps=1e-5, sequence_parallel=None, params_dtype=None, zero_centered_gamma=False,
                 device="cpu", **te_only):
        super().__init__()
        _module.check_unsupported(self.kind, dict(te_only, sequence_parallel=sequence_parallel))
        _module.resolve_device(device)
        self.hidden_size, self.eps, self.zero_centered_gamma = int(hidden_size), float(eps), bool(zero_centered_gamma)
        dtype = _module.resolve_dtype(params_dtype)
        self.weight = _module.new_vector(self.hidden_size, dtype, 0.0 if zero_centered_gamma else 1.0)
        self.bias = _module.new_vector(self.hidden_size, dtype, 0.0) if self.kind == "LayerNorm" else None

    def forward(self, inp):
        _module.check_parameters(self, self.kind)
        x = _module.activation(inp, self.hidden_size, self.kind)
        return normalize(x, self.kind, self.weight, self.bias, self.eps, self.zero_centered_gamma)


class LayerNorm(_Norm):
    """TE's LayerNorm: (x - mean) / sqrt(var + eps) * gamma + beta (gamma + 1 with zero_centered_gamma)."""
    kind = "LayerNorm"

