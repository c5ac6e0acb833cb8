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
import functools
import types

import torch

from .. import _model_init
from ...common import recipe as _recipe
from . import _te_checks, _te_extra_state

__all__ = ["TEModuleMixin", "weight_quantizer"]


def _normal(std, t):
    return torch.nn.init.normal_(t, mean=0.0, std=std)


def _constant(value, t):
    return torch.nn.init.constant_(t, value)


def init_normal(std=0.023):
    """TE's default weight initialiser, normal(0, 0.023) (a picklable callable, as modules deepcopy)."""
    return functools.partial(_normal, std)


def init_constant(value):
    return functools.partial(_constant, value)


def weight_quantizer(recipe, name=""):
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

    def reset_parameters(self, defer_init=False):
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
    def _te_activation_dtype(self, inp, autocast_dtype):
        return _te_checks.check_activation_dtype(self, inp.dtype, autocast_dtype)

    def _te_note_forward(self, recipe, calibrating=False):
        """TE's fp8_meta["fp8_checkpoint"]: whether the last forward quantized (or calibrated)."""
        self._fp8_checkpoint = recipe is not None or calibrating
        if recipe is not None:
            self._checkpoint_recipe = recipe

    # ---- state_dict ----------------------------------------------------------------------------------
    def get_extra_state(self):
        units = self._te_units()
        states = [u.extra_state() for u in units]
        gemms = [{k: v.numpy() for k, v in s["scaling"].items()} or None for s in states]
        return _te_extra_state.write_state(self._checkpoint_recipe, gemms, states[0]["steps"], self._fp8_checkpoint)

    def set_extra_state(self, state):
        units = self._te_units()
        loaded = _te_extra_state.read_state(state, len(units), type(self).__name__)
        if loaded is None:
            return
        for unit, scaling in zip(units, loaded["gemms"]):
            steps = loaded["steps"] if loaded["steps"] is not None else unit.extra_state()["steps"]
            unit.load_extra_state({"scaling": scaling or {}, "steps": steps})
        if loaded["recipe"] is not None:
            self._checkpoint_recipe = loaded["recipe"]
        self._fp8_checkpoint = loaded["fp8_checkpoint"]

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        if self.primary_weights_in_fp8:  # TE: the FP8 metadata first, then the quantized weights copy into it
            key = prefix + torch.nn.modules.module._EXTRA_STATE_KEY_SUFFIX
            if key in state_dict:
                self.set_extra_state(state_dict[key])
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
