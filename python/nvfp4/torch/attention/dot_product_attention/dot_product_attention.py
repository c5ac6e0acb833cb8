"""te.DotProductAttention: softmax(Q K^T * softmax_scale + bias, masked) V over heads, with TE's
signature, defaults, mask types, sliding windows, GQA / MQA, the sbhd / bshd / thd formats and
packed QKV inputs (TE's transformer_engine/pytorch/attention/dot_product_attention/
dot_product_attention.py). The arithmetic is in backends.py (float32 inside, one rounding of the
output); under a recipe with ``fp8_dpa`` the FP8 casts of TE's emulated FP8 attention apply
(Float8CurrentScaling; see backends.py and docs/python.md)."""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch

from ... import quantization
from ..._tensors import check_cpu, check_float
from ...module import base as _module
from . import backends
from . import utils as dpa_utils

# TE's dtypes; the core computes in float32 and rounds once to the activation dtype (backends.py),
# so float16 needs no float16 CPU kernel (torch 1.13 has none for matmul / softmax)
_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

__all__ = ["DotProductAttention"]

# TE arguments for tensor / context parallelism and the GPU's RNG tracker: one process on the CPU
# has none, so only their defaults are accepted.
_PARALLEL_DEFAULTS = {"sequence_parallel": False, "tp_size": 1, "tp_group": None, "get_rng_state_tracker": None,
                      "cp_group": None, "cp_global_ranks": None, "cp_stream": None}


def check_parallel_defaults(module_name: str, **values: Any) -> None:
    """Refuses (ValueError, naming the argument) a parallelism argument other than TE's default."""
    for name, value in values.items():
        default = _PARALLEL_DEFAULTS.get(name, None)
        if not (value is default or value == default):
            raise ValueError(f"{module_name}({name}={value!r}) is not supported by nvfp4.torch (one process on the CPU: no "
                             f"tensor / sequence / context parallelism or CUDA RNG tracker); leave it at its default")


def fp8_attention_casts(module_name: str = "DotProductAttention") -> Optional[backends.Fp8Casts]:
    """The FP8 casts for the current autocast region, or None when it does not ask for FP8
    attention (no region, or fp8_dpa / fp8_mha off). Which recipes TE's FP8 attention takes and
    with which quantizers (dot_product_attention.py init_fp8_metadata, backends.py): Float8CurrentScaling
    casts Q, K, V, O, dQKV and dO with the recipe's quantizer (its format, use_power_2_scales) and S,
    dP with plain current scaling; the forward tensors in E4M3, the backward ones in the recipe's
    backward format."""
    if not quantization.is_fp8_enabled():
        return None
    recipe = quantization.get_fp8_recipe()
    if not (getattr(recipe, "fp8_dpa", False) or getattr(recipe, "fp8_mha", False)):
        return None
    if recipe.float8_current_scaling():
        fwd = "e4m3"
        bwd = "e5m2" if recipe.fp8_format.name == "HYBRID" else "e4m3"
        pow2 = bool(recipe.use_power_2_scales)
        return backends.Fp8Casts(qkv=backends.Fp8Cast(fwd, pow2), s=backends.Fp8Cast(fwd), o=backends.Fp8Cast(fwd, pow2),
                                 dqkv=backends.Fp8Cast(bwd, pow2), dp=backends.Fp8Cast(bwd), do=backends.Fp8Cast(bwd, pow2))
    if recipe.delayed() or recipe.mxfp8():
        raise ValueError(f"{module_name}: FP8 attention (fp8_dpa / fp8_mha) under {type(recipe).__name__} is not supported by "
                         "nvfp4.torch yet (Float8CurrentScaling is); turn fp8_dpa / fp8_mha off for this recipe")
    raise ValueError("No dot product attention backend is available for the provided inputs: FP8 attention "
                     f"(fp8_dpa / fp8_mha) takes DelayedScaling, Float8CurrentScaling or MXFP8BlockScaling, not {type(recipe).__name__}")


def _unpack_packed(qkv_layer, kv_layer, query, key, value, qkv_format, interleave_dim):
    """TE's packed inputs: qkv_layer [.., 3, h, d] / [.., h, 3, d] or query + kv_layer [.., 2, hg, d] /
    [.., hg, 2, d] (interleave_dim -3 / -2), split into views."""
    if qkv_layer is None and kv_layer is None:
        return query, key, value
    if interleave_dim not in (-3, -2):
        raise ValueError(f"qkv_interleave_dim must be -3 or -2, got {interleave_dim}")
    if qkv_layer is not None:
        if any(t is not None for t in (query, key, value, kv_layer)):
            raise ValueError("qkv_layer is mutually exclusive with query_layer, key_layer, value_layer and kv_layer")
        expected = 4 if qkv_format == "thd" else 5
        if qkv_layer.dim() != expected or qkv_layer.shape[interleave_dim] != 3:
            raise ValueError(f"qkv_layer must be {expected}-D with 3 at dimension {interleave_dim}, got shape {tuple(qkv_layer.shape)}")
        return tuple(t.squeeze(interleave_dim) for t in qkv_layer.split(1, dim=interleave_dim))
    if query is None or key is not None or value is not None:
        raise ValueError("kv_layer needs query_layer and excludes key_layer and value_layer")
    expected = 4 if qkv_format == "thd" else 5
    if kv_layer.dim() != expected or kv_layer.shape[interleave_dim] != 2:
        raise ValueError(f"kv_layer must be {expected}-D with 2 at dimension {interleave_dim}, got shape {tuple(kv_layer.shape)}")
    key, value = (t.squeeze(interleave_dim) for t in kv_layer.split(1, dim=interleave_dim))
    return query, key, value


def _bias_shape_ok(bias, batch_size, heads):
    """TE's accepted core_attention_bias shapes: bhss, 1hss, b1ss, 11ss, 111s."""
    return bias.dim() == 4 and ((bias.shape[0] in (1, batch_size) and bias.shape[1] in (1, heads)))


class DotProductAttention(torch.nn.Module):
    """TE's DotProductAttention (signature, defaults and attribute names as TE's). Parameters:
    only ``softmax_offset`` [heads] with ``softmax_type="learnable"``; state_dict also holds
    ``_extra_state``, as TE's module does."""

    def __init__(self, num_attention_heads: int, kv_channels: Union[int, Tuple[int, int]], num_gqa_groups: Optional[int] = None,
                 attention_dropout: float = 0.0, qkv_format: str = "sbhd", attn_mask_type: str = "causal",
                 window_size: Optional[Tuple[int, int]] = None, bottom_right_diagonal: Optional[bool] = None,
                 sequence_parallel: bool = False, tp_size: int = 1, get_rng_state_tracker: Optional[Callable] = None,
                 tp_group: Optional[torch.distributed.ProcessGroup] = None, layer_number: Optional[int] = None,
                 attention_type: str = "self",
                 cp_group: Union[torch.distributed.ProcessGroup, List[torch.distributed.ProcessGroup], None] = None,
                 cp_global_ranks: Optional[List[int]] = None, cp_stream: Any = None,
                 cp_comm_type: str = "p2p", softmax_scale: Optional[float] = None, softmax_type: str = "vanilla",
                 return_max_logit: Optional[bool] = False, name: Optional[str] = None) -> None:
        super().__init__()
        check_parallel_defaults("DotProductAttention", sequence_parallel=sequence_parallel, tp_size=tp_size, tp_group=tp_group,
                                get_rng_state_tracker=get_rng_state_tracker, cp_group=cp_group,
                                cp_global_ranks=cp_global_ranks, cp_stream=cp_stream)
        self.name = name
        self.qkv_format = qkv_format
        attn_mask_type = dpa_utils.canonical_mask_type(attn_mask_type)
        if attn_mask_type not in dpa_utils.AttnMaskTypes:
            raise ValueError(f"Attention mask type {attn_mask_type} is not supported!")
        self.attn_mask_type = attn_mask_type
        self.window_size = dpa_utils.check_set_window_size(attn_mask_type, window_size)
        self.bottom_right_diagonal = bottom_right_diagonal
        self.tp_size = tp_size
        self.get_rng_state_tracker = get_rng_state_tracker
        self.num_attention_heads = int(num_attention_heads)
        self.layer_number = 1 if layer_number is None else layer_number
        self._layer_number_given = layer_number is not None
        self.cp_group, self.cp_global_ranks, self.cp_stream, self.cp_comm_type = cp_group, cp_global_ranks, cp_stream, cp_comm_type
        self.hidden_size_per_attention_head_k = kv_channels if isinstance(kv_channels, int) else kv_channels[0]
        self.hidden_size_per_attention_head_v = kv_channels if isinstance(kv_channels, int) else kv_channels[1]
        self.num_gqa_groups = self.num_attention_heads if num_gqa_groups is None else int(num_gqa_groups)
        self.num_gqa_groups_per_partition = self.num_gqa_groups
        if self.num_gqa_groups <= 0 or self.num_attention_heads % self.num_gqa_groups != 0:
            raise ValueError("The number of attention heads must be divisible by the number of GQA groups!")
        if softmax_scale is None:
            softmax_scale = 1.0 / math.sqrt(self.hidden_size_per_attention_head_k)
        self.softmax_scale = float(softmax_scale)
        if attention_type not in dpa_utils.AttnTypes:
            raise ValueError(f"attention_type {attention_type} not supported")
        self.attention_type = attention_type
        self.attention_dropout = float(attention_dropout)
        self.return_max_logit = bool(return_max_logit)
        if softmax_type not in ("vanilla", "off-by-one", "learnable"):
            raise ValueError(f"softmax_type must be 'vanilla', 'off-by-one' or 'learnable', got {softmax_type!r}")
        self.softmax_type = softmax_type
        self.softmax_offset = None
        if softmax_type == "off-by-one":
            self.softmax_offset = torch.zeros(self.num_attention_heads)  # a plain attribute, as TE's (not saved)
        elif softmax_type == "learnable":
            self.softmax_offset = torch.nn.Parameter(torch.zeros(self.num_attention_heads))
        self._extra = None  # a loaded _extra_state we do not interpret, kept so it round-trips

    # ---- state_dict: TE keeps its FP8 attention metadata under _extra_state -------------------
    def get_extra_state(self) -> Any:
        return self._extra if self._extra is not None else {}

    def set_extra_state(self, state: Any) -> None:
        if state is None or (torch.is_tensor(state) and state.numel() == 0) or (isinstance(state, dict) and not state):
            self._extra = None
            return
        self._extra = state

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        # TE 1.6 / 1.7 wrote this module's FP8 metadata under core_attention.fused_attention._extra_state.
        old, new = prefix + "fused_attention._extra_state", prefix + "_extra_state"
        if old in state_dict and new not in state_dict:
            state_dict[new] = state_dict.pop(old)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)

    def extra_repr(self) -> str:
        return (f"num_attention_heads={self.num_attention_heads}, kv_channels=({self.hidden_size_per_attention_head_k}, "
                f"{self.hidden_size_per_attention_head_v}), num_gqa_groups={self.num_gqa_groups}, qkv_format={self.qkv_format}, "
                f"attn_mask_type={self.attn_mask_type}, attention_dropout={self.attention_dropout}")

    # ---- forward ------------------------------------------------------------------------------
    def forward(self, query_layer: Optional[torch.Tensor] = None, key_layer: Optional[torch.Tensor] = None,
                value_layer: Optional[torch.Tensor] = None,
                attention_mask: Optional[Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]] = None,
                qkv_format: Optional[str] = None, cu_seqlens_q: Optional[torch.Tensor] = None,
                cu_seqlens_kv: Optional[torch.Tensor] = None, cu_seqlens_q_padded: Optional[torch.Tensor] = None,
                cu_seqlens_kv_padded: Optional[torch.Tensor] = None, max_seqlen_q: Optional[int] = None,
                max_seqlen_kv: Optional[int] = None, attn_mask_type: Optional[str] = None,
                window_size: Optional[Tuple[int, int]] = None, bottom_right_diagonal: Optional[bool] = None,
                checkpoint_core_attention: bool = False, core_attention_bias_type: str = "no_bias",
                core_attention_bias: Optional[torch.Tensor] = None, alibi_slopes: Optional[torch.Tensor] = None,
                fast_zero_fill: bool = True, inference_params: Any = None, pad_between_seqs: Optional[bool] = None,
                fp8_output: Optional[bool] = False, bf16_backward: Optional[bool] = False, num_splits: Optional[int] = 1,
                score_mod: Optional[Callable] = None, score_mod_bprop: Optional[Callable] = None,
                score_mod_tensors: Optional[Dict[str, torch.Tensor]] = None,
                score_mod_bprop_tensors: Optional[Dict[str, torch.Tensor]] = None,
                qkv_layer: Optional[torch.Tensor] = None, kv_layer: Optional[torch.Tensor] = None,
                qkv_interleave_dim: int = -3) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:

        """TE's forward. Q [sq, b, h, d] (sbhd), [b, sq, h, d] (bshd) or [tq, h, d] (thd); K and V
        with num_gqa_groups heads. Returns [sq, b, h * dv] / [b, sq, h * dv] / [tq, h * dv] in
        the inputs' dtype (torch autocast's, when enabled), and the max logit per head [h] with
        return_max_logit."""
        qkv_format = self.qkv_format if qkv_format is None else qkv_format
        if qkv_format not in dpa_utils.QKVFormats:
            raise ValueError("DotProductAttention only supports qkv_format = {'sbhd', 'bshd', 'thd'}!")
        if inference_params is not None:
            raise ValueError("DotProductAttention: inference_params (KV caching) is not supported by nvfp4.torch")
        if score_mod is not None or score_mod_bprop is not None or score_mod_tensors is not None or score_mod_bprop_tensors is not None:
            raise ValueError("DotProductAttention: score_mod (cuDNN frontend Flex Attention) is not supported by nvfp4.torch")
        if num_splits not in (None, 1):
            raise ValueError("DotProductAttention: num_splits (FlashAttention-3 only) is not supported by nvfp4.torch; leave it at 1")
        query_layer, key_layer, value_layer = _unpack_packed(qkv_layer, kv_layer, query_layer, key_layer, value_layer,
                                                             qkv_format, qkv_interleave_dim)
        for t, what in ((query_layer, "query_layer"), (key_layer, "key_layer"), (value_layer, "value_layer")):
            if not torch.is_tensor(t):
                raise TypeError(f"DotProductAttention: {what} must be a torch.Tensor, got {type(t).__name__}")
            check_float(t, f"DotProductAttention's {what}", _DTYPES)
        if not (query_layer.dtype == key_layer.dtype == value_layer.dtype):
            raise ValueError("Queries, keys and values must have the same data type!")
        dtype = _module.activation_dtype(query_layer)  # TE's rule: torch autocast's dtype, else the input's
        check_float(torch.empty(0, dtype=dtype), "DotProductAttention's activation dtype (torch autocast's)", _DTYPES)
        query_layer, key_layer, value_layer = (t.to(dtype) for t in (query_layer, key_layer, value_layer))
        if key_layer.shape[:-1] != value_layer.shape[:-1]:
            raise ValueError("Keys and values must have the same batch size, sequence length and number of heads!")
        if query_layer.shape[-1] != key_layer.shape[-1]:
            raise ValueError("Queries and keys must have the same head dimension!")
        head_dim_qk, head_dim_v = query_layer.shape[-1], value_layer.shape[-1]
        if head_dim_qk != self.hidden_size_per_attention_head_k:
            raise ValueError(f"Keys have head_dim = {head_dim_qk}, but expected head_dim = {self.hidden_size_per_attention_head_k}!")
        if head_dim_v != self.hidden_size_per_attention_head_v:
            raise ValueError(f"Values have head_dim = {head_dim_v}, but expected head_dim = {self.hidden_size_per_attention_head_v}!")
        if key_layer.shape[-2] != self.num_gqa_groups_per_partition:
            raise ValueError(f"Keys and values must have num_gqa_group = {self.num_gqa_groups_per_partition} heads! "
                             f"Found {key_layer.shape[-2]}.")
        if query_layer.shape[-2] % key_layer.shape[-2] != 0:
            raise ValueError("The number of attention heads must be divisible by the number of GQA groups!")

        attn_mask_type = self.attn_mask_type if attn_mask_type is None else dpa_utils.canonical_mask_type(attn_mask_type)
        if attn_mask_type not in dpa_utils.AttnMaskTypes:
            raise ValueError(f"Attention mask type {attn_mask_type} is not supported!")
        window_size = dpa_utils.check_set_window_size(attn_mask_type, self.window_size if window_size is None else window_size)
        if bottom_right_diagonal is None:
            bottom_right_diagonal = self.bottom_right_diagonal
        if attn_mask_type in ("causal", "padding_causal"):
            bottom_right_diagonal = False
        if bottom_right_diagonal is None or attn_mask_type in ("causal_bottom_right", "padding_causal_bottom_right"):
            bottom_right_diagonal = True
        if core_attention_bias_type not in dpa_utils.AttnBiasTypes:
            raise ValueError(f"core_attention_bias_type {core_attention_bias_type} is not supported!")
        if alibi_slopes is not None and core_attention_bias_type != "alibi":
            raise ValueError("core_attention_bias_type must be alibi in order to use alibi_slopes!")
        if core_attention_bias_type == "alibi" and core_attention_bias is not None:
            raise ValueError("core_attention_bias must be None when core_attention_bias_type is alibi!")
        if core_attention_bias_type in ("pre_scale_bias", "post_scale_bias") and core_attention_bias is None:
            raise ValueError("core_attention_bias should not be None!")
        fp8 = fp8_attention_casts()
        if fp8_output and fp8 is not None:
            raise ValueError("DotProductAttention: fp8_output=True (an FP8 tensor out) is not supported by nvfp4.torch")

        # ---- to [b, s, h, d], with the padding information -----------------------------------
        thd = None
        if qkv_format in ("sbhd", "bshd"):
            if not all(t.dim() == 4 for t in (query_layer, key_layer, value_layer)):
                raise ValueError(f"Queries, keys and values must be 4D tensors when qkv_format={qkv_format!r}!")
            q, k, v = ((t.transpose(0, 1) if qkv_format == "sbhd" else t) for t in (query_layer, key_layer, value_layer))
            if q.shape[0] != k.shape[0]:
                raise ValueError("Queries, keys and values must have the same batch size")
            batch_size, sq, sk = q.shape[0], q.shape[1], k.shape[1]
            if "padding" in attn_mask_type:
                attention_mask = self._padding_masks(attention_mask, cu_seqlens_q, cu_seqlens_kv, batch_size, sq, sk)
        else:
            if not all(t.dim() == 3 for t in (query_layer, key_layer, value_layer)):
                raise ValueError("Queries, keys and values must be 3D tensors when qkv_format = thd!")
            if "padding" not in attn_mask_type:
                raise ValueError("Attention mask type must be padding or padding_causal for qkv_format=thd!")
            if cu_seqlens_q is None or cu_seqlens_kv is None:
                raise ValueError("cu_seqlens_q and cu_seqlens_kv can not be None when qkv_format = thd!")
            if cu_seqlens_q.shape != cu_seqlens_kv.shape or cu_seqlens_q.dim() != 1:
                raise ValueError("cu_seqlens_q and cu_seqlens_q must both have shape [batch_size + 1]!")
            if cu_seqlens_q.dtype != torch.int32 or cu_seqlens_kv.dtype != torch.int32:
                raise ValueError("cu_seqlens_q and cu_seqlens_q must both be in dtype torch.int32!")
            for c in (cu_seqlens_q, cu_seqlens_kv, cu_seqlens_q_padded, cu_seqlens_kv_padded):
                if c is not None:
                    check_cpu(c, "cu_seqlens")
            rows_q, b_q, pos_q, len_q = dpa_utils.thd_positions(cu_seqlens_q, cu_seqlens_q_padded)
            rows_k, b_k, pos_k, len_k = dpa_utils.thd_positions(cu_seqlens_kv, cu_seqlens_kv_padded)
            if len(rows_q) and int(rows_q.max()) >= query_layer.shape[0] or len(rows_k) and int(rows_k.max()) >= key_layer.shape[0]:
                raise ValueError("cu_seqlens (or cu_seqlens_padded) point past the end of the thd tensors")
            batch_size = len(len_q)
            sq = int(len_q.max()) if batch_size else 0
            sk = int(len_k.max()) if batch_size else 0
            q = dpa_utils.thd_to_padded(query_layer, rows_q, b_q, pos_q, batch_size, sq)
            k = dpa_utils.thd_to_padded(key_layer, rows_k, b_k, pos_k, batch_size, sk)
            v = dpa_utils.thd_to_padded(value_layer, rows_k, b_k, pos_k, batch_size, sk)
            mask_q = dpa_utils.padding_mask_from_lengths(len_q, sq)
            mask_kv = dpa_utils.padding_mask_from_lengths(len_k, sk)
            attention_mask = (mask_q, mask_kv)
            thd = (rows_q, b_q, pos_q, query_layer.shape[0])
        attention_type = "cross" if thd is not None else self.attention_type
        if "padding" in attn_mask_type and attention_type == "self" and isinstance(attention_mask, (tuple, list)):
            attention_mask = attention_mask[0]
        if attn_mask_type == "arbitrary":
            if attention_mask is None:
                raise ValueError("attn_mask_type='arbitrary' needs attention_mask (broadcastable to [b, h, sq, sk])")
            self._check_mask(attention_mask)
        elif "padding" not in attn_mask_type:
            attention_mask = None
        mask, actual_q, actual_kv = dpa_utils.get_full_mask(sq, sk, attn_mask_type, attention_mask, window_size, attention_type,
                                                            bottom_right_diagonal)

        bias = core_attention_bias
        if core_attention_bias_type == "alibi":
            if alibi_slopes is not None:
                check_cpu(alibi_slopes, "alibi_slopes")
            padded = "padding" in attn_mask_type
            bias = dpa_utils.alibi_bias(q.shape[2], sq, sk, alibi_slopes, actual_q if padded else None,
                                        actual_kv if padded else None, bottom_right_diagonal)
        elif bias is not None:
            check_float(bias, "core_attention_bias", _DTYPES)
            if not _bias_shape_ok(bias, batch_size, q.shape[2]):
                raise ValueError("core_attention_bias must be in one of {bhss, 1hss, b1ss, 11ss, 111s} shapes")
        offset = self.softmax_offset
        # TE's fp16 trick (NVTE_APPLY_QK_LAYER_SCALING=1, an fp16 input and a layer_number)
        apply_qk_scaling = (os.getenv("NVTE_APPLY_QK_LAYER_SCALING", "0") == "1" and self._layer_number_given
                            and dtype == torch.float16)
        with _autocast_off():
            result = backends.attention(q, k, v, scale=self.softmax_scale, mask=mask,
                                        zero_masked_probs="padding" in attn_mask_type, dropout=self.attention_dropout,
                                        training=self.training, bias=bias, bias_type=core_attention_bias_type,
                                        softmax_offset=offset, layer_number=self.layer_number,
                                        apply_qk_layer_scaling=apply_qk_scaling, fp8=fp8,
                                        return_max_logit=self.return_max_logit)
        out, max_logit = result if self.return_max_logit else (result, None)

        # ---- back to the caller's format: [.., h * dv] -------------------------------------------
        width = out.shape[2] * out.shape[3]
        if thd is not None:
            out = dpa_utils.padded_to_thd(out, *thd)
            out = out.reshape(out.shape[0], width)
        elif qkv_format == "sbhd":
            out = out.transpose(0, 1).reshape(sq, batch_size, width)
        else:
            out = out.reshape(batch_size, sq, width)
        if fp8 is not None:
            out = backends.apply_output_casts(out, fp8)
        return (out, max_logit) if self.return_max_logit else out

    def _padding_masks(self, attention_mask, cu_seqlens_q, cu_seqlens_kv, batch_size, sq, sk):
        """The [b, 1, 1, s] padding masks of q and kv: attention_mask as given (self: one tensor;
        cross: a pair), or built from cu_seqlens_q / cu_seqlens_kv."""
        if attention_mask is not None:
            masks = attention_mask if isinstance(attention_mask, (tuple, list)) else (attention_mask,)
            for m in masks:
                self._check_mask(m)
            if self.attention_type == "cross" and len(masks) != 2:
                raise ValueError("cross attention with a padding mask needs attention_mask = (mask_q [b, 1, 1, sq], mask_kv [b, 1, 1, sk])")
            return attention_mask
        if cu_seqlens_q is None:
            raise ValueError("Please provide attention_mask for padding!")
        check_cpu(cu_seqlens_q, "cu_seqlens_q")
        mask_q = dpa_utils.padding_mask_from_lengths(cu_seqlens_q[1:batch_size + 1] - cu_seqlens_q[:batch_size], sq)
        if self.attention_type == "self":
            return mask_q
        if cu_seqlens_kv is None:
            raise ValueError("Please provide attention_mask for padding!")
        check_cpu(cu_seqlens_kv, "cu_seqlens_kv")
        return mask_q, dpa_utils.padding_mask_from_lengths(cu_seqlens_kv[1:batch_size + 1] - cu_seqlens_kv[:batch_size], sk)

    @staticmethod
    def _check_mask(mask):
        if not torch.is_tensor(mask) or mask.dtype != torch.bool:
            raise TypeError("Attention mask must be in boolean type!")
        check_cpu(mask, "attention_mask")


class _autocast_off:
    """torch autocast disabled inside the core (it computes in float32 by design)."""

    def __enter__(self):
        self._ctx = torch.autocast("cpu", enabled=False)
        self._ctx.__enter__()

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)
