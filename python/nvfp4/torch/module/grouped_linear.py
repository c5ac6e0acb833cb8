"""te.GroupedLinear: num_gemms independent Linear layers (MoE experts) over consecutive row blocks of
one input, y[rows of expert i] = x[rows of expert i] W_i^T + b_i, with TE's signature, defaults and
parameter names (``weight0``, ``bias0``, ``weight1``, ...; TE's transformer_engine/pytorch/module/
grouped_linear.py). TE's grouped GEMM quantizes each expert's block with that expert's own
quantizers (split_quantize: its own amax / delayed-scaling state / NVFP4 global scale) and runs one
GEMM per expert, so each expert here is one emulated GEMM layer (LinearUnit) run on its block:
bit for bit what a separate te.Linear with the same weight, seed and recipe computes."""
from typing import Optional

import torch

from .._tensors import check_cpu
from . import base as _module
from ._linear_unit import LinearUnit

__all__ = ["GroupedLinear"]


class GroupedLinear(torch.nn.Module):
    """TE's GroupedLinear. ``forward(inp, m_splits, is_first_microbatch=None)``: inp [tokens,
    in_features] (any leading shape, flattened to rows), m_splits num_gemms row counts (a list of
    ints or an int tensor) that add up to the rows; returns [tokens, out_features] (and with
    return_bias the list of biases in the activation dtype). Extra keywords beyond TE's:
    ``seed`` (expert i draws its NVFP4 stochastic-rounding streams from seed + i), ``mode``,
    ``fp8_tensor_core``, ``promotion_interval`` (as te.Linear's)."""

    def __init__(self, num_gemms: int, in_features: int, out_features: int, sequence_parallel: bool = False,
                 fuse_wgrad_accumulation: bool = False, tp_group=None, tp_size: int = 1, get_rng_state_tracker=None,
                 rng_tracker_name: Optional[str] = None, init_method=None, bias: bool = True, return_bias: bool = False,
                 params_dtype: Optional[torch.dtype] = None, parallel_mode: Optional[str] = None, device="cpu",
                 ub_overlap_rs: bool = False, ub_overlap_ag: bool = False, ub_name: Optional[str] = None,
                 delay_wgrad_compute: bool = False, save_original_input: bool = False, single_grouped_weight: bool = False,
                 single_grouped_bias: bool = False, name: Optional[str] = None, use_grouped_tensor: Optional[bool] = None,
                 seed: int = 0, mode: str = "exact", fp8_tensor_core: str = "hopper", promotion_interval: int = 128) -> None:
        super().__init__()
        if ub_overlap_rs or ub_overlap_ag:
            raise ValueError("GroupedLinear doesn't support Userbuffer overlap.")
        _module.check_unsupported("GroupedLinear", dict(
            sequence_parallel=sequence_parallel, fuse_wgrad_accumulation=fuse_wgrad_accumulation, tp_group=tp_group,
            tp_size=tp_size, get_rng_state_tracker=get_rng_state_tracker, rng_tracker_name=rng_tracker_name,
            parallel_mode=parallel_mode, ub_name=ub_name, delay_wgrad_compute=delay_wgrad_compute,
            save_original_input=save_original_input))
        if single_grouped_weight or single_grouped_bias or use_grouped_tensor:
            raise ValueError("GroupedLinear: single_grouped_weight / single_grouped_bias / use_grouped_tensor (TE's "
                             "experimental native grouped-tensor path) are not supported by nvfp4.torch; the per-expert "
                             "parameters weight0.. / bias0.. are")
        _module.resolve_device(device)
        if isinstance(num_gemms, bool) or not isinstance(num_gemms, int) or num_gemms <= 0:
            raise ValueError(f"GroupedLinear: num_gemms must be a positive int, got {num_gemms!r}")
        self.num_gemms = num_gemms
        self.in_features, self.out_features = int(in_features), int(out_features)
        if self.in_features <= 0 or self.out_features <= 0:
            raise ValueError(f"GroupedLinear: in_features and out_features must be positive, got {in_features}, {out_features}")
        self.params_dtype = _module.resolve_dtype(params_dtype)
        self.use_bias, self.return_bias = bool(bias), bool(return_bias)
        self.apply_bias = self.use_bias and not self.return_bias
        self.name = name
        for i in range(num_gemms):  # weight0, bias0, weight1, bias1, ...: TE's registration order
            setattr(self, f"weight{i}", _module.new_weight((self.out_features, self.in_features), self.params_dtype,
                                                           init_method))
            if self.use_bias:
                setattr(self, f"bias{i}", _module.new_vector(self.out_features, self.params_dtype, 0.0))
        self._units = [LinearUnit(self.in_features, self.out_features, bias=self.apply_bias, params_dtype=self.params_dtype,
                                  seed=seed + i, mode=mode, fp8_tensor_core=fp8_tensor_core,
                                  promotion_interval=promotion_interval) for i in range(num_gemms)]

    def _weights(self):
        return [getattr(self, f"weight{i}") for i in range(self.num_gemms)]

    def _biases(self):
        return [getattr(self, f"bias{i}") for i in range(self.num_gemms)] if self.use_bias else [None] * self.num_gemms

    def forward(self, inp, m_splits, is_first_microbatch: Optional[bool] = None, out=None, dgrad_out=None):
        if out is not None or dgrad_out is not None:
            raise ValueError("GroupedLinear: preallocated out / dgrad_out buffers are not supported by nvfp4.torch")
        if torch.is_tensor(m_splits):
            check_cpu(m_splits, "m_splits")
            if m_splits.dtype.is_floating_point or m_splits.dtype == torch.bool:
                raise TypeError(f"GroupedLinear: m_splits must hold integers, got {m_splits.dtype}")
            sizes = tuple(m_splits.shape)
            splits = [int(s) for s in m_splits.reshape(-1).tolist()]
        else:
            splits = [int(s) for s in m_splits]
            sizes = (len(splits),)
        if sizes != (self.num_gemms,):
            raise ValueError(f"Shape of splits tensor ({sizes}) does not match number of GEMMs ({self.num_gemms}).")
        if any(s < 0 for s in splits):
            raise ValueError(f"GroupedLinear: m_splits must be non-negative, got {splits}")
        _module.check_parameters(self, "GroupedLinear")
        if torch.is_tensor(inp) and inp.dim() >= 1 and inp.shape[-1] != self.in_features:
            raise ValueError(f"Input tensor (shape={tuple(inp.size())}) is not compatible with weight tensor "
                             f"(shape={(self.out_features, self.in_features)})")
        x = _module.activation(inp, self.in_features, "GroupedLinear")
        x2d = x.reshape(-1, self.in_features)
        if sum(splits) != x2d.shape[0]:
            raise ValueError(f"GroupedLinear: m_splits add up to {sum(splits)} rows but the input has {x2d.shape[0]}")
        outputs = [unit.run(rows, weight, bias if self.apply_bias else None, is_first_microbatch)
                   for unit, rows, weight, bias in zip(self._units, torch.split(x2d, splits), self._weights(), self._biases())]
        y = torch.cat(outputs)  # an expert without tokens runs as a te.Linear on 0 rows: zero dW, db
        if self.return_bias:
            biases = [b.to(x.dtype) if b is not None else torch.empty(0, dtype=x.dtype) for b in self._biases()]
            return y, biases
        return y

    def get_extra_state(self):
        return {"gemms": [unit.extra_state() for unit in self._units]}

    def set_extra_state(self, state):
        if not isinstance(state, dict) or not isinstance(state.get("gemms"), list) or len(state["gemms"]) != self.num_gemms:
            raise ValueError(f"GroupedLinear._extra_state must be what get_extra_state() returned "
                             f"({{'gemms': [one state per GEMM, {self.num_gemms}]}})")
        for unit, s in zip(self._units, state["gemms"]):
            unit.load_extra_state(s)

    def extra_repr(self):
        return (f"num_gemms={self.num_gemms}, in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.use_bias}, params_dtype={self.params_dtype}")
