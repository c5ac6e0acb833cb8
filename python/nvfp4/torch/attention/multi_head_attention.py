"""te.MultiheadAttention: the QKV projection (te.Linear or te.LayerNormLinear, one fused weight or
TE's query / key / value parameters), optional QK norms and rotary embedding, DotProductAttention
and the output projection (te.Linear), with TE's signature, defaults, submodule and parameter
names (TE's transformer_engine/pytorch/attention/multi_head_attention.py), so state_dicts line
up. The projections are the library's emulated GEMMs under the region's recipe, exactly as the
standalone te.Linear / te.LayerNormLinear quantize."""
from __future__ import annotations

import collections
from typing import Any, Callable, Optional, Tuple, Union

import torch

from ..module import _te_checks
from ..module import base as _module
from ..module.layernorm import LayerNorm
from ..module.layernorm_linear import LayerNormLinear
from ..module.linear import Linear
from ..module.rmsnorm import RMSNorm
from .dot_product_attention import DotProductAttention
from .dot_product_attention import utils as dpa_utils
from .dot_product_attention.dot_product_attention import check_parallel_defaults
from .rope import apply_rotary_pos_emb

__all__ = ["MultiheadAttention"]


class L2Normalization(torch.nn.Module):
    """TE's L2Normalization (ops/basic/l2normalization.py): x / sqrt(sum(x^2) + eps) over the last
    dimension, in float32, the result in x's dtype. No parameters."""

    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = float(eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).sum(dim=-1, keepdim=True) + self.eps)).to(x.dtype)


def _sub(name, part):
    """A projection's name as TE gives it (CustomRecipe roles): the module's name and the part."""
    return None if name is None else f"{name}.{part}"


class MultiheadAttention(torch.nn.Module):
    """TE's MultiheadAttention. Submodules as TE names them: ``layernorm_qkv`` (self attention with
    input_layernorm) or ``qkv``; for cross attention ``layernorm_query`` or ``query_layer`` and
    ``key_value``; ``q_norm`` / ``k_norm``; ``core_attention``; ``proj``. With
    fuse_qkv_params=False (the default) the QKV weight is held as TE's ``query_weight``,
    ``key_weight``, ``value_weight`` (and biases). Extra keywords beyond TE's, passed to every
    projection: ``seed``, ``mode``, ``fp8_tensor_core``, ``promotion_interval`` (as te.Linear's)."""

    def __init__(self, hidden_size: int, num_attention_heads: int, kv_channels: Optional[int] = None,
                 attention_dropout: float = 0.1, layernorm_epsilon: float = 1e-5, init_method: Optional[Callable] = None,
                 output_layer_init_method: Optional[Callable] = None, layer_number: Optional[int] = None,
                 attn_mask_type: str = "causal", window_size: Optional[Tuple[int, int]] = None,
                 bottom_right_diagonal: Optional[bool] = None, tp_group: Optional[torch.distributed.ProcessGroup] = None,
                 tp_size: int = 1, num_gqa_groups: Optional[int] = None, fuse_wgrad_accumulation: bool = False,
                 get_rng_state_tracker: Optional[Callable] = None,
                 sequence_parallel: bool = False, params_dtype: Optional[torch.dtype] = None, return_bias: bool = False,
                 return_layernorm_output: bool = False, input_layernorm: bool = False, attention_type: str = "self",
                 set_parallel_mode: bool = False, fuse_qkv_params: bool = False, zero_centered_gamma: bool = False,
                 qkv_weight_interleaved: bool = True, rotary_pos_interleaved: bool = False, ub_overlap_ag: bool = False,
                 ub_overlap_rs: bool = False, ub_overlap_rs_dgrad: bool = False, ub_bulk_dgrad: bool = False,
                 ub_bulk_wgrad: bool = False, bias: bool = True, normalization: str = "LayerNorm",
                 device: Union[torch.device, str] = "cpu", qkv_format: str = "sbhd", name: Optional[str] = None,
                 qk_norm_type: Optional[str] = None, qk_norm_eps: float = 1e-6,
                 qk_norm_before_rope: bool = False, seq_length: Optional[int] = None, micro_batch_size: Optional[int] = None,
                 softmax_type: str = "vanilla", seed: int = 0, mode: str = "exact", fp8_tensor_core: str = "hopper",
                 promotion_interval: int = 128) -> None:
        super().__init__()
        check_parallel_defaults("MultiheadAttention", tp_group=tp_group, tp_size=tp_size, sequence_parallel=sequence_parallel,
                                get_rng_state_tracker=get_rng_state_tracker)
        _module.check_unsupported("MultiheadAttention", dict(
            fuse_wgrad_accumulation=fuse_wgrad_accumulation, set_parallel_mode=set_parallel_mode, ub_overlap_ag=ub_overlap_ag,
            ub_overlap_rs=ub_overlap_rs, ub_overlap_rs_dgrad=ub_overlap_rs_dgrad, ub_bulk_dgrad=ub_bulk_dgrad,
            ub_bulk_wgrad=ub_bulk_wgrad))
        device = _te_checks.canonical_device(device)  # "meta" goes to every submodule (TE's deferred init)
        if attention_type not in dpa_utils.AttnTypes:
            raise ValueError(f"attention_type {attention_type} not supported")
        if layer_number is not None and layer_number <= 0:
            raise ValueError("layer_number must be a positive integer")
        if normalization not in ("LayerNorm", "RMSNorm"):
            raise ValueError(f"MultiheadAttention: normalization must be 'LayerNorm' or 'RMSNorm', got {normalization!r}")
        if qkv_format not in dpa_utils.QKVFormats:
            raise ValueError(f"MultiheadAttention: qkv_format must be 'sbhd', 'bshd' or 'thd', got {qkv_format!r}")
        self.qkv_format = qkv_format
        self.attn_mask_type = attn_mask_type
        self.window_size = window_size
        self.bottom_right_diagonal = bottom_right_diagonal
        self.layer_number = 1 if layer_number is None else layer_number
        self.input_layernorm = input_layernorm
        self.attention_type = attention_type
        self.return_layernorm_output = return_layernorm_output
        self.params_dtype = _module.resolve_dtype(params_dtype)
        self.num_attention_heads = num_attention_heads
        self.return_bias = return_bias
        self.softmax_type = softmax_type
        kv_channels = kv_channels if kv_channels else hidden_size // num_attention_heads
        if not fuse_qkv_params:
            qkv_weight_interleaved = False
        self.qkv_weight_interleaved = qkv_weight_interleaved
        self.rotary_pos_interleaved = rotary_pos_interleaved
        self.qk_norm_before_rope = qk_norm_before_rope
        self.num_attention_heads_per_partition = num_attention_heads
        self.num_gqa_groups = num_attention_heads if num_gqa_groups is None else num_gqa_groups
        if self.num_gqa_groups <= 0 or num_attention_heads % self.num_gqa_groups != 0:
            raise ValueError("The number of attention heads must be divisible by the number of GQA groups!")
        self.num_gqa_groups_per_partition = self.num_gqa_groups
        self.hidden_size_per_attention_head = kv_channels
        self.hidden_size_q = kv_channels * num_attention_heads
        self.hidden_size_kv = kv_channels * self.num_gqa_groups
        self.name = name
        gemm = dict(params_dtype=self.params_dtype, mode=mode, fp8_tensor_core=fp8_tensor_core,
                    promotion_interval=promotion_interval, device=device)

        # QK norms first: TE creates them before the projections (parameter order).
        self.q_norm, self.k_norm = self._qk_norms(qk_norm_type, qk_norm_eps, device)

        def projection(in_features, out_features, split, layernorm, seed_offset, **extra):
            options = dict(bias=bias, init_method=init_method, params_dtype=self.params_dtype, seed=seed + seed_offset,
                           mode=mode, fp8_tensor_core=fp8_tensor_core, promotion_interval=promotion_interval, device=device)
            if layernorm:
                options.update(eps=layernorm_epsilon, normalization=normalization, zero_centered_gamma=zero_centered_gamma,
                               return_layernorm_output=return_layernorm_output)
            return (LayerNormLinear if layernorm else Linear)(in_features, out_features, parameters_split=split, **options,
                                                              **extra)

        if attention_type == "self":
            split = None if fuse_qkv_params else collections.OrderedDict(
                [("query", self.hidden_size_q), ("key", self.hidden_size_kv), ("value", self.hidden_size_kv)])
            out = self.hidden_size_q + 2 * self.hidden_size_kv
            if input_layernorm:
                self.layernorm_qkv = projection(hidden_size, out, split, True, 0, name=_sub(name, "layernorm_linear_qkv"))
            else:
                self.qkv = projection(hidden_size, out, split, False, 0, name=_sub(name, "linear_qkv"))
        else:
            if input_layernorm:
                self.layernorm_query = projection(hidden_size, self.hidden_size_q, None if fuse_qkv_params else ("query",), True, 0,
                                                  name=_sub(name, "layernorm_linear_q"))
            else:
                self.query_layer = projection(hidden_size, self.hidden_size_q, None, False, 0)
            self.key_value = projection(hidden_size, 2 * self.hidden_size_kv, None if fuse_qkv_params else ("key", "value"),
                                        False, 1, name=_sub(name, "linear_kv"))
        self.core_attention = DotProductAttention(num_attention_heads, kv_channels, num_gqa_groups=self.num_gqa_groups,
                                                  attention_dropout=attention_dropout, qkv_format=qkv_format,
                                                  layer_number=self.layer_number, attention_type=attention_type,
                                                  softmax_type=softmax_type,
                                                  name=name + ".core_attention" if name is not None else None)
        self.proj = Linear(self.hidden_size_q, hidden_size, init_method=output_layer_init_method, bias=bias,
                           return_bias=return_bias, seed=seed + 2, name=_sub(name, "proj"), **gemm)

    def _qk_norms(self, qk_norm_type, eps, device):
        if qk_norm_type is None:
            return None, None
        if qk_norm_type == "L2Normalization":
            norm = L2Normalization(eps)
            return norm, norm  # no parameters: one instance, as TE shares it
        if qk_norm_type in ("RMSNorm", "LayerNorm"):
            cls = RMSNorm if qk_norm_type == "RMSNorm" else LayerNorm
            return (cls(self.hidden_size_per_attention_head, eps=eps, params_dtype=self.params_dtype, device=device),
                    cls(self.hidden_size_per_attention_head, eps=eps, params_dtype=self.params_dtype, device=device))
        raise ValueError(f"Unsupported QK norm type: {qk_norm_type}. Supported types: ['L2Normalization', 'RMSNorm', 'LayerNorm']")

    def set_tensor_parallel_group(self, tp_group: Optional[torch.distributed.ProcessGroup]) -> None:
        check_parallel_defaults("MultiheadAttention.set_tensor_parallel_group", tp_group=tp_group)

    def forward(self, hidden_states: torch.Tensor,
                attention_mask: Optional[Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]] = None,
                encoder_output: Optional[torch.Tensor] = None, attn_mask_type: Optional[str] = None,
                window_size: Optional[Tuple[int, int]] = None, bottom_right_diagonal: Optional[bool] = None,
                is_first_microbatch: Optional[bool] = None, checkpoint_core_attention: bool = False,
                inference_params: Any = None,
                rotary_pos_emb: Optional[Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]] = None,
                core_attention_bias_type: str = "no_bias", core_attention_bias: Optional[torch.Tensor] = None,
                alibi_slopes: Optional[torch.Tensor] = None, cu_seqlens_q: Optional[torch.Tensor] = None,
                cu_seqlens_kv: Optional[torch.Tensor] = None, cu_seqlens_q_padded: Optional[torch.Tensor] = None,
                cu_seqlens_kv_padded: Optional[torch.Tensor] = None, max_seqlen_q: Optional[int] = None,
                max_seqlen_kv: Optional[int] = None, fast_zero_fill: bool = True, pad_between_seqs: Optional[bool] = None
                ) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:

        """TE's forward: hidden_states [sq, b, hidden] (sbhd; [b, sq, hidden] for bshd, [t, hidden]
        for thd) -> the projection's output, then the bias with return_bias and the layernorm
        output with input_layernorm and return_layernorm_output."""
        attn_mask_type = self.attn_mask_type if attn_mask_type is None else attn_mask_type
        window_size = self.window_size if window_size is None else window_size
        window_size = dpa_utils.check_set_window_size(dpa_utils.canonical_mask_type(attn_mask_type), window_size)
        if bottom_right_diagonal is None:
            bottom_right_diagonal = self.bottom_right_diagonal
        if attn_mask_type in ("causal", "padding_causal"):
            bottom_right_diagonal = False
        if bottom_right_diagonal is None or attn_mask_type in ("causal_bottom_right", "padding_causal_bottom_right"):
            bottom_right_diagonal = True
        if "padding" in attn_mask_type and attention_mask is not None:
            for mask in (attention_mask if isinstance(attention_mask, (tuple, list)) else (attention_mask,)):
                if mask.dtype != torch.bool:
                    raise TypeError("Attention mask must be in boolean type!")
        if core_attention_bias_type not in dpa_utils.AttnBiasTypes:
            raise ValueError(f"core_attention_bias_type {core_attention_bias_type} is not supported!")
        if inference_params is not None:
            raise ValueError("MultiheadAttention: inference_params (KV caching) is not supported by nvfp4.torch")
        d = self.hidden_size_per_attention_head
        ng = self.num_gqa_groups_per_partition
        per_group = self.num_attention_heads_per_partition // ng
        layernorm_output = None
        if self.attention_type == "self":
            if self.input_layernorm:
                outputs = self.layernorm_qkv(hidden_states, is_first_microbatch=is_first_microbatch)
                mixed = outputs[0] if self.return_layernorm_output else outputs
                layernorm_output = outputs[1] if self.return_layernorm_output else None
            else:
                mixed = self.qkv(hidden_states, is_first_microbatch=is_first_microbatch)
            if self.qkv_weight_interleaved:  # [.., ng, (np/ng + 2), d]: each group's queries, key, value together
                mixed = mixed.view(*mixed.shape[:-1], ng, per_group + 2, d)
                split_dim = -2
            else:  # [.., (np/ng + 2), ng, d]: all queries, then all keys, then all values
                mixed = mixed.view(*mixed.shape[:-1], per_group + 2, ng, d)
                split_dim = -3
            query, key, value = torch.split(mixed, (per_group, 1, 1), dim=split_dim)
            lead = query.shape[:-3]
            query = query.reshape(*lead, ng * per_group, d)
            key, value = key.reshape(*lead, ng, d), value.reshape(*lead, ng, d)
        else:
            if encoder_output is None:
                raise ValueError("MultiheadAttention(attention_type='cross') needs encoder_output")
            mixed_kv = self.key_value(encoder_output, is_first_microbatch=is_first_microbatch)
            if self.qkv_weight_interleaved:  # [.., ng, 2 * d]
                mixed_kv = mixed_kv.view(*mixed_kv.shape[:-1], ng, 2 * d)
                key, value = torch.split(mixed_kv, d, dim=-1)
            else:  # [.., 2 * ng, d]
                mixed_kv = mixed_kv.view(*mixed_kv.shape[:-1], 2 * ng, d)
                key, value = torch.split(mixed_kv, ng, dim=-2)
            if self.input_layernorm:
                outputs = self.layernorm_query(hidden_states, is_first_microbatch=is_first_microbatch)
                query = outputs[0] if self.return_layernorm_output else outputs
                layernorm_output = outputs[1] if self.return_layernorm_output else None
            else:
                query = self.query_layer(hidden_states, is_first_microbatch=is_first_microbatch)
            query = query.view(*query.shape[:-1], self.num_attention_heads_per_partition, d)

        if self.q_norm is not None and self.qk_norm_before_rope:
            query, key = self.q_norm(query), self.k_norm(key)
        if rotary_pos_emb is not None:
            q_emb, k_emb = rotary_pos_emb if isinstance(rotary_pos_emb, tuple) else (rotary_pos_emb, rotary_pos_emb)
            cu_q = cu_seqlens_q_padded if pad_between_seqs else cu_seqlens_q
            cu_kv = cu_seqlens_kv_padded if pad_between_seqs else cu_seqlens_kv
            query = apply_rotary_pos_emb(query, q_emb, self.qkv_format, fused=True, cu_seqlens=cu_q,
                                         interleaved=self.rotary_pos_interleaved)
            key = apply_rotary_pos_emb(key, k_emb, self.qkv_format, fused=True, cu_seqlens=cu_kv,
                                       interleaved=self.rotary_pos_interleaved)
        if self.q_norm is not None and not self.qk_norm_before_rope:
            query, key = self.q_norm(query), self.k_norm(key)

        context = self.core_attention(query, key, value, qkv_format=self.qkv_format, cu_seqlens_q=cu_seqlens_q,
                                      cu_seqlens_kv=cu_seqlens_kv, cu_seqlens_q_padded=cu_seqlens_q_padded,
                                      cu_seqlens_kv_padded=cu_seqlens_kv_padded, max_seqlen_q=max_seqlen_q,
                                      max_seqlen_kv=max_seqlen_kv, attention_mask=attention_mask,
                                      attn_mask_type=attn_mask_type, window_size=window_size,
                                      bottom_right_diagonal=bottom_right_diagonal,
                                      checkpoint_core_attention=checkpoint_core_attention,
                                      core_attention_bias_type=core_attention_bias_type,
                                      core_attention_bias=core_attention_bias, alibi_slopes=alibi_slopes,
                                      fast_zero_fill=fast_zero_fill, pad_between_seqs=pad_between_seqs)
        projection = self.proj(context, is_first_microbatch=is_first_microbatch)
        if self.return_bias:  # proj's bias in the activation dtype (an empty tensor without bias), as TE
            out = tuple(projection)
        else:
            out = (projection,)
        if self.input_layernorm and self.return_layernorm_output:
            out = tuple(out) + (layernorm_output,)
        return out if len(out) > 1 else out[0]
