"""The attention core of DotProductAttention: softmax(scale * Q K^T + bias, masked) V for [b, s, h, d]
tensors, in float32 with one rounding of the output (and of dQ, dK, dV) to the inputs' dtype, as
TE's fused kernels (cuDNN, flash-attn) compute it up to their summation order. The steps are TE's
UnfusedDotProductAttention's (dot_product_attention/backends.py): masked scores filled with
-10000 (TE's attention_mask_func), softmax, padded rows zeroed, dropout on the probabilities, then
P V; GQA repeats each K / V head for its queries.

With ``fp8_dpa`` the FP8 casts of TE's FP8 emulation of that path (``FP8EmulationFunc``, what TE
runs with NVTE_UnfusedDPA_Emulate_FP8=1) are applied: forward Q, K and V quantized together with
one scale and dequantized, the probabilities S and the output O likewise; backward dO, the
gradient of the scores dP and dQ, dK, dV together. Each cast is TE's quantizer for that tensor
followed by its dequantization to the inputs' dtype."""
from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import torch

import nvfp4 as _lib

_MASK_FILL = -10000.0  # TE's attention_mask_func value


class Fp8Cast:
    """One of TE's per-tensor current-scaling quantizers (Float8CurrentScalingQuantizer) followed
    by dequantization to the nominal dtype: codes = fp8(x * fp8_max / amax), values = code /
    scale rounded to that dtype. The library's quantize_fp8_current does the quantization."""

    def __init__(self, fmt: str, power_2_scale: bool = False) -> None:
        self.format, self.power_2_scale = fmt, bool(power_2_scale)

    def __call__(self, x: torch.Tensor, nominal_dtype: torch.dtype) -> torch.Tensor:
        if x.numel() == 0:
            return x.to(nominal_dtype)
        flat = x.detach().to(torch.float32).reshape(1, -1).contiguous()
        q = _lib.quantize_fp8_current(flat.numpy(), self.format, power_2_scale=self.power_2_scale)
        return torch.from_numpy(_lib.dequantize(q)).view(x.shape).to(nominal_dtype)


def _cast_together(tensors, cast, dtype):
    """The tensors flattened and concatenated, cast as ONE tensor (one amax, one scale; TE's
    combine_and_quantize for separate Q, K, V), then split back."""
    sizes = [t.numel() for t in tensors]
    joined = cast(torch.cat([t.detach().reshape(-1) for t in tensors]), dtype)
    return [part.view(t.shape) for part, t in zip(torch.split(joined, sizes), tensors)]


class _CastForward(torch.autograd.Function):
    """Forward: the tensors through the cast; backward: gradients unchanged."""

    @staticmethod
    def forward(ctx, cast, dtype, *tensors):
        return tuple(_cast_together(tensors, cast, dtype))

    @staticmethod
    def backward(ctx, *grads):
        return (None, None) + grads


class _CastBackward(torch.autograd.Function):
    """Forward: the tensors unchanged; backward: their gradients through the cast."""

    @staticmethod
    def forward(ctx, cast, dtype, *tensors):
        ctx.cast, ctx.dtype = cast, dtype
        return tuple(t.clone() for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        return (None, None) + tuple(t.to(g.dtype) for t, g in zip(_cast_together(grads, ctx.cast, ctx.dtype), grads))


class Fp8Casts:
    """The six FP8 casts TE's emulation applies (QKV, S, O forward; dQKV, dP, dO backward)."""

    def __init__(self, qkv: Fp8Cast, s: Fp8Cast, o: Fp8Cast, dqkv: Fp8Cast, dp: Fp8Cast, do: Fp8Cast) -> None:
        self.qkv, self.s, self.o, self.dqkv, self.dp, self.do = qkv, s, o, dqkv, dp, do


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, scale: float, mask: Optional[torch.Tensor],
              zero_masked_probs: bool, dropout: float, training: bool, bias: Optional[torch.Tensor] = None,
              bias_type: str = "no_bias", softmax_offset: Optional[torch.Tensor] = None, layer_number: Optional[int] = None,
              apply_qk_layer_scaling: bool = False, fp8: Optional[Fp8Casts] = None,
              return_max_logit: bool = False) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """q [b, sq, h, dk], k [b, sk, hg, dk], v [b, sk, hg, dv] (one dtype) -> [b, sq, h, dv] in
    that dtype (and the max logit per head [h] when asked). mask: boolean, True = masked,
    broadcastable to [b, h, sq, sk], or None. zero_masked_probs: set the masked probabilities to
    zero after the softmax (TE does for padding masks, so padded query rows give zeros)."""
    dtype = q.dtype
    h, hg = q.shape[2], k.shape[2]
    qf, kf, vf = (t.float() for t in (q, k, v))
    if hg != h:  # GQA / MQA: each K / V head serves h / hg consecutive query heads
        kf, vf = kf.repeat_interleave(h // hg, dim=2), vf.repeat_interleave(h // hg, dim=2)
    if fp8 is not None:
        qf, kf, vf = (t.float() for t in _CastForward.apply(fp8.qkv, dtype, qf, kf, vf))
        qf, kf, vf = _CastBackward.apply(fp8.dqkv, dtype, qf, kf, vf)
    qf, kf, vf = (t.transpose(1, 2) for t in (qf, kf, vf))  # [b, h, s, d]
    if apply_qk_layer_scaling:  # TE's fp16 trick: scores scaled down by the layer number, back up in the softmax
        scale = scale / layer_number
    if bias_type == "pre_scale_bias":
        scores = (torch.matmul(qf, kf.transpose(-1, -2)) + bias.float()) * scale
    else:
        scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
        if bias_type in ("post_scale_bias", "alibi"):
            scores = scores + bias.float()
    if fp8 is not None:
        (scores,) = _CastBackward.apply(fp8.dp, dtype, scores)
    max_logit = None
    if return_max_logit:
        masked = scores if mask is None else scores.masked_fill(mask, _MASK_FILL)
        max_logit = torch.amax(masked.detach(), dim=(0, 2, 3))
    if apply_qk_layer_scaling:
        scores = scores * layer_number
    if softmax_offset is not None:  # an attention sink: one more column, never masked
        sink = softmax_offset.float().view(1, -1, 1, 1).expand(scores.shape[0], -1, scores.shape[2], 1)
        scores = torch.cat([scores, sink], dim=-1)
        if mask is not None:
            mask = torch.nn.functional.pad(torch.broadcast_to(mask, scores.shape[:3] + (scores.shape[3] - 1,)), (0, 1), value=False)
    if mask is not None:
        scores = scores.masked_fill(mask, _MASK_FILL)
    probs = torch.softmax(scores, dim=-1)
    if zero_masked_probs and mask is not None and softmax_offset is None:  # TE: a sink turns the mask "arbitrary"
        probs = probs.masked_fill(mask, 0.0)
    if softmax_offset is not None:
        probs = probs[..., :-1]
    if dropout > 0.0 and training:
        probs = torch.nn.functional.dropout(probs, p=dropout, training=True)
    if fp8 is not None:
        (probs,) = _CastForward.apply(fp8.s, dtype, probs)
        probs = probs.float()
    out = torch.matmul(probs, vf).transpose(1, 2).to(dtype)  # [b, sq, h, dv]
    return (out, max_logit) if return_max_logit else out


def apply_output_casts(out: torch.Tensor, fp8: Fp8Casts) -> torch.Tensor:
    """TE's O cast (forward) and dO cast (backward) on the attention output, in its final layout."""
    (out,) = _CastForward.apply(fp8.o, out.dtype, out)
    (out,) = _CastBackward.apply(fp8.do, out.dtype, out)
    return out


def default_softmax_scale(head_dim: int) -> float:

    return 1.0 / math.sqrt(head_dim)
