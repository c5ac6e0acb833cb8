"""One emulated GEMM layer (nvfp4.LinearCore) under torch: the recipe that follows the autocast
region, the delayed-scaling state kept across recipe switches as TE keeps it, and the autograd
Function whose forward and backward are the library's Linear (every quantizer and GEMM of the GPU
recipe). The core computes in TE's activation dtype (the input's, or torch autocast's), W cast to
it as TE casts it. Parameters stay the caller's torch Parameters: float32 ones are read in place,
bfloat16 ones are widened to float32 for the call (values unchanged)."""
import numpy as np
import torch

import nvfp4 as _lib

from .. import quantization
from .._tensors import check_float, float32_numpy, from_float32
from ...common.recipe import DelayedScaling, to_library

_WEIGHT_CACHE = {None: "off", True: "refresh", False: "reuse"}


def _recipe_key(recipe):
    return None if recipe is None else (type(recipe).__name__, repr(recipe))


class LinearUnit:
    """A LinearCore plus what the torch side tracks about it."""

    def __init__(self, in_features, out_features, *, bias, params_dtype, seed=0, mode="exact",
                 fp8_tensor_core="hopper", promotion_interval=128):
        if not hasattr(_lib, "LinearCore"):
            raise ImportError("this build of the nvfp4 extension has no LinearCore (rebuild the nvfp4_python target)")
        self.in_features, self.out_features, self.has_bias = in_features, out_features, bias
        self._options = dict(bias=bias, mode=mode, fp8_tensor_core=fp8_tensor_core, promotion_interval=promotion_interval, seed=seed)
        self.dtype = params_dtype
        self.core = self._new_core(params_dtype)
        self.recipe = None           # the TE recipe the core runs (None: no quantization)
        self._key = None
        self._delayed = None         # the first DelayedScaling registered (its update settings stay)
        self._saved_scaling = None   # delayed-scaling state kept while another recipe runs
        self.forward_token = 0       # which training forward the core keeps for backward
        self.kept_token = None

    # ---- pickle / deepcopy (the core is rebuilt from the options, recipe and state) ----------------
    def __getstate__(self):
        return {"features": (self.in_features, self.out_features, self.has_bias), "options": self._options,
                "dtype": self.dtype, "recipe": self.recipe, "delayed": self._delayed, "state": self.extra_state()}

    def __setstate__(self, saved):
        self.in_features, self.out_features, self.has_bias = saved["features"]
        self._options, self.dtype = saved["options"], saved["dtype"]
        self.core = self._new_core(self.dtype)
        self.recipe, self._key, self._delayed, self._saved_scaling = None, None, None, None
        self.forward_token, self.kept_token = 0, None
        if saved["delayed"] is not None:
            self.use_recipe(saved["delayed"])  # the first registered DelayedScaling's settings
        self.use_recipe(saved["recipe"])
        self.load_extra_state(saved["state"])

    def _new_core(self, dtype):
        return _lib.LinearCore(self.in_features, self.out_features, None,
                               dtype="bf16" if dtype == torch.bfloat16 else "fp32", **self._options)

    def follow_dtype(self, dtype):
        """When the activation dtype changes (TE's rule: torch autocast's dtype, else the input's):
        a core of that dtype, with the old one's recipe, delayed-scaling state and step count."""
        if dtype == self.dtype:
            return
        state, recipe = self.extra_state(), self.recipe
        self.core, self.dtype = self._new_core(dtype), dtype
        self.recipe, self._key, self.kept_token = None, None, None
        self.use_recipe(recipe)
        self.load_extra_state(state)

    # ---- the recipe of the region --------------------------------------------------------------
    def use_recipe(self, recipe):
        """Runs the core under `recipe` (None: no quantization). Delayed-scaling state survives a
        switch as in TE: DelayedScaling -> DelayedScaling keeps the scale and history (cut or
        zero-padded to the new amax_history_len) and the first registered recipe's update
        settings (margin, format, algorithm). A region without quantization leaves the state as it
        is (TE does not touch its recipe state while FP8 is off); another quantized recipe replaces
        it, so coming back to DelayedScaling starts afresh (TE's set_meta_tensor builds a new
        DelayedScalingRecipeState when the kept state is of another recipe's class)."""
        key = _recipe_key(recipe)
        if key == self._key:
            return
        if isinstance(self.recipe, DelayedScaling):
            self._saved_scaling = self.core.scaling_state_dict()
        if recipe is not None and not isinstance(recipe, DelayedScaling):
            self._saved_scaling = None
        library_recipe = to_library(recipe)  # raises for what the library cannot honour, before any change
        if isinstance(recipe, DelayedScaling):
            if self._delayed is None:
                self._delayed = recipe
            first = self._delayed
            settings = DelayedScaling(margin=first.margin, fp8_format=first.fp8_format, amax_history_len=recipe.amax_history_len,
                                      amax_compute_algo=first.amax_compute_algo, reduce_amax=first.reduce_amax)
            library_recipe = to_library(settings)
        self.core.set_recipe(library_recipe)
        if isinstance(recipe, DelayedScaling) and self._saved_scaling:
            self.core.load_scaling_state_dict(_resized(self._saved_scaling, recipe.amax_history_len))
        self.recipe, self._key = recipe, key
        self.kept_token = None

    def end_forward_region(self, grad_enabled):
        self.core.end_forward_region(grad_enabled)

    def end_backward_region(self):
        self.core.end_backward_region()

    # ---- state_dict ---------------------------------------------------------------------------
    def extra_state(self):
        scaling = self.core.scaling_state_dict() if isinstance(self.recipe, DelayedScaling) else self._saved_scaling
        return {"scaling": {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in (scaling or {}).items()},
                "steps": int(self.core.steps)}

    def load_extra_state(self, state):
        if not isinstance(state, dict) or "scaling" not in state:
            raise ValueError("the layer's _extra_state must be what get_extra_state() returned ({'scaling': ..., 'steps': ...})")
        scaling = {k: np.asarray(v.detach().cpu().numpy() if torch.is_tensor(v) else v, dtype=np.float32)
                   for k, v in state["scaling"].items()}
        if isinstance(self.recipe, DelayedScaling) and scaling:
            self.core.load_scaling_state_dict(_resized(scaling, self.recipe.amax_history_len))
        else:
            self._saved_scaling = scaling or None
        self.core.steps = int(state.get("steps", 0))

    # ---- one call ---------------------------------------------------------------------------------
    def run(self, x2d, weight, bias, is_first_microbatch):
        """Y [M, out] for x2d [M, in] under the current region's recipe; autograd when grad is on."""
        if is_first_microbatch not in _WEIGHT_CACHE:
            raise ValueError(f"is_first_microbatch must be None, True or False, got {is_first_microbatch!r}")
        self.follow_dtype(x2d.dtype)  # the core computes in the activation dtype (TE casts W to it)
        recipe, region = quantization._current()
        self.use_recipe(recipe)
        first = False
        if region is not None and recipe is not None:
            region.add(self)
            first = region.take_first()
        cache = _WEIGHT_CACHE[is_first_microbatch]
        if torch.is_grad_enabled():
            return _LinearFunction.apply(x2d, weight, bias, self, cache, region if first else None)
        w = float32_numpy(weight)
        b = float32_numpy(bias.to(x2d.dtype)) if bias is not None else None  # TE casts the bias too
        y = self.core.forward(float32_numpy(x2d), w, b, weight_cache=cache, training=False)
        return from_float32(y, self.dtype)


def _resized(scaling, length):
    """A scaling_state_dict with each amax history cut or zero-padded to `length` (TE's rule)."""
    out = {}
    for k, v in scaling.items():
        v = np.asarray(v, dtype=np.float32)
        if k.endswith("amax_history") and v.shape[0] != length:
            v = v[:length] if v.shape[0] > length else np.concatenate([v, np.zeros(length - v.shape[0], np.float32)])
        out[k] = v
    return out


class _LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2d, weight, bias, unit, cache, region):
        w = float32_numpy(weight)
        b = float32_numpy(bias.to(x2d.dtype)) if bias is not None else None  # TE casts the bias too
        x = float32_numpy(x2d)
        y = unit.core.forward(x, w, b, weight_cache=cache, training=True)
        unit.forward_token += 1
        unit.kept_token = unit.forward_token
        ctx.unit, ctx.token, ctx.region = unit, unit.forward_token, region
        ctx.cache = "reuse" if cache == "refresh" else cache
        ctx.arrays = (x, w, b)
        ctx.dtypes = (x2d.dtype, weight.dtype, None if bias is None else bias.dtype)
        return from_float32(y, unit.dtype)

    @staticmethod
    def backward(ctx, dy):
        unit = ctx.unit
        x, w, b = ctx.arrays
        if unit.kept_token != ctx.token:
            # The core keeps one forward for backward; a layer called again before this backward
            # runs this call's forward once more (the same bits unless a delayed-scaling update
            # happened in between; docs/python.md).
            unit.core.forward(x, w, b, weight_cache=ctx.cache, training=True)
        check_float(dy, "the gradient of te.Linear's output")
        dy_np = float32_numpy(dy.reshape(-1, unit.out_features))
        wgrad = np.empty((unit.out_features, unit.in_features), np.float32)
        bgrad = np.empty((unit.out_features,), np.float32) if b is not None else None
        dx = unit.core.backward(dy_np, w, wgrad, bgrad)
        unit.kept_token = None
        if ctx.region is not None:
            for member in ctx.region.units:
                member.end_backward_region()
        x_dtype, w_dtype, b_dtype = ctx.dtypes
        # TE's wgrad and bgrad come out in the activation dtype (no fuse_wgrad_accumulation), then
        # autograd casts them to the parameters' dtype.
        return (from_float32(dx, x_dtype), from_float32(wgrad, x_dtype).to(w_dtype),
                None if bgrad is None else from_float32(bgrad, x_dtype).to(b_dtype), None, None, None)
