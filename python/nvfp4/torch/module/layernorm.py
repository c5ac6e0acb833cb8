"""te.LayerNorm (and the normalisation te.RMSNorm and the fused modules share): normalisation in high
precision, as TE computes it (statistics and the affine step in float32). Not quantized: TE's
norms are not FP8 GEMMs. Ordinary torch operations, so autograd differentiates them.

The module follows TE's (module/layernorm.py over ops/basic/layer_norm.py): ``normalized_shape``
an int or a tuple of the input's inner dims (``hidden_size`` and ``params_dtype`` are TE's
deprecated spellings), the computation in torch autocast's dtype or else the weight's (the input is
cast to it and the output has it), ``device="meta"`` defers initialisation to
``reset_parameters()`` (or to the first forward, as TE's op does)."""
from __future__ import annotations

import math
import typing
import warnings
from collections.abc import Iterable

import torch

from . import _te_checks

__all__ = ["LayerNorm", "normalize"]


def normalize(x: torch.Tensor, kind: str, weight: torch.Tensor, bias: typing.Optional[torch.Tensor], eps: float,
              zero_centered_gamma: bool) -> torch.Tensor:
    """x normalised over its last weight.dim() dimensions ("LayerNorm" or "RMSNorm"), in float32,
    returned in x's dtype."""
    inner = tuple(weight.shape)
    x32 = x.float()
    gamma = weight.float() + 1.0 if zero_centered_gamma else weight.float()
    if kind == "LayerNorm":
        y = torch.nn.functional.layer_norm(x32, inner, gamma, None if bias is None else bias.float(), eps)
    elif kind == "RMSNorm":
        dims = tuple(range(-len(inner), 0))
        y = x32 * torch.rsqrt(x32.pow(2).mean(dim=dims, keepdim=True) + eps) * gamma
    else:
        raise ValueError(f"normalization must be 'LayerNorm' or 'RMSNorm', got {kind!r}")
    return y.to(x.dtype)


def _cpu_autocast_dtype():
    """The dtype of an enabled CPU autocast region (TE reads CUDA's), else None."""
    try:
        enabled = torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    return torch.get_autocast_dtype("cpu") if enabled else None


class _Norm(torch.nn.Module):
    kind = None
    _has_bias = False

    def __init__(self, normalized_shape: typing.Union[typing.Iterable[int], int, None] = None, eps: float = 1e-5,
                 sequence_parallel: typing.Optional[bool] = None, params_dtype: typing.Optional[torch.dtype] = None,
                 zero_centered_gamma: bool = False, hidden_size: typing.Optional[int] = None, *,
                 device: typing.Union[torch.device, str, None] = None, dtype: typing.Optional[torch.dtype] = None,
                 sm_margin: typing.Union[int, typing.Dict[str, int]] = 0) -> None:
        super().__init__()
        if normalized_shape is None:
            if hidden_size is None:
                raise RuntimeError("Neither `normalized_shape` nor `hidden_size` (deprecated) args are provided")
            warnings.warn("`hidden_size` arg has been renamed to `normalized_shape` for compatibility with `torch.nn.LayerNorm`.",
                          DeprecationWarning, stacklevel=3)
            normalized_shape = hidden_size
        elif hidden_size is not None:
            raise RuntimeError("Both `normalized_shape` and `hidden_size` (deprecated) args are provided")
        if params_dtype is not None:
            if dtype is not None:
                raise RuntimeError("Both `dtype` and `params_dtype` (deprecated) kwargs are provided")
            dtype = params_dtype
        shape = tuple(normalized_shape) if isinstance(normalized_shape, Iterable) else (normalized_shape,)
        for size in shape:
            if isinstance(size, bool) or not hasattr(type(size), "__index__") or int(size) <= 0:
                raise ValueError(f"{self.kind}: normalized_shape must be positive ints, got {normalized_shape!r}")
        self.normalized_shape = tuple(int(s) for s in shape)
        self.eps, self.zero_centered_gamma = float(eps), bool(zero_centered_gamma)
        self.sequence_parallel = sequence_parallel  # Megatron-LM's flag; nothing to do on one process
        self.sm_margin = sm_margin                  # SMs left to other kernels: no meaning on a CPU
        device = _te_checks.canonical_device(device)
        dtype = _te_checks.canonical_dtype(dtype, "dtype")
        self.weight = torch.nn.Parameter(torch.empty(self.normalized_shape, device=device, dtype=dtype))
        self.bias = torch.nn.Parameter(torch.empty(self.normalized_shape, device=device, dtype=dtype)) if self._has_bias else None
        if device.type != "meta":
            self.reset_parameters()

    @property
    def hidden_size(self) -> int:
        """The number of elements normalised together (the old single-int spelling)."""
        return math.prod(self.normalized_shape)

    def reset_parameters(self, defer_init: typing.Optional[bool] = None) -> None:
        """TE's initialisation: weight ones (zeros with zero_centered_gamma), bias zeros; parameters
        on the meta device are made on the CPU first."""
        if defer_init is not None:
            warnings.warn('defer_init argument to reset_parameters function is deprecated. Set device to "meta" instead.',
                          DeprecationWarning, stacklevel=2)
            if defer_init:
                return
        for name in ("weight", "bias"):
            param = getattr(self, name)
            if param is None:
                continue
            if param.device.type == "meta":
                param = torch.nn.Parameter(torch.empty_like(param, device="cpu"))
            with torch.no_grad():
                param.fill_(1.0 if name == "weight" and not self.zero_centered_gamma else 0.0)
            if self.sequence_parallel is not None:
                param.sequence_parallel = self.sequence_parallel
            setattr(self, name, param)

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        if self.weight.device.type == "meta":
            self.reset_parameters()  # TE's op initialises deferred parameters at its first forward
        if not torch.is_tensor(inp):
            raise TypeError(f"{self.kind}: the input must be a torch.Tensor, got {type(inp).__name__}")
        for name, param in self.named_parameters(recurse=False):
            if param.device.type != "cpu":
                raise ValueError(f"{self.kind}.{name} is on device '{param.device}': nvfp4.torch runs on the CPU")
        if inp.device.type != "cpu":
            raise ValueError(f"{self.kind}: the input is on device '{inp.device}': nvfp4.torch runs on the CPU "
                             "(move it with .cpu())")
        if not inp.is_floating_point() or inp.dtype == torch.float64:
            raise TypeError(f"{self.kind}: the input must be float32, float16 or bfloat16, got {inp.dtype}")
        inner = self.normalized_shape
        if inp.dim() < len(inner) or tuple(inp.shape[-len(inner):]) != inner:
            raise ValueError(f"Input tensor (shape={tuple(inp.shape)}) and weight tensor (shape={inner}) are not compatible")
        dtype = _cpu_autocast_dtype() or self.weight.dtype
        x = inp if inp.dtype == dtype else inp.to(dtype)
        return normalize(x, self.kind, self.weight, self.bias, self.eps, self.zero_centered_gamma)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, zero_centered_gamma={self.zero_centered_gamma}"


class LayerNorm(_Norm):
    """TE's LayerNorm: (x - mean) / sqrt(var + eps) * gamma + beta (gamma + 1 with
    zero_centered_gamma), over the input's last len(normalized_shape) dims."""
    kind = "LayerNorm"
    _has_bias = True
