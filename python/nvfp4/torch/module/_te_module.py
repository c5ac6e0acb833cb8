"""What TE's TransformerEngineBaseModule (module/base.py) gives every GEMM module, for nvfp4.torch's:

- parameters registered with their initialiser (TE's register_parameter(..., init_fn=)), made on the
  meta device without values when ``device="meta"``, and ``reset_parameters(defer_init=False)``
  (re)initialising every parameter in registration order, on the CPU;
- quantized primary weights: a weight made inside ``quantized_model_init`` is a QuantizedTensor from
  the region's recipe's weight quantizer, keeping its initial values on request
  (``get_high_precision_init_val()`` / ``clear_high_precision_init_val()``);
- ``_extra_state`` in TE's format (module/_te_extra_state.py), loaded before the parameters when
  the weights are quantized (TE's _load_from_state_dict);
- TE's activation-dtype check and the FP8 checkpoint flag of the last forward.
"""
from __future__ import annotations

import functools
import io
import types
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Union

import torch

from .. import _model_init
from ...common import recipe as _recipe
from . import _te_checks, _te_extra_state

if TYPE_CHECKING:  # for the annotations only: the module imports nothing more at run time
    from ..quantized_tensor import QuantizedTensor, Quantizer
    from ._linear_unit import LinearUnit

__all__ = ["TEModuleMixin", "weight_quantizer"]


def _normal(std, t):
    return torch.nn.init.normal_(t, mean=0.0, std=std)


def _constant(value, t):
    return torch.nn.init.constant_(t, value)


def init_normal(std: float = 0.023) -> Callable[[torch.Tensor], torch.Tensor]:
    """TE's default weight initialiser, normal(0, 0.023) (a picklable callable, as modules deepcopy)."""
    return functools.partial(_normal, std)


def init_constant(value: float) -> Callable[[torch.Tensor], torch.Tensor]:
    return functools.partial(_constant, value)


def weight_quantizer(recipe: _recipe.Recipe, name: str = "") -> Quantizer:
    """The quantizer TE's GEMM module quantizes its weight with under `recipe` (its forward weight slot)."""
    from .. import tensor as T
    from ..constants import DType
    from .._roles import linear_roles
    if isinstance(recipe, _recipe.CustomRecipe):
        recipe = T.resolve_custom_recipe(recipe, linear_roles(name))
    if isinstance(recipe, _recipe.DelayedScaling):
        return T.Float8Quantizer(torch.ones(1), torch.zeros(1), DType.kFloat8E4M3)
    if isinstance(recipe, _recipe.Float8CurrentScaling):
        q = recipe.fp8_quant_fwd_weight
        return T.Float8CurrentScalingQuantizer(DType.kFloat8E4M3, "cpu", force_pow_2_scales=q.power_2_scale,
                                               amax_epsilon=q.amax_epsilon)
    if isinstance(recipe, _recipe.MXFP8BlockScaling):
        return T.MXFP8Quantizer(DType.kFloat8E4M3, with_2d_quantization=recipe.enable_2d_quantization)
    if isinstance(recipe, _recipe.Float8BlockScaling):
        q = recipe.fp8_quant_fwd_weight
        return T.Float8BlockQuantizer(DType.kFloat8E4M3, rowwise=True, columnwise=True, amax_epsilon=q.amax_epsilon,
                                      force_pow_2_scales=q.power_2_scale, block_scaling_dim=recipe.w_block_scaling_dim)
    if isinstance(recipe, _recipe.NVFP4BlockScaling):
        q = recipe.fp4_quant_fwd_weight
        return T.NVFP4Quantizer(with_rht=q.random_hadamard_transform, with_2d_quantization=q.fp4_2d_quantization,
                                stochastic_rounding=q.stochastic_rounding)
    raise TypeError(f"no weight quantizer for {type(recipe).__name__}")


def _get_high_precision_init_val(param):
    return getattr(param, "_high_precision_init_val", None)


def _clear_high_precision_init_val(param):
    if hasattr(param, "_high_precision_init_val"):
        del param._high_precision_init_val


class TEModuleMixin:
    """Mixed into a torch.nn.Module whose GEMMs are LinearUnits (``self._te_units()``)."""

    def _te_setup(self, device):
        """Call first in __init__: the device (cpu or meta), the quantized-init region's settings."""
        self._te_device = _te_checks.canonical_device(device)
        self.param_init_meta = {}
        self.primary_weights_in_fp8 = _model_init.with_fp8_parameters()
        self.preserve_high_precision_init_val = _model_init.with_high_precision_init_val()
        self._te_init_recipe = _model_init.model_init_recipe() if self.primary_weights_in_fp8 else None
        self.activation_dtype = None
        self._fp8_checkpoint, self._checkpoint_recipe = False, None

    def _te_parameter(self, name, shape, dtype, init_fn, *, is_weight=False):
        """Registers `name` (values later, by reset_parameters) with its initialiser."""
        self.register_parameter(name, torch.nn.Parameter(torch.empty(shape, dtype=dtype, device=self._te_device)))
        self.param_init_meta[name] = types.SimpleNamespace(init_fn=init_fn, is_weight=is_weight)

    def reset_parameters(self, defer_init: Optional[bool] = False) -> None:
        """TE's: every parameter made on the CPU if on the meta device and given its initial values
        (weights quantized under quantized_model_init)."""
        if defer_init:
            return
        for name, meta in self.param_init_meta.items():
            param = getattr(self, name)
            if param is None:
                continue
            values = torch.empty(param.shape, dtype=param.dtype, device="cpu")
            with torch.no_grad():
                meta.init_fn(values)
            saved = None
            if self.primary_weights_in_fp8 and meta.is_weight:
                if self.preserve_high_precision_init_val:
                    saved = values.detach().clone()
                with torch.no_grad():
                    values = weight_quantizer(self._te_init_recipe, getattr(self, "name", None) or "")(values)
            param = torch.nn.Parameter(values)
            if saved is not None:
                param._high_precision_init_val = saved
                param.get_high_precision_init_val = types.MethodType(_get_high_precision_init_val, param)
                param.clear_high_precision_init_val = types.MethodType(_clear_high_precision_init_val, param)
            setattr(self, name, param)

    def _te_materialize(self):
        """A module whose parameters are still on the meta device is initialised at its first forward."""
        if any(p.device.type == "meta" for p in self.parameters(recurse=False)):
            self.reset_parameters()

    # ---- the forward's checks and bookkeeping ---------------------------------------------------------
    def _te_check_parameters(self, module_name):
        for name, p in self.named_parameters(recurse=False):
            if p.device.type != "cpu":
                raise ValueError(f"{module_name}.{name} is on device '{p.device}': nvfp4.torch emulates the GPU numerics on "
                                 "the CPU, so tensors must be CPU tensors (move it with .cpu(), create modules with device='cpu')")
            if p.dtype not in _te_checks.PARAM_DTYPES:
                raise TypeError(f"{module_name}.{name} must be float32, float16 or bfloat16, got {str(p.dtype).replace('torch.', '')}")

    def _te_activation_dtype(self, inp, autocast_dtype):
        return _te_checks.check_activation_dtype(self, inp.dtype, autocast_dtype)

    def _te_prepare_forward(self, inp, module_name, width, width_name="in_features"):
        """TE's prepare_forward for a module whose GEMMs check their own 2-D operands (run_gemm):
        parameters made if deferred, the input a CPU tensor of TE's dtypes with `width` features,
        TE's parameter-dtype rule outside torch autocast, and the FP8 checkpoint flag of this
        forward. Returns (the input in the activation dtype, the region's recipe, that dtype)."""
        from .. import quantization
        from .base import _cpu_autocast_dtype
        self._te_materialize()
        if not torch.is_tensor(inp):
            raise TypeError(f"{module_name}: the input must be a torch.Tensor, got {type(inp).__name__}")
        autocast_dtype = _cpu_autocast_dtype()
        self._te_check_parameters(module_name)
        if inp.device.type != "cpu":
            raise ValueError(f"{module_name}'s input is on device '{inp.device}': nvfp4.torch emulates the GPU numerics on "
                             "the CPU, so tensors must be CPU tensors (move it with .cpu())")
        if inp.dtype not in _te_checks.PARAM_DTYPES:
            raise TypeError(f"{module_name}'s input must be float32, float16 or bfloat16, got {str(inp.dtype).replace('torch.', '')}")
        dtype = self._te_activation_dtype(inp, autocast_dtype)  # TE's order: this rule, then the shapes
        if inp.dim() < 1 or inp.shape[-1] != width:
            raise ValueError(f"{module_name}: the input's last dimension must be {width} ({width_name}), "
                             f"got shape {tuple(inp.shape)}")
        recipe = quantization._current()[0]
        calibrating = recipe is None and quantization.is_fp8_calibration()
        self._te_note_forward(quantization.calibration_recipe() if calibrating else recipe, calibrating)
        return (inp if inp.dtype == dtype else inp.to(dtype)), recipe, dtype

    def _te_note_forward(self, recipe, calibrating=False):
        """TE's fp8_meta["fp8_checkpoint"]: whether the last forward quantized (or calibrated)."""
        self._fp8_checkpoint = recipe is not None or calibrating
        if recipe is not None:
            self._checkpoint_recipe = recipe

    # ---- state_dict ----------------------------------------------------------------------------------
    def get_extra_state(self) -> torch.Tensor:
        units = self._te_units()
        states = [u.extra_state() for u in units]
        gemms = [{k: v.numpy() for k, v in s["scaling"].items()} or None for s in states]
        steps = [int(s["steps"]) for s in states]
        steps = steps[0] if len(set(steps)) == 1 else steps  # one count, or one per GEMM when they differ
        return _te_extra_state.write_state(self._checkpoint_recipe, gemms, steps, self._fp8_checkpoint)

    def set_extra_state(self, state: Union[torch.Tensor, io.BytesIO, Dict[str, Any], None]) -> None:
        units = self._te_units()
        loaded = _te_extra_state.read_state(state, len(units), type(self).__name__)
        if loaded is None:
            return
        counts = loaded["steps"]
        if isinstance(counts, (list, tuple)):
            if len(counts) != len(units):
                raise ValueError(f"{type(self).__name__}._extra_state holds {len(counts)} step counts for {len(units)} GEMMs")
        else:
            counts = [counts] * len(units)
        for unit, scaling, steps in zip(units, loaded["gemms"], counts):
            steps = steps if steps is not None else unit.extra_state()["steps"]
            unit.load_extra_state({"scaling": scaling or {}, "steps": int(steps)})
        if loaded["recipe"] is not None:
            self._checkpoint_recipe = loaded["recipe"]
        self._fp8_checkpoint = loaded["fp8_checkpoint"]

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        if self.primary_weights_in_fp8:  # TE: the FP8 metadata first, then the quantized weights copy into it
            key = prefix + torch.nn.modules.module._EXTRA_STATE_KEY_SUFFIX
            if key in state_dict:
                self.set_extra_state(state_dict[key])
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)


# ---- one GEMM in TE's activation dtype -------------------------------------------------------------

class _WeightValues(torch.autograd.Function):
    """The values a GEMM quantizes for `param` (its own, or a QuantizedTensor's source values), with
    the gradient routed back to `param` in TE's dtypes: the wgrad GEMM's output in the activation
    dtype, then the parameter's dtype."""

    @staticmethod
    def forward(ctx, param, values, activation_dtype):
        ctx.dtypes = (activation_dtype, param.dtype)
        return values.detach().to(torch.float32)

    @staticmethod
    def backward(ctx, grad):
        activation_dtype, param_dtype = ctx.dtypes
        return grad.to(activation_dtype).to(param_dtype), None, None


def run_gemm(unit: LinearUnit, x2d: torch.Tensor, weight: Union[torch.Tensor, QuantizedTensor], bias: Optional[torch.Tensor],
             is_first_microbatch: Optional[bool], recipe: Optional[_recipe.Recipe], activation_dtype: torch.dtype,
             name: str = "") -> torch.Tensor:
    """One GEMM as TE computes it (see _run_gemm), inside te.checkpoint as TE's modules run there: a
    delayed-scaling layer keeps its scaling state at the checkpointed forward and recomputes with
    it, its recomputed amaxes discarded (TE: copy_forward_fp8_meta_tensors_for_recompute,
    get_old_fp8_meta_tensors_for_recompute, restore_fp8_meta_tensors). A CustomRecipe runs as the
    built-in recipe its factory's quantizers for this module amount to (tensor.resolve_custom_recipe),
    in a region nested in the caller's."""
    from .. import distributed as _dist
    from .. import quantization
    from ...common.recipe import CustomRecipe, DelayedScaling
    _te_checks.check_quantized_gemm(recipe, x2d, tuple(weight.shape), activation_dtype,  # TE's refusals, before any change
                                    shape_rule=getattr(unit, "te_fp8_shape_rule", True))
    if isinstance(recipe, CustomRecipe):
        resolved = _resolved_custom(recipe, name)
        with quantization.autocast(enabled=True, recipe=resolved):
            return run_gemm(unit, x2d, weight, bias, is_first_microbatch, resolved, activation_dtype, name)
    if getattr(recipe, "backward_override", None) is not None:
        return _BackwardOverride.apply(x2d, weight, bias, unit, recipe, activation_dtype, is_first_microbatch)
    if recipe is None and quantization.is_fp8_calibration():
        y = _run_gemm(unit, x2d, weight, bias, is_first_microbatch, recipe, activation_dtype)
        _calibrate(unit, quantization.calibration_recipe(), x2d.to(activation_dtype), weight)
        return y
    if not isinstance(recipe, DelayedScaling) or not _dist._recompute.in_region:
        return _run_gemm(unit, x2d, weight, bias, is_first_microbatch, recipe, activation_dtype)
    stash = _dist.scaling_stash(unit)
    unit.follow_dtype(_unit_dtype(weight, activation_dtype))
    unit.use_recipe(recipe)
    if _dist.in_fp8_activation_recompute_phase():
        with stash.recompute(unit.core.scaling_state_dict, unit.core.load_scaling_state_dict):
            return _run_gemm(unit, x2d, weight, bias, is_first_microbatch, recipe, activation_dtype)
    stash.push(unit.core.scaling_state_dict())
    return _run_gemm(unit, x2d, weight, bias, is_first_microbatch, recipe, activation_dtype)


def input_quantizer(recipe: _recipe.Recipe) -> Quantizer:

    """The quantizer of a GEMM module's input under `recipe`, rowwise (TE's forward input slot)."""
    from .. import tensor as T
    from ..constants import DType
    q = None
    if isinstance(recipe, _recipe.Float8CurrentScaling):
        p = recipe.fp8_quant_fwd_inp
        q = T.Float8CurrentScalingQuantizer(DType.kFloat8E4M3, "cpu", force_pow_2_scales=p.power_2_scale, amax_epsilon=p.amax_epsilon)
    elif isinstance(recipe, _recipe.MXFP8BlockScaling):
        q = T.MXFP8Quantizer(DType.kFloat8E4M3)
    elif isinstance(recipe, _recipe.Float8BlockScaling):
        p = recipe.fp8_quant_fwd_inp
        q = T.Float8BlockQuantizer(DType.kFloat8E4M3, rowwise=True, columnwise=False, amax_epsilon=p.amax_epsilon,
                                   force_pow_2_scales=p.power_2_scale, block_scaling_dim=recipe.x_block_scaling_dim)
    elif isinstance(recipe, _recipe.NVFP4BlockScaling):
        if recipe.row_scaled_activation or recipe.nvfp4_4over6 != "none":
            raise ValueError("backward_override with row-scaled or 4over6 NVFP4 activations is not supported by nvfp4.torch")
        p = recipe.fp4_quant_fwd_inp
        q = T.NVFP4Quantizer(with_2d_quantization=p.fp4_2d_quantization)
    if q is None:
        raise ValueError(f"{type(recipe).__name__} has no backward_override here (TE: delayed scaling only supports None)")
    q.set_usage(rowwise=True, columnwise=False)
    return q


class _BackwardOverride(torch.autograd.Function):
    """TE's recipe.backward_override (module/linear.py): the forward quantized as the recipe says, the
    backward GEMMs in high precision, on the forward's dequantized operands ("dequantized": the
    input's and weight's rowwise quantized copies dequantized to the activation dtype) or on the
    original ones ("high_precision"), the output gradient not quantized. The backward's GEMMs are
    the library's high-precision layer's (float32 accumulation; cuBLAS's order is not reproduced)."""

    @staticmethod
    def forward(ctx, x2d, weight, bias, unit, recipe, activation_dtype, is_first_microbatch):
        import copy
        from .. import quantization
        from ..quantized_tensor import high_precision_values
        forward_recipe = copy.copy(recipe)
        forward_recipe.backward_override = None
        with torch.no_grad(), quantization.autocast(enabled=True, recipe=forward_recipe):
            y = _run_gemm(unit, x2d, weight, bias, is_first_microbatch, forward_recipe, activation_dtype)
        x = x2d.detach().to(activation_dtype)
        w = high_precision_values(weight).detach()
        if recipe.backward_override == "dequantized":
            x = input_quantizer(forward_recipe)(x).dequantize(dtype=activation_dtype)
            wq = weight_quantizer(forward_recipe)
            wq.set_usage(rowwise=True, columnwise=False)
            w = wq(w).dequantize(dtype=activation_dtype)
        else:
            w = w.to(activation_dtype)
        ctx.operands = (x, w)
        ctx.dtypes = (activation_dtype, x2d.dtype, weight.dtype, None if bias is None else bias.dtype)
        ctx.save_for_backward(x2d, weight, bias)  # torch's checks: in-place changes, a second backward
        return y

    @staticmethod
    def backward(ctx, dy):
        import numpy as np
        import nvfp4 as _lib
        from ._linear_unit import _SecondOrderRefused
        saved = ctx.saved_tensors  # raises torch's errors: freed (no retain_graph) or modified in place
        x, w = ctx.operands
        activation_dtype, x_dtype, w_dtype, b_dtype = ctx.dtypes
        core = _lib.LinearCore(w.shape[1], w.shape[0], None, bias=b_dtype is not None)
        w32 = w.to(torch.float32).contiguous().numpy()
        _, forward = core.forward(x.to(torch.float32).contiguous().numpy(), w32,
                                  np.zeros(w.shape[0], np.float32) if b_dtype is not None else None)
        wgrad = np.empty(w.shape, np.float32)
        bgrad = np.empty(w.shape[0], np.float32) if b_dtype is not None else None
        dx = core.backward(forward, dy.detach().to(activation_dtype).to(torch.float32).contiguous().numpy(), wgrad, bgrad)
        rounded = lambda a, dtype: torch.from_numpy(a).to(activation_dtype).to(dtype)  # noqa: E731
        grads = [rounded(dx, x_dtype), rounded(wgrad, w_dtype), None if bgrad is None else rounded(bgrad, b_dtype)]
        if torch.is_grad_enabled():  # create_graph=True: gradients that refuse a second differentiation
            anchors = [t for t in (*saved, dy) if t is not None and t.requires_grad]
            if anchors:
                grads = [None if g is None else _SecondOrderRefused.apply(g, *anchors) for g in grads]
        return (*grads, None, None, None, None)


_custom_cache = {}


def _resolved_custom(recipe, name):
    """The built-in recipe of a CustomRecipe for a module name, made once per recipe object (so the
    layer keeps its state across calls, as TE keeps a custom recipe's state per recipe object)."""
    from ..tensor import resolve_custom_recipe
    from .._roles import linear_roles
    key = (id(recipe), name)
    cached = _custom_cache.get(key)
    if cached is None or cached[0] is not recipe:
        cached = _custom_cache[key] = (recipe, resolve_custom_recipe(recipe, linear_roles(name)))
    return cached[1]


def _calibrate(unit, recipe, x, weight):
    """TE's calibration (module/linear.py, tensor/float8_tensor.py Float8Quantizer.calibrate): the
    GEMM ran in high precision; a delayed-scaling recipe's input and weight amaxes are written into
    the current entry of their histories (overwritten, as TE's calibrate copies them), kept in the
    layer's delayed-scaling state for when the recipe runs. Other recipes keep no statistics."""
    import numpy as np
    from ...common.recipe import DelayedScaling
    from ..quantized_tensor import high_precision_values
    if not isinstance(recipe, DelayedScaling):
        return
    with torch.no_grad():
        amaxes = {"input": float(x.detach().abs().max()) if x.numel() else 0.0,
                  "weight": float(high_precision_values(weight).detach().abs().max())}
    with unit._lock:
        saved = unit._saved_scaling
        if not saved:
            ones, zeros = np.ones(1, np.float32), np.zeros(recipe.amax_history_len, np.float32)
            saved = {f"{role}.{key}": (ones if key == "scale" else zeros).copy()
                     for role in ("input", "weight", "grad_output") for key in ("scale", "amax_history")}
        saved = {k: np.array(v, dtype=np.float32, copy=True) for k, v in saved.items()}
        for role, amax in amaxes.items():
            saved[f"{role}.amax_history"][0] = amax
        unit._saved_scaling = saved


def _direct(weight, activation_dtype):
    """Whether the core of the activation dtype runs the call as it is (see _run_gemm)."""
    from ..quantized_tensor import QuantizedTensor
    return not isinstance(weight, QuantizedTensor) and (activation_dtype == torch.float32 or
                                                         weight.dtype == activation_dtype == torch.bfloat16)


def _unit_dtype(weight, activation_dtype):
    return activation_dtype if _direct(weight, activation_dtype) else torch.float32


def _run_gemm(unit, x2d, weight, bias, is_first_microbatch, recipe, activation_dtype):
    """Y = x2d W^T (+ bias) of one emulated GEMM layer as TE computes it in `activation_dtype`:
    the input and bias in that dtype, a quantized recipe quantizing the weight's own values (TE
    quantizes the parameter as it is, an fp32 master included), no recipe computing on the weight
    cast to that dtype; Y, dX, dW (and db) rounded once to it, dW and db then to the parameters'
    dtype. float32 and bfloat16 activations over parameters of their own dtype run on the core of
    that dtype; float16 activations, bfloat16 ones over float32 parameters and quantized weights run
    on the float32 core, the bias added after the GEMM's float32 output (as the GPU's epilogue
    adds it) and each result rounded once (for bfloat16 values this gives the bfloat16 core's
    bits: tests/python/test_torch_te_compat.py)."""
    from ..quantized_tensor import high_precision_values
    if _direct(weight, activation_dtype):
        b = bias.to(activation_dtype) if bias is not None else None
        return unit.run_core(x2d if x2d.dtype == activation_dtype else x2d.to(activation_dtype), weight, b, is_first_microbatch)
    if recipe is None:  # TE casts the weight to the activation dtype for a GEMM in high precision
        values = high_precision_values(weight).to(activation_dtype)
    else:
        values = high_precision_values(weight)
    w = _WeightValues.apply(weight, values, activation_dtype)
    x32 = x2d.to(activation_dtype).to(torch.float32)
    zero = torch.zeros(unit.out_features, dtype=torch.float32) if unit.has_bias else None
    y = unit.run_core(x32, w, zero, is_first_microbatch)
    if bias is not None:
        y = y + bias.to(activation_dtype).to(torch.float32)
    return y.to(activation_dtype)
