"""te.Linear: y = x W^T + b with every GEMM and quantizer of the region's recipe emulated."""
import torch

from . import base as _module
from ._linear_unit import LinearUnit

__all__ = ["Linear"]


class GemmModule(torch.nn.Module):
    """What TE's GEMM modules share: ``weight`` [out_features, in_features] and ``bias``
    Parameters that the emulated core (a LinearUnit) reads in place, and the core's state kept in
    state_dict under ``_extra_state``."""

    def _init_gemm(self, name, in_features, out_features, *, bias, return_bias, params_dtype, init_method, seed, mode,
                   fp8_tensor_core, promotion_interval):
        """Makes the parameters and the core."""
        self.in_features, self.out_features = int(in_features), int(out_features)
        if self.in_features <= 0 or self.out_features <= 0:
            raise ValueError(f"{name}: in_features and out_features must be positive, got {in_features}, {out_features}")
        dtype = _module.resolve_dtype(params_dtype)
        self.use_bias, self.return_bias = bool(bias), bool(return_bias)
        self.weight = _module.new_weight((self.out_features, self.in_features), dtype, init_method)
        self.bias = _module.new_vector(self.out_features, dtype, 0.0) if self.use_bias else None
        # With return_bias the bias is returned, not added (TE: for a fused bias-add downstream).
        self._unit = LinearUnit(self.in_features, self.out_features, bias=self.use_bias and not self.return_bias,
                                params_dtype=dtype, seed=seed, mode=mode, fp8_tensor_core=fp8_tensor_core,
                                promotion_interval=promotion_interval)

    @property
    def params_dtype(self):
        """The parameters' dtype (it follows module.to(dtype); float32 or bfloat16)."""
        return self.weight.dtype

    def get_extra_state(self):
        return self._unit.extra_state()

    def set_extra_state(self, state):
        self._unit.load_extra_state(state)


class Linear(GemmModule):
    """TE's Linear. ``weight`` [out_features, in_features] and ``bias`` [out_features] are ordinary
    Parameters of ``params_dtype`` (float32 or bfloat16) that the layer reads in place. Extra
    keywords beyond TE's: ``seed`` (NVFP4 stochastic rounding streams), ``mode`` ("exact" tensor
    core, or "relaxed" fp32 chains), ``fp8_tensor_core`` ("hopper" | "blackwell"),
    ``promotion_interval`` (FP8 split accumulator, elements of K per promotion)."""

    def __init__(self, in_features, out_features, *, bias=True, init_method=None, return_bias=False, params_dtype=None,
                 device="cpu", seed=0, mode="exact", fp8_tensor_core="hopper", promotion_interval=128, **te_only):
        super().__init__()
        _module.check_unsupported("Linear", te_only)
        _module.resolve_device(device)
        self._init_gemm("Linear", in_features, out_features, bias=bias, return_bias=return_bias, params_dtype=params_dtype,
                        init_method=init_method, seed=seed, mode=mode, fp8_tensor_core=fp8_tensor_core,
                        promotion_interval=promotion_interval)

    def forward(self, inp, is_first_microbatch=None, fp8_output=False, fp8_grad=False):
        if fp8_output or fp8_grad:
            raise ValueError("Linear: fp8_output / fp8_grad (FP8 tensors between modules) are not supported by nvfp4.torch")
        _module.check_parameters(self, "Linear")
        x = _module.activation(inp, self.in_features, "Linear")
        y = self._unit.run(x.reshape(-1, self.in_features), self.weight, None if self.return_bias else self.bias,
                           is_first_microbatch)
        y = y.reshape(*x.shape[:-1], self.out_features)
        return (y, self.bias) if self.return_bias else y

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.use_bias}, params_dtype={self.params_dtype}"
