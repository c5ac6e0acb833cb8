"""te.LayerNormMLP: norm -> fc1 -> activation -> fc2, the two GEMM layers emulated under the
region's recipe, the norm and the activation in high precision (float32 math, params_dtype out)."""

import torch

from . import base as _module
from ._linear_unit import LinearUnit
from ._parallel import TensorParallel, TensorParallelModule, divide
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


class LayerNormMLP(TensorParallelModule, torch.nn.Module):
    """TE's LayerNormMLP: parameters ``layer_norm_weight``, ``layer_norm_bias``, ``fc1_weight``,
    ``fc1_bias``, ``fc2_weight``, ``fc2_bias``; ``activation`` one of ACTIVATIONS (TE's "gelu" is
    the tanh approximation, "glu" is sigmoid(a) * b); ``activation_params`` only for
    "clamped_swiglu" (``limit``, ``alpha``, ``glu_linear_offset``, TE's defaults 7, 1.702, 1).
    Tensor parallelism as TE's: ``tp_group`` / ``tp_size`` split ffn_hidden_size over the group
    (``size_per_partition``); with ``set_parallel_mode=True`` fc1 is column-parallel and fc2
    row-parallel (its output all-reduced, or reduce-scattered with ``sequence_parallel``, whose
    input rows are all-gathered), fc2's bias added after the collective."""

    def __init__(self, hidden_size, ffn_hidden_size, eps=1e-5, *, bias=True, normalization="LayerNorm", activation="gelu",
                 activation_params=None, init_method=None, output_layer_init_method=None, return_bias=False, params_dtype=None,
                 return_layernorm_output=False, zero_centered_gamma=False, device="cpu", seed=0, mode="exact",
                 fp8_tensor_core="hopper", promotion_interval=128, **te_only):
        super().__init__()
        set_parallel_mode = bool(te_only.pop("set_parallel_mode", False))
        self._tp = TensorParallel.take("LayerNormMLP", te_only, names=("tp_group", "tp_size", "sequence_parallel"))
        _module.check_unsupported("LayerNormMLP", te_only)
        if self._tp.sequence_parallel and not set_parallel_mode:
            # TE gathers the rows but scatters nothing back: its backward fails on the gradient's shape
            raise ValueError("LayerNormMLP(sequence_parallel=True) needs set_parallel_mode=True in nvfp4.torch (TE's "
                             "gathered rows are reduce-scattered only in that mode)")
        self.set_parallel_mode = set_parallel_mode
        _module.resolve_device(device)
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
        dtype = _module.resolve_dtype(params_dtype)
        self.use_bias, self.return_bias, self.return_layernorm_output = bool(bias), bool(return_bias), bool(return_layernorm_output)
        self.size_per_partition = divide(self.ffn_hidden_size, self._tp.size)
        fc1_out = self.size_per_partition * (2 if ACTIVATIONS[activation][1] else 1)
        self.layer_norm_weight = _module.new_vector(self.hidden_size, dtype, 0.0 if zero_centered_gamma else 1.0)
        self.layer_norm_bias = _module.new_vector(self.hidden_size, dtype, 0.0) if normalization == "LayerNorm" else None
        self.fc1_weight = _module.new_weight((fc1_out, self.hidden_size), dtype, init_method)
        self.fc1_bias = _module.new_vector(fc1_out, dtype, 0.0) if self.use_bias else None
        self.fc2_weight = _module.new_weight((self.hidden_size, self.size_per_partition), dtype, output_layer_init_method or init_method)
        self.fc2_bias = _module.new_vector(self.hidden_size, dtype, 0.0) if self.use_bias else None
        options = dict(params_dtype=dtype, mode=mode, fp8_tensor_core=fp8_tensor_core, promotion_interval=promotion_interval)
        self._fc1 = LinearUnit(self.hidden_size, fc1_out, bias=self.use_bias, seed=seed, **options)
        # set_parallel_mode: fc2's bias is added after the collective (TE: gemm_bias_unfused_add)
        self._fc2 = LinearUnit(self.size_per_partition, self.hidden_size, bias=self._fc2_fused_bias(), seed=seed + 1, **options)
        self._tp.mark_parameters([], [], [p for p in (self.layer_norm_weight, self.layer_norm_bias) if p is not None])
        for param, dim in ((self.fc1_weight, 0), (self.fc2_weight, 1), (self.fc1_bias, 0)):
            if param is not None:
                param.tensor_model_parallel, param.partition_dim, param.partition_stride = True, dim, 1
        if self.fc2_bias is not None and set_parallel_mode:
            self.fc2_bias.sequence_parallel = self._tp.sequence_parallel

    def _fc2_fused_bias(self):
        return self.use_bias and not self.return_bias and not self.set_parallel_mode

    @property
    def params_dtype(self):
        """The parameters' dtype (it follows module.to(dtype); float32 or bfloat16)."""
        return self.fc1_weight.dtype

    def forward(self, inp, is_first_microbatch=None):
        _module.check_parameters(self, "LayerNormMLP")
        x = _module.activation(inp, self.hidden_size, "LayerNormMLP")
        from .. import quantization
        self._tp.check_forward(quantization._current()[0])
        ln_out = normalize(x, self.normalization, self.layer_norm_weight, self.layer_norm_bias, self.eps, self.zero_centered_gamma)
        ln_total = self._tp.column_input(ln_out, reduce_grad=self.set_parallel_mode)  # TE: SP gathers, fc1's dgrad reduced
        h = self._fc1.run(ln_total.reshape(-1, self.hidden_size), self.fc1_weight, self.fc1_bias, is_first_microbatch)
        act, gated = ACTIVATIONS[self.activation]
        if self.activation == "clamped_swiglu":
            a, b = h.float().chunk(2, dim=-1)
            h = _clamped_swiglu(a, b, {**_CLAMPED_SWIGLU_DEFAULTS, **(self.activation_params or {})}).to(x.dtype)
        elif gated:
            a, b = h.float().chunk(2, dim=-1)
            h = (act(a) * b).to(x.dtype)
        else:
            h = act(h.float()).to(x.dtype)
        y = self._fc2.run(h, self.fc2_weight, self.fc2_bias if self._fc2_fused_bias() else None, is_first_microbatch)
        y = y.reshape(*ln_total.shape[:-1], self.hidden_size)
        if self.set_parallel_mode:
            y = self._tp.row_output(y)
            if self.use_bias and not self.return_bias:
                y = y + self.fc2_bias.to(y.dtype)
        # TE returns fc2's bias in the activation dtype (cast_if_needed)
        out = (y, None if self.fc2_bias is None else self.fc2_bias.to(y.dtype)) if self.return_bias else (y,)
        if self.return_layernorm_output:
            out = out + (ln_out,)
        return out if len(out) > 1 else out[0]

    def get_extra_state(self):
        return {"fc1": self._fc1.extra_state(), "fc2": self._fc2.extra_state()}

    def set_extra_state(self, state):
        if not isinstance(state, dict) or set(state) != {"fc1", "fc2"}:
            raise ValueError("LayerNormMLP._extra_state must be what get_extra_state() returned ({'fc1': ..., 'fc2': ...})")
        self._fc1.load_extra_state(state["fc1"])
        self._fc2.load_extra_state(state["fc2"])
