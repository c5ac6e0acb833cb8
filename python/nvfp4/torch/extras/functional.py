"""nvfp4.torch.extras.functional: the extension's quantize / dequantize / GEMM calls with torch tensors in
and out (CPU tensors; float32 read in place, bfloat16 passed as its bits without a copy; results
are float32 tensors over the returned arrays' memory, or bfloat16 where out_dtype="bfloat16").
The quantized objects are the extension's own (nvfp4.QuantizedTensor, nvfp4.Fp8Tensor); reference:
docs/python.md. (Not TE's ``te.ops``, its fusible-operation API, which is not provided.)"""
from __future__ import annotations

from typing import Any, Tuple, Union

import numpy as np
import torch

import nvfp4 as _lib

from .._tensors import bf16_bits_numpy, check_float

__all__ = ["to_numpy", "quantize", "quantize_rowwise_and_columnwise", "quantize_fp8_current", "quantize_fp8_with_scale",
           "quantize_fp8_blockwise", "dequantize", "gemm", "fp8_gemm", "mxfp8_gemm"]


def to_numpy(x: torch.Tensor, what: str = "x") -> np.ndarray:
    """A 2-D CPU float32 / bfloat16 tensor as the extension's input array: float32 read in place
    (any strides), bfloat16 as uint16 bits (a contiguous tensor is not copied)."""
    if not torch.is_tensor(x):
        raise TypeError(f"{what} must be a torch.Tensor, got {type(x).__name__}")
    check_float(x, what)
    if x.dim() != 2:
        raise ValueError(f"{what} must be 2-D [rows, cols], got shape {tuple(x.shape)} (reshape it first)")
    x = x.detach()
    return bf16_bits_numpy(x) if x.dtype == torch.bfloat16 else x.numpy()


def _tensor(a):
    """A returned numpy array as a tensor over its memory; uint16 bf16 bits as torch.bfloat16."""
    if a.dtype == np.uint16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def quantize(x: torch.Tensor, format: str = "nvfp4_1x16", **options: Any) -> _lib.QuantizedTensor:
    """nvfp4.quantize of a torch tensor (same keywords): a QuantizedTensor."""
    return _lib.quantize(to_numpy(x), format, **options)


def quantize_rowwise_and_columnwise(x: torch.Tensor, format: str = "nvfp4_1x16",
                                    **options: Any) -> Tuple[_lib.QuantizedTensor, _lib.QuantizedTensor]:
    return _lib.quantize_rowwise_and_columnwise(to_numpy(x), format, **options)


def quantize_fp8_current(x: torch.Tensor, format: str = "e4m3", **options: Any) -> _lib.Fp8Tensor:
    return _lib.quantize_fp8_current(to_numpy(x), format, **options)


def quantize_fp8_with_scale(x: torch.Tensor, format: str = "e4m3", **options: Any) -> _lib.Fp8Tensor:
    return _lib.quantize_fp8_with_scale(to_numpy(x), format, **options)


def quantize_fp8_blockwise(x: torch.Tensor, format: str = "e4m3", block: str = "1x128", **options: Any) -> _lib.Fp8Tensor:
    return _lib.quantize_fp8_blockwise(to_numpy(x), format, block, **options)


def dequantize(q: Union[_lib.QuantizedTensor, _lib.Fp8Tensor]) -> torch.Tensor:
    """float32 tensor [rows, cols] of a QuantizedTensor or Fp8Tensor."""
    return torch.from_numpy(_lib.dequantize(q))


def _c(options):
    if torch.is_tensor(options.get("c")):
        options["c"] = to_numpy(options["c"], "c")
    if torch.is_tensor(options.get("bias")):
        b = options["bias"]
        check_float(b, "bias", (torch.float32,))
        options["bias"] = b.detach().contiguous().numpy()
    return options


def gemm(a: _lib.QuantizedTensor, b: _lib.QuantizedTensor, **options: Any) -> torch.Tensor:
    """nvfp4.gemm (a @ b.T of two quantized FP4 tensors) as a tensor."""
    return _tensor(_lib.gemm(a, b, **_c(options)))


def fp8_gemm(a: _lib.Fp8Tensor, b: _lib.Fp8Tensor, **options: Any) -> torch.Tensor:
    """nvfp4.fp8_gemm (a @ b.T of two Fp8Tensors, as TE's FP8 GEMM) as a tensor."""
    return _tensor(_lib.fp8_gemm(a, b, **_c(options)))


def mxfp8_gemm(a: _lib.QuantizedTensor, b: _lib.QuantizedTensor, **options: Any) -> torch.Tensor:
    return _tensor(_lib.mxfp8_gemm(a, b, **_c(options)))
