"""te.LayerNormMLP: norm -> fc1 -> activation -> fc2, the two GEMM layers emulated under the
region's recipe, the norm and the activation in high precision (float32 math, params_dtype out)."""
from __future__ import annotations

import io
from typing import Any, Callable, Dict, Optional, Tuple, Union

import torch

from . import _te_checks
from . import base as _module
from ._linear_unit import LinearUnit
from ._parallel import TensorParallel, TensorParallelModule, divide, set_tensor_model_parallel_attributes
from ._te_module import TEModuleMixin, init_constant, init_normal
from .layernorm import normalize

__all__ = ["LayerNormMLP", "ACTIVATIONS"]


def _gelu_tanh(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


def _qgelu(x):
    return x * torch.sigmoid(1.702 * x)


def _srelu(x):
    return torch.relu(x).square()


# TE's activation names: (function, gated). A gated activation splits fc1's output into two halves
# a, b and returns act(a) * b, so fc1 has 2 * ffn_hidden_size outputs.
ACTIVATIONS = {
    "gelu": (_gelu_tanh, False), "relu": (torch.relu, False), "silu": (torch.nn.functional.silu, False),
    "qgelu": (_qgelu, False), "srelu": (_srelu, False),
    "geglu": (_gelu_tanh, True), "reglu": (torch.relu, True), "swiglu": (torch.nn.functional.silu, True),
    "qgeglu": (_qgelu, True), "sreglu": (_srelu, True), "glu": (torch.sigmoid, True),
    "clamped_swiglu": (None, True),  # needs activation_params: _clamped_swiglu
}

# TE's clamped_swiglu defaults (tex.clamped_swiglu: limit 7, alpha 1.702, glu_linear_offset 1).
_CLAMPED_SWIGLU_DEFAULTS = {"limit": 7.0, "alpha": 1.702, "glu_linear_offset": 1.0}


def _clamped_swiglu(a, b, params):
    """GPT-OSS's SwiGLU (TE common/util/math.h clamped_silu, activation/swiglu.cu): the gate
    clamped from above at limit, a * sigmoid(alpha * a); the linear half clamped to [-limit, limit]
    plus glu_linear_offset."""
    limit, alpha, offset = params["limit"], params["alpha"], params["glu_linear_offset"]
    a = a.clamp(max=limit)
    return a * torch.sigmoid(alpha * a) * (b.clamp(min=-limit, max=limit) + offset)


class LayerNormMLP(TEModuleMixin, TensorParallelModule, torch.nn.Module):
    """TE's LayerNormMLP: parameters ``layer_norm_weight``, ``layer_norm_bias``, ``fc1_weight``,
    ``fc1_bias``, ``fc2_weight``, ``fc2_bias`` (TE's order; ``bias=False`` leaves TE's empty tensors);
    ``activation`` one of ACTIVATIONS (TE's "gelu" is the tanh approximation, "glu" is
    sigmoid(a) * b); ``activation_params`` only for "clamped_swiglu" (``limit``, ``alpha``,
    ``glu_linear_offset``, TE's defaults 7, 1.702, 1). On TE's module base (TEModuleMixin):
    ``device="meta"`` and ``reset_parameters()``, quantized weights under quantized_model_init,
    ``_extra_state`` in TE's two-GEMM layout, TE's parameter-dtype rule outside torch autocast.
    Tensor parallelism as TE's: ``tp_group`` / ``tp_size`` split ffn_hidden_size over the group
    (``size_per_partition``); with ``set_parallel_mode=True`` fc1 is column-parallel and fc2
    row-parallel (its output all-reduced, or reduce-scattered with ``sequence_parallel``, whose
    input rows are all-gathered), fc2's bias added after the collective."""

    def __init__(self, hidden_size: int, ffn_hidden_size: int, eps: float = 1e-5, *, bias: bool = True,
                 normalization: str = "LayerNorm", activation: str = "gelu",
                 activation_params: Optional[Dict[str, Any]] = None, init_method: Optional[Callable] = None,
                 output_layer_init_method: Optional[Callable] = None, return_bias: bool = False,
                 params_dtype: Optional[torch.dtype] = None, return_layernorm_output: bool = False,
                 zero_centered_gamma: bool = False, device: Union[torch.device, str] = "cpu", name: Optional[str] = None,
                 seed: int = 0, mode: str = "exact", fp8_tensor_core: str = "hopper", promotion_interval: int = 128,
                 **te_only: Any) -> None:
        super().__init__()
        set_parallel_mode = bool(te_only.pop("set_parallel_mode", False))
        self._tp = TensorParallel.take("LayerNormMLP", te_only, names=("tp_group", "tp_size", "sequence_parallel"))
        _module.check_unsupported("LayerNormMLP", te_only)
        if self._tp.sequence_parallel and not set_parallel_mode:
            # TE gathers the rows but scatters nothing back: its backward fails on the gradient's shape
            raise ValueError("LayerNormMLP(sequence_parallel=True) needs set_parallel_mode=True in nvfp4.torch (TE's "
                             "gathered rows are reduce-scattered only in that mode)")
        self.set_parallel_mode = set_parallel_mode
        self.name = name
        self._te_setup(device)
        if normalization not in ("LayerNorm", "RMSNorm"):
            raise ValueError(f"LayerNormMLP: normalization must be 'LayerNorm' or 'RMSNorm', got {normalization!r}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"LayerNormMLP: activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if activation_params and (not isinstance(activation_params, dict) or activation != "clamped_swiglu"
                                  or set(activation_params) - set(_CLAMPED_SWIGLU_DEFAULTS)):
            raise ValueError("LayerNormMLP: activation_params is only used by activation='clamped_swiglu' "
                             f"(keys {sorted(_CLAMPED_SWIGLU_DEFAULTS)}), got {activation_params!r} for {activation!r}")
        self.activation_params = activation_params
        self.hidden_size = _module.size_argument("LayerNormMLP", "hidden_size", hidden_size)
        self.ffn_hidden_size = _module.size_argument("LayerNormMLP", "ffn_hidden_size", ffn_hidden_size)
        self.eps = float(eps)
        self.normalization, self.activation, self.zero_centered_gamma = normalization, activation, bool(zero_centered_gamma)
        dtype = _te_checks.canonical_dtype(params_dtype)
        self.use_bias, self.return_bias, self.return_layernorm_output = bool(bias), bool(return_bias), bool(return_layernorm_output)
        self.size_per_partition = divide(self.ffn_hidden_size, self._tp.size)
        fc1_out = self.size_per_partition * (2 if ACTIVATIONS[activation][1] else 1)
        # TE's registration order and initialisers: fc1 from init_method, fc2 from
        # output_layer_init_method (each TE's normal(0, 0.023) when not given), biases zero.
        self._te_parameter("layer_norm_weight", (self.hidden_size,), dtype, init_constant(0.0 if zero_centered_gamma else 1.0))
        if normalization == "LayerNorm":
            self._te_parameter("layer_norm_bias", (self.hidden_size,), dtype, init_constant(0.0))
        else:
            self.layer_norm_bias = None
        self._te_parameter("fc1_weight", (fc1_out, self.hidden_size), dtype, init_method or init_normal(), is_weight=True)
        if self.use_bias:
            self._te_parameter("fc1_bias", (fc1_out,), dtype, init_constant(0.0))
        else:
            self.fc1_bias = torch.Tensor().to(dtype=dtype)  # TE: an empty tensor, not a parameter
        self._te_parameter("fc2_weight", (self.hidden_size, self.size_per_partition), dtype,
                           output_layer_init_method or init_normal(), is_weight=True)
        if self.use_bias:
            self._te_parameter("fc2_bias", (self.hidden_size,), dtype, init_constant(0.0))
        else:
            self.fc2_bias = torch.Tensor().to(dtype=dtype)
        options = dict(params_dtype=dtype, mode=mode, fp8_tensor_core=fp8_tensor_core, promotion_interval=promotion_interval)
        self._fc1 = LinearUnit(self.hidden_size, fc1_out, bias=self.use_bias, seed=seed, **options)
        # set_parallel_mode: fc2's bias is added after the collective (TE: gemm_bias_unfused_add)
        self._fc2 = LinearUnit(self.size_per_partition, self.hidden_size, bias=self._fc2_fused_bias(), seed=seed + 1, **options)
        if self._te_device.type != "meta":
            self.reset_parameters()

    def _te_units(self):
        return [self._fc1, self._fc2]

    def reset_parameters(self, defer_init: Optional[bool] = False) -> None:
        """TE's: the parameters' values (module/_te_module.py), then TE's tensor-parallel attributes."""
        super().reset_parameters(defer_init=defer_init)
        if defer_init:
            return
        self._tp.mark_parameters([], [], [p for p in (self.layer_norm_weight, self.layer_norm_bias) if p is not None])
        set_tensor_model_parallel_attributes(self.fc1_weight, True, 0, 1)
        set_tensor_model_parallel_attributes(self.fc2_weight, True, 1, 1)
        if self.use_bias:
            set_tensor_model_parallel_attributes(self.fc1_bias, True, 0, 1)
            if self.set_parallel_mode:
                self.fc2_bias.sequence_parallel = self._tp.sequence_parallel

    def _fc2_fused_bias(self):
        return self.use_bias and not self.return_bias and not self.set_parallel_mode

    @property
    def params_dtype(self) -> torch.dtype:
        """The parameters' dtype (it follows module.to(dtype))."""
        return self.fc1_weight.dtype

    def forward(self, inp: torch.Tensor, is_first_microbatch: Optional[bool] = None
                ) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
        x, recipe, dtype = self._te_prepare_forward(inp, "LayerNormMLP", self.hidden_size)
        self._tp.check_forward(recipe)
        if recipe is not None and _te_checks.TE_STRICT:  # TE's, on the input, fc1's and fc2's weights at once
            _te_checks.assert_dim_for_fp8_exec(x.reshape(-1, self.hidden_size), self.fc1_weight, self.fc2_weight)
        fc1_bias = self.fc1_bias if self.use_bias else None
        fc2_bias = self.fc2_bias if self.use_bias else None
        ln_out = normalize(x, self.normalization, self.layer_norm_weight, self.layer_norm_bias, self.eps, self.zero_centered_gamma)
        ln_total = self._tp.column_input(ln_out, reduce_grad=self.set_parallel_mode)  # TE: SP gathers, fc1's dgrad reduced
        # Both GEMMs' quantizer checks before fc1 runs, so that a refusal of fc2's operands (MXFP8 /
        # NVFP4 dims of ffn_hidden_size) leaves the module as it was (TE's order of messages).
        rows = ln_total.reshape(-1, self.hidden_size).shape[0]
        for width, weight in ((self.hidden_size, self.fc1_weight), (self.size_per_partition, self.fc2_weight)):
            _te_checks.check_quantized_gemm(recipe, torch.empty(rows, width, device="meta"), tuple(weight.shape), dtype)
        for unit in self._te_units():
            unit.name = self.name or ""
        h = self._fc1.run(ln_total.reshape(-1, self.hidden_size), self.fc1_weight, fc1_bias, is_first_microbatch)
        act, gated = ACTIVATIONS[self.activation]
        if self.activation == "clamped_swiglu":
            a, b = h.float().chunk(2, dim=-1)
            h = _clamped_swiglu(a, b, {**_CLAMPED_SWIGLU_DEFAULTS, **(self.activation_params or {})}).to(x.dtype)
        elif gated:
            a, b = h.float().chunk(2, dim=-1)
            h = (act(a) * b).to(x.dtype)
        else:
            h = act(h.float()).to(x.dtype)
        y = self._fc2.run(h, self.fc2_weight, fc2_bias if self._fc2_fused_bias() else None, is_first_microbatch)
        y = y.reshape(*ln_total.shape[:-1], self.hidden_size)
        if self.set_parallel_mode:
            y = self._tp.row_output(y)
            if self.use_bias and not self.return_bias:
                y = y + self.fc2_bias.to(y.dtype)
        # TE returns fc2's bias in the activation dtype (cast_if_needed; an empty tensor without bias)
        out = (y, self.fc2_bias.to(y.dtype)) if self.return_bias else (y,)
        if self.return_layernorm_output:
            out = out + (ln_out,)
        return out if len(out) > 1 else out[0]

    def set_extra_state(self, state: Union[torch.Tensor, io.BytesIO, Dict[str, Any], None]) -> None:
        """TE's format (module/_te_extra_state.py), or nvfp4.torch's earlier {"fc1": ..., "fc2": ...}."""
        if isinstance(state, dict) and set(state) == {"fc1", "fc2"}:
            for unit, key in ((self._fc1, "fc1"), (self._fc2, "fc2")):
                if not isinstance(state[key], dict) or "scaling" not in state[key]:
                    raise ValueError(f"LayerNormMLP._extra_state[{key!r}] is not a GEMM state ({{'scaling': ..., 'steps': ...}})")
            self._fc1.load_extra_state(state["fc1"])
            self._fc2.load_extra_state(state["fc2"])
            return
        super().set_extra_state(state)

    def extra_repr(self) -> str:

        return (f"hidden_size={self.hidden_size}, ffn_hidden_size={self.ffn_hidden_size}, activation={self.activation}, "
                f"normalization={self.normalization}, bias={self.use_bias}, params_dtype={self.params_dtype}")
