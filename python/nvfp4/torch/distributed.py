"""TE's ``transformer_engine.pytorch.distributed`` on a CPU: ``checkpoint`` (activation
recomputation that keeps the forward's quantization: the recompute runs inside the forward's
te.autocast and torch autocast, with the RNG state of the forward, and a delayed-scaling layer
recomputes with the scale and amax history it had in the forward, its recomputed amaxes
discarded, so the recomputed forward has the bits of the first and no scale updates twice) and
``CudaRNGStatesTracker`` (named RNG states, here of torch's CPU generator).

As TE: ``use_reentrant=True`` (the default) runs the forward under torch.no_grad() and recomputes
it in backward; ``use_reentrant=False`` is TE's saved-tensor-hook form, which here keeps the
forward's activations (no memory saved, the same bits: nvfp4.torch's layers keep their saved
forward outside autograd's saved tensors). A function with no TE module goes to
torch.utils.checkpoint, as in TE. ``distribute_saved_activations=True`` keeps only this rank's
equal share of the first argument between the forward and the recompute (``tp_group``'s ranks
hold the rest), as TE's.

The tensor-parallel collectives TE's modules use, with TE's names and signatures
(``gather_along_first_dim``, ``reduce_scatter_along_first_dim``, ``allreduce``,
``get_distributed_world_size``, ``get_distributed_rank``, ``set_tensor_model_parallel_attributes``,
``split_tensor_into_1d_equal_chunks``, ``gather_split_1d_tensor``), are module/_parallel.py's: they
complete before returning (the handle is None) and sum in rank order in the tensor's dtype."""
from __future__ import annotations

import collections
import contextlib
import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator

import torch
import torch.utils.checkpoint

from .module._parallel import (allreduce, gather_along_first_dim, gather_split_1d_tensor, get_distributed_rank,  # noqa: F401
                               get_distributed_world_size, reduce_scatter_along_first_dim,
                               set_tensor_model_parallel_attributes, split_tensor_into_1d_equal_chunks)

if TYPE_CHECKING:  # for the annotations only: the module imports nothing more at run time
    from .module._linear_unit import LinearUnit

__all__ = ["checkpoint", "CudaRNGStatesTracker", "is_fp8_activation_recompute_enabled", "in_fp8_activation_recompute_phase",
           "activation_recompute_forward", "gather_along_first_dim", "reduce_scatter_along_first_dim", "allreduce",
           "get_distributed_world_size", "get_distributed_rank", "set_tensor_model_parallel_attributes",
           "split_tensor_into_1d_equal_chunks", "gather_split_1d_tensor"]


class _RecomputeState(threading.local):
    in_region = False   # inside checkpoint's forward or its recompute
    phase = False       # in the recompute
    first_module = None  # per checkpoint call: what the region's first-module flag was at its forward


_recompute = _RecomputeState()


def is_fp8_activation_recompute_enabled() -> bool:
    """Whether a checkpointed forward runs now with quantization enabled (TE's name)."""
    from . import quantization
    return _recompute.in_region and quantization.is_fp8_enabled()


def in_fp8_activation_recompute_phase() -> bool:
    """Whether checkpoint's recompute (in backward) runs now."""
    return _recompute.phase


@contextlib.contextmanager
def activation_recompute_forward(activation_recompute: bool = False, recompute_phase: bool = False) -> Iterator[None]:
    """Marks a checkpointed forward (recompute_phase=False) or its recompute (True)."""
    saved = (_recompute.in_region, _recompute.phase)
    _recompute.in_region, _recompute.phase = bool(activation_recompute), bool(recompute_phase)
    try:
        yield
    finally:
        _recompute.in_region, _recompute.phase = saved


# ---- what a delayed-scaling layer keeps for its recompute --------------------------------------------

class ScalingStash:
    """A layer's delayed-scaling state at each checkpointed forward, in call order (TE:
    FP8GlobalStateManager.copy_forward_fp8_meta_tensors_for_recompute), for the recomputes."""

    def __init__(self) -> None:
        self._saved = collections.deque()

    def __len__(self) -> int:
        return len(self._saved)

    def push(self, state: Dict[str, Any]) -> None:
        self._saved.append(state)

    @contextlib.contextmanager
    def recompute(self, get_state: Callable[[], Dict[str, Any]], set_state: Callable[[Dict[str, Any]], None]) -> Iterator[None]:
        """Runs the body with the state of the matching checkpointed forward, then puts back the
        state the layer has now (TE: get_old_fp8_meta_tensors_for_recompute, restore_fp8_meta_tensors)."""
        if not self._saved:
            raise RuntimeError("checkpoint's recompute found no state saved by its forward for this layer "
                               "(was the layer called outside te.checkpoint's forward?)")
        current = get_state()
        set_state(self._saved.popleft())
        try:
            yield
        finally:
            set_state(current)


_stashes = weakref.WeakKeyDictionary()


def scaling_stash(unit: LinearUnit) -> ScalingStash:
    """The ScalingStash of one GEMM layer (a LinearUnit)."""
    stash = _stashes.get(unit)
    if stash is None:
        stash = _stashes[unit] = ScalingStash()
    return stash


# ---- checkpoint ------------------------------------------------------------------------------------

def _te_modules():
    from .module.layernorm import _Norm
    from .module.linear import GemmModule
    from .module.layernorm_mlp import LayerNormMLP
    classes = [_Norm, GemmModule, LayerNormMLP]
    try:
        from .transformer import TransformerLayer
        classes.append(TransformerLayer)
        from .attention import DotProductAttention, MultiheadAttention
        classes += [DotProductAttention, MultiheadAttention]
    except ImportError:  # pragma: no cover - the attention family not built yet
        pass
    return tuple(classes)


def has_te_modules(network: Callable[..., Any]) -> bool:
    """Whether `network` holds a TE module (a callable that is no torch Module may: assumed so, as TE)."""
    if isinstance(network, torch.nn.Module):
        classes = _te_modules()
        return any(isinstance(m, classes) for m in network.modules())
    return True


def _autocast_contexts():
    """The torch autocast regions active now (CPU and CUDA), to re-enter for the recompute."""
    cache = torch.is_autocast_cache_enabled()
    try:
        cpu = torch.autocast("cpu", enabled=torch.is_autocast_enabled("cpu"), dtype=torch.get_autocast_dtype("cpu"),
                             cache_enabled=cache)
    except TypeError:  # torch < 2.4
        cpu = torch.autocast("cpu", enabled=torch.is_autocast_cpu_enabled(), dtype=torch.get_autocast_cpu_dtype(),
                             cache_enabled=cache)
    return cpu


def _te_region():
    """(enabled, recipe) of the te.autocast region active now."""
    from . import quantization
    enabled = quantization.is_fp8_enabled()
    return enabled, (quantization.get_fp8_recipe() if enabled else None)


@contextlib.contextmanager
def _quantization_region(enabled, recipe, outer, first_taken):
    """The recompute's te.autocast region, standing for the forward's: it carries the forward
    region's layers and its first-module flag as it was when the checkpointed forward began (TE
    restores is_first_fp8_module; its amax buffers are global), so the backward-scale update runs
    once, from the region's first module, for all of the region's layers."""
    from . import quantization
    with quantization.autocast(enabled=enabled, recipe=recipe):
        region = quantization._current()[1]
        if region is not None and outer is not None and region is not outer:
            region.units, region._ids, region.first_taken = outer.units, outer._ids, first_taken
        yield


def _region_now():
    from . import quantization
    region = quantization._current()[1]
    return region, (region.first_taken if region is not None else True)


class _CheckpointFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run_function, get_rng_state_tracker, kwargs, distribute, tp_group, *args):
        ctx.run_function, ctx.kwargs = run_function, kwargs
        ctx.distribute, ctx.tp_group = distribute, tp_group
        ctx.get_rng_state_tracker = get_rng_state_tracker
        ctx.fwd_rng_state = torch.get_rng_state()
        ctx.fwd_tracker_states = get_rng_state_tracker().get_states() if get_rng_state_tracker is not None else None
        ctx.amp = _autocast_contexts()
        ctx.fp8, ctx.fp8_recipe = _te_region()
        ctx.region, ctx.first_taken = _region_now()
        with torch.no_grad(), activation_recompute_forward(activation_recompute=True, recompute_phase=False):
            outputs = run_function(*args, **kwargs)
        if distribute:  # TE: only this rank's share of the first argument is kept until the recompute
            ctx.input_0_shape = args[0].data.shape
            args[0].data = split_tensor_into_1d_equal_chunks(args[0].data, tp_group, new_buffer=True)
        ctx.inputs = [None if torch.is_tensor(a) else a for a in args]
        ctx.save_for_backward(*[a if torch.is_tensor(a) else None for a in args])
        return outputs

    @staticmethod
    def backward(ctx, *grads):
        if not torch.autograd._is_checkpoint_valid():
            raise RuntimeError("Checkpointing is not compatible with .grad(), please use .backward() if possible")
        inputs = [t if t is not None else a for t, a in zip(ctx.saved_tensors, ctx.inputs)]
        if ctx.distribute:
            inputs[0].data = gather_split_1d_tensor(inputs[0].data, ctx.tp_group).view(ctx.input_0_shape)
        tracker = ctx.get_rng_state_tracker
        bwd_rng_state = torch.get_rng_state()
        bwd_tracker_states = tracker().get_states() if tracker is not None else None
        torch.set_rng_state(ctx.fwd_rng_state)
        if tracker is not None:
            tracker().set_states(ctx.fwd_tracker_states)
        detached = [a.detach().requires_grad_(a.requires_grad) if torch.is_tensor(a) else a for a in inputs]
        try:
            with torch.enable_grad(), ctx.amp, activation_recompute_forward(activation_recompute=True, recompute_phase=True), \
                    _quantization_region(ctx.fp8, ctx.fp8_recipe, ctx.region, ctx.first_taken):
                outputs = ctx.run_function(*detached, **ctx.kwargs)
        finally:
            torch.set_rng_state(bwd_rng_state)
            if tracker is not None:
                tracker().set_states(bwd_tracker_states)
        outputs = (outputs,) if torch.is_tensor(outputs) else tuple(outputs)
        pairs = [(o, g) for o, g in zip(outputs, grads) if torch.is_tensor(o) and o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None, None, None, None) + tuple(a.grad if torch.is_tensor(a) else None for a in detached)


def checkpoint(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """TE's checkpoint(function, *args, distribute_saved_activations=False, get_rng_state_tracker=None,
    tp_group=None, use_reentrant=True, **kwargs): `function(*args, **kwargs)`, its activations
    recomputed in backward with the forward's quantization state (see the module docstring)."""
    use_reentrant = kwargs.pop("use_reentrant", True)
    distribute_saved_activations = kwargs.pop("distribute_saved_activations", False)
    tp_group = kwargs.pop("tp_group", None)
    get_rng_state_tracker = kwargs.pop("get_rng_state_tracker", None)
    if len(args) > 3 and isinstance(args[0], bool) and callable(args[1]) and args[2] is None:
        warnings.warn("Passing non-tensor non-keyword arguments is deprecated and support will be removed in future releases "
                      "of TransformerEngine. `distribute_saved_activations`, `tp_group`, and `get_rng_state_tracker` must be "
                      "passed as keyword arguments to `checkpoint`.", DeprecationWarning, stacklevel=2)
        distribute_saved_activations, get_rng_state_tracker, tp_group, args = args[0], args[1], args[2], args[3:]
    context_fn = kwargs.pop("context_fn", None)
    determinism_check = kwargs.pop("determinism_check", "default")
    debug = kwargs.pop("debug", False)
    if not has_te_modules(function):
        options = {} if context_fn is None else {"context_fn": context_fn}
        if determinism_check != "default" or debug:
            options.update(determinism_check=determinism_check, debug=debug)
        return torch.utils.checkpoint.checkpoint(function, *args, use_reentrant=use_reentrant, **options, **kwargs)
    if context_fn is not None:
        raise ValueError("checkpoint(context_fn=...) around TE modules is not supported by nvfp4.torch")
    if use_reentrant:
        return _CheckpointFunction.apply(function, get_rng_state_tracker, kwargs, bool(distribute_saved_activations), tp_group,
                                         *args)
    if distribute_saved_activations:
        warnings.warn("`distribute_saved_activations=True` has no effect when `use_reentrant=False`.")
    return function(*args, **kwargs)


# ---- RNG states ------------------------------------------------------------------------------------

class CudaRNGStatesTracker:
    """Named RNG states (TE's, for model-parallel dropout): ``add(name, seed)`` makes one, ``fork(name)``
    runs a block with it as torch's default (CPU) generator state and keeps where it got to."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.states_ = {}
        self.seeds_ = set()

    def get_states(self) -> Dict[str, torch.Tensor]:
        return dict(self.states_)

    def set_states(self, states: Dict[str, torch.Tensor]) -> None:
        self.states_ = states

    def add(self, name: str, seed: int) -> None:
        if seed in self.seeds_:
            raise RuntimeError(f"seed {seed} already exists")
        self.seeds_.add(seed)
        if name in self.states_:
            raise RuntimeError(f"cuda rng state {name} already exists")
        original = torch.get_rng_state()
        torch.manual_seed(seed)
        self.states_[name] = torch.get_rng_state()
        torch.set_rng_state(original)

    @contextlib.contextmanager
    def fork(self, name: str = "model-parallel-rng") -> Iterator[None]:
        if name not in self.states_:
            raise KeyError(f"cuda rng state {name} is not added")
        original = torch.get_rng_state()
        torch.set_rng_state(self.states_[name])
        try:
            yield
        finally:
            self.states_[name] = torch.get_rng_state()
            torch.set_rng_state(original)
