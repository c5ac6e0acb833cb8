"""TE's quantized-tensor API (transformer_engine/pytorch/quantized_tensor.py): a ``Quantizer`` turns a
high-precision tensor into a ``QuantizedTensor``, a torch.Tensor subclass holding the quantized
bytes (the library's nvfp4.Fp8Tensor / nvfp4.QuantizedTensor, rowwise and, where the recipe keeps
one, columnwise) and standing for their dequantized values in any torch operation, as TE's does:
an operation reads the dequantized values, an in-place one (optimizer updates, ``copy_``)
re-quantizes the result into the tensor, ``detach()`` shares the bytes. The concrete classes are in
nvfp4.torch.tensor. CPU tensors only; the quantization is the library's, bit for bit TE's."""
from __future__ import annotations

import abc
import copy
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

import numpy as np
import torch

__all__ = ["QuantizedTensorStorage", "QuantizedTensor", "Quantizer", "prepare_for_saving", "restore_from_saved",
           "high_precision_values"]


class QuantizedTensorStorage:
    """What every quantized tensor is (TE: the storage mix-in its tensor classes share)."""


class _Bytes:
    """The quantized copies, shared by a tensor and its detached views (TE shares the buffers), and
    the high-precision values they were quantized from (`source`; see high_precision_values)."""

    def __init__(self, rowwise, columnwise, quantizer, source=None):
        self.rowwise, self.columnwise, self.quantizer, self.source = rowwise, columnwise, quantizer, source


def high_precision_values(tensor: torch.Tensor) -> torch.Tensor:
    """What a GEMM module quantizes for a weight: a QuantizedTensor's source values (quantizing
    them again with the same recipe gives exactly its bytes, which TE's GEMM reads directly), or its
    dequantized values when it has none; any other tensor as it is."""
    if isinstance(tensor, QuantizedTensor):
        source = tensor._bytes.source
        return source if source is not None else tensor.dequantize()
    return tensor


def _as_2d(tensor):
    """A CPU float tensor flattened to [prod(leading dims), last dim] as the library reads it:
    float32 as is, bfloat16 as its bits, float16 widened to float32 (exact)."""
    t = tensor.detach()
    if t.device.type != "cpu":
        raise ValueError(f"quantizers run on the CPU here; the tensor is on '{t.device}' (move it with .cpu())")
    if t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError(f"a quantizer takes float32, float16 or bfloat16 tensors, got {t.dtype}")
    if t.dim() == 0:
        raise ValueError("a quantizer takes tensors of at least one dimension")
    t = t.reshape(-1, t.shape[-1]) if t.dim() != 2 else t
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(np.uint16)
    return t.to(torch.float32).contiguous().numpy()


class Quantizer(abc.ABC):
    """Builds quantized tensors (TE's Quantizer): ``quantizer(tensor)`` quantizes a float32 / float16 /
    bfloat16 CPU tensor; ``rowwise_usage`` / ``columnwise_usage`` say which copies it keeps (the
    columnwise one is what a backward GEMM reads)."""

    def __init__(self, *, rowwise: bool = True, columnwise: bool = True) -> None:
        self.rowwise_usage, self.columnwise_usage = bool(rowwise), bool(columnwise)
        self.internal = False
        self.optimize_for_gemm = False

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(rowwise_usage={self.rowwise_usage}, columnwise_usage={self.columnwise_usage}, "
                f"internal={self.internal}, )")

    def set_usage(self, *, rowwise: Optional[bool] = None, columnwise: Optional[bool] = None) -> None:
        if rowwise is not None:
            self.rowwise_usage = bool(rowwise)
        if columnwise is not None:
            self.columnwise_usage = bool(columnwise)

    def get_usages(self) -> Dict[str, bool]:
        return {"rowwise": self.rowwise_usage, "columnwise": self.columnwise_usage}

    def copy(self) -> Quantizer:
        return copy.copy(self)

    def calibrate(self, tensor: torch.Tensor) -> None:
        """Records what calibration needs from `tensor` without quantizing (TE: delayed scaling's amax)."""

    @abc.abstractmethod
    def _quantize_2d(self, x):
        """(rowwise, columnwise) library tensors of a 2-D array (float32 or bf16 bits); either may be None."""

    @abc.abstractmethod
    def _tensor_class(self):
        """The QuantizedTensor subclass this quantizer makes."""

    def quantize(self, tensor: torch.Tensor, *, out: Optional[QuantizedTensor] = None,
                 dtype: Optional[torch.dtype] = None) -> QuantizedTensor:
        """A QuantizedTensor of `tensor`'s values (nominal dtype `dtype`, default the tensor's), or the
        bytes written into `out`."""
        if out is not None:
            return self.update_quantized(tensor, out)
        if not (self.rowwise_usage or self.columnwise_usage):
            raise ValueError(f"{type(self).__name__}: neither rowwise nor columnwise usage is set")
        rowwise, columnwise = self._quantize_2d(_as_2d(tensor))
        return self._tensor_class()(tuple(tensor.shape), dtype or tensor.dtype,
                                    _Bytes(rowwise, columnwise, self, tensor.detach().clone()), requires_grad=False)

    def __call__(self, tensor: torch.Tensor) -> QuantizedTensor:
        return self.quantize(tensor)

    def update_quantized(self, src: torch.Tensor, dst: QuantizedTensor, *,
                         noop_flag: Optional[torch.Tensor] = None) -> QuantizedTensor:
        """Quantizes `src` into `dst` in place (its bytes replaced; views sharing them see the change)."""
        if noop_flag is not None and bool(noop_flag.item()):
            return dst
        if tuple(src.shape) != tuple(dst.shape):
            raise ValueError(f"update_quantized: source shape {tuple(src.shape)} != destination shape {tuple(dst.shape)}")
        dst._bytes.rowwise, dst._bytes.columnwise = self._quantize_2d(_as_2d(src))
        dst._bytes.quantizer, dst._bytes.source = self, src.detach().clone()
        return dst

    def make_empty(self, shape: Iterable[int], *, dtype: torch.dtype = torch.float32,
                   device: Optional[Union[torch.device, str]] = None, requires_grad: bool = False,
                   pin_memory: bool = False) -> QuantizedTensor:
        """A quantized tensor of zeros (TE allocates uninitialised buffers; zeros are a valid value)."""
        out = self.quantize(torch.zeros(tuple(shape), dtype=torch.float32), dtype=dtype)
        out.requires_grad_(requires_grad)
        return out

    def _get_compatible_recipe(self):
        return None


def _dequantized(args):
    if isinstance(args, QuantizedTensor):
        return args.dequantize()
    if isinstance(args, (list, tuple)):
        return type(args)(_dequantized(a) for a in args)
    if isinstance(args, dict):
        return {k: _dequantized(v) for k, v in args.items()}
    return args


class QuantizedTensor(torch.Tensor):
    """A tensor whose values are held quantized (TE's QuantizedTensor): ``dequantize(dtype=None)``
    gives the values, ``quantize_(tensor)`` re-quantizes new ones into it; in torch operations it
    stands for its dequantized values (in the nominal ``dtype``)."""

    @staticmethod
    def __new__(cls, shape: Iterable[int], dtype: torch.dtype, data: _Bytes, *,
                requires_grad: bool = False) -> QuantizedTensor:
        self = torch.Tensor._make_wrapper_subclass(cls, tuple(shape), dtype=dtype, device=torch.device("cpu"),
                                                   requires_grad=requires_grad)
        self._bytes = data
        return self

    @property
    def _quantizer(self):
        return self._bytes.quantizer

    def _get_quantizer(self):
        return self._bytes.quantizer

    def get_usages(self) -> Dict[str, bool]:
        return {"rowwise": self._bytes.rowwise is not None, "columnwise": self._bytes.columnwise is not None}

    def dequantize(self, *, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
        """The values: float32 from the library's dequantize, in `dtype` (default the nominal dtype)."""
        shape = tuple(self.shape)
        if self._bytes.rowwise is not None:
            values = torch.from_numpy(self._bytes.quantizer._dequantize(self._bytes.rowwise))
        else:
            values = torch.from_numpy(self._bytes.quantizer._dequantize(self._bytes.columnwise)).t()
        return values.reshape(shape).to(dtype or self.dtype)

    def quantize_(self, tensor: torch.Tensor) -> QuantizedTensor:
        self._bytes.quantizer.update_quantized(tensor.dequantize() if isinstance(tensor, QuantizedTensor) else tensor, self)
        return self

    def detach(self) -> QuantizedTensor:
        return type(self)(self.shape, self.dtype, self._bytes, requires_grad=False)

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        return f"{type(self).__name__}(data={self.dequantize()})"

    def float(self) -> torch.Tensor:
        return self.dequantize(dtype=torch.float32)

    def bfloat16(self) -> torch.Tensor:
        return self.dequantize(dtype=torch.bfloat16)

    def half(self) -> torch.Tensor:
        return self.dequantize(dtype=torch.float16)

    def __reduce_ex__(self, protocol: int) -> Tuple[Callable[..., QuantizedTensor], Tuple[Any, ...]]:
        return _rebuild, (type(self), tuple(self.shape), self.dtype, self._bytes.rowwise, self._bytes.columnwise,
                          self._bytes.quantizer, self.requires_grad, self._bytes.source)

    @classmethod
    def __torch_dispatch__(cls, func: Callable[..., Any], types: Tuple[type, ...], args: Tuple[Any, ...] = (),
                           kwargs: Optional[Dict[str, Any]] = None) -> Any:
        kwargs = kwargs or {}
        aten = torch.ops.aten
        if func is aten.detach.default:
            return args[0].detach()
        if func is aten.copy_.default:
            dst, src = args[0], args[1]
            if isinstance(dst, QuantizedTensor):
                if isinstance(src, QuantizedTensor) and type(src._bytes.quantizer) is type(dst._bytes.quantizer):
                    dst._bytes.rowwise, dst._bytes.columnwise = src._bytes.rowwise, src._bytes.columnwise  # the bytes, as TE copies them
                    dst._bytes.quantizer, dst._bytes.source = src._bytes.quantizer, src._bytes.source
                else:
                    dst.quantize_(src)
                return dst
            dst.copy_(src.dequantize(dtype=dst.dtype) if isinstance(src, QuantizedTensor) else src)
            return dst
        if func._schema.is_mutable:  # in place: compute on the values, quantize the result into the tensor
            plain_args, plain_kwargs = _dequantized(args), _dequantized(kwargs)
            func(*plain_args, **plain_kwargs)
            for arg, plain, schema in zip(args, plain_args, func._schema.arguments):
                alias = getattr(schema, "alias_info", None)
                if isinstance(arg, QuantizedTensor) and alias is not None and alias.is_write:
                    arg.quantize_(plain)
            return args[0]
        return func(*_dequantized(args), **_dequantized(kwargs))

    __torch_function__ = torch._C._disabled_torch_function_impl


def _rebuild(cls, shape, dtype, rowwise, columnwise, quantizer, requires_grad, source=None):
    out = cls(shape, dtype, _Bytes(rowwise, columnwise, quantizer, source), requires_grad=False)
    out.requires_grad_(requires_grad)
    return out


def prepare_for_saving(*tensors: Optional[torch.Tensor]) -> Tuple[List[Optional[torch.Tensor]], List[Optional[torch.Tensor]]]:
    """TE's helper for autograd contexts: plain tensors here, nothing to split."""
    return list(tensors), list(tensors)


def restore_from_saved(tensors: List[Optional[torch.Tensor]], saved_tensors: List[Optional[torch.Tensor]],
                       return_saved_tensors: bool = False
                       ) -> Union[List[Optional[torch.Tensor]], Tuple[List[Optional[torch.Tensor]], List[Optional[torch.Tensor]]]]:
    return (tensors, saved_tensors) if return_saved_tensors else tensors
