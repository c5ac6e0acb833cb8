"""A GEMM module's ``_extra_state`` in TransformerEngine's format, both ways (TE:
pytorch/module/base.py get_extra_state / set_extra_state, pytorch/_extra_state.py).

What TE writes, for a module of N GEMMs:
- ``torch.empty(0, dtype=torch.uint8)`` when its last forward ran without quantization, or (TE 2.x)
  under a recipe with no state (current scaling, block scaling, MXFP8, NVFP4);
- otherwise the bytes of ``pickle.dumps(state)`` as a uint8 tensor, where ``state`` is a dict:
  ``"recipe"`` (the ``transformer_engine.common.recipe`` object), for delayed scaling
  ``"scale_fwd"`` float32 [3N], ``"amax_history_fwd"`` float32 [L, 3N], ``"scale_bwd"`` [2N],
  ``"amax_history_bwd"`` [L, 2N] (GEMM g's slots: forward input 3g, weight 3g+1, output 3g+2;
  backward grad_output 2g, grad_input 2g+1; history row 0 is the step in progress), and
  ``"extra_fp8_variables"`` (``fp8_checkpoint``, ``num_gemms``, ``fp8_max_fwd``, ``fp8_max_bwd``).
  TE 1.x wrote the same without ``"recipe"`` (delayed scaling only, plus ``scale_inv_*``), and
  earlier versions an ``io.BytesIO`` holding ``torch.save`` of it.

What nvfp4.torch writes is the same, with two differences: an NVFP4 module writes the pickle (TE
2.x: empty) so that its stochastic-rounding counter survives, and every pickle carries
``"nvfp4_torch": {"steps": n}`` (a key TE ignores). Reading never runs arbitrary code: the
unpickler resolves only torch's tensor rebuilders and TE's recipe classes (mapped onto
nvfp4.common.recipe), so unlike TE no NVTE_ALLOW_UNSAFE_PICKLE_EXTRA_STATE opt-in is needed.
Loading ours in TE: TE 2.x refuses a delayed-scaling pickle (its own included) unless that
variable is 1; the others load there and are ignored.
"""
from __future__ import annotations

import collections
import dataclasses
import enum
import io
import pickle
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np
import torch

from ...common import recipe as _recipe
from ..constants import FP8_BWD_TENSORS_PER_GEMM, FP8_FWD_TENSORS_PER_GEMM

__all__ = ["empty_state", "write_state", "read_state"]

TE_RECIPE_MODULE = "transformer_engine.common.recipe"
_OUR_KEY = "nvfp4_torch"
_FWD_ROLES = ("input", "weight")  # slots 3g, 3g+1 (3g+2, the output, is never quantized here)
_BWD_ROLES = ("grad_output",)     # slot 2g (2g+1, grad_input, is never quantized here)


def empty_state() -> torch.Tensor:
    """What TE writes when there is nothing to save."""
    return torch.empty(0, dtype=torch.uint8)


# ---- writing -------------------------------------------------------------------------------------

def write_state(recipe: Optional[_recipe.Recipe], gemms: Sequence[Optional[Dict[str, np.ndarray]]],
                steps: Union[int, Sequence[int]], fp8_checkpoint: bool) -> torch.Tensor:
    """The module's ``_extra_state`` tensor. `recipe`: the TE recipe of the module's last forward
    (None without quantization); `gemms`: per GEMM, its delayed-scaling state
    ({"input.scale", "input.amax_history", "weight.*", "grad_output.*"} float32 arrays) or None;
    `steps`: the stochastic-rounding counter (an int, or one per GEMM); `fp8_checkpoint`: whether the last forward quantized
    (or calibrated), TE's fp8_meta["fp8_checkpoint"]."""
    if not fp8_checkpoint or recipe is None:
        return empty_state()
    delayed = isinstance(recipe, _recipe.DelayedScaling)
    if not delayed and not isinstance(recipe, _recipe.NVFP4BlockScaling):
        return empty_state()
    tensors = _te_tensors(gemms, recipe.amax_history_len) if delayed else {}
    if delayed and tensors["amax_history_fwd"].shape[0] != recipe.amax_history_len:
        # TE allocates the history from the recipe's length before copying the saved one into it.
        recipe = dataclasses.replace(recipe, amax_history_len=tensors["amax_history_fwd"].shape[0])
    state = {"recipe": _te_object(recipe)}
    state.update(tensors)
    fp8_max = recipe.fp8_format.value
    state["extra_fp8_variables"] = {"fp8_checkpoint": True, "num_gemms": len(gemms),
                                    "fp8_max_fwd": fp8_max.max_fwd, "fp8_max_bwd": fp8_max.max_bwd}
    state[_OUR_KEY] = {"steps": [int(n) for n in steps] if isinstance(steps, (list, tuple)) else int(steps)}
    buffer = io.BytesIO()
    _TEPickler(buffer, protocol=4).dump(state)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def _te_tensors(gemms, history_len):
    """TE's four delayed-scaling tensors from per-GEMM scaling states (unused slots: scale 1,
    history 0, as TE leaves them)."""
    n = len(gemms)
    lengths = {np.asarray(s[f"{r}.amax_history"]).shape[0] for s in gemms if s for r in _FWD_ROLES + _BWD_ROLES}
    length = lengths.pop() if len(lengths) == 1 else history_len
    scale_fwd = torch.ones(FP8_FWD_TENSORS_PER_GEMM * n, dtype=torch.float32)
    history_fwd = torch.zeros(length, FP8_FWD_TENSORS_PER_GEMM * n, dtype=torch.float32)
    scale_bwd = torch.ones(FP8_BWD_TENSORS_PER_GEMM * n, dtype=torch.float32)
    history_bwd = torch.zeros(length, FP8_BWD_TENSORS_PER_GEMM * n, dtype=torch.float32)
    for g, scaling in enumerate(gemms):
        if not scaling:
            continue
        for slot, role in enumerate(_FWD_ROLES):
            _put(scaling, role, scale_fwd, history_fwd, FP8_FWD_TENSORS_PER_GEMM * g + slot)
        for slot, role in enumerate(_BWD_ROLES):
            _put(scaling, role, scale_bwd, history_bwd, FP8_BWD_TENSORS_PER_GEMM * g + slot)
    return {"scale_fwd": scale_fwd, "amax_history_fwd": history_fwd, "scale_bwd": scale_bwd, "amax_history_bwd": history_bwd}


def _put(scaling, role, scale, history, column):
    scale[column] = float(np.asarray(scaling[f"{role}.scale"], dtype=np.float32).reshape(-1)[0])
    history[:, column] = torch.from_numpy(np.asarray(scaling[f"{role}.amax_history"], dtype=np.float32).reshape(-1))


class _TEName:
    """A class TE has, standing in for it in a pickle: pickled as a reference to
    transformer_engine.common.recipe.<name> (see _TEPickler.save_global)."""


_STAND_INS = {}


def _stand_in(name):
    if name not in _STAND_INS:
        _STAND_INS[name] = type(name, (_TEName,), {"__module__": TE_RECIPE_MODULE, "__qualname__": name})
    return _STAND_INS[name]


_FormatHelperStandIn = collections.namedtuple("_FormatHelper", ["max_fwd", "max_bwd"], module=TE_RECIPE_MODULE)


class _EnumValue:
    """A TE enum member in a pickle: TE's Enum reduces to (Format, (value,))."""

    def __init__(self, enum_class_name, value):
        self.cls, self.value = _stand_in(enum_class_name), value

    def __reduce_ex__(self, protocol):
        return self.cls, (self.value,)


def _te_object(obj):
    """Our recipe objects as the instances of TE's classes that a TE pickle holds."""
    if isinstance(obj, enum.Enum):
        return _EnumValue(type(obj).__name__, _FormatHelperStandIn(*obj.value))
    if isinstance(obj, (_recipe.QParams, _recipe.MMParams)):
        out = object.__new__(_stand_in(type(obj).__name__))
        out.__dict__.update({f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
        out.__dict__["_cached_repr"] = _te_params_repr(obj)  # TE's QParams / MMParams __repr__ returns it
        return out
    if isinstance(obj, _recipe.Recipe):
        out = object.__new__(_stand_in(type(obj).__name__))
        out.__dict__.update({k: _te_object(v) for k, v in vars(obj).items()})
        return out
    return obj


def _te_params_repr(params):
    """The string TE's __post_init__ caches as the repr (common/recipe/__init__.py)."""
    if isinstance(params, _recipe.MMParams):
        return f"MMParams(use_split_accumulator={params.use_split_accumulator})"
    return (f"Qparams(\npower_2_scale={params.power_2_scale},\namax_epsilon={params.amax_epsilon},\n"
            f"random_hadamard_transform={params.random_hadamard_transform},\n"
            f"stochastic_rounding={params.stochastic_rounding},\nfp4_2d_quantization={params.fp4_2d_quantization}\n)")


class _TEPickler(pickle._Pickler):  # the Python pickler: how it saves a class can be overridden
    def save_te_class(self, obj):
        if issubclass(obj, _TEName) or obj is _FormatHelperStandIn:
            self.save(obj.__module__)
            self.save(obj.__qualname__)
            self.write(pickle.STACK_GLOBAL)
            self.memoize(obj)
        else:
            pickle._Pickler.dispatch[type](self, obj)

    dispatch = dict(pickle._Pickler.dispatch)
    dispatch[type] = save_te_class


# ---- reading -------------------------------------------------------------------------------------

def read_state(state: Union[torch.Tensor, io.BytesIO, Dict[str, Any], None], num_gemms: int,
               context: str) -> Optional[Dict[str, Any]]:

    """What a checkpoint's ``_extra_state`` holds, or None when it holds nothing: {"recipe": a
    nvfp4.common.recipe object or None, "gemms": per GEMM a scaling state dict (delayed scaling) or
    None, "steps": int or None, "fp8_checkpoint": bool}. Accepts TE's formats (2.x, 1.x, the
    io.BytesIO one) and nvfp4.torch's earlier dict ({"scaling", "steps"}, one GEMM). Raises
    RuntimeError for anything else (TE's message), ValueError for a state of another shape."""
    if state is None:
        return None
    if isinstance(state, dict) and "scaling" in state:  # nvfp4.torch before TE's format
        if num_gemms != 1:
            raise ValueError(f"{context}: a one-GEMM nvfp4.torch state cannot load into a module of {num_gemms} GEMMs")
        scaling = {k: np.asarray(v.detach().cpu().numpy() if torch.is_tensor(v) else v, dtype=np.float32)
                   for k, v in state["scaling"].items()}
        return {"recipe": None, "gemms": [scaling or None], "steps": int(state.get("steps", 0)), "fp8_checkpoint": bool(scaling)}
    if torch.is_tensor(state):
        if state.numel() == 0:
            return None
        if state.dtype != torch.uint8:
            raise RuntimeError("Unsupported checkpoint format.")
        data = _load_pickle(state.detach().cpu().contiguous().numpy().tobytes(), context)
    elif isinstance(state, io.BytesIO):
        state.seek(0)
        data = torch.load(state, map_location="cpu", pickle_module=_RestrictedPickleModule)
    else:
        raise RuntimeError("Unsupported checkpoint format.")
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ValueError(f"{context}: _extra_state holds a {type(data).__name__}, not TE's dict of FP8 metadata")
    recipe = data.get("recipe")
    if recipe is None:  # TE 1.x: delayed scaling was the only recipe
        recipe = _recipe.DelayedScaling()
    if not isinstance(recipe, _recipe.Recipe):
        raise ValueError(f"{context}: _extra_state's recipe is a {type(recipe).__name__}, not a TE recipe")
    gemms = [None] * num_gemms
    if isinstance(recipe, _recipe.DelayedScaling) and "scale_fwd" in data:
        gemms = _our_scaling(data, num_gemms, context)
    extra = data.get("extra_fp8_variables", {})
    ours = data.get(_OUR_KEY, {})
    return {"recipe": recipe, "gemms": gemms, "steps": ours.get("steps"),
            "fp8_checkpoint": bool(extra.get("fp8_checkpoint", True)) if isinstance(extra, dict) else True}


def _our_scaling(data, num_gemms, context):
    tensors = {}
    for key, slots in (("fwd", FP8_FWD_TENSORS_PER_GEMM), ("bwd", FP8_BWD_TENSORS_PER_GEMM)):
        scale, history = data.get(f"scale_{key}"), data.get(f"amax_history_{key}")
        if not (torch.is_tensor(scale) and torch.is_tensor(history)):
            raise ValueError(f"{context}: _extra_state has no scale_{key} / amax_history_{key} tensors")
        scale = scale.detach().cpu().to(torch.float32).reshape(-1)
        history = history.detach().cpu().to(torch.float32)
        if history.dim() == 1:
            history = history.reshape(-1, 1)
        if scale.numel() != slots * num_gemms or history.dim() != 2 or history.shape[1] != slots * num_gemms:
            raise ValueError(f"{context}: _extra_state's scale_{key} {tuple(scale.shape)} / amax_history_{key} "
                             f"{tuple(history.shape)} do not fit a module of {num_gemms} GEMM(s) ({slots * num_gemms} "
                             f"quantizers)")
        tensors[key] = (scale.numpy(), history.numpy())
    gemms = []
    for g in range(num_gemms):
        scaling = {}
        for key, roles, slots in (("fwd", _FWD_ROLES, FP8_FWD_TENSORS_PER_GEMM), ("bwd", _BWD_ROLES, FP8_BWD_TENSORS_PER_GEMM)):
            scale, history = tensors[key]
            for slot, role in enumerate(roles):
                column = slots * g + slot
                scaling[f"{role}.scale"] = np.array([scale[column]], dtype=np.float32)
                scaling[f"{role}.amax_history"] = np.ascontiguousarray(history[:, column], dtype=np.float32)
        gemms.append(scaling)
    return gemms


# TE's recipe classes onto ours; anything else a TE extra state can hold is torch's tensor machinery.
_TE_CLASSES = {name: getattr(_recipe, name) for name in
               ("DelayedScaling", "Float8CurrentScaling", "Float8BlockScaling", "MXFP8BlockScaling",
                "NVFP4BlockScaling", "Format", "MMParams", "QParams")}
_TE_CLASSES["_FormatHelper"] = _recipe._FormatHelper
_TORCH_GLOBALS = {("torch._utils", n) for n in ("_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3")}
_TORCH_GLOBALS |= {("collections", "OrderedDict"), ("torch", "Size")}


def _storage_from_bytes(data):
    return torch.load(io.BytesIO(data), weights_only=True)


def _enum_member(cls, name):
    """builtins.getattr as an Enum pickle uses it (Python 3.11: a member by name), for TE's Format only."""
    if cls is _recipe.Format and isinstance(name, str) and name in cls.__members__:
        return cls[name]
    raise pickle.UnpicklingError(f"_extra_state asks for attribute {name!r} of {cls!r}; only recipe.Format members are read")


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickles TE's extra state without running anything else (TE runs it unrestricted)."""

    def find_class(self, module, name):
        if module in (TE_RECIPE_MODULE, _recipe.__name__) and name in _TE_CLASSES:
            return _TE_CLASSES[name]
        if (module, name) == ("torch.storage", "_load_from_bytes"):
            return _storage_from_bytes
        if (module, name) == ("builtins", "getattr"):
            return _enum_member
        if (module, name) in _TORCH_GLOBALS or (module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)):
            return super().find_class(module, name)
        if module == "torch" and name.endswith("Storage") and hasattr(torch, name):  # legacy torch.save of storages
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"_extra_state refers to {module}.{name}, which a TransformerEngine FP8 metadata "
                                     "checkpoint does not hold; refusing to load it (it could run code)")


class _RestrictedPickleModule:
    """What torch.load needs of a pickle module, with the restricted unpickler."""
    Unpickler = _RestrictedUnpickler
    load = staticmethod(lambda f, **kw: _RestrictedUnpickler(f, **kw).load())
    __name__ = "nvfp4_restricted_pickle"


def _load_pickle(data, context):
    try:
        loaded = _RestrictedUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError:
        raise
    except Exception as e:  # truncated or corrupt bytes
        raise ValueError(f"{context}: _extra_state is not a readable TransformerEngine FP8 metadata pickle ({e})") from None
    return _rebuilt(loaded)


def _rebuilt(obj):
    """Recipes unpickled from TE's state (made without __init__) rebuilt through our constructor, so
    TE's field values are checked and the per-role QParams exist; nested dicts walked."""
    if isinstance(obj, dict):
        return {k: _rebuilt(v) for k, v in obj.items()}
    if isinstance(obj, _recipe.Recipe) and dataclasses.is_dataclass(obj):
        state = vars(obj)
        fields = {f.name: state[f.name] for f in dataclasses.fields(obj) if f.name in state}
        rebuilt = type(obj)(**fields)
        for role in _recipe._FP8_ROLES + _recipe._FP4_ROLES:
            if isinstance(state.get(role), _recipe.QParams):
                setattr(rebuilt, role, state[role])
        return rebuilt
    return obj
