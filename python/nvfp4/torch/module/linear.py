"""te.Linear: y = x W^T + b with every GEMM and quantizer of the region's recipe emulated."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch

from .. import quantization
from . import _te_checks
from . import base as _module
from ._linear_unit import LinearUnit
from ._parallel import TensorParallel, TensorParallelModule
from ._te_module import TEModuleMixin, init_constant, init_normal

__all__ = ["Linear"]


class GemmModule(TEModuleMixin, TensorParallelModule, torch.nn.Module):
    """What TE's GEMM modules share: ``weight`` [out_features, in_features] and ``bias`` Parameters
    that the emulated core (a LinearUnit) reads, TE's deferred / quantized initialisation and
    ``_extra_state`` (TEModuleMixin), TE's tensor / sequence parallelism (module/_parallel.py), and
    TE's checks before a forward."""

    def _init_gemm(self, name, in_features, out_features, *, bias, return_bias, params_dtype, init_method, seed, mode,
                   fp8_tensor_core, promotion_interval, tp=None, parameters_split=None):
        """Makes the parameters (after any the subclass registered first) and the core. With
        tensor parallelism in_features (row) or out_features (column) become this rank's share.
        parameters_split (TE's): the weight and bias held as one Parameter per named block of
        rows (``query_weight``, ``key_weight``, ..., then ``query_bias``, ...), each initialised
        by itself, concatenated for the GEMM."""
        self._tp = tp if tp is not None else TensorParallel(name)
        self.in_features = _module.size_argument(name, "in_features", in_features)
        self.out_features = _module.size_argument(name, "out_features", out_features)
        total_out = self.out_features
        self.in_features, self.out_features = self._tp.split(self.in_features, self.out_features)  # TE: divide() first
        self.weight_names, self.bias_names, self.parameter_split_sizes = split_parameters(total_out, parameters_split)
        if self._tp.mode == "column":
            for size in self.parameter_split_sizes:
                if size % self._tp.size != 0:
                    raise RuntimeError(f"Attempting to distribute a parameter with out_features={size} "
                                       f"between {self._tp.size} tensor-parallel processes")
            self.parameter_split_sizes = [size // self._tp.size for size in self.parameter_split_sizes]
        if len(self.parameter_split_sizes) > 1 and self.primary_weights_in_fp8:
            raise RuntimeError("Splitting QuantizedTensor into multiple params is not supported")
        dtype = _te_checks.canonical_dtype(params_dtype)
        self.use_bias, self.return_bias = bool(bias), bool(return_bias)
        for weight_name, size in zip(self.weight_names, self.parameter_split_sizes):  # weights together, as TE
            self._te_parameter(weight_name, (size, self.in_features), dtype, init_method or init_normal(), is_weight=True)
        for bias_name, size in zip(self.bias_names, self.parameter_split_sizes):
            if self.use_bias:
                self._te_parameter(bias_name, (size,), dtype, init_constant(0.0))
            else:
                setattr(self, bias_name, torch.Tensor().to(dtype=dtype))  # TE: an empty tensor, not a parameter
        # With return_bias the bias is returned, not added (TE: for a fused bias-add downstream); a
        # row-parallel layer adds it after the collective (TE: gemm_bias_unfused_add).
        self._unit = LinearUnit(self.in_features, self.out_features, bias=self._fused_bias(),
                                params_dtype=dtype, seed=seed, mode=mode, fp8_tensor_core=fp8_tensor_core,
                                promotion_interval=promotion_interval)
        if self._te_device.type != "meta":
            self.reset_parameters()

    def _te_units(self):
        return [self._unit]

    def _fused_bias(self):
        """Whether the GEMM adds the bias (else it is returned, or added after the collective)."""
        return self.use_bias and not self.return_bias and not self._tp.unfused_bias

    def reset_parameters(self, defer_init: Optional[bool] = False) -> None:
        super().reset_parameters(defer_init=defer_init)
        if not defer_init:
            self._tp.mark_parameters(self._weights(), self._biases() if self.use_bias else [], self._norm_parameters())

    def _weights(self):
        return [getattr(self, name) for name in self.weight_names]

    def _biases(self):
        return [getattr(self, name) for name in self.bias_names]

    def _weight_tensor(self):
        """The GEMM's weight: the parameter, or the split parameters concatenated (TE's noop_cat)."""
        weights = self._weights()
        return weights[0] if len(weights) == 1 else torch.cat(weights)

    def _bias_tensor(self):
        biases = self._biases()
        return biases[0] if len(biases) == 1 else torch.cat(biases)

    def _norm_parameters(self):
        return []

    @property
    def params_dtype(self) -> torch.dtype:
        """The parameters' dtype (it follows module.to(dtype))."""
        return getattr(self, self.weight_names[0]).dtype

    def _gemm_input(self, inp, module_name, check_input=True):
        """TE's checks before the GEMM, in TE's order (the parameters' dtype against the input's
        outside torch autocast, the FP8 shape rule, the quantizers' own) and the input in the
        activation dtype. Returns (x, recipe, activation dtype)."""
        self._te_materialize()
        if not torch.is_tensor(inp):
            raise TypeError(f"{module_name}: the input must be a torch.Tensor, got {type(inp).__name__}")
        autocast_dtype = _module._cpu_autocast_dtype()
        self._te_check_parameters(module_name)
        if inp.device.type != "cpu":
            raise ValueError(f"{module_name}'s input is on device '{inp.device}': nvfp4.torch emulates the GPU numerics on "
                             "the CPU, so tensors must be CPU tensors (move it with .cpu())")
        if inp.dtype not in _te_checks.PARAM_DTYPES:
            raise TypeError(f"{module_name}'s input must be float32, float16 or bfloat16, got {str(inp.dtype).replace('torch.', '')}")
        dtype = self._te_activation_dtype(inp, autocast_dtype)
        if inp.dim() < 1 or inp.shape[-1] != self.in_features:
            raise ValueError(f"{module_name}: GEMM not possible: the input's last dimension must be {self.in_features} "
                             f"(in_features), got shape {tuple(inp.shape)}")
        recipe = quantization._current()[0]
        if check_input:  # TE's Linear checks the input as given (LayerNormLinear its 2-D view: the unit does)
            _te_checks.check_quantized_gemm(recipe, inp, (self.out_features, self.in_features), dtype)
        calibrating = recipe is None and quantization.is_fp8_calibration()
        self._te_note_forward(quantization.calibration_recipe() if calibrating else recipe, calibrating)
        return (inp if inp.dtype == dtype else inp.to(dtype)), recipe, dtype

    def _gemm(self, x, is_first_microbatch):
        """The GEMM with TE's tensor-parallel communication around it (module/_parallel.py)."""
        self._tp.check_forward(quantization._current()[0])
        bias = self._bias_tensor() if self._fused_bias() else None
        if self._tp.mode == "column":
            x = self._tp.column_input(x)
        self._unit.name = self.name or ""
        y = self._unit.run(x.reshape(-1, self.in_features), self._weight_tensor(), bias, is_first_microbatch)
        y = y.reshape(*x.shape[:-1], self.out_features)
        if self._tp.mode == "row":
            y = self._tp.row_output(y)
            if self.use_bias and not self.return_bias:
                y = y + self._bias_tensor().to(y.dtype)
        return y

    def _returned_bias(self, dtype):
        """What return_bias returns: the bias in the activation dtype (TE's cast_if_needed; an empty
        tensor without bias)."""
        return self._bias_tensor().to(dtype)


class Linear(GemmModule):
    """TE's Linear. ``weight`` [out_features, in_features] and ``bias`` [out_features] are Parameters of
    ``params_dtype`` (float32, float16 or bfloat16); ``device="meta"`` defers their values to
    ``reset_parameters()``; inside ``quantized_model_init`` the weight is a QuantizedTensor.
    ``parameters_split`` (TE's): the weight and bias as one Parameter per named block of rows
    (``query_weight``, ..., ``query_bias``, ...; not on the meta device, as TE asserts). Extra
    keywords beyond TE's: ``seed`` (NVFP4 stochastic rounding streams), ``mode`` ("exact" tensor
    core, or "relaxed" fp32 chains), ``fp8_tensor_core`` ("hopper" | "blackwell"),
    ``promotion_interval`` (FP8 split accumulator, elements of K per promotion)."""

    def __init__(self, in_features: int, out_features: int, *, bias: bool = True, init_method: Optional[Callable] = None,
                 return_bias: bool = False, params_dtype: Optional[torch.dtype] = None,
                 parameters_split: Optional[Union[Tuple[str, ...], Dict[str, int]]] = None,
                 device: Union[torch.device, str] = "cpu", name: Optional[str] = None, seed: int = 0, mode: str = "exact",
                 fp8_tensor_core: str = "hopper", promotion_interval: int = 128, **te_only: Any) -> None:
        super().__init__()
        tp = TensorParallel.take("Linear", te_only)  # parallel_mode, tp_group, tp_size, sequence_parallel
        _module.check_unsupported("Linear", te_only)
        self.name = name
        self._te_setup(device)
        if self._te_device.type == "meta" and parameters_split is not None:  # TE's assertion (Linear's only)
            raise AssertionError("Cannot split module parameters on 'meta' device.")
        self._init_gemm("Linear", in_features, out_features, bias=bias, return_bias=return_bias, params_dtype=params_dtype,
                        init_method=init_method, seed=seed, mode=mode, fp8_tensor_core=fp8_tensor_core,
                        promotion_interval=promotion_interval, tp=tp, parameters_split=parameters_split)

    def forward(self, inp: torch.Tensor, is_first_microbatch: Optional[bool] = None, fp8_output: Optional[bool] = False,
                fp8_grad: Optional[bool] = False) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
        if fp8_output or fp8_grad:
            raise ValueError("Linear: fp8_output / fp8_grad (FP8 tensors between modules) are not supported by nvfp4.torch")
        x, recipe, dtype = self._gemm_input(inp, "Linear")
        y = self._gemm(x, is_first_microbatch)
        return (y, self._returned_bias(dtype)) if self.return_bias else y

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.use_bias}, params_dtype={self.params_dtype}"


def split_parameters(out_features: int, parameters_split: Optional[Union[Tuple[str, ...], Dict[str, int]]]
                     ) -> Tuple[List[str], List[str], List[int]]:

    """TE's naming of a GEMM module's parameters (module/linear.py): None -> weight / bias; a tuple
    of names -> equal blocks ``{name}_weight`` / ``{name}_bias`` (trailing underscores dropped); a
    dict {name: rows}. Returns (weight names, bias names, block sizes)."""
    if parameters_split is None:
        return ["weight"], ["bias"], [out_features]
    if not parameters_split:
        raise ValueError("Cannot split weight buffer into 0 parameters")
    if isinstance(parameters_split, dict):
        items = list(parameters_split.items())
    elif all(isinstance(name, str) for name in parameters_split):
        items = [(name, out_features // len(parameters_split)) for name in parameters_split]
    else:
        raise TypeError("Invalid configuration for parameters split")
    names = [name.rstrip("_") for name, _ in items]
    sizes = [int(size) for _, size in items]
    if sum(sizes) != out_features:
        raise ValueError(f"Trying to split weight buffer (out_features={out_features}) with split sizes {sizes}")
    return [f"{n}_weight" for n in names], [f"{n}_bias" for n in names], sizes
