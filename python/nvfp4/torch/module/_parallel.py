"""Tensor and sequence parallelism of TE's GEMM modules (module/linear.py, layernorm_linear.py,
layernorm_mlp.py), over torch.distributed, with TE's communication at TE's points:

- column-parallel (the weight's output rows split over the group): with sequence parallelism the
  input's rows are all-gathered before the GEMM and the input gradient is reduce-scattered after
  the dgrad GEMM; without it the input is replicated and the input gradient all-reduced;
- row-parallel (the weight's input columns split): the GEMM's partial output is all-reduced, or
  reduce-scattered along the rows with sequence parallelism (the output gradient then
  all-gathered in backward); the bias is added after the collective, in the activation dtype.

Precision: TE all-gathers the quantized input (and, row-parallel with sequence parallelism, the
quantized output gradient) after reducing the quantizer's amax over the group (current scaling,
NVFP4) or with the ranks' shared delayed scale; here the tensor is gathered in the activation
dtype and the layer's quantizer runs on the gathered tensor, which gives the same bits (per-tensor
scales from the group's amax, MXFP8 / NVFP4 / FP8 blocks inside each rank's rows). Partial sums
(row-parallel outputs, column-parallel input gradients) are summed in the activation dtype, in
rank order, each addition rounded once to that dtype (NCCL rounds each addition the same way; the
order of its ring or tree with more than two ranks is not reproduced). The collectives are
torch.distributed's all-gather (any backend: gloo has no bfloat16 all-reduce nor reduce-scatter),
each preceded by a small all-gather of the tensor's shape, so that ranks with different shapes
fail alike with a message instead of exchanging mismatched buffers.

Also TE's public helpers of transformer_engine/pytorch/distributed.py built on them
(gather_along_first_dim, reduce_scatter_along_first_dim, allreduce, ...), re-exported by
nvfp4.torch.distributed.
"""
from __future__ import annotations

import copy
import zlib
from typing import TYPE_CHECKING, Any, Dict, Iterable, Optional, Tuple

import torch

from .._amax_reduction import check_same_everywhere, collective_error

if TYPE_CHECKING:  # for the annotations only: the module imports nothing more at run time
    from ...common.recipe import Recipe
    from ..quantized_tensor import Quantizer

GEMM_PARALLEL_MODES = ("row", "column", None)  # TE's constants.GemmParallelModes

# TE's tensor-parallel constructor arguments (popped from a module's keyword arguments).
_ARGUMENTS = ("parallel_mode", "tp_group", "tp_size", "sequence_parallel")


def _dist():
    import torch.distributed as dist
    return dist


def get_distributed_world_size(group: Optional[torch.distributed.ProcessGroup] = None) -> int:
    """TE's: the group's size, 1 when torch.distributed is not initialized."""
    dist = _dist()
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size(group=group)


def get_distributed_rank(group: Optional[torch.distributed.ProcessGroup] = None) -> int:
    """TE's: this process's rank in the group."""
    dist = _dist()
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("torch.distributed is not initialized. Call torch.distributed.init_process_group() before "
                           "calling get_distributed_rank().")
    return dist.get_rank(group=group)


def divide(numerator: int, denominator: int) -> int:
    """TE's utils.divide."""
    if numerator % denominator != 0:
        raise ValueError(f"{numerator} is not divisible by {denominator}")
    return numerator // denominator


# ---- the collectives -----------------------------------------------------------------------------------

_DTYPE_CODES = {torch.float32: 1, torch.bfloat16: 2, torch.float16: 3, torch.float64: 4, torch.uint8: 5, torch.int64: 6}


def _signature(op, t):
    shape = tuple(t.shape)
    rest = 1
    for d in shape[1:]:
        rest *= d
    return (op, _DTYPE_CODES.get(t.dtype, 99), t.dim(), shape[0] if shape else 1, rest,
            zlib.crc32(repr(shape).encode()) & 0x7FFFFFFF)


def _describe(s):
    dtypes = {v: str(k).replace("torch.", "") for k, v in _DTYPE_CODES.items()}
    return f"{dtypes.get(s[1], '?')} tensor of {s[2]} dims, {s[3]} rows x {s[4]}"


_OPS = {"all-gather": 1, "reduce-scatter": 2, "all-reduce": 3}


def _exchange(t, group, op):
    """Every rank's copy of `t` (a list in rank order), through an all-gather of its bytes, after
    checking that every rank passes the same shape and dtype."""
    dist = _dist()
    what = f"the tensor-parallel {op}"
    check_same_everywhere(group, _signature(_OPS[op], t), what, _describe)
    flat = t.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8) if flat.numel() else torch.empty(0, dtype=torch.uint8)
    parts = [torch.empty_like(raw) for _ in range(dist.get_world_size(group))]
    try:
        dist.all_gather(parts, raw, group=group)
    except RuntimeError as e:
        raise collective_error(what, e) from e
    return [p.view(t.dtype).reshape(t.shape) if t.numel() else torch.empty(t.shape, dtype=t.dtype) for p in parts]


def _sum_in_rank_order(parts):
    """parts[0] + parts[1] + ..., each addition rounded once to the parts' dtype (float32 holds the
    exact sum of two bfloat16 or float16 numbers' rounding: at least 2p + 2 bits)."""
    dtype, total = parts[0].dtype, parts[0]
    for p in parts[1:]:
        total = total + p if dtype in (torch.float32, torch.float64) else (total.float() + p.float()).to(dtype)
    return total


def _check_rows(t, world):
    if t.dim() < 1 or t.shape[0] % world != 0:
        rows = t.shape[0] if t.dim() else 0
        raise ValueError("First dimension of the tensor should be divisible by tensor parallel size, but got "
                         f"dim_size[0]={rows} and world_size={world} (remainder={rows % world}).")


def all_gather_rows(t: torch.Tensor, group: Optional[torch.distributed.ProcessGroup]) -> torch.Tensor:
    """The ranks' tensors concatenated along the first dimension, in rank order."""
    if get_distributed_world_size(group) == 1:
        return t
    return torch.cat(_exchange(t, group, "all-gather"))


def reduce_scatter_rows(t: torch.Tensor, group: Optional[torch.distributed.ProcessGroup]) -> torch.Tensor:
    """This rank's rows of the ranks' tensors summed (rank order, t's dtype)."""
    world = get_distributed_world_size(group)
    if world == 1:
        return t
    _check_rows(t, world)
    total = _sum_in_rank_order(_exchange(t, group, "reduce-scatter"))
    return total.chunk(world)[_dist().get_rank(group)].clone()


def all_reduce_sum(t: torch.Tensor, group: Optional[torch.distributed.ProcessGroup]) -> torch.Tensor:
    """The ranks' tensors summed (rank order, t's dtype), a new tensor."""
    if get_distributed_world_size(group) == 1:
        return t
    return _sum_in_rank_order(_exchange(t, group, "all-reduce"))


# ---- autograd ---------------------------------------------------------------------------------------------

class _GatherRows(torch.autograd.Function):
    """Sequence parallel into a column-parallel GEMM: all-gather forward, reduce-scatter backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return all_gather_rows(x, group)

    @staticmethod
    def backward(ctx, grad):
        return reduce_scatter_rows(grad, ctx.group), None


class _ScatterRows(torch.autograd.Function):
    """A row-parallel GEMM's output under sequence parallelism: reduce-scatter forward, all-gather backward."""

    @staticmethod
    def forward(ctx, y, group):
        ctx.group = group
        return reduce_scatter_rows(y, group)

    @staticmethod
    def backward(ctx, grad):
        return all_gather_rows(grad, ctx.group), None


class _ReduceOutput(torch.autograd.Function):
    """A row-parallel GEMM's output: all-reduce forward, the gradient as it is backward."""

    @staticmethod
    def forward(ctx, y, group):
        return all_reduce_sum(y, group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _ReduceInputGrad(torch.autograd.Function):
    """A replicated input into a column-parallel GEMM: itself forward, its gradient all-reduced backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return all_reduce_sum(grad, ctx.group), None


# ---- a module's layout ---------------------------------------------------------------------------------

class TensorParallel:
    """One GEMM module's tensor-parallel settings, as TE's constructor resolves them: the group
    (tp_size is the group's size when a group is given, else the tp_size argument, the group then to
    be given by set_tensor_parallel_group before the first forward), the mode, and
    sequence_parallel (only with more than one rank)."""

    def __init__(self, module_name: str, parallel_mode: Optional[str] = None,
                 tp_group: Optional[torch.distributed.ProcessGroup] = None, tp_size: int = 1,
                 sequence_parallel: bool = False) -> None:
        if parallel_mode not in GEMM_PARALLEL_MODES:
            raise ValueError(f"parallel_mode {parallel_mode} not supported")
        if isinstance(tp_size, bool) or not isinstance(tp_size, int) or tp_size < 1:
            raise ValueError(f"{module_name}(tp_size={tp_size!r}): the tensor-parallel size must be a positive int")
        self.module_name, self.mode = module_name, parallel_mode
        if tp_group is None:
            self.size, self.group, self.initialized = tp_size, None, tp_size == 1
        else:
            self.size, self.group, self.initialized = get_distributed_world_size(tp_group), tp_group, True
            if self.size < 1:  # torch.distributed answers -1 to a process outside the group
                raise ValueError(f"{module_name}: this process (rank {get_distributed_rank()}) is not a member of tp_group")
        self.sequence_parallel = self.size > 1 and bool(sequence_parallel)

    @classmethod
    def take(cls, module_name: str, kwargs: Dict[str, Any], names: Iterable[str] = _ARGUMENTS) -> TensorParallel:
        """The settings from a module's keyword arguments (those of `names`, removed from `kwargs`)."""
        return cls(module_name, **{name: kwargs.pop(name) for name in names if name in kwargs})

    # pickling and deepcopy share the group (a process-wide handle, which pickle cannot carry)
    def __deepcopy__(self, memo):
        out = copy.copy(self)
        memo[id(self)] = out
        return out

    def __getstate__(self):
        state = dict(self.__dict__)
        if state["group"] is not None:
            state["group"], state["initialized"] = None, state["size"] == 1
        return state

    def set_group(self, group: Optional[torch.distributed.ProcessGroup]) -> None:
        """TE's set_tensor_parallel_group: the group of the collectives (the size stays)."""
        self.group, self.initialized = group, True

    @property
    def unfused_bias(self) -> bool:
        """TE adds a row-parallel layer's bias after the collective (gemm_bias_unfused_add)."""
        return self.mode == "row"

    def mark_parameters(self, weights: Iterable[torch.Tensor], biases: Iterable[torch.Tensor],
                        norms: Iterable[torch.Tensor] = ()) -> None:
        """TE's attributes on the parameters (reset_parameters), which Megatron reads: weights split
        along dim 1 (row) or 0, a column-parallel bias split along dim 0, a row-parallel bias and the
        norm's parameters marked with sequence_parallel."""
        for w in weights:
            set_tensor_model_parallel_attributes(w, True, 1 if self.mode == "row" else 0, 1)
        for b in biases:
            if self.mode == "row":
                b.sequence_parallel = self.sequence_parallel
            elif self.mode == "column":
                set_tensor_model_parallel_attributes(b, True, 0, 1)
        for p in norms:
            p.sequence_parallel = self.sequence_parallel

    def split(self, in_features: int, out_features: int) -> Tuple[int, int]:
        """The local (in, out) features: TE divides out_features (column) or in_features (row)."""
        if self.mode == "column":
            out_features = divide(out_features, self.size)
        elif self.mode == "row":
            in_features = divide(in_features, self.size)
        return in_features, out_features

    def check_forward(self, recipe: Optional[Recipe]) -> None:
        """TE's checks before a forward (module/base.py prepare_forward)."""
        from ...common.recipe import DelayedScaling
        if self.size > 1 and not self.initialized:
            raise RuntimeError("Tensor parallel group not initialized. Call set_tensor_parallel_group() before forward "
                               "pass when tp_size > 1.")
        if self.size > 1 and get_distributed_world_size(self.group) != self.size:
            raise RuntimeError(f"{self.module_name}: tp_size is {self.size} but the tensor-parallel group has "
                               f"{get_distributed_world_size(self.group)} ranks (is torch.distributed initialized?)")
        if self.sequence_parallel and isinstance(recipe, DelayedScaling) and not recipe.reduce_amax:
            raise ValueError("Amax reduction across tensor parallel group is necessary when using sequence parallelism with FP8.")

    # ---- the communication around one GEMM
    def column_input(self, x: torch.Tensor, reduce_grad: bool = True) -> torch.Tensor:
        """The GEMM input of a column-parallel layer: the ranks' rows gathered (sequence parallel),
        or x with its gradient all-reduced (reduce_grad: TE's LayerNormMLP reduces only with
        set_parallel_mode)."""
        if self.sequence_parallel:
            return _GatherRows.apply(x, self.group)
        if self.size > 1 and reduce_grad:
            return _ReduceInputGrad.apply(x, self.group)
        return x

    def row_output(self, y: torch.Tensor) -> torch.Tensor:
        """A row-parallel layer's output: the ranks' partial outputs summed (all-reduce), or this
        rank's rows of the sum (sequence parallel)."""
        if self.size == 1:
            return y
        if self.sequence_parallel:
            return _ScatterRows.apply(y, self.group)
        return _ReduceOutput.apply(y, self.group)


class TensorParallelModule:
    """TE's set_tensor_parallel_group for modules holding a TensorParallel in ``_tp``."""

    def set_tensor_parallel_group(self, tp_group: Optional[torch.distributed.ProcessGroup]) -> None:
        """Sets the tensor-parallel group before the first forward (TE's, for modules made with tp_size > 1
        and no group)."""
        self._tp.set_group(tp_group)

    @property
    def tp_group(self) -> Optional[torch.distributed.ProcessGroup]:
        return self._tp.group

    @property
    def tp_size(self) -> int:
        return self._tp.size

    @property
    def parallel_mode(self) -> Optional[str]:
        return self._tp.mode

    @property
    def sequence_parallel(self) -> bool:
        return self._tp.sequence_parallel


def set_tensor_model_parallel_attributes(tensor: torch.Tensor, is_parallel: bool, dim: int, stride: int) -> None:
    """TE's: marks a parameter as split over the tensor-parallel group (Megatron reads these)."""
    for attribute in ("tensor_model_parallel", "partition_dim", "partition_stride"):
        if hasattr(tensor, attribute):
            raise RuntimeError(f"Tensor already has attribute '{attribute}' set. Cannot set tensor model parallel "
                               "attributes on a tensor that already has them.")
    tensor.tensor_model_parallel, tensor.partition_dim, tensor.partition_stride = is_parallel, dim, stride


# ---- TE's distributed.py helpers -----------------------------------------------------------------------

def gather_along_first_dim(inp: torch.Tensor, process_group: Optional[torch.distributed.ProcessGroup], async_op: bool = False,
                           quantizer: Optional[Quantizer] = None) -> Tuple[torch.Tensor, None]:
    """TE's: the ranks' tensors concatenated along dim 0, and None for the handle (the call
    completes before it returns). With a quantizer, the gathered tensor quantized by it (TE
    quantizes each rank's tensor and gathers the bytes: the same when the ranks' scales agree,
    i.e. under amax reduction)."""
    from ..quantized_tensor import QuantizedTensor
    if isinstance(inp, QuantizedTensor):
        inp = inp.dequantize()
    out = all_gather_rows(inp, process_group)
    if quantizer is not None:
        out = quantizer(out)
    return out, None


def reduce_scatter_along_first_dim(inp: torch.Tensor, tp_group: Optional[torch.distributed.ProcessGroup], async_op: bool = False,
                                   output: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, None]:
    """TE's: this rank's rows of the ranks' tensors summed, and None for the handle."""
    out = reduce_scatter_rows(inp, tp_group)
    if output is not None and out is not inp:
        output.copy_(out)
        out = output
    return out, None


def allreduce(inp: torch.Tensor, tp_group: Optional[torch.distributed.ProcessGroup] = None,
              async_op: bool = False) -> Tuple[torch.Tensor, None]:
    """TE's: the ranks' tensors summed into `inp` (in place, as torch.distributed.all_reduce), and None."""
    if get_distributed_world_size(tp_group) == 1:
        return inp, None
    inp.copy_(all_reduce_sum(inp, tp_group))
    return inp, None


def split_tensor_into_1d_equal_chunks(tensor: torch.Tensor, tp_group: Optional[torch.distributed.ProcessGroup],
                                      new_buffer: bool = False) -> torch.Tensor:
    """TE's: this rank's equal part of the flattened tensor."""
    world = get_distributed_world_size(tp_group)
    if tensor.numel() % world != 0:
        raise ValueError(f"split_tensor_into_1d_equal_chunks: {tensor.numel()} elements do not split into {world} equal parts")
    size = tensor.numel() // world
    start = size * get_distributed_rank(tp_group)  # TE's: raises when torch.distributed is not initialized
    data = tensor.reshape(-1)[start:start + size]
    return data.clone() if new_buffer else data


def gather_split_1d_tensor(tensor: torch.Tensor, tp_group: Optional[torch.distributed.ProcessGroup]) -> torch.Tensor:

    """TE's: the inverse of split_tensor_into_1d_equal_chunks (the ranks' parts, concatenated)."""
    return all_gather_rows(tensor.reshape(-1), tp_group)
