"""te.TransformerLayer: self attention (MultiheadAttention), optional cross attention
(layer_type="decoder") and LayerNormMLP, with residual connections, bias + dropout + add, drop
path and the pre / post layernorm arrangements, following TE's transformer_engine/pytorch/
transformer.py (signature, defaults, submodule names). The GEMMs are the library's emulation of
the region's recipe; norms, activations, attention, dropout and the adds are torch operations."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple, Union

import torch

from .attention.dot_product_attention import utils as dpa_utils
from .attention.dot_product_attention.dot_product_attention import check_parallel_defaults
from .attention.multi_head_attention import MultiheadAttention
from .module import _te_checks
from .module import base as _module
from .module.layernorm import LayerNorm
from .module.layernorm_mlp import LayerNormMLP
from .module.rmsnorm import RMSNorm

__all__ = ["TransformerLayer"]

LayerTypes = ("encoder", "decoder")


def dropout(t: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """torch's dropout; float16 (torch 1.13 has no float16 Bernoulli on the CPU) as the float32 one
    on the same values, rounded once: the same mask from torch's generator (drawn on a float32
    tensor of t's shape, as torch's dropout draws it), and the GPU's fused dropout computes
    x * mask * scale in float32 before its one rounding too."""
    if t.dtype != torch.float16 or not training or p == 0.0:
        return torch.nn.functional.dropout(t, p=p, training=training)
    return torch.nn.functional.dropout(t.float(), p=p, training=True).to(torch.float16)


class DropPath(torch.nn.Module):
    """Stochastic depth per sample (TE's DropPath): in training, each sample's branch is kept with
    probability 1 - drop_prob and scaled by 1 / (1 - drop_prob)."""

    def __init__(self, drop_prob: float = 0.0) -> None:
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, hidden_state: torch.Tensor) -> torch.Tensor:
        if self.drop_prob == 0.0 or not self.training:
            return hidden_state
        keep_prob = 1 - self.drop_prob
        shape = (hidden_state.shape[0],) + (1,) * (hidden_state.ndim - 1)
        random_tensor = (keep_prob + torch.rand(shape, dtype=hidden_state.dtype, device=hidden_state.device)).floor_()
        return hidden_state.div(keep_prob) * random_tensor


class TransformerLayer(torch.nn.Module):
    """TE's TransformerLayer. Submodules: ``self_attention`` (input layernorm inside unless
    output_layernorm), ``inter_attention`` (decoder), ``layernorm_mlp``, ``layernorm``
    (output_layernorm). Extra keywords beyond TE's, passed to every GEMM: ``seed``, ``mode``,
    ``fp8_tensor_core``, ``promotion_interval`` (as te.Linear's)."""

    def __init__(self, hidden_size: int, ffn_hidden_size: int, num_attention_heads: int,
                 num_gqa_groups: Optional[int] = None, layernorm_epsilon: float = 1e-5, hidden_dropout: float = 0.1,
                 attention_dropout: float = 0.1, init_method: Optional[Callable] = None,
                 output_layer_init_method: Optional[Callable] = None, layer_number: Optional[int] = None,
                 kv_channels: Optional[int] = None, self_attn_mask_type: str = "causal",
                 window_size: Optional[Tuple[int, int]] = None, bottom_right_diagonal: Optional[bool] = None,
                 enc_dec_attn_mask_type: str = "no_mask", enc_dec_bottom_right_diagonal: Optional[bool] = None,
                 enc_dec_window_size: Optional[Tuple[int, int]] = None,
                 tp_group: Optional[torch.distributed.ProcessGroup] = None, tp_size: int = 1,
                 params_dtype: Optional[torch.dtype] = None, get_rng_state_tracker: Optional[Callable] = None,
                 fuse_wgrad_accumulation: bool = False, seq_length: Optional[int] = None,
                 micro_batch_size: Optional[int] = None, sequence_parallel: bool = False,
                 apply_residual_connection_post_layernorm: bool = False, output_layernorm: bool = False,
                 parallel_attention_mlp: bool = False, layer_type: str = "encoder", drop_path_rate: float = 0.0,
                 set_parallel_mode: bool = False, fuse_qkv_params: bool = False, rotary_pos_interleaved: bool = False,
                 zero_centered_gamma: bool = False, qkv_weight_interleaved: bool = True, ub_tp_comm_overlap: bool = False,
                 ub_overlap_ag: bool = True, ub_overlap_rs: bool = True, ub_overlap_rs_dgrad: bool = False,
                 ub_bulk_dgrad: bool = True, ub_bulk_wgrad: bool = True, bias: bool = True, activation: str = "gelu",
                 activation_params: Optional[dict] = None, normalization: str = "LayerNorm",
                 device: Union[torch.device, str] = "cpu", attn_input_format: str = "sbhd", name: Optional[str] = None,
                 qk_norm_type: Optional[str] = None,
                 qk_norm_eps: float = 1e-6, qk_norm_before_rope: bool = False, softmax_type: str = "vanilla",
                 seed: int = 0, mode: str = "exact", fp8_tensor_core: str = "hopper", promotion_interval: int = 128) -> None:
        super().__init__()
        check_parallel_defaults("TransformerLayer", tp_group=tp_group, tp_size=tp_size, sequence_parallel=sequence_parallel,
                                get_rng_state_tracker=get_rng_state_tracker)
        # Userbuffers only act with ub_tp_comm_overlap (TE ANDs every ub_* flag with it).
        _module.check_unsupported("TransformerLayer", dict(ub_tp_comm_overlap=ub_tp_comm_overlap) if ub_tp_comm_overlap else {})
        _module.check_unsupported("TransformerLayer", dict(fuse_wgrad_accumulation=fuse_wgrad_accumulation,
                                                           set_parallel_mode=set_parallel_mode))
        device = _te_checks.canonical_device(device)  # "meta" goes to every submodule (TE's deferred init)
        self.self_attn_mask_type = self_attn_mask_type
        self.window_size = window_size
        self.bottom_right_diagonal = bottom_right_diagonal
        self.enc_dec_attn_mask_type = enc_dec_attn_mask_type
        self.enc_dec_window_size = enc_dec_window_size
        self.enc_dec_bottom_right_diagonal = enc_dec_bottom_right_diagonal
        params_dtype = _module.resolve_dtype(params_dtype)
        self.layer_number = layer_number
        self.output_layernorm = output_layernorm
        self.layer_type = layer_type
        self.apply_residual_connection_post_layernorm = apply_residual_connection_post_layernorm
        if parallel_attention_mlp:
            if layer_type != "encoder":
                raise ValueError(f"parallel_attention requires layer_type='encoder', but got layer_type={layer_type!r}")
            if apply_residual_connection_post_layernorm:
                raise ValueError("parallel_attention and apply_residual_connection_post_layernorm are not supported simultaneously.")
            if output_layernorm:
                raise ValueError("parallel_attention and output_layernorm are not supported simultaneously.")
        self.parallel_attention_mlp = parallel_attention_mlp
        if layer_type not in LayerTypes:
            raise ValueError(f"layer_type {layer_type!r} is not supported. "
                             f"Supported types are: {', '.join(repr(t) for t in LayerTypes)}")
        if not fuse_qkv_params:
            qkv_weight_interleaved = False
        self.kv_channels = kv_channels if kv_channels else hidden_size // num_attention_heads
        self.tp_size = tp_size
        self.sequence_parallel = False
        self.seq_length = seq_length
        self.get_rng_state_tracker = get_rng_state_tracker
        self.attn_input_format = attn_input_format
        self.softmax_type = softmax_type
        self.name = name
        gemm = dict(mode=mode, fp8_tensor_core=fp8_tensor_core, promotion_interval=promotion_interval, device=device)
        attention_args = (hidden_size, num_attention_heads, self.kv_channels, attention_dropout, layernorm_epsilon,
                          init_method, output_layer_init_method)
        common = dict(layer_number=layer_number, num_gqa_groups=num_gqa_groups, params_dtype=params_dtype,
                      return_layernorm_output=apply_residual_connection_post_layernorm, fuse_qkv_params=fuse_qkv_params,
                      zero_centered_gamma=zero_centered_gamma, qkv_weight_interleaved=qkv_weight_interleaved,
                      rotary_pos_interleaved=rotary_pos_interleaved, qkv_format=attn_input_format,
                      softmax_type=softmax_type, bias=bias, normalization=normalization, qk_norm_type=qk_norm_type,
                      qk_norm_eps=qk_norm_eps, qk_norm_before_rope=qk_norm_before_rope, **gemm)
        self.self_attention = MultiheadAttention(*attention_args, **common, input_layernorm=not output_layernorm,
                                                 attention_type="self", return_bias=not parallel_attention_mlp,
                                                 seed=seed, name=name + ".self_attention" if name is not None else None)
        if layer_type == "decoder":
            self.inter_attention = MultiheadAttention(*attention_args, **common, attn_mask_type=enc_dec_attn_mask_type,
                                                      input_layernorm=True, attention_type="cross", return_bias=True,
                                                      seed=seed + 3,
                                                      name=name + ".inter_attention" if name is not None else None)
        self.layernorm_mlp = LayerNormMLP(hidden_size, ffn_hidden_size, eps=layernorm_epsilon, init_method=init_method,
                                          output_layer_init_method=output_layer_init_method, bias=bias,
                                          return_bias=not parallel_attention_mlp, params_dtype=params_dtype,
                                          return_layernorm_output=apply_residual_connection_post_layernorm,
                                          zero_centered_gamma=zero_centered_gamma, activation=activation,
                                          activation_params=activation_params, normalization=normalization,
                                          seed=seed + 6, **gemm)
        self.hidden_dropout = hidden_dropout
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0.0 else None
        if output_layernorm:
            norm = {"LayerNorm": LayerNorm, "RMSNorm": RMSNorm}[normalization]
            self.layernorm = norm(hidden_size, eps=layernorm_epsilon, params_dtype=params_dtype,
                                  zero_centered_gamma=zero_centered_gamma, device=device)

    def set_tensor_parallel_group(self, tp_group: Optional[torch.distributed.ProcessGroup]) -> None:
        check_parallel_defaults("TransformerLayer.set_tensor_parallel_group", tp_group=tp_group)

    def forward(self, hidden_states: torch.Tensor, attention_mask: Optional[torch.Tensor] = None,
                self_attn_mask_type: Optional[str] = None, window_size: Optional[Tuple[int, int]] = None,
                bottom_right_diagonal: Optional[bool] = None, encoder_output: Optional[torch.Tensor] = None,
                enc_dec_attn_mask: Optional[Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]] = None,
                enc_dec_attn_mask_type: Optional[str] = None, enc_dec_window_size: Optional[Tuple[int, int]] = None,
                enc_dec_bottom_right_diagonal: Optional[bool] = None, is_first_microbatch: Optional[bool] = None,
                checkpoint_core_attention: bool = False, inference_params: Any = None,
                rotary_pos_emb: Optional[Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]] = None,
                core_attention_bias_type: str = "no_bias", core_attention_bias: Optional[torch.Tensor] = None,
                alibi_slopes: Optional[torch.Tensor] = None, cu_seqlens_q: Optional[torch.Tensor] = None,
                cu_seqlens_kv: Optional[torch.Tensor] = None, cu_seqlens_q_padded: Optional[torch.Tensor] = None,
                cu_seqlens_kv_padded: Optional[torch.Tensor] = None, max_seqlen_q: Optional[int] = None,
                max_seqlen_kv: Optional[int] = None, fast_zero_fill: bool = True, pad_between_seqs: Optional[bool] = None
                ) -> torch.Tensor:

        """TE's forward: hidden_states [s, b, hidden] (attn_input_format "sbhd"; [b, s, hidden] for
        "bshd", [t, hidden] for "thd") -> the same shape."""
        self_attn_mask_type = self.self_attn_mask_type if self_attn_mask_type is None else self_attn_mask_type
        window_size = self.window_size if window_size is None else window_size
        window_size = dpa_utils.check_set_window_size(self_attn_mask_type, window_size)
        enc_dec_attn_mask_type = self.enc_dec_attn_mask_type if enc_dec_attn_mask_type is None else enc_dec_attn_mask_type
        enc_dec_window_size = self.enc_dec_window_size if enc_dec_window_size is None else enc_dec_window_size
        enc_dec_window_size = dpa_utils.check_set_window_size(enc_dec_attn_mask_type, enc_dec_window_size)
        if bottom_right_diagonal is None:
            bottom_right_diagonal = self.bottom_right_diagonal
        if self_attn_mask_type in ("causal", "padding_causal"):
            bottom_right_diagonal = False
        if bottom_right_diagonal is None or self_attn_mask_type in ("causal_bottom_right", "padding_causal_bottom_right"):
            bottom_right_diagonal = True
        if enc_dec_bottom_right_diagonal is None:
            enc_dec_bottom_right_diagonal = self.enc_dec_bottom_right_diagonal
        if enc_dec_attn_mask_type in ("causal", "padding_causal"):
            enc_dec_bottom_right_diagonal = False
        if enc_dec_bottom_right_diagonal is None or enc_dec_attn_mask_type in ("causal_bottom_right",
                                                                                "padding_causal_bottom_right"):
            enc_dec_bottom_right_diagonal = True
        for kind, value in (("self_attn_mask_type", self_attn_mask_type), ("enc_dec_attn_mask_type", enc_dec_attn_mask_type)):
            if value not in dpa_utils.AttnMaskTypes:
                raise ValueError(f"{kind} {value!r} is not supported. "
                                 f"Supported types are: {', '.join(repr(t) for t in dpa_utils.AttnMaskTypes)}")
        _check_bool_masks(self_attn_mask_type, attention_mask, "Attention mask must be a boolean tensor or a list/tuple of "
                                                              "boolean tensors")
        _check_bool_masks(enc_dec_attn_mask_type, enc_dec_attn_mask, "Encoder-decoder attention mask must be boolean tensor(s)")
        if not torch.is_tensor(hidden_states):
            raise TypeError(f"TransformerLayer: hidden_states must be a torch.Tensor, got {type(hidden_states).__name__}")
        hidden_states = hidden_states.contiguous()
        autocast_dtype = _module.activation_dtype(hidden_states)
        if autocast_dtype != hidden_states.dtype:  # TE: under torch autocast the layer runs in its dtype
            hidden_states = hidden_states.to(autocast_dtype)

        self_attention_outputs = self.self_attention(
            hidden_states, attention_mask=attention_mask, attn_mask_type=self_attn_mask_type, window_size=window_size,
            bottom_right_diagonal=bottom_right_diagonal, inference_params=inference_params,
            is_first_microbatch=is_first_microbatch, checkpoint_core_attention=checkpoint_core_attention,
            rotary_pos_emb=rotary_pos_emb, core_attention_bias_type=core_attention_bias_type,
            core_attention_bias=core_attention_bias, alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q,
            cu_seqlens_kv=cu_seqlens_q, cu_seqlens_q_padded=cu_seqlens_q_padded, cu_seqlens_kv_padded=cu_seqlens_q_padded,
            max_seqlen_q=max_seqlen_q, max_seqlen_kv=max_seqlen_q, fast_zero_fill=fast_zero_fill,
            pad_between_seqs=pad_between_seqs)
        if self.apply_residual_connection_post_layernorm and not self.output_layernorm:
            attention_output, attention_bias, residual = self_attention_outputs
            hidden_states = self._bias_dropout_add(attention_output, attention_bias, residual, self.drop_path)
        elif not self.parallel_attention_mlp:
            attention_output, attention_bias = self_attention_outputs
            hidden_states = self._bias_dropout_add(attention_output, attention_bias, hidden_states, self.drop_path)

        if self.layer_type == "decoder":
            inter_outputs = self.inter_attention(
                hidden_states, attention_mask=enc_dec_attn_mask, attn_mask_type=enc_dec_attn_mask_type,
                window_size=enc_dec_window_size, bottom_right_diagonal=enc_dec_bottom_right_diagonal,
                encoder_output=encoder_output, inference_params=inference_params, is_first_microbatch=is_first_microbatch,
                checkpoint_core_attention=checkpoint_core_attention, rotary_pos_emb=rotary_pos_emb,
                core_attention_bias_type=core_attention_bias_type, core_attention_bias=core_attention_bias,
                alibi_slopes=alibi_slopes, cu_seqlens_q=cu_seqlens_q, cu_seqlens_kv=cu_seqlens_kv,
                cu_seqlens_q_padded=cu_seqlens_q_padded, cu_seqlens_kv_padded=cu_seqlens_kv_padded,
                max_seqlen_q=max_seqlen_q, max_seqlen_kv=max_seqlen_kv, fast_zero_fill=fast_zero_fill,
                pad_between_seqs=pad_between_seqs)
            if self.apply_residual_connection_post_layernorm:
                attention_output, attention_bias, residual = inter_outputs
            else:
                attention_output, attention_bias = inter_outputs
                residual = hidden_states
            hidden_states = self._bias_dropout_add(attention_output, attention_bias, residual)

        mlp_outputs = self.layernorm_mlp(hidden_states, is_first_microbatch=is_first_microbatch)
        if self.apply_residual_connection_post_layernorm:
            mlp_output, mlp_bias, residual = mlp_outputs
            output = self._bias_dropout_add(mlp_output, mlp_bias, residual, self.drop_path)
        elif self.parallel_attention_mlp:
            output = self._bias_dropout_add(self_attention_outputs, mlp_outputs, hidden_states, self.drop_path)
        else:
            mlp_output, mlp_bias = mlp_outputs
            output = self._bias_dropout_add(mlp_output, mlp_bias, hidden_states, self.drop_path)
        if self.output_layernorm:
            output = self.layernorm(output)
        return output

    def _bias_dropout_add(self, hidden_state, bias, residual, drop_path=None):
        """residual + dropout(hidden_state + bias) (+ drop path), TE's bias_dropout_add in the
        activations' dtype."""
        if bias is not None and bias.numel() != 0:
            hidden_state = hidden_state + bias
        out = dropout(hidden_state, self.hidden_dropout, self.training)
        if drop_path is not None:
            out = drop_path(out)
        return residual + out


def _check_bool_masks(mask_type, mask, message):
    if mask is None or not ("padding" in mask_type or mask_type == "arbitrary"):
        return
    masks = mask if isinstance(mask, (tuple, list)) else (mask,)
    bad = [(i, m.dtype) for i, m in enumerate(masks) if not torch.is_tensor(m) or m.dtype != torch.bool]
    if bad:
        raise TypeError(f"{message}, but found non-bool dtypes at indices: {bad}")
