"""Autocast regions, as TransformerEngine's ``autocast`` / ``fp8_autocast`` run them: the recipe is
chosen per region (the innermost wins), and when the OUTERMOST region exits every layer that ran in
it ends its forward region (delayed scaling: the input and weight scales update once, from the
max of the region's amaxes, and only when grad is enabled; under ``torch.no_grad()`` the amaxes
wait for the next update). The backward role's update happens at the end of the backward of the
region's first quantized module (TE: ``reduce_and_update_bwd_fp8_tensors``), for every layer of
the region. One process: there is no amax reduction across ranks (groups are accepted, unused).

The region state is per thread, as torch.autocast's is: a region opened in one thread does not
reach layers called from another, and each thread's outermost exit ends the forward region of the
layers that thread called. TE keeps it process-wide (FP8GlobalStateManager's class attributes,
transformer_engine/pytorch/quantization.py), which on a GPU is one training thread's state anyway.
"""
import contextlib
import threading

import torch

from ..common.recipe import DelayedScaling, Recipe

__all__ = ["autocast", "fp8_autocast", "is_fp8_enabled", "get_fp8_recipe", "get_default_fp8_recipe"]


class _Region:
    """The layers that ran inside one outermost autocast region (in call order)."""

    def __init__(self):
        self.units = []
        self._ids = set()
        self.first_taken = False

    def add(self, unit):
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


_state = _State()


def get_default_fp8_recipe():
    """The recipe of a region opened without one: DelayedScaling(), TE's default on Hopper (the
    GPU whose FP8 numerics this library emulates by default)."""
    return DelayedScaling()


def is_fp8_enabled():
    """Whether the calling thread runs inside an enabled autocast region."""
    return _state.enabled


def get_fp8_recipe():
    """The recipe of the calling thread's current region (the default recipe outside any)."""
    return _state.recipe if _state.recipe is not None else get_default_fp8_recipe()


def is_fp8_calibration():
    """Whether the calling thread's innermost region has calibrating=True (TE's
    FP8GlobalStateManager.is_fp8_calibration)."""
    return _state.calibrating


def calibration_recipe():
    """The recipe a calibrating region records statistics for (TE's default recipe when it gave none)."""
    return _state.calibration_recipe


def _current():
    """(recipe or None, region or None) for a layer's forward: None outside enabled regions."""
    if not _state.enabled:
        return None, _state.region
    return _state.recipe, _state.region


@contextlib.contextmanager
def autocast(enabled=True, calibrating=False, recipe=None, amax_reduction_group=None, _graph=False):
    """TE 2.x's region: the layers called inside quantize as ``recipe`` prescribes (TE's default
    recipe when None). Regions nest; the innermost one's ``enabled`` and ``recipe`` apply."""
    if _graph:
        raise ValueError("autocast(_graph=True) (CUDA graph capture) has no meaning on the CPU; leave it False")
    if recipe is not None and not isinstance(recipe, Recipe):
        raise TypeError(f"recipe must be a recipe from nvfp4.common.recipe (e.g. recipe.DelayedScaling()), got {type(recipe).__name__}")
    if enabled and recipe is None:
        recipe = get_default_fp8_recipe()
    saved = (_state.enabled, _state.recipe)
    saved_calibration = (_state.calibrating, _state.calibration_recipe)
    outermost = _state.depth == 0
    if outermost:
        _state.region = _Region()
    _state.depth += 1
    _state.enabled = bool(enabled)
    _state.recipe = recipe if enabled else saved[1]
    _state.calibrating = bool(calibrating)
    _state.calibration_recipe = (recipe or get_default_fp8_recipe()) if calibrating else None
    try:
        yield
    finally:
        _state.enabled, _state.recipe = saved
        _state.calibrating, _state.calibration_recipe = saved_calibration
        _state.depth -= 1
        if outermost:
            region, _state.region = _state.region, None
            grad_enabled = torch.is_grad_enabled()
            for unit in region.units:
                unit.end_forward_region(grad_enabled)


def fp8_autocast(enabled=True, calibrating=False, fp8_recipe=None, fp8_group=None, _graph=False):
    """TE 1.x's name for ``autocast`` (``fp8_recipe`` -> ``recipe``, ``fp8_group`` -> ``amax_reduction_group``)."""
    return autocast(enabled=enabled, calibrating=calibrating, recipe=fp8_recipe, amax_reduction_group=fp8_group, _graph=_graph)
