"""TE's ``quantized_model_init`` / ``fp8_model_init`` (transformer_engine/pytorch/quantization.py): modules
built inside the region hold their weights as quantized tensors (the recipe's weight quantizer
applied to the initial values), optionally keeping the initial values on the CPU for master weights
(``preserve_high_precision_init_val``). The region's state is per thread, as nvfp4.torch's autocast
region is (TE's is process-wide)."""
from __future__ import annotations

import contextlib
import threading
import warnings
from typing import Iterator, Optional

from ..common.recipe import DelayedScaling, Recipe

__all__ = ["quantized_model_init", "fp8_model_init", "with_fp8_parameters", "with_high_precision_init_val",
           "model_init_recipe"]


class _State(threading.local):
    fp8_parameters = False
    recipe = None
    high_precision_init_val = False


_state = _State()


def with_fp8_parameters() -> bool:
    """Whether modules made now keep their weights quantized."""
    return _state.fp8_parameters


def with_high_precision_init_val() -> bool:
    return _state.high_precision_init_val


def model_init_recipe() -> Recipe:
    """The recipe whose weight quantizer makes the quantized weights (TE's default when None)."""
    return _state.recipe if _state.recipe is not None else DelayedScaling()


@contextlib.contextmanager
def quantized_model_init(enabled: bool = True, recipe: Optional[Recipe] = None,
                         preserve_high_precision_init_val: bool = False) -> Iterator[None]:
    """Modules created in this region keep only quantized copies of their weights (QuantizedTensor
    parameters). With preserve_high_precision_init_val, each such weight also keeps its initial
    high-precision values on the CPU: ``weight.get_high_precision_init_val()`` /
    ``weight.clear_high_precision_init_val()``."""
    if recipe is not None and not isinstance(recipe, Recipe):
        raise TypeError(f"recipe must be a recipe from nvfp4.common.recipe, got {type(recipe).__name__}")
    saved = (_state.fp8_parameters, _state.recipe, _state.high_precision_init_val)
    _state.fp8_parameters, _state.recipe = bool(enabled), recipe
    _state.high_precision_init_val = bool(preserve_high_precision_init_val)
    try:
        yield
    finally:
        _state.fp8_parameters, _state.recipe, _state.high_precision_init_val = saved


@contextlib.contextmanager
def fp8_model_init(enabled: bool = True, recipe: Optional[Recipe] = None,
                   preserve_high_precision_init_val: bool = False) -> Iterator[None]:
    """TE 1.x's name for quantized_model_init (deprecated in TE, with its warning)."""
    warnings.warn("fp8_model_init is deprecated and will be removed in a future release. Use quantized_model_init("
                  "enabled=..., recipe=..., preserve_high_precision_init_val=...) instead.", category=DeprecationWarning,
                  stacklevel=3)
    with quantized_model_init(enabled=enabled, recipe=recipe, preserve_high_precision_init_val=preserve_high_precision_init_val):
        yield
