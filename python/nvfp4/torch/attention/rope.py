"""Rotary position embedding (TE's transformer_engine/pytorch/attention/rope.py): the frequency
table ``RotaryPositionEmbedding`` and ``apply_rotary_pos_emb``. Not quantized in any recipe.

The fused form (``fused=True``, what MultiheadAttention uses) follows TE's CUDA kernel
(common/fused_rope/fused_rope.cu): cos and sin of the float32 frequencies, ``t * cos +
rotate(t) * sin`` in float32, the result rounded once to t's dtype. The unfused form follows TE's
Python code: cos / sin rounded to t's dtype first and the arithmetic done in t's dtype. cos, sin
and the products are torch's CPU kernels (the GPU's sincosf and its fused multiply-adds may
differ in the last bit)."""
from __future__ import annotations

from typing import Optional, Union

import torch

__all__ = ["RotaryPositionEmbedding", "apply_rotary_pos_emb"]


class RotaryPositionEmbedding(torch.nn.Module):
    """TE's RotaryPositionEmbedding: ``forward(max_seq_len, offset=0)`` gives the angle table
    [max_seq_len, 1, 1, dim] (float32) that ``rotary_pos_emb`` arguments take. ``inv_freq`` is a
    buffer, as in TE (so it is in state_dict)."""

    def __init__(self, dim: int, rotary_percent: float = 1.0, seq_len_interpolation_factor: Optional[int] = None,
                 pretrained_max_position_embeddings: Optional[int] = None, rotary_base: float = 10000.0,
                 interleaved: bool = False) -> None:
        super().__init__()
        if rotary_percent < 1.0:
            dim = int(dim * rotary_percent)
        self.seq_len_interpolation_factor = seq_len_interpolation_factor
        self.rotary_base = rotary_base
        inv_freq = 1.0 / (self.rotary_base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        self.register_buffer("inv_freq", inv_freq)
        self.pretrained_max_position_embeddings = pretrained_max_position_embeddings
        self.interleaved = interleaved

    def forward(self, max_seq_len: int, offset: int = 0) -> torch.Tensor:

        # Positions and angles in float32 whatever autocast says (TE disables autocast here too).
        seq = torch.arange(max_seq_len, device=self.inv_freq.device, dtype=self.inv_freq.dtype) + offset
        if self.pretrained_max_position_embeddings is not None and self.seq_len_interpolation_factor is not None:
            if max_seq_len > self.pretrained_max_position_embeddings * self.seq_len_interpolation_factor:
                seq *= 1 / (max_seq_len / self.pretrained_max_position_embeddings)  # dynamic linear scaling
            else:
                seq *= 1 / self.seq_len_interpolation_factor
        freqs = torch.outer(seq, self.inv_freq.float())
        if not self.interleaved:
            emb = torch.cat((freqs, freqs), dim=-1)
        else:  # each angle twice in a row: (f0, f0, f1, f1, ...)
            emb = torch.stack((freqs.view(-1, 1), freqs.view(-1, 1)), dim=-1).view(freqs.shape[0], -1)
        return emb.reshape(emb.size(0), 1, 1, emb.size(1))


def _rotate_half(x, interleaved):
    """The partner of every element with the sign of the rotation: [-x2, x1] for halves, or
    (-x1, x0, -x3, x2, ...) for interleaved pairs."""
    if not interleaved:
        x1, x2 = torch.chunk(x, 2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)
    x1, x2 = x[..., ::2], x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def _rotate(t, freqs, interleaved, fused):
    """t [..., s, heads, d] (sequence dimension third from the end after any leading dims are
    aligned by the caller) rotated by freqs broadcastable to t[..., :d2]."""
    d2 = freqs.shape[-1]
    t_rot, t_pass = t[..., :d2], t[..., d2:]
    if fused:
        x = t_rot.float()
        out = (x * torch.cos(freqs) + _rotate_half(x, interleaved) * torch.sin(freqs)).to(t.dtype)
    else:  # TE's unfused code: cos / sin in t's dtype, the arithmetic in t's dtype
        out = t_rot * torch.cos(freqs).to(t.dtype) + _rotate_half(t_rot, interleaved) * torch.sin(freqs).to(t.dtype)
    return torch.cat((out, t_pass), dim=-1) if t_pass.shape[-1] else out


def apply_rotary_pos_emb(t: torch.Tensor, freqs: torch.Tensor, tensor_format: str = "sbhd",
                         start_positions: Union[torch.Tensor, None] = None, interleaved: bool = False,
                         fused: bool = False, cu_seqlens: Union[torch.Tensor, None] = None, cp_size: int = 1,
                         cp_rank: int = 0) -> torch.Tensor:
    """TE's apply_rotary_pos_emb: t [s, b, h, d] (sbhd), [b, s, h, d] (bshd) or [t, h, d] (thd,
    with cu_seqlens; positions restart at each sequence) rotated by freqs [s2, 1, 1, d2] (s2 >= s,
    d2 <= d; the last d - d2 channels pass through). start_positions [b]: sequence i starts at
    that position. One process: cp_size must be 1."""
    if tensor_format not in ("sbhd", "bshd", "thd"):
        raise ValueError(f"Unsupported tensor_format: {tensor_format}.")
    if tensor_format == "thd" and cu_seqlens is None:
        raise ValueError("cu_seqlens must not be None when tensor_format is 'thd'.")
    if cp_size != 1 or cp_rank != 0:
        raise ValueError("apply_rotary_pos_emb: context parallelism (cp_size > 1) is not supported by nvfp4.torch (one process)")
    if freqs.dim() != 4 or freqs.shape[1] != 1 or freqs.shape[2] != 1:
        raise ValueError(f"freqs must have shape [s, 1, 1, d], got {tuple(freqs.shape)}")
    if freqs.shape[-1] > t.shape[-1]:
        raise ValueError(f"freqs covers {freqs.shape[-1]} channels but t has only {t.shape[-1]}")
    freqs = freqs.float()
    if tensor_format == "thd":
        lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
        parts = []
        for i, part in enumerate(torch.split(t, lengths)):
            start = int(start_positions[i]) if start_positions is not None else 0
            f = freqs[start:start + part.shape[0]]
            if f.shape[0] < part.shape[0]:
                raise ValueError(f"Rotary Embeddings only suppported up to {freqs.shape[0]} sequence length!")
            parts.append(_rotate(part, f[:, 0], interleaved, fused))  # [s, 1, d2] against [s, h, d]
        return torch.cat(parts) if parts else t.clone()
    seq_dim = 0 if tensor_format == "sbhd" else 1
    seqlen = t.shape[seq_dim]
    if start_positions is not None:
        if int(start_positions.max()) + seqlen > freqs.shape[0]:
            raise ValueError(f"Rotary Embeddings only suppported up to {freqs.shape[0]} sequence length!")
        f = torch.cat([freqs[int(p):int(p) + seqlen] for p in start_positions], dim=1)  # [s, b, 1, d2]
    else:
        if seqlen > freqs.shape[0]:
            raise ValueError(f"Rotary Embeddings only suppported up to {freqs.shape[0]} sequence length!")
        f = freqs[:seqlen]
    if tensor_format == "bshd":
        f = f.transpose(0, 1)
    return _rotate(t, f, interleaved, fused)
