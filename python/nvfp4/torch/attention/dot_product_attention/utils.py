"""Mask and sequence-length helpers of TE's dot_product_attention/utils.py, in our words: the mask
types, sliding windows, padding masks from cu_seqlens and back, the full [b, 1, sq, sk] mask the
softmax sees, and the thd <-> padded-batch conversions. A mask is boolean with True = masked out,
as in TE."""
from __future__ import annotations

import warnings
from typing import Optional, Tuple, Union

import torch

AttnMaskTypes = ("no_mask", "padding", "causal", "causal_bottom_right", "padding_causal",
                 "padding_causal_bottom_right", "arbitrary")
AttnTypes = ("self", "cross")
AttnBiasTypes = ("pre_scale_bias", "post_scale_bias", "no_bias", "alibi")
QKVFormats = ("sbhd", "bshd", "thd")


def canonical_mask_type(attn_mask_type: str) -> str:
    """TE's spellings: "padding,causal" / "causal,padding" / "causal_padding" mean "padding_causal"."""
    attn_mask_type = attn_mask_type.replace(",", "_")
    return "padding_causal" if attn_mask_type == "causal_padding" else attn_mask_type


def check_set_window_size(attn_mask_type: str, window_size: Optional[Tuple[int, int]] = None) -> Tuple[int, int]:
    """The sliding window a mask type allows (TE's check_set_window_size): causal types need
    (-1, 0) or (>=0, 0); the others (-1, -1) or (>=0, >=0). A window the type contradicts in a
    fixable way is fixed with a warning, as TE does; an impossible one raises."""
    if "causal" in attn_mask_type:
        if window_size is None:
            return (-1, 0)
        if tuple(window_size) == (-1, -1) or (window_size[0] >= 0 and window_size[1] != 0):
            warnings.warn("window_size should be (-1, 0) or (>=0, 0) for attn_mask_type=" + attn_mask_type)
            return (window_size[0], 0)
        if tuple(window_size) != (-1, 0) and (window_size[0] < 0 or window_size[1] != 0):
            raise ValueError("window_size should be (-1, 0) or (>=0, 0) for attn_mask_type=" + attn_mask_type)
        return tuple(window_size)
    if attn_mask_type in ("no_mask", "padding", "arbitrary"):
        if window_size is None:
            return (-1, -1)
        if tuple(window_size) == (-1, 0):
            warnings.warn("window_size should be (-1, -1) or (>=0, >=0) for attn_mask_type=" + attn_mask_type)
            return (-1, -1)
        if tuple(window_size) != (-1, -1) and (window_size[0] < 0 or window_size[1] < 0):
            raise ValueError("window_size should be (-1, -1) or (>=0, >=0) for attn_mask_type=" + attn_mask_type)
        return tuple(window_size)
    raise ValueError("Invalid attn_mask_type: " + attn_mask_type)


def get_cu_seqlens(mask: torch.Tensor) -> torch.Tensor:
    """[b + 1] int32 cumulative lengths of the unmasked tokens of a [b, 1, 1, s] padding mask."""
    lengths = mask.reshape(mask.shape[0], -1).logical_not().sum(dim=1)
    return torch.cat((torch.zeros(1, dtype=torch.int32), lengths.cumsum(0).to(torch.int32)))


def get_full_cu_seqlens(batch_size: int, max_seqlen: int) -> torch.Tensor:
    """cu_seqlens of a batch whose sequences are all max_seqlen long."""
    return torch.arange(0, (batch_size + 1) * max_seqlen, step=max_seqlen, dtype=torch.int32)


def padding_mask_from_lengths(lengths: torch.Tensor, max_seqlen: int) -> torch.Tensor:
    """[b, 1, 1, max_seqlen]: True beyond each sequence's length."""
    positions = torch.arange(max_seqlen)
    return (positions.unsqueeze(0) >= lengths.to(torch.int64).unsqueeze(1)).view(len(lengths), 1, 1, max_seqlen)


def get_full_mask(max_seqlen_q: int, max_seqlen_kv: int, attn_mask_type: str,
                  attention_mask: Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor], None],
                  window_size: Optional[Tuple[int, int]], attention_type: str, bottom_right_alignment: bool
                  ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """The mask the softmax sees (TE's get_full_mask), broadcastable to [b, h, sq, sk]: the padding
    mask of q and kv (q rows and kv columns), the causal / sliding-window band, and an arbitrary
    mask, ORed. Returns (mask, actual_seqlens_q or None, actual_seqlens_kv or None). Causal aligns
    to the top-left corner, causal_bottom_right to the bottom-right one; the other types follow
    bottom_right_alignment (for padding: each sequence's own corner)."""
    window = (-1, -1) if window_size is None else tuple(window_size)
    if "causal" in attn_mask_type:
        window = (window[0], 0)
    left = max_seqlen_kv if window[0] == -1 else window[0]
    right = max_seqlen_q if window[1] == -1 else window[1]
    actual_q = actual_kv = None
    if "padding" in attn_mask_type:
        q_mask, kv_mask = (attention_mask, attention_mask) if attention_type == "self" else attention_mask
        attention_mask = torch.logical_or(q_mask.squeeze(1).unsqueeze(3), kv_mask)  # [b, 1, sq, sk]
        keep = attention_mask.logical_not()
        actual_q = keep[:, 0, :, 0].sum(dim=1)
        actual_kv = keep[:, 0, 0, :].sum(dim=1)
    offset = (torch.arange(max_seqlen_q).view(1, 1, max_seqlen_q, 1)
              - torch.arange(max_seqlen_kv).view(1, 1, 1, max_seqlen_kv))  # i - j
    if attn_mask_type == "causal_bottom_right" or (attn_mask_type in ("no_mask", "arbitrary") and bottom_right_alignment):
        shift = max_seqlen_kv - max_seqlen_q
    elif attn_mask_type in ("causal", "padding_causal") or (
            attn_mask_type in ("no_mask", "padding", "arbitrary") and not bottom_right_alignment):
        shift = 0
    else:  # padding_causal_bottom_right, or padding aligned bottom-right: each sequence's corner
        shift = (actual_kv - actual_q).view(-1, 1, 1, 1)
    band = torch.logical_not((offset + shift - left <= 0) & (offset + shift + right >= 0))
    mask = band if attention_mask is None else torch.logical_or(band, attention_mask)
    return mask, actual_q, actual_kv


def alibi_bias(num_heads: int, max_seqlen_q: int, max_seqlen_kv: int, alibi_slopes: Optional[torch.Tensor] = None,
               actual_q: Optional[torch.Tensor] = None, actual_kv: Optional[torch.Tensor] = None,
               bottom_right_alignment: bool = True) -> torch.Tensor:
    """TE's ALiBi bias: -slope_h * |i - j + (kv length - q length)| (the shift only when aligned
    bottom-right), float32, [1 or b, h, sq, sk]. Default slopes: TE's geometric series."""
    if alibi_slopes is None:
        n = 2 ** int(torch.log2(torch.tensor(float(num_heads))).floor())
        slopes = torch.pow(2.0 ** (-8.0 / n), torch.arange(1, 1 + n))
        if n < num_heads:
            extra = torch.pow(2.0 ** (-4.0 / n), torch.arange(1, 1 + 2 * (num_heads - n), 2))
            slopes = torch.cat([slopes, extra])
        alibi_slopes = slopes.to(torch.float32)
    shape = (1, alibi_slopes.shape[0], 1, 1) if alibi_slopes.dim() == 1 else (*alibi_slopes.shape, 1, 1)
    bias = (torch.arange(max_seqlen_q).view(1, 1, max_seqlen_q, 1)
            - torch.arange(max_seqlen_kv).view(1, 1, 1, max_seqlen_kv))
    if actual_q is None:
        if bottom_right_alignment:
            bias = bias + max_seqlen_kv - max_seqlen_q
    elif bottom_right_alignment:
        bias = bias + (actual_kv - actual_q).view(-1, 1, 1, 1)
    return bias.abs().mul(-1).to(torch.float32) * alibi_slopes.to(torch.float32).view(shape)


def thd_positions(cu_seqlens: torch.Tensor, cu_seqlens_padded: Optional[torch.Tensor] = None
                  ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(token rows, batch index, position) of every real token of a thd tensor: sequence i has
    lengths cu_seqlens[i+1] - cu_seqlens[i] and starts at row cu_seqlens_padded[i] (cu_seqlens[i]
    when no padding lies between sequences)."""
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).to(torch.int64)
    starts = (cu_seqlens if cu_seqlens_padded is None else cu_seqlens_padded)[:-1].to(torch.int64)
    batch = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
    first = torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
    position = torch.arange(int(lengths.sum())) - first
    return starts[batch] + position, batch, position, lengths


def thd_to_padded(x: torch.Tensor, rows: torch.Tensor, batch: torch.Tensor, position: torch.Tensor, batch_size: int,
                  max_seqlen: int) -> torch.Tensor:
    """[t, h, d] -> [b, max_seqlen, h, d], zeros after each sequence (differentiable)."""
    out = x.new_zeros((batch_size, max_seqlen) + tuple(x.shape[1:]))
    out[batch, position] = x[rows]
    return out


def padded_to_thd(x: torch.Tensor, rows: torch.Tensor, batch: torch.Tensor, position: torch.Tensor,
                  total_rows: int) -> torch.Tensor:

    """[b, s, ...] -> [t, ...]: each real token back at its row; rows between sequences zero."""
    out = x.new_zeros((total_rows,) + tuple(x.shape[2:]))
    out[rows] = x[batch, position]
    return out
