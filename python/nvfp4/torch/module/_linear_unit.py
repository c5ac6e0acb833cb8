"""One emulated GEMM layer (nvfp4.LinearCore) under torch: the recipe that follows the autocast
region, the delayed-scaling state kept across recipe switches as TE keeps it, and the autograd
Function whose forward and backward are the library's Linear (every quantizer and GEMM of the GPU
recipe). The core computes in TE's activation dtype (the input's, or torch autocast's), W cast to
it as TE casts it. Parameters stay the caller's torch Parameters, read in place: float32 ones as
they are, bfloat16 ones (and bfloat16 inputs and gradients) as their bits by a bf16 core, with no
float32 copy. Each training call keeps its own forward's state for its backward (the core's
SavedForward, as TE's ctx.save_for_backward), so calls and backwards may interleave in any order
and from any thread."""
from __future__ import annotations

import threading
from typing import Any, Dict, Optional

import numpy as np
import torch

import nvfp4 as _lib

from .. import quantization
from .._tensors import check_float, core_array, from_core, from_float32
from ...common.recipe import DelayedScaling, Recipe, recipe_key, to_library

_WEIGHT_CACHE = {None: "off", True: "refresh", False: "reuse"}


def _recipe_key(recipe):
    """What the core runs for `recipe` (per-role QParams assigned after construction included, so
    such a change reaches the core, as TE means it to: its TODO #3157)."""
    return recipe_key(recipe)


class LinearUnit:
    """A LinearCore plus what the torch side tracks about it."""

    def __init__(self, in_features: int, out_features: int, *, bias: bool, params_dtype: torch.dtype, seed: int = 0,
                 mode: str = "exact", fp8_tensor_core: str = "hopper", promotion_interval: int = 128) -> None:
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
        self._chain = _Chain()       # the delayed-scaling states' lifetime the forwards of now belong to
        self._lock = threading.RLock()  # a call's recipe / dtype switch and forward, whole
        self.name = ""                  # the module's name, for a CustomRecipe factory's roles

    # ---- pickle / deepcopy (the core is rebuilt from the options, recipe and state) ----------------
    def __getstate__(self):
        return {"name": self.name, "features": (self.in_features, self.out_features, self.has_bias), "options": self._options,
                "dtype": self.dtype, "recipe": self.recipe, "delayed": self._delayed, "state": self.extra_state()}

    def __setstate__(self, saved):
        self.name = saved.get("name", "")
        self.in_features, self.out_features, self.has_bias = saved["features"]
        self._options, self.dtype = saved["options"], saved["dtype"]
        self.core = self._new_core(self.dtype)
        self.recipe, self._key, self._delayed, self._saved_scaling = None, None, None, None
        self._chain = _Chain()
        self._lock = threading.RLock()
        if saved["delayed"] is not None:
            self.use_recipe(saved["delayed"])  # the first registered DelayedScaling's settings
        self.use_recipe(saved["recipe"])
        self.load_extra_state(saved["state"])

    def _new_core(self, dtype):
        return _lib.LinearCore(self.in_features, self.out_features, None,
                               dtype="bf16" if dtype == torch.bfloat16 else "fp32", **self._options)

    def follow_dtype(self, dtype: torch.dtype) -> None:
        """When the activation dtype changes (TE's rule: torch autocast's dtype, else the input's):
        a core of that dtype, with the old one's recipe, delayed-scaling state and step count."""
        if dtype == self.dtype:
            return
        state, recipe = self.extra_state(), self.recipe
        self.core, self.dtype = self._new_core(dtype), dtype
        self.recipe, self._key = None, None
        self.use_recipe(recipe)
        self.load_extra_state(state)

    # ---- the recipe of the region --------------------------------------------------------------
    def use_recipe(self, recipe: Optional[Recipe]) -> None:
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
        delayed = isinstance(recipe, DelayedScaling)
        library_recipe = to_library(recipe)  # raises for what the library cannot honour
        if delayed:
            first = self._delayed if self._delayed is not None else recipe
            settings = DelayedScaling(margin=first.margin, fp8_format=first.fp8_format, amax_history_len=recipe.amax_history_len,
                                      amax_compute_algo=first.amax_compute_algo, reduce_amax=first.reduce_amax)
            library_recipe = to_library(settings)
        if hasattr(library_recipe, "validate"):
            library_recipe.validate()  # the library's checks (e.g. the history length), before anything changes
        if isinstance(self.recipe, DelayedScaling):
            self._saved_scaling = self.core.scaling_state_dict()
            if not delayed:  # the states end here for the forwards run under them
                self._chain.final, self._chain = self._saved_scaling, _Chain()
        if recipe is not None and not delayed:
            self._saved_scaling = None
        if delayed and self._delayed is None:
            self._delayed = recipe
        self.core.set_recipe(library_recipe)
        if delayed and self._saved_scaling:
            self.core.load_scaling_state_dict(_resized(self._saved_scaling, recipe.amax_history_len))
        self.recipe, self._key = recipe, key

    def end_forward_region(self, grad_enabled: bool) -> None:
        with self._lock:
            self.core.end_forward_region(grad_enabled)

    def end_backward_region(self) -> None:
        with self._lock:
            self.core.end_backward_region()

    # ---- state_dict ---------------------------------------------------------------------------
    def extra_state(self) -> Dict[str, Any]:
        with self._lock:
            scaling = self.core.scaling_state_dict() if isinstance(self.recipe, DelayedScaling) else self._saved_scaling
            return {"scaling": {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in (scaling or {}).items()},
                    "steps": int(self.core.steps)}

    def load_extra_state(self, state: Dict[str, Any]) -> None:
        if not isinstance(state, dict) or "scaling" not in state:
            raise ValueError("the layer's _extra_state must be what get_extra_state() returned ({'scaling': ..., 'steps': ...})")
        scaling = {k: np.asarray(v.detach().cpu().numpy() if torch.is_tensor(v) else v, dtype=np.float32)
                   for k, v in state["scaling"].items()}
        with self._lock:
            if isinstance(self.recipe, DelayedScaling) and scaling:
                self.core.load_scaling_state_dict(_resized(scaling, self.recipe.amax_history_len))
            else:
                self._saved_scaling = scaling or None
            self.core.steps = int(state.get("steps", 0))

    # ---- one call ---------------------------------------------------------------------------------
    def run(self, x2d: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
            is_first_microbatch: Optional[bool]) -> torch.Tensor:
        """Y [M, out] for x2d [M, in] (in the activation dtype) under the calling thread's region
        recipe, as TE computes it: TE's refusals first, float16 and mixed-precision activations,
        quantized weights, CustomRecipe, backward_override, calibration and te.checkpoint's
        recompute (module/_te_module.run_gemm), each GEMM by run_core."""
        from ._te_module import run_gemm
        if is_first_microbatch not in _WEIGHT_CACHE:
            raise ValueError(f"is_first_microbatch must be None, True or False, got {is_first_microbatch!r}")
        return run_gemm(self, x2d, weight, bias, is_first_microbatch, quantization._current()[0], x2d.dtype, self.name)

    def run_core(self, x2d: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                 is_first_microbatch: Optional[bool]) -> torch.Tensor:
        """Y [M, out] for x2d [M, in] under the calling thread's region recipe on the core of x2d's
        dtype; autograd when grad is on. The unit's lock holds from the recipe switch to the end of
        the forward, so a layer shared by threads runs each call whole under the recipe and dtype of
        the thread that made it."""
        if is_first_microbatch not in _WEIGHT_CACHE:
            raise ValueError(f"is_first_microbatch must be None, True or False, got {is_first_microbatch!r}")
        cache = _WEIGHT_CACHE[is_first_microbatch]
        recipe, region = quantization._current()
        with self._lock:
            self.follow_dtype(x2d.dtype)  # the core computes in the activation dtype (TE casts W to it)
            self.use_recipe(recipe)
            first = False
            if region is not None and recipe is not None:
                region.add(self)
                first = region.take_first()
            if torch.is_grad_enabled():
                return _LinearFunction.apply(x2d, weight, bias, self, cache, region if first else None)
            bf16 = self.dtype == torch.bfloat16
            b = core_array(bias.to(x2d.dtype), bf16) if bias is not None else None  # TE casts the bias too
            y = self.core.infer(core_array(x2d, bf16), core_array(weight, bf16), b, weight_cache=cache, record_amaxes=True)
            return from_core(y, self.dtype)

    def backward(self, core: _lib.LinearCore, saved: _lib.SavedForward, chain: _Chain, dy: np.ndarray, wgrad: np.ndarray,
                 bgrad: Optional[np.ndarray]) -> np.ndarray:

        """dX of one saved forward, on the core that ran it (dW, db into wgrad, bgrad). What the
        backward reads besides its forward is the layer's gradient-side state as TE reads it when
        the backward runs: the backward count (NVFP4's gradient seed) and delayed scaling's
        grad_output scale and history, live while the layer stays under DelayedScaling (`chain`,
        the forward's, is the layer's), else as they were when the layer left it. A forward from
        before an activation dtype change ran on that dtype's core, which holds copies: its
        backward is given the layer's state and hands it back (no seed is used twice)."""
        with self._lock:
            current = self.core
            if core is current:  # the forward's own states: live, or left as they were
                return core.backward(saved, dy, wgrad, bgrad)
            core.steps = current.steps
            if chain is self._chain:
                _copy_grad_output(current.scaling_state_dict(), core)
            elif chain.final:
                _copy_grad_output(chain.final, core)
            dx = core.backward(saved, dy, wgrad, bgrad)
            current.steps = core.steps
            if chain is self._chain:
                _copy_grad_output(core.scaling_state_dict(), current)
            return dx


class _Chain:
    """One lifetime of a layer's delayed-scaling states, from entering DelayedScaling to leaving it
    (DelayedScaling -> DelayedScaling continues it, as TE keeps its meta); `final` is the state
    when it ended, which backwards of its forwards still read."""

    def __init__(self):
        self.final = None


def _copy_grad_output(source, target):
    """source's grad_output scale and history (a scaling_state_dict) into target's delayed-scaling
    state, cut or zero-padded to target's history length (nothing when either keeps none)."""
    ours = target.scaling_state_dict()
    if source and ours:
        length = len(ours["grad_output.amax_history"])
        ours["grad_output.scale"] = source["grad_output.scale"]
        ours["grad_output.amax_history"] = _resized({"h.amax_history": source["grad_output.amax_history"]}, length)["h.amax_history"]
        target.load_scaling_state_dict(ours)


def _resized(scaling, length):
    """A scaling_state_dict with each amax history cut or zero-padded to `length` (TE's rule)."""
    out = {}
    for k, v in scaling.items():
        v = np.asarray(v, dtype=np.float32)
        if k.endswith("amax_history") and v.shape[0] != length:
            v = v[:length] if v.shape[0] > length else np.concatenate([v, np.zeros(length - v.shape[0], np.float32)])
        out[k] = v
    return out


def _release_after_last_backward(ctx):
    """Drops the call's SavedForward once this backward pass ends, unless the graph is kept
    (retain_graph): the core reuses a forward's storage only when no SavedForward refers to it,
    and the autograd node (ctx) lives on as long as the output's graph is referenced, e.g. by the
    loss until the next step's forward. torch frees a node's saved tensors before the pass's final
    callbacks when the graph is not kept, which is what the callback looks at."""
    engine = getattr(torch.autograd.Variable, "_execution_engine", None)
    if engine is None or not hasattr(engine, "queue_callback"):
        return  # kept with the graph: correct, only the storage is not reused

    def release_if_freed():
        try:
            ctx.saved_tensors
        except RuntimeError:  # freed: no later backward can reach this call
            ctx.saved = None
    engine.queue_callback(release_if_freed)


class _SecondOrderRefused(torch.autograd.Function):
    """Marks a gradient computed under create_graph=True: it has a grad_fn (so it is not silently
    a constant), and differentiating it raises, since the emulated GEMMs' backward is not itself
    differentiable (TE's is not either)."""

    @staticmethod
    def forward(ctx, grad, *anchors):
        return grad.clone()

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("nvfp4.torch: the gradient of a te.Linear / LayerNormLinear / LayerNormMLP GEMM cannot be "
                           "differentiated again (double backward, e.g. a gradient penalty through create_graph=True): the "
                           "emulated quantized GEMMs' backward is not differentiable, as TE's is not")


class _LinearFunction(torch.autograd.Function):
    """One call's forward and backward. Each call keeps its own forward's state, as TE's
    ctx.save_for_backward does: the core's SavedForward (the recipe it ran under and its quantized
    operands) and, through ctx.save_for_backward, the input and the parameters, so that torch's
    checks apply (a second backward without retain_graph raises torch's error, and so does a
    backward after an in-place change of a saved tensor)."""

    @staticmethod
    def forward(ctx, x2d, weight, bias, unit, cache, region):
        core, bf16 = unit.core, unit.dtype == torch.bfloat16
        b = core_array(bias.to(x2d.dtype), bf16) if bias is not None else None  # TE casts the bias too
        y, saved = core.forward(core_array(x2d, bf16), core_array(weight, bf16), b, weight_cache=cache)
        ctx.save_for_backward(x2d, weight, bias)
        ctx.unit, ctx.core, ctx.saved, ctx.chain = unit, core, saved, unit._chain
        ctx.region, ctx.out_features = region, unit.out_features
        ctx.has_bias, ctx.bf16 = b is not None, bf16
        return from_core(y, unit.dtype)

    @staticmethod
    def backward(ctx, dy):
        x2d, weight, bias = ctx.saved_tensors  # raises torch's errors: freed (no retain_graph) or modified in place
        _release_after_last_backward(ctx)
        core = ctx.core
        check_float(dy, "the gradient of te.Linear's output")
        dy_np = core_array(dy.reshape(-1, ctx.out_features), ctx.bf16)
        # A bf16 core writes dW as bf16 bits (rounded once from its fp32 dW, kept inside the core):
        # no fp32 dW array and no torch conversion per step.
        wgrad = np.empty((core.out_features, core.in_features), np.uint16 if ctx.bf16 else np.float32)
        bgrad = np.empty((core.out_features,), np.float32) if ctx.has_bias else None
        dx = ctx.unit.backward(core, ctx.saved, ctx.chain, dy_np, wgrad, bgrad)
        if ctx.region is not None:  # TE: reduce the region's grad_output amaxes (across ranks), then update
            from .._amax_reduction import end_backward
            end_backward(ctx.region.units)
        # TE's wgrad and bgrad come out in the activation dtype (no fuse_wgrad_accumulation), then
        # autograd casts them to the parameters' dtype.
        grads = [from_core(dx, x2d.dtype), from_core(wgrad, x2d.dtype).to(weight.dtype),
                 None if bgrad is None else from_float32(bgrad, x2d.dtype).to(bias.dtype)]
        if torch.is_grad_enabled():  # create_graph=True: gradients that refuse a second differentiation
            anchors = [t for t in (x2d, weight, bias, dy) if t is not None and t.requires_grad]
            if anchors:
                grads = [None if g is None else _SecondOrderRefused.apply(g, *anchors) for g in grads]
        return (*grads, None, None, None)
