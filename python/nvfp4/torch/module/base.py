"""What TE's modules share here: the constructor arguments that only steer GPU machinery
(accepted at their defaults, refused otherwise with the reason), parameter creation (TE's
initialisation: weights normal(0, 0.023), biases zero), input checks, and the per-layer state kept
in state_dict under ``_extra_state`` as TE keeps its FP8 metadata there."""
from __future__ import annotations

import operator
from typing import Any, Callable, Dict, Optional, Sequence, Union

import torch

from .._tensors import check_cpu, check_float

# TE arguments for GPU machinery the CPU emulation has not (userbuffers, fused wgrad accumulation,
# delayed wgrad, symmetric all-reduce, ...), and for tensor / sequence parallelism where a module
# does not implement it: only their defaults are accepted. te.Linear, te.LayerNormLinear and
# te.LayerNormMLP take their tensor-parallel arguments before this check (module/_parallel.py).
_GPU_ONLY_DEFAULTS = {
    "sequence_parallel": (False, None), "fuse_wgrad_accumulation": (False,), "tp_group": (None,), "tp_size": (1,),
    "get_rng_state_tracker": (None,), "rng_tracker_name": (None,), "parallel_mode": (None,),
    "ub_overlap_ag": (False,), "ub_overlap_rs": (False,), "ub_overlap_rs_dgrad": (False,), "ub_bulk_dgrad": (False,),
    "ub_bulk_wgrad": (False,), "ub_name": (None,), "ub_overlap_rs_fprop": (False,), "ub_overlap_ag_fprop": (False,),
    "delay_wgrad_compute": (False,), "symmetric_ar_type": (None,), "set_parallel_mode": (False,),
    "return_layernorm_output_gathered": (False,), "seq_length": (None,), "micro_batch_size": (None,),
    "save_original_input": (False,), "checkpoint": (False,), "keep_fp8_weight_transpose_cache": (True,),
}


def check_unsupported(module_name: str, kwargs: Dict[str, Any]) -> None:
    for name, value in kwargs.items():
        if name == "name":
            continue
        if name not in _GPU_ONLY_DEFAULTS:
            raise TypeError(f"{module_name}() got an unexpected keyword argument '{name}'")
        if not any(value is d or value == d for d in _GPU_ONLY_DEFAULTS[name]):
            raise ValueError(f"{module_name}({name}={value!r}) is not supported by nvfp4.torch (no userbuffers, fused wgrad "
                             f"accumulation or other GPU-only machinery; tensor / sequence parallelism only in te.Linear, "
                             f"te.LayerNormLinear and te.LayerNormMLP); leave it at its default")


def size_argument(module_name: str, name: str, value: Any) -> int:
    """A size argument (in_features, hidden_size, ...) as a positive int, checked before anything
    is allocated. TE passes its sizes to torch.empty, which raises TypeError for a float or a str
    (64.0 included); so does this. An int-like object (numpy integer, anything with __index__) is
    taken as its int, as torch takes it. A bool is refused too, although torch.empty would read
    True as 1: no one means a layer of width True. Zero and negative sizes raise ValueError (TE
    would make an empty weight, or torch.empty's RuntimeError for a negative one)."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{module_name}(): {name} must be an int, got {type(value).__name__} {value!r}")
    size = operator.index(value)
    if size <= 0:
        raise ValueError(f"{module_name}(): {name} must be positive, got {size}")
    return size


_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # TE's parameter and activation dtypes


def resolve_dtype(params_dtype: Optional[torch.dtype]) -> torch.dtype:
    dtype = torch.get_default_dtype() if params_dtype is None else params_dtype
    if dtype not in _DTYPES:
        raise TypeError(f"params_dtype must be torch.float32, torch.float16 or torch.bfloat16, got {dtype}")
    return dtype


def resolve_device(device: Union[torch.device, str, None]) -> torch.device:
    device = torch.device("cpu" if device is None else device)
    if device.type != "cpu":
        raise ValueError(f"device='{device}': nvfp4.torch emulates TE's GPU numerics on the CPU; pass device='cpu' (or leave it out)")
    return device


def new_weight(shape: Sequence[int], dtype: torch.dtype,
               init_method: Optional[Callable[[torch.Tensor], Any]]) -> torch.nn.Parameter:
    w = torch.empty(shape, dtype=dtype)
    if init_method is None:
        torch.nn.init.normal_(w, mean=0.0, std=0.023)  # TE's default init_method
    else:
        init_method(w)
    return torch.nn.Parameter(w)


def new_vector(size: int, dtype: torch.dtype, value: float) -> torch.nn.Parameter:
    return torch.nn.Parameter(torch.full((size,), float(value), dtype=dtype))


def activation_dtype(inp: Any) -> Optional[torch.dtype]:
    """TE's activation dtype (module/base.py, set_activation_dtype): the dtype of an enabled torch
    autocast region (here the CPU one: torch.autocast("cpu", dtype=torch.bfloat16)), else the
    input's own dtype. The layer computes in it and casts its weights to it, so float32 master
    weights with bfloat16 activations is TE's mixed precision."""
    if _cpu_autocast_dtype() is not None:
        return _cpu_autocast_dtype()
    return inp.dtype if torch.is_tensor(inp) else None


def _cpu_autocast_dtype():
    """The dtype of an enabled CPU autocast region, else None (torch 2.4+ spells the query with a
    device argument and deprecates the CPU-specific calls 1.13 has)."""
    try:
        enabled = torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4: no device argument
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    return torch.get_autocast_dtype("cpu") if enabled else None


def activation(inp: torch.Tensor, features: int, module_name: str) -> torch.Tensor:
    """The input as the layer computes it: a CPU float tensor of [..., features] in TE's
    activation dtype (float32, float16 or bfloat16)."""
    if not torch.is_tensor(inp):
        raise TypeError(f"{module_name}: the input must be a torch.Tensor, got {type(inp).__name__}")
    check_float(inp, f"{module_name}'s input", _DTYPES)
    if inp.dim() < 1 or inp.shape[-1] != features:
        raise ValueError(f"{module_name}: the input's last dimension must be {features} (in_features), got shape {tuple(inp.shape)}")
    dtype = activation_dtype(inp)
    if dtype not in _DTYPES:
        raise TypeError(f"{module_name}: torch autocast's dtype {dtype} is not supported (float32, float16 or bfloat16)")
    return inp if inp.dtype == dtype else inp.to(dtype)


def check_parameters(module: torch.nn.Module, module_name: str) -> None:

    for name, p in module.named_parameters(recurse=False):
        check_cpu(p, f"{module_name}.{name}")
        check_float(p, f"{module_name}.{name}", _DTYPES)
