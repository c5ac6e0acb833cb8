"""Torch tensors to and from the extension's numpy arrays: CPU only, float32 read in place
(zero-copy), bfloat16 as its bits (uint16, zero-copy) where the callee takes them, else widened
to float32 (exact); everything else refused with the fix."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

_ACCEPTED = (torch.float32, torch.bfloat16)


def check_cpu(t: torch.Tensor, what: str) -> None:
    if t.device.type != "cpu":
        raise ValueError(f"{what} is on device '{t.device}': nvfp4.torch emulates the GPU numerics on the CPU, "
                         f"so tensors must be CPU tensors (move it with .cpu(), create modules with device='cpu')")


def check_float(t: torch.Tensor, what: str, accepted: Sequence[torch.dtype] = _ACCEPTED) -> None:
    check_cpu(t, what)
    if t.dtype not in accepted:
        names = " or ".join(str(d).replace("torch.", "") for d in accepted)
        raise TypeError(f"{what} must be {names}, got {str(t.dtype).replace('torch.', '')} "
                        f"(convert it with .to(torch.float32) or .to(torch.bfloat16))")


def float32_numpy(t: torch.Tensor) -> np.ndarray:
    """A float32 numpy view of t's values: t's own memory when t is float32 and contiguous, else a
    float32 contiguous copy (bf16 widens exactly). The caller keeps the tensor alive."""
    t = t.detach()
    if t.dtype != torch.float32:
        t = t.to(torch.float32)
    return t.contiguous().numpy()


def bf16_bits_numpy(t: torch.Tensor) -> np.ndarray:
    """A bfloat16 tensor's bits as a uint16 numpy view (zero-copy; numpy has no bfloat16)."""
    return t.detach().contiguous().view(torch.int16).numpy().view(np.uint16)


def from_float32(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """A torch tensor of `dtype` from a float32 numpy array (no copy for float32; bf16: RNE,
    exact when the values are bf16 values already)."""
    t = torch.from_numpy(np.ascontiguousarray(a))
    return t if dtype == torch.float32 else t.to(dtype)


def core_array(t: torch.Tensor, bf16_core: bool) -> np.ndarray:
    """What a LinearCore reads for tensor t: a bfloat16 tensor as its bits for a core of dtype
    bf16 (no fp32 round trip), else float32 values (t's own memory when float32 and contiguous)."""
    return bf16_bits_numpy(t) if bf16_core and t.dtype == torch.bfloat16 else float32_numpy(t)


def from_core(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """A torch tensor of `dtype` from a LinearCore output: bf16 bits (uint16) or float32 values."""
    if a.dtype == np.uint16:
        t = torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        return t if dtype == torch.bfloat16 else t.to(dtype)
    return from_float32(a, dtype)
