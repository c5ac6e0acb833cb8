"""TE's quantizers and quantized tensors (transformer_engine/pytorch/tensor/), each quantizing as TE's
does, by the library's quantizers:

- ``Float8Quantizer(scale, amax, fp8_dtype)``: delayed scaling, codes = fp8(x * scale) with the given
  scale, the tensor's amax max-merged into ``amax`` (TE's atomic max); columnwise = the same codes.
- ``Float8CurrentScalingQuantizer(fp8_dtype, device, force_pow_2_scales=False, amax_epsilon=0.0)``.
- ``MXFP8Quantizer(fp8_dtype, with_2d_quantization=False)``: E8M0 per 32 by TE's rounded-up scale
  rule; the columnwise copy quantized from the values again along the other dim.
- ``Float8BlockQuantizer(fp8_dtype, rowwise, columnwise, amax_epsilon=0.0, force_pow_2_scales=True,
  block_scaling_dim=2)``: 1x128 or 128x128 blocks.
- ``NVFP4Quantizer(..., with_rht, with_2d_quantization, stochastic_rounding)``: 1x16 (16x16 tiles
  with 2D) E4M3 scales and the FP32 tensor scale; the columnwise copy shares the amax, or with RHT
  is RHT(x.T) with its own amax; stochastic rounding seeded from torch's default generator (TE: the
  CUDA generator's Philox stream, so the random bits differ).

Each makes the matching QuantizedTensor (Float8Tensor, MXFP8Tensor, Float8BlockwiseQTensor,
NVFP4Tensor). ``resolve_custom_recipe`` turns a CustomRecipe into the built-in recipe its factory's
quantizers amount to."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence, Union

import numpy as np
import torch

import nvfp4 as _lib

from ...common import recipe as _recipe
from ..constants import DType
from ..quantized_tensor import QuantizedTensor, QuantizedTensorStorage, Quantizer

if TYPE_CHECKING:  # for the annotations only: resolve_custom_recipe imports _roles where it runs, as before
    from .._roles import QuantizerRole

__all__ = ["Quantizer", "QuantizedTensor", "QuantizedTensorStorage", "Float8Quantizer", "Float8CurrentScalingQuantizer",
           "MXFP8Quantizer", "Float8BlockQuantizer", "NVFP4Quantizer", "Float8Tensor", "MXFP8Tensor",
           "Float8BlockwiseQTensor", "NVFP4Tensor", "Float8TensorStorage", "MXFP8TensorStorage",
           "Float8BlockwiseQTensorStorage", "NVFP4TensorStorage", "resolve_custom_recipe"]

_FP8_NAMES = {DType.kFloat8E4M3: "e4m3", DType.kFloat8E5M2: "e5m2"}


def _fp8(dtype):
    tag = DType.cast(dtype)
    if tag not in _FP8_NAMES:
        raise ValueError(f"fp8_dtype must be DType.kFloat8E4M3 or DType.kFloat8E5M2, got {tag!r}")
    return tag


class Float8TensorStorage(QuantizedTensorStorage):
    pass


class MXFP8TensorStorage(QuantizedTensorStorage):
    pass


class Float8BlockwiseQTensorStorage(QuantizedTensorStorage):
    pass


class NVFP4TensorStorage(QuantizedTensorStorage):
    pass


class Float8Tensor(Float8TensorStorage, QuantizedTensor):
    """Per-tensor FP8 (delayed or current scaling): ``_data`` uint8 codes, ``_scale_inv``."""

    @property
    def _data(self):
        return torch.from_numpy(np.array(self._bytes.rowwise.codes)).reshape(self.shape)

    @property
    def _scale_inv(self):
        return torch.tensor([float(np.asarray(self._bytes.rowwise.scale_inv).reshape(-1)[0])], dtype=torch.float32)

    @property
    def _fp8_dtype(self):
        return self._bytes.quantizer.dtype


class MXFP8Tensor(MXFP8TensorStorage, QuantizedTensor):
    pass


class Float8BlockwiseQTensor(Float8BlockwiseQTensorStorage, QuantizedTensor):
    pass


class NVFP4Tensor(NVFP4TensorStorage, QuantizedTensor):
    pass


class _LibraryQuantizer(Quantizer):
    def _dequantize(self, q):
        return _lib.dequantize(q)


class Float8Quantizer(_LibraryQuantizer):
    """Delayed scaling: quantizes with ``scale`` (a one-element float32 tensor, read at each call) and
    max-merges each tensor's amax into ``amax`` (TE: a view of the amax history's current row)."""

    def __init__(self, scale: torch.Tensor, amax: torch.Tensor, fp8_dtype: Union[DType, int], *, rowwise: bool = True,
                 columnwise: bool = True) -> None:
        super().__init__(rowwise=rowwise, columnwise=columnwise)
        self.scale, self.amax, self.dtype = scale, amax, _fp8(fp8_dtype)

    def _record(self, amax):
        with torch.no_grad():
            current = self.amax.reshape(-1)[0]
            if not (current >= amax):  # NaN kept, as TE's atomic max of a NaN amax
                self.amax.reshape(-1)[0] = amax

    def calibrate(self, tensor: torch.Tensor) -> None:
        self._record(float(torch.as_tensor(tensor).detach().abs().max().float()) if tensor.numel() else 0.0)

    def _quantize_2d(self, x):
        scale = float(self.scale.reshape(-1)[0])
        q = _lib.quantize_fp8_with_scale(x, _FP8_NAMES[self.dtype], scale=scale)
        self._record(float(q.amax))
        return q, None

    def _tensor_class(self):
        return Float8Tensor


class Float8CurrentScalingQuantizer(_LibraryQuantizer):
    """Current scaling: scale = fp8_max / max(amax, amax_epsilon), a power of two with
    force_pow_2_scales."""

    def __init__(self, fp8_dtype: Union[DType, int], device: Optional[Union[torch.device, str]] = None, *, rowwise: bool = True,
                 columnwise: bool = True, use_existing_amax: bool = False, with_amax_reduction: bool = False,
                 amax_reduction_group: Optional[torch.distributed.ProcessGroup] = None, force_pow_2_scales: bool = False,
                 amax_epsilon: float = 0.0, scale: Optional[torch.Tensor] = None, amax: Optional[torch.Tensor] = None) -> None:
        super().__init__(rowwise=rowwise, columnwise=columnwise)
        if use_existing_amax or with_amax_reduction:
            raise ValueError("Float8CurrentScalingQuantizer: use_existing_amax / with_amax_reduction are not supported "
                             "by nvfp4.torch (one process, amax computed from the tensor)")
        self.dtype, self.force_pow_2_scales, self.amax_epsilon = _fp8(fp8_dtype), bool(force_pow_2_scales), float(amax_epsilon)

    def _quantize_2d(self, x):
        q = _lib.quantize_fp8_current(x, _FP8_NAMES[self.dtype], power_2_scale=self.force_pow_2_scales,
                                      amax_epsilon=self.amax_epsilon)
        return q, None

    def _tensor_class(self):
        return Float8Tensor


class MXFP8Quantizer(_LibraryQuantizer):
    def __init__(self, fp8_dtype: Union[DType, int], *, rowwise: bool = True, columnwise: bool = True,
                 with_2d_quantization: bool = False) -> None:
        super().__init__(rowwise=rowwise, columnwise=columnwise)
        self.dtype, self.with_2d_quantization = _fp8(fp8_dtype), bool(with_2d_quantization)
        if self.with_2d_quantization:
            raise ValueError("MXFP8Quantizer(with_2d_quantization=True): 32x32 MXFP8 blocks are not emulated by this library")

    def _quantize_2d(self, x):
        fmt = "mxfp8" if self.dtype == DType.kFloat8E4M3 else "mxfp8_e5m2"
        rowwise = _lib.quantize(x, fmt, mx_rule="te_ceil") if self.rowwise_usage else None
        columnwise = _lib.quantize(x.T, fmt, mx_rule="te_ceil", axis="columnwise") if self.columnwise_usage else None
        return rowwise, columnwise

    def _tensor_class(self):
        return MXFP8Tensor


class Float8BlockQuantizer(_LibraryQuantizer):
    def __init__(self, fp8_dtype: Union[DType, int], *, rowwise: bool, columnwise: bool, amax_epsilon: float = 0.0,
                 force_pow_2_scales: bool = True, block_scaling_dim: int = 2) -> None:
        super().__init__(rowwise=rowwise, columnwise=columnwise)
        if block_scaling_dim not in (1, 2):
            raise ValueError(f"Unsupported block scaling dim {block_scaling_dim}")
        self.dtype, self.amax_epsilon = _fp8(fp8_dtype), float(amax_epsilon)
        self.force_pow_2_scales, self.block_scaling_dim = bool(force_pow_2_scales), int(block_scaling_dim)

    def _quantize_2d(self, x):
        block = "1x128" if self.block_scaling_dim == 1 else "128x128"
        options = dict(power_2_scale=self.force_pow_2_scales, amax_epsilon=self.amax_epsilon)
        fmt = _FP8_NAMES[self.dtype]
        rowwise = _lib.quantize_fp8_blockwise(x, fmt, block, **options) if self.rowwise_usage else None
        columnwise = _lib.quantize_fp8_blockwise(x.T, fmt, block, axis="columnwise", **options) if self.columnwise_usage else None
        return rowwise, columnwise

    def _tensor_class(self):
        return Float8BlockwiseQTensor


class NVFP4Quantizer(_LibraryQuantizer):
    def __init__(self, fp4_dtype: Union[DType, int] = DType.kFloat4E2M1, rowwise: bool = True, columnwise: bool = True,
                 with_amax_reduction: bool = False, amax_reduction_group: Optional[torch.distributed.ProcessGroup] = None,
                 with_rht: bool = False, with_post_rht_amax: bool = False, with_2d_quantization: bool = False,
                 stochastic_rounding: bool = False, row_scaled_nvfp4: bool = False, nvfp4_use_4over6: bool = False,
                 nvfp4_e4m3_max: int = 448, nvfp4_4over6_err_mode: str = "MAE", with_random_sign_mask: bool = True) -> None:
        super().__init__(rowwise=rowwise, columnwise=columnwise)
        if DType.cast(fp4_dtype) != DType.kFloat4E2M1:
            raise ValueError(f"fp4_dtype must be DType.kFloat4E2M1, got {fp4_dtype!r}")
        if with_amax_reduction or row_scaled_nvfp4 or nvfp4_use_4over6 or not with_random_sign_mask:
            raise ValueError("NVFP4Quantizer: amax reduction, row-scaled NVFP4, 4over6 and RHT without the random sign "
                             "mask are not provided as stand-alone quantizers here (the recipes run them inside the layers)")
        self.dtype = DType.kFloat4E2M1
        self.with_rht, self.with_post_rht_amax = bool(with_rht), bool(with_post_rht_amax)
        self.with_2d_quantization, self.stochastic_rounding = bool(with_2d_quantization), bool(stochastic_rounding)
        self.row_scaled_nvfp4, self.nvfp4_use_4over6, self.nvfp4_e4m3_max = False, False, int(nvfp4_e4m3_max)
        self.nvfp4_4over6_err_mode = nvfp4_4over6_err_mode

    def _quantize_2d(self, x):
        if self.with_rht and x.dtype != np.uint16:
            enum = 5 if x.dtype == np.float16 else 4
            raise RuntimeError(f"RHT is only supported for bfloat16 input, got dtype enum value {enum}")
        fmt = "nvfp4_16x16" if self.with_2d_quantization else "nvfp4_1x16"
        rounding = dict(rounding="stochastic", seed=int(torch.randint(0, 2 ** 62, (1,)))) if self.stochastic_rounding else {}
        if self.with_rht:
            rowwise = _lib.quantize(x, fmt, **rounding) if self.rowwise_usage else None
            columnwise = _lib.quantize_columnwise_rht(x, "nvfp4_1x16", **rounding) if self.columnwise_usage else None
            return rowwise, columnwise
        rowwise, columnwise = _lib.quantize_rowwise_and_columnwise(x, fmt, **rounding)
        return (rowwise if self.rowwise_usage else None), (columnwise if self.columnwise_usage else None)

    def _tensor_class(self):
        return NVFP4Tensor


# ---- CustomRecipe ----------------------------------------------------------------------------------

_GEMM_ROLES = ("input", "weight", "grad_output")


def resolve_custom_recipe(recipe: _recipe.CustomRecipe, roles: Sequence[Optional[QuantizerRole]]) -> _recipe.Recipe:
    """The built-in recipe a CustomRecipe amounts to for one GEMM: ``recipe.qfactory`` is called for
    each of TE's quantizer slots (`roles`: forward input, weight, output, backward grad_output,
    grad_input; QuantizerRole or None, as TE's module gives them), and the quantizers of the three
    that run here (input, weight, grad_output) must be of one built-in recipe's kind. Raises
    ValueError naming what does not fit."""
    from .._roles import DelayedScalingRequest
    made = []
    for i, role in enumerate(roles):
        q = recipe.qfactory(role)
        if q is None:
            raise ValueError(f"CustomRecipe qfactory returned None for slot {i} (role={role}). Every slot must return a "
                             "Quantizer instance or a QuantizerRequest. For an intentional no-op (high-precision / "
                             "unquantized) slot, return an IdentityQuantizer instead of None.")
        made.append(q)
    used = dict(zip(_GEMM_ROLES, (made[0], made[1], made[3])))
    kinds = {type(q) for q in used.values()}
    if len(kinds) != 1:
        raise ValueError("CustomRecipe: nvfp4.torch runs a custom recipe whose input, weight and grad_output quantizers are "
                         f"of one built-in recipe's kind; got {[type(q).__name__ for q in used.values()]}")
    kind = kinds.pop()
    x, w, g = used["input"], used["weight"], used["grad_output"]
    options = dict(fp8_dpa=recipe.fp8_dpa, fp8_mha=recipe.fp8_mha, backward_override=recipe.backward_override)
    if kind in (Float8CurrentScalingQuantizer, MXFP8Quantizer, Float8BlockQuantizer):
        fmt = _format(x, w, g)
    if kind is DelayedScalingRequest:
        if not (x == w == g):
            raise ValueError("CustomRecipe: every DelayedScalingRequest of one module must have the same parameters")
        return _recipe.DelayedScaling(margin=x.margin, fp8_format=x.fp8_format, amax_history_len=x.amax_history_len,
                                      amax_compute_algo=x.amax_compute_algo, scaling_factor_compute_algo=x.scaling_factor_compute_algo,
                                      reduce_amax=x.reduce_amax, **options)
    if kind is Float8CurrentScalingQuantizer:
        out = _recipe.Float8CurrentScaling(fp8_format=fmt, **options)
        for role, q in zip(_recipe._FP8_ROLES, (x, w, g)):
            setattr(out, role, _recipe.QParams(power_2_scale=q.force_pow_2_scales, amax_epsilon=q.amax_epsilon))
        return out
    if kind is MXFP8Quantizer:
        return _recipe.MXFP8BlockScaling(fp8_format=fmt, enable_2d_quantization=w.with_2d_quantization, **options)
    if kind is Float8BlockQuantizer:
        out = _recipe.Float8BlockScaling(fp8_format=fmt, x_block_scaling_dim=x.block_scaling_dim,
                                         w_block_scaling_dim=w.block_scaling_dim, grad_block_scaling_dim=g.block_scaling_dim, **options)
        for role, q in zip(_recipe._FP8_ROLES, (x, w, g)):
            setattr(out, role, _recipe.QParams(power_2_scale=q.force_pow_2_scales, amax_epsilon=q.amax_epsilon))
        return out
    if kind is NVFP4Quantizer:
        out = _recipe.NVFP4BlockScaling(**options)
        for role, q in zip(_recipe._FP4_ROLES, (x, w, g)):
            setattr(out, role, _recipe.QParams(random_hadamard_transform=q.with_rht, stochastic_rounding=q.stochastic_rounding,
                                               fp4_2d_quantization=q.with_2d_quantization))
        return out
    raise ValueError(f"CustomRecipe: quantizers of type {kind.__name__} are not run by nvfp4.torch")


def _format(x, w, g):
    if x.dtype != DType.kFloat8E4M3 or w.dtype != DType.kFloat8E4M3:
        raise ValueError("CustomRecipe: the input and weight quantizers must be E4M3 (the recipes' forward format)")
    return _recipe.Format.E4M3 if g.dtype == DType.kFloat8E4M3 else _recipe.Format.HYBRID
