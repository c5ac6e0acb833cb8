"""Autocast regions, as TransformerEngine's ``autocast`` / ``fp8_autocast`` run them: the recipe is
chosen per region (the innermost wins), and when the OUTERMOST region exits every layer that ran in
it ends its forward region (delayed scaling: the input and weight scales update once, from the
max of the region's amaxes, and only when grad is enabled; under ``torch.no_grad()`` the amaxes
wait for the next update). The backward role's update happens at the end of the backward of the
region's first quantized module (TE: ``reduce_and_update_bwd_fp8_tensors``), for every layer of
the region. Before each update, with torch.distributed initialized, the amaxes are reduced across
the region's ``amax_reduction_group`` as TE reduces them (_amax_reduction.py).

The region state is per thread, as torch.autocast's is: a region opened in one thread does not
reach layers called from another, and each thread's outermost exit ends the forward region of the
layers that thread called. TE keeps it process-wide (FP8GlobalStateManager's class attributes,
transformer_engine/pytorch/quantization.py), which on a GPU is one training thread's state anyway.
"""
from __future__ import annotations

import threading
import warnings
from types import TracebackType
from typing import Optional, Tuple, Type, Union

import torch

from ..common.recipe import DelayedScaling, Recipe

from ._model_init import fp8_model_init, quantized_model_init  # noqa: E402  (TE keeps them in this module)

__all__ = ["autocast", "fp8_autocast", "is_fp8_enabled", "get_fp8_recipe", "get_default_fp8_recipe", "get_default_recipe",
           "is_fp8_available", "is_mxfp8_available", "is_fp8_block_scaling_available", "is_nvfp4_available",
           "quantized_model_init", "fp8_model_init", "is_fp8_calibration"]


class _Region:
    """The layers that ran inside one outermost autocast region (in call order)."""

    def __init__(self):
        self.units = []
        self._ids = set()
        self.first_taken = False

    def add(self, unit):
        from . import _amax_reduction
        from .distributed import in_fp8_activation_recompute_phase
        if not in_fp8_activation_recompute_phase():  # TE's recompute region has no group; the layer keeps its own
            _amax_reduction.note_forward(unit, _state.group)
        if id(unit) not in self._ids:
            self._ids.add(id(unit))
            self.units.append(unit)

    def take_first(self):
        """True for the region's first quantized module (TE's is_first_fp8_module)."""
        first = not self.first_taken
        self.first_taken = True
        return first


class _State(threading.local):
    """The autocast state of the calling thread (each thread starts outside any region)."""

    def __init__(self):
        self.enabled = False
        self.recipe = None
        self.depth = 0
        self.region = None
        self.calibrating = False
        self.calibration_recipe = None
        self.group = None  # the innermost region's amax_reduction_group (TE: fp8_distributed_group)


_state = _State()


def get_default_fp8_recipe() -> Recipe:
    """The recipe of a region opened without one: DelayedScaling(), TE's default on Hopper (the
    GPU whose FP8 numerics this library emulates by default)."""
    return DelayedScaling()


def get_default_recipe() -> Recipe:
    """TE 2.x's name for get_default_fp8_recipe."""
    return get_default_fp8_recipe()


def _available(return_reason):
    return (True, "") if return_reason else True


def is_fp8_available(return_reason: bool = False) -> Union[bool, Tuple[bool, str]]:
    """Whether delayed and current per-tensor FP8 scaling run: always here (emulated), with TE's
    signature ((True, "") with return_reason)."""
    return _available(return_reason)


def is_mxfp8_available(return_reason: bool = False) -> Union[bool, Tuple[bool, str]]:
    """Whether MXFP8 runs: always here (TE answers False below compute capability 10.0)."""
    return _available(return_reason)


def is_fp8_block_scaling_available(return_reason: bool = False) -> Union[bool, Tuple[bool, str]]:
    """Whether FP8 block scaling runs: always here."""
    return _available(return_reason)


def is_nvfp4_available(return_reason: bool = False) -> Union[bool, Tuple[bool, str]]:
    """Whether NVFP4 runs: always here (TE answers False below compute capability 10.0)."""
    return _available(return_reason)


def is_fp8_enabled() -> bool:
    """Whether the calling thread runs inside an enabled autocast region."""
    return _state.enabled


def get_fp8_recipe() -> Recipe:
    """The recipe of the calling thread's current region (the default recipe outside any)."""
    return _state.recipe if _state.recipe is not None else get_default_fp8_recipe()


def is_fp8_calibration() -> bool:
    """Whether the calling thread's innermost region has calibrating=True (TE's
    FP8GlobalStateManager.is_fp8_calibration)."""
    return _state.calibrating


def calibration_recipe() -> Optional[Recipe]:
    """The recipe a calibrating region records statistics for (TE's default recipe when it gave none)."""
    return _state.calibration_recipe


def _current():
    """(recipe or None, region or None) for a layer's forward: None outside enabled regions."""
    if not _state.enabled:
        return None, _state.region
    return _state.recipe, _state.region


class autocast:
    """TE 2.x's region (a reusable context-manager object, as TE's class): the layers called inside
    quantize as ``recipe`` prescribes (TE's default recipe when None). Regions nest; the innermost
    one's ``enabled`` and ``recipe`` apply. One object may be entered again after it exits, not
    while it is active (TE's RuntimeError)."""

    __slots__ = ("_enabled", "_calibrating", "_recipe", "_amax_reduction_group", "_graph", "_saved")

    def __init__(self, enabled: bool = True, calibrating: bool = False, recipe: Optional[Recipe] = None,
                 amax_reduction_group: Optional[torch.distributed.ProcessGroup] = None, _graph: bool = False) -> None:
        self._enabled, self._calibrating, self._recipe = enabled, calibrating, recipe
        self._amax_reduction_group, self._graph = amax_reduction_group, _graph
        self._saved = None

    def __enter__(self) -> autocast:
        if self._saved is not None:
            raise RuntimeError("autocast context manager cannot be entered more than once concurrently")
        if self._graph:
            raise ValueError("autocast(_graph=True) (CUDA graph capture) has no meaning on the CPU; leave it False")
        recipe = self._recipe
        if recipe is not None and not isinstance(recipe, Recipe):
            raise TypeError(f"recipe must be a recipe from nvfp4.common.recipe (e.g. recipe.DelayedScaling()), got {type(recipe).__name__}")
        if self._enabled and recipe is None:
            recipe = get_default_fp8_recipe()
        outermost = _state.depth == 0
        self._saved = (_state.enabled, _state.recipe, _state.calibrating, _state.calibration_recipe, _state.group, outermost)
        if outermost:
            _state.region = _Region()
        _state.depth += 1
        _state.enabled = bool(self._enabled)
        _state.recipe = recipe if self._enabled else self._saved[1]
        _state.calibrating = bool(self._calibrating)
        _state.calibration_recipe = (recipe or get_default_fp8_recipe()) if self._calibrating else None
        _state.group = self._amax_reduction_group
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc_value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> bool:
        enabled, recipe, calibrating, calibration, group, outermost = self._saved
        self._saved = None
        _state.enabled, _state.recipe, _state.calibrating, _state.calibration_recipe = enabled, recipe, calibrating, calibration
        _state.group = group
        _state.depth -= 1
        if outermost:
            from . import _amax_reduction
            region, _state.region = _state.region, None
            # TE: reduce (across ranks), then update; an exception skips the collective only
            _amax_reduction.end_forward(region.units, torch.is_grad_enabled(), failed=exc_type is not None)
        return False


def fp8_autocast(enabled: bool = True, calibrating: bool = False, fp8_recipe: Optional[Recipe] = None,
                 fp8_group: Optional[torch.distributed.ProcessGroup] = None, _graph: bool = False) -> autocast:
    """TE 1.x's name for ``autocast`` (``fp8_recipe`` -> ``recipe``, ``fp8_group`` -> ``amax_reduction_group``),
    deprecated in TE with this warning."""
    warnings.warn("fp8_autocast is deprecated and will be removed in a future release. Use autocast(enabled=..., "
                  "calibrating=..., recipe=..., group=..., _graph=...) instead.", category=DeprecationWarning, stacklevel=2)
    return autocast(enabled=enabled, calibrating=calibrating, recipe=fp8_recipe, amax_reduction_group=fp8_group, _graph=_graph)
