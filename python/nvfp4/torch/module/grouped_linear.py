"""te.GroupedLinear: num_gemms independent Linear layers (MoE experts) over consecutive row blocks of
one input, y[rows of expert i] = x[rows of expert i] W_i^T + b_i, with TE's signature, defaults and
parameter names (``weight0``, ``bias0``, ``weight1``, ...; TE's transformer_engine/pytorch/module/
grouped_linear.py). TE's grouped GEMM quantizes each expert's block with that expert's own
quantizers (split_quantize: its own amax / delayed-scaling state / NVFP4 global scale) and runs one
GEMM per expert, so each expert here is one emulated GEMM layer (LinearUnit) run on its block:
bit for bit what a separate te.Linear with the same weight, seed and recipe computes."""
from __future__ import annotations

import io
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch

from .._tensors import check_cpu
from . import _te_checks
from . import base as _module
from ._linear_unit import LinearUnit
from ._te_module import TEModuleMixin, init_constant, init_normal

__all__ = ["GroupedLinear"]


class GroupedLinear(TEModuleMixin, torch.nn.Module):
    """TE's GroupedLinear. ``forward(inp, m_splits, is_first_microbatch=None)``: inp [tokens,
    in_features] (any leading shape, flattened to rows), m_splits num_gemms row counts (a list of
    ints or an int tensor) that add up to the rows; returns [tokens, out_features] (and with
    return_bias the list of biases in the activation dtype). On TE's module base (TEModuleMixin):
    ``device="meta"`` and ``reset_parameters()``, quantized weights under quantized_model_init,
    ``_extra_state`` in TE's layout of num_gemms GEMMs, TE's parameter-dtype rule outside torch
    autocast; ``bias=False`` leaves TE's empty tensors ``bias0``, ... Extra keywords beyond TE's:
    ``seed`` (expert i draws its NVFP4 stochastic-rounding streams from seed + i), ``mode``,
    ``fp8_tensor_core``, ``promotion_interval`` (as te.Linear's)."""

    def __init__(self, num_gemms: int, in_features: int, out_features: int, sequence_parallel: bool = False,
                 fuse_wgrad_accumulation: bool = False, tp_group: Optional[torch.distributed.ProcessGroup] = None,
                 tp_size: int = 1, get_rng_state_tracker: Optional[Callable] = None,
                 rng_tracker_name: Optional[str] = None, init_method: Optional[Callable] = None, bias: bool = True,
                 return_bias: bool = False, params_dtype: Optional[torch.dtype] = None, parallel_mode: Optional[str] = None,
                 device: Union[torch.device, str] = "cpu",
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
        self.name = name
        self._te_setup(device)
        if isinstance(num_gemms, bool) or not isinstance(num_gemms, int) or num_gemms <= 0:
            raise ValueError(f"GroupedLinear: num_gemms must be a positive int, got {num_gemms!r}")
        self.num_gemms = num_gemms
        self.in_features = _module.size_argument("GroupedLinear", "in_features", in_features)
        self.out_features = _module.size_argument("GroupedLinear", "out_features", out_features)
        dtype = _te_checks.canonical_dtype(params_dtype)
        self.use_bias, self.return_bias = bool(bias), bool(return_bias)
        self.apply_bias = self.use_bias and not self.return_bias
        for i in range(num_gemms):  # weight0, bias0, weight1, bias1, ...: TE's registration order
            self._te_parameter(f"weight{i}", (self.out_features, self.in_features), dtype, init_method or init_normal(),
                               is_weight=True)
            if self.use_bias:
                self._te_parameter(f"bias{i}", (self.out_features,), dtype, init_constant(0.0))
            else:
                setattr(self, f"bias{i}", torch.Tensor().to(dtype=dtype))  # TE: an empty tensor, not a parameter
        self._units = [LinearUnit(self.in_features, self.out_features, bias=self.apply_bias, params_dtype=dtype,
                                  seed=seed + i, mode=mode, fp8_tensor_core=fp8_tensor_core,
                                  promotion_interval=promotion_interval) for i in range(num_gemms)]
        for unit in self._units:
            unit.te_fp8_shape_rule = False  # TE's GroupedLinear makes no assert_dim_for_fp8_exec; its quantizers' checks stay
        if self._te_device.type != "meta":
            self.reset_parameters()

    def _te_units(self):
        return list(self._units)

    @property
    def params_dtype(self) -> torch.dtype:
        """The parameters' dtype (it follows module.to(dtype))."""
        return self.weight0.dtype

    def _weights(self):
        return [getattr(self, f"weight{i}") for i in range(self.num_gemms)]

    def _biases(self):
        return [getattr(self, f"bias{i}") for i in range(self.num_gemms)]

    def forward(self, inp: torch.Tensor, m_splits: Union[List[int], torch.Tensor], is_first_microbatch: Optional[bool] = None,
                out: Optional[torch.Tensor] = None, dgrad_out: Optional[torch.Tensor] = None
                ) -> Union[torch.Tensor, Tuple[torch.Tensor, List[torch.Tensor]]]:
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
        if torch.is_tensor(inp) and inp.dim() >= 1 and inp.shape[-1] != self.in_features:
            raise ValueError(f"Input tensor (shape={tuple(inp.size())}) is not compatible with weight tensor "
                             f"(shape={(self.out_features, self.in_features)})")
        x, recipe, dtype = self._te_prepare_forward(inp, "GroupedLinear", self.in_features)
        x2d = x.reshape(-1, self.in_features)
        if sum(splits) != x2d.shape[0]:
            raise ValueError(f"GroupedLinear: m_splits add up to {sum(splits)} rows but the input has {x2d.shape[0]}")
        for rows in splits:  # every expert's quantizer checks before the first expert runs: a refusal changes nothing
            _te_checks.check_quantized_gemm(recipe, torch.empty(rows, self.in_features, device="meta"),
                                            (self.out_features, self.in_features), dtype, shape_rule=False)
        for unit in self._units:
            unit.name = self.name or ""
        outputs = [unit.run(rows, weight, bias if self.apply_bias else None, is_first_microbatch)
                   for unit, rows, weight, bias in zip(self._units, torch.split(x2d, splits), self._weights(), self._biases())]
        y = torch.cat(outputs)  # an expert without tokens runs as a te.Linear on 0 rows: zero dW, db
        if self.return_bias:  # TE: each bias in the activation dtype (empty tensors without bias)
            return y, [b.to(dtype) for b in self._biases()]
        return y

    def set_extra_state(self, state: Union[torch.Tensor, io.BytesIO, Dict[str, Any], None]) -> None:
        """TE's format (module/_te_extra_state.py), or nvfp4.torch's earlier {"gemms": [...]}."""
        if isinstance(state, dict) and "gemms" in state:
            if not isinstance(state["gemms"], list) or len(state["gemms"]) != self.num_gemms:
                raise ValueError(f"GroupedLinear._extra_state must hold one state per GEMM ({self.num_gemms})")
            for unit, s in zip(self._units, state["gemms"]):
                unit.load_extra_state(s)
            return
        super().set_extra_state(state)

    def extra_repr(self) -> str:

        return (f"num_gemms={self.num_gemms}, in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.use_bias}, params_dtype={self.params_dtype}")
