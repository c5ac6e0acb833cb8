"""te.Linear / te.LayerNormLinear with TE's ``parameters_split``, as MultiheadAttention builds its
QKV projections when ``fuse_qkv_params=False`` (TE's default): the weight [out, in] held as one
Parameter per part (``query_weight``, ``key_weight``, ``value_weight``, then ``query_bias``, ...),
views of one buffer, each initialised by itself as TE does; the forward concatenates them and runs
one GEMM, so the numerics are te.Linear's with the concatenated weight (TE's noop_cat). Built on
LinearUnit.run and module/base.py's helpers; the state_dict keys are TE's."""
import collections

import torch

from ..module import base as _module
from ..module._linear_unit import LinearUnit
from ..module.layernorm import normalize


def split_names(out_features, parameters_split):
    """TE's naming (module/linear.py): a dict {name: size} or a tuple of names (equal sizes) ->
    ([name_weight], [name_bias], [size])."""
    if not parameters_split:
        raise ValueError("Cannot split weight buffer into 0 parameters")
    if isinstance(parameters_split, dict):
        items = list(parameters_split.items())
    elif all(isinstance(n, str) for n in parameters_split):
        items = [(n, out_features // len(parameters_split)) for n in parameters_split]
    else:
        raise TypeError("Invalid configuration for parameters split")
    sizes = [int(s) for _, s in items]
    if sum(sizes) != out_features:
        raise ValueError(f"Trying to split weight buffer (out_features={out_features}) with split sizes {sizes}")
    names = [n.rstrip("_") for n, _ in items]
    return [f"{n}_weight" for n in names], [f"{n}_bias" for n in names], sizes


class SplitLinear(torch.nn.Module):
    """te.Linear (``normalization=None``) or te.LayerNormLinear with parameters_split."""

    def __init__(self, in_features, out_features, parameters_split, *, bias=True, init_method=None, return_bias=False,
                 params_dtype=None, normalization=None, eps=1e-5, return_layernorm_output=False, zero_centered_gamma=False,
                 seed=0, mode="exact", fp8_tensor_core="hopper", promotion_interval=128, module_name="Linear"):
        super().__init__()
        self.module_name = module_name
        self.in_features, self.out_features = int(in_features), int(out_features)
        dtype = _module.resolve_dtype(params_dtype)
        self.use_bias, self.return_bias = bool(bias), bool(return_bias)
        self.normalization, self.eps, self.zero_centered_gamma = normalization, float(eps), bool(zero_centered_gamma)
        self.return_layernorm_output = bool(return_layernorm_output)
        if normalization is not None:  # the norm's parameters first, as TE registers them
            self.layer_norm_weight = _module.new_vector(self.in_features, dtype, 0.0 if zero_centered_gamma else 1.0)
            self.layer_norm_bias = _module.new_vector(self.in_features, dtype, 0.0) if normalization == "LayerNorm" else None
        self.weight_names, self.bias_names, self.parameter_split_sizes = split_names(self.out_features, parameters_split)
        weight = torch.empty(self.out_features, self.in_features, dtype=dtype)
        bias_buffer = torch.zeros(self.out_features, dtype=dtype)
        starts = [sum(self.parameter_split_sizes[:i]) for i in range(len(self.parameter_split_sizes) + 1)]
        for i, name in enumerate(self.weight_names):  # weights together, then biases (TE's order)
            part = torch.nn.Parameter(weight[starts[i]:starts[i + 1]])
            with torch.no_grad():
                (init_method or (lambda w: torch.nn.init.normal_(w, mean=0.0, std=0.023)))(part)
            self.register_parameter(name, part)
        if self.use_bias:
            for i, name in enumerate(self.bias_names):
                self.register_parameter(name, torch.nn.Parameter(bias_buffer[starts[i]:starts[i + 1]]))
        self._unit = LinearUnit(self.in_features, self.out_features, bias=self.use_bias and not self.return_bias,
                                params_dtype=dtype, seed=seed, mode=mode, fp8_tensor_core=fp8_tensor_core,
                                promotion_interval=promotion_interval)

    @property
    def params_dtype(self):
        return getattr(self, self.weight_names[0]).dtype

    def _bias(self):
        return torch.cat([getattr(self, n) for n in self.bias_names]) if self.use_bias else None

    def forward(self, inp, is_first_microbatch=None, fp8_output=False, fp8_grad=False):
        if fp8_output or fp8_grad:
            raise ValueError(f"{self.module_name}: fp8_output / fp8_grad (FP8 tensors between modules) are not supported by nvfp4.torch")
        _module.check_parameters(self, self.module_name)
        x = _module.activation(inp, self.in_features, self.module_name)
        ln_out = x
        if self.normalization is not None:
            ln_out = normalize(x, self.normalization, self.layer_norm_weight, self.layer_norm_bias, self.eps,
                               self.zero_centered_gamma)
        weight = torch.cat([getattr(self, n) for n in self.weight_names])
        bias = self._bias()
        y = self._unit.run(ln_out.reshape(-1, self.in_features), weight, None if self.return_bias else bias,
                           is_first_microbatch).reshape(*x.shape[:-1], self.out_features)
        out = (y, None if bias is None else bias.to(y.dtype)) if self.return_bias else (y,)  # TE: in the activation dtype
        if self.return_layernorm_output:
            out = out + (ln_out,)
        return out if len(out) > 1 else out[0]

    def get_extra_state(self):
        return self._unit.extra_state()

    def set_extra_state(self, state):
        self._unit.load_extra_state(state)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"parameters_split={collections.OrderedDict(zip(self.weight_names, self.parameter_split_sizes))}")
