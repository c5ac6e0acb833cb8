"""What TransformerEngine refuses before a module computes, refused here with TE's exception type and
message, so that code which runs here runs on a GPU:

- quantized GEMM shapes (TE pytorch/utils.py assert_dim_for_fp8_exec, ValueError: the product of
  the input's leading dims divisible by 8 and its last dim by 16, for the input and the weight;
  then the quantizers' own checks, RuntimeError from TE's C++ layer (pytorch/csrc/quantizer.cpp):
  MXFP8 needs both flattened dims divisible by 32, NVFP4 by 16);
- NVFP4's RHT on anything but bfloat16 (pytorch/csrc/quantizer.cpp, RuntimeError) and NVFP4 GEMMs
  with float16 output (common/gemm/cublaslt_gemm.cu, RuntimeError);
- an input dtype other than the parameters' outside torch autocast (module/base.py
  set_activation_dtype, TypeError);
- parameter and device arguments TE has no meaning for on this machine.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import torch

from ...common import recipe as _recipe

# The checks TE makes before a GEMM module's forward (its dtype rule, the FP8 shape rule and the
# quantizers' own) are always enforced, as TE enforces them. Not a user setting: the library's own
# tests turn it off (their te_lenient fixture) only to compare te.Linear's bits with the C++ layer
# on inputs TE refuses.
TE_STRICT = True

__all__ = ["PARAM_DTYPES", "canonical_dtype", "canonical_device", "assert_dim_for_fp8_exec", "check_quantized_gemm",
           "check_activation_dtype"]

PARAM_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_TE_DTYPE_ENUM = {torch.float32: 4, torch.float16: 5, torch.bfloat16: 6}  # transformer_engine::DType values


def canonical_dtype(dtype: Optional[torch.dtype], what: str = "params_dtype") -> torch.dtype:
    """TE's canonicalize_dtype: None is torch's default dtype; TE's modules take float32, float16
    and bfloat16 parameters."""
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if dtype not in PARAM_DTYPES:
        raise TypeError(f"{what} must be torch.float32, torch.float16 or torch.bfloat16, got {dtype}")
    return dtype


def canonical_device(device: Union[torch.device, str, None]) -> torch.device:
    """torch.device of a module's parameters: the CPU (TE's default, the current CUDA device, has no
    counterpart here) or "meta" (deferred initialisation; reset_parameters() makes them on the CPU)."""
    device = torch.device("cpu" if device is None else device)
    if device.type not in ("cpu", "meta"):
        raise ValueError(f"device='{device}': nvfp4.torch emulates TE's GPU numerics on the CPU; pass device='cpu' "
                         "(or leave it out), or device='meta' to defer initialisation")
    return device


def assert_dim_for_fp8_exec(*tensors: torch.Tensor) -> None:
    """TE's check before a quantized GEMM (same message)."""
    for tensor in tensors:
        leading = math.prod(tensor.shape[:-1])
        if leading % 8 != 0 or tensor.shape[-1] % 16 != 0:
            raise ValueError(
                "FP8 execution requires the product of all dimensions except the last to be"
                " divisible by 8 and the last dimension to be divisible by 16, but got tensor"
                f" with dims={list(tensor.size())} (product of leading dims ="
                f" {leading}, last dim = {tensor.shape[-1]})")


def _shape_text(shape):
    return "(" + ",".join(str(int(s)) for s in shape) + ")"  # TE's C++ to_string of a shape


def _flat(shape):
    shape = tuple(shape)
    return math.prod(shape[:-1]), shape[-1]


def check_quantized_gemm(recipe: Optional[_recipe.Recipe], inp: torch.Tensor, weight_shape: Sequence[int],
                         activation_dtype: torch.dtype, shape_rule: bool = True) -> None:
    """Everything TE refuses for a GEMM module's forward under `recipe` (a TE recipe; None: nothing),
    in TE's order: the FP8 shape rule on the input and the weight (`shape_rule`: TE's Linear,
    LayerNormLinear and LayerNormMLP make it; its GroupedLinear does not), then the input's
    quantizer, then the weight's, then the GEMM's output dtype."""
    if recipe is None or not TE_STRICT:
        return
    if shape_rule:
        assert_dim_for_fp8_exec(inp, torch.empty(tuple(weight_shape), device="meta"))
    if isinstance(recipe, _recipe.CustomRecipe):
        return
    for shape, is_input in ((tuple(inp.shape), True), (tuple(weight_shape), False)):
        rows, cols = _flat(shape)
        if isinstance(recipe, _recipe.MXFP8BlockScaling) and (rows % 32 or cols % 32):
            raise RuntimeError(f"MXFP8 requires tensor dims that are divisible by 32 (got shape={_shape_text(shape)})")
        if isinstance(recipe, _recipe.NVFP4BlockScaling):
            if rows % 16:
                raise RuntimeError(f"First dim for NVFP4 must be divisible by 16 (got shape={_shape_text(shape)})")
            if cols % 16:
                raise RuntimeError(f"NVFP4 requires tensor dims that are divisible by 16 (got shape={_shape_text(shape)})")
            if is_input and _rht(recipe) and activation_dtype != torch.bfloat16:
                raise RuntimeError("RHT is only supported for bfloat16 input, got dtype enum value "
                                   f"{_TE_DTYPE_ENUM.get(activation_dtype, -1)}")
    if isinstance(recipe, _recipe.NVFP4BlockScaling) and activation_dtype == torch.float16:
        raise RuntimeError("FP4 GEMM does not support FP16 output!")


def _rht(recipe):
    """Whether TE's NVFP4 input quantizer applies the RHT (its QParams, as TE builds it)."""
    q = getattr(recipe, "fp4_quant_fwd_inp", None)
    return bool(q is not None and q.random_hadamard_transform)


def check_activation_dtype(module: torch.nn.Module, inp_dtype: torch.dtype,
                           autocast_dtype: Optional[torch.dtype]) -> torch.dtype:

    """TE's set_activation_dtype: outside torch autocast every parameter must have the input's
    dtype (checked when the activation dtype changes, as TE caches it on the module)."""
    if autocast_dtype is not None:
        module.activation_dtype = autocast_dtype
        return autocast_dtype
    if getattr(module, "activation_dtype", None) == inp_dtype or not TE_STRICT:
        module.activation_dtype = inp_dtype
        return inp_dtype
    for name, param in module.named_parameters():
        if param is not None and inp_dtype != param.dtype:
            raise TypeError("Data types for parameters must match when outside of autocasted region. "
                            f"Found input dtype: {inp_dtype} and {name!r} dtype: {param.dtype}")
    module.activation_dtype = inp_dtype
    return inp_dtype
