"""te.LayerNormLinear: a high-precision norm (LayerNorm or RMSNorm) followed by an emulated Linear."""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple, Union

import torch

from . import base as _module
from ._te_checks import canonical_dtype
from ._parallel import TensorParallel
from ._te_module import init_constant
from .layernorm import normalize
from .linear import GemmModule

__all__ = ["LayerNormLinear"]


class LayerNormLinear(GemmModule):
    """TE's LayerNormLinear: parameters ``layer_norm_weight``, ``layer_norm_bias`` (LayerNorm only),
    ``weight``, ``bias``; the norm in float32 (output in the activation dtype), then the Linear
    under the region's recipe. Initialisation, devices and extra keywords as te.Linear's."""

    def __init__(self, in_features: int, out_features: int, eps: float = 1e-5, *, bias: bool = True,
                 normalization: str = "LayerNorm", init_method: Optional[Callable] = None, return_bias: bool = False,
                 params_dtype: Optional[torch.dtype] = None, return_layernorm_output: bool = False,
                 zero_centered_gamma: bool = False,
                 parameters_split: Optional[Union[Tuple[str, ...], Dict[str, int]]] = None,
                 device: Union[torch.device, str] = "cpu", name: Optional[str] = None, seed: int = 0, mode: str = "exact",
                 fp8_tensor_core: str = "hopper", promotion_interval: int = 128, **te_only: Any) -> None:
        super().__init__()
        tp = TensorParallel.take("LayerNormLinear", te_only)  # parallel_mode, tp_group, tp_size, sequence_parallel
        _module.check_unsupported("LayerNormLinear", te_only)
        if tp.mode == "row":
            raise NotImplementedError("Normalization does not support tensor-parallel distribution.")  # TE's
        if normalization not in ("LayerNorm", "RMSNorm"):
            raise ValueError(f"LayerNormLinear: normalization must be 'LayerNorm' or 'RMSNorm', got {normalization!r}")
        self.name = name
        self.eps, self.normalization, self.zero_centered_gamma = float(eps), normalization, bool(zero_centered_gamma)
        self.return_layernorm_output = bool(return_layernorm_output)
        self._te_setup(device)
        width = _module.size_argument("LayerNormLinear", "in_features", in_features)
        dtype = canonical_dtype(params_dtype)
        # The norm's parameters first, as TE registers them (state_dict and parameter order).
        self._te_parameter("layer_norm_weight", (width,), dtype, init_constant(0.0 if zero_centered_gamma else 1.0))
        if normalization == "LayerNorm":
            self._te_parameter("layer_norm_bias", (width,), dtype, init_constant(0.0))
        else:
            self.layer_norm_bias = None
        self._init_gemm("LayerNormLinear", in_features, out_features, bias=bias, return_bias=return_bias,
                        params_dtype=params_dtype, init_method=init_method, seed=seed, mode=mode,
                        fp8_tensor_core=fp8_tensor_core, promotion_interval=promotion_interval, tp=tp,
                        parameters_split=parameters_split)

    def _norm_parameters(self):
        return [p for p in (self.layer_norm_weight, self.layer_norm_bias) if p is not None]

    def forward(self, inp: torch.Tensor, is_first_microbatch: Optional[bool] = None, fp8_output: Optional[bool] = False,
                fp8_grad: Optional[bool] = False) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:

        if fp8_output or fp8_grad:
            raise ValueError("LayerNormLinear: fp8_output / fp8_grad are not supported by nvfp4.torch")
        x, recipe, dtype = self._gemm_input(inp, "LayerNormLinear", check_input=False)
        ln_out = normalize(x, self.normalization, self.layer_norm_weight, self.layer_norm_bias, self.eps, self.zero_centered_gamma)
        y = self._gemm(ln_out, is_first_microbatch)
        out = (y, self._returned_bias(dtype)) if self.return_bias else (y,)
        if self.return_layernorm_output:
            out = out + (ln_out,)
        return out if len(out) > 1 else out[0]
