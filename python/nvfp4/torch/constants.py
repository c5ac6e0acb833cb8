"""TE's ``transformer_engine.pytorch.constants``: ``DType``, the tag TE gives each tensor dtype
(values as TE's C++ ``transformer_engine::DType``: common/include/transformer_engine/
transformer_engine.h), and the maps between it and torch dtypes. FP8 torch dtypes exist from
torch 2.1; with an older torch only the other entries are mapped."""
from __future__ import annotations

import enum
from typing import SupportsInt

import torch

__all__ = ["DType", "TE_DType", "TE_DType_To_Torch"]


class DType(enum.IntEnum):
    """A tensor's dtype as TE tags it (kFloat4E2M1 has no torch dtype: NVFP4 data is packed uint8)."""
    kByte = 0
    kInt32 = 2
    kFloat32 = 4
    kFloat16 = 5
    kBFloat16 = 6
    kFloat8E4M3 = 7
    kFloat8E5M2 = 8
    kFloat4E2M1 = 10

    @classmethod
    def cast(cls, dtype: SupportsInt) -> DType:
        """A DType from a DType or anything with its integer value (TE also takes its pybind enum)."""
        return dtype if isinstance(dtype, cls) else cls(int(dtype))


TE_DType = {torch.uint8: DType.kByte, torch.int32: DType.kInt32, torch.float32: DType.kFloat32,
            torch.float16: DType.kFloat16, torch.bfloat16: DType.kBFloat16}
for _name, _tag in (("float8_e4m3fn", DType.kFloat8E4M3), ("float8_e5m2", DType.kFloat8E5M2)):
    if hasattr(torch, _name):
        TE_DType[getattr(torch, _name)] = _tag

TE_DType_To_Torch = {tag: dtype for dtype, tag in TE_DType.items()}

# Indices of a GEMM module's quantizers in TE's FP8 metadata (pytorch/csrc/common.h FP8FwdTensors /
# FP8BwdTensors): forward [input, weight, output] per GEMM, backward [grad_output, grad_input].
FP8_FWD_TENSORS_PER_GEMM = 3
FP8_BWD_TENSORS_PER_GEMM = 2
