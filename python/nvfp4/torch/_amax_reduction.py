"""Delayed scaling's amax reduction across ranks, as TransformerEngine performs it
(transformer_engine/pytorch/quantization.py, FP8GlobalStateManager.reduce_and_update_fp8_tensors):
when a forward region ends (the outermost te.autocast exits with grad enabled) and when a backward
pass ends (the backward of the region's first module), the amaxes each layer recorded for the
step in progress (entry 0 of every amax history) are concatenated, reduced with one MAX
all-reduce over the layers' amax reduction group, written back, and only then are the scales
updated from the histories. TE reduces when the recipe's ``reduce_amax`` is true,
torch.distributed is initialized and the group (None: the default group) has more than one rank.

A layer's group is the ``amax_reduction_group`` (TE 1.x: ``fp8_group``) of the innermost region
its latest forward ran in; the recompute of te.checkpoint, whose region TE opens without a group,
leaves it unchanged. ``reduce_amax`` is that of the layer's first DelayedScaling (the update
settings a layer keeps, as TE keeps its first registration in its amax buffer).

What is added to TE's collective, so that a mistake fails on every rank instead of silently
mixing unrelated numbers: before the MAX all-reduce, the ranks exchange the layout of what they
reduce (how many layers, their shapes and history lengths); ranks that ran different layers
raise a RuntimeError naming each rank's layout. The MAX follows NCCL's float max (fmaxf: a NaN
amax loses to a number and stays NaN only when every rank has NaN), whatever the backend (gloo's
max keeps or drops a NaN depending on its position).

An exception that ends a region skips the collective (a rank that fails must not wait on peers
that will not reach it): its layers update from their own amaxes, as in one process.
"""
from __future__ import annotations

import threading
import weakref
import zlib
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Tuple

import numpy as np
import torch

from ..common.recipe import DelayedScaling

if TYPE_CHECKING:  # for the annotations only: the module imports nothing more at run time
    from .module._linear_unit import LinearUnit

__all__ = ["note_forward", "end_forward", "end_backward", "reduction_group"]

_FORWARD_ROLES = ("input", "weight")
_BACKWARD_ROLES = ("grad_output",)

# The amax reduction group of each layer (a LinearUnit), set by its latest forward in a region.
_groups = weakref.WeakKeyDictionary()
_groups_lock = threading.Lock()
_NO_GROUP = object()  # a layer that never ran in a region since it was made: TE's None, the default group


def note_forward(unit: LinearUnit, group: Optional[torch.distributed.ProcessGroup]) -> None:
    """Records the amax reduction group of the region `unit` runs in now (TE: fp8_meta["fp8_group"])."""
    with _groups_lock:
        _groups[unit] = group


def _group_of(unit):
    with _groups_lock:
        return _groups.get(unit, _NO_GROUP)


def reduction_group(group: Optional[torch.distributed.ProcessGroup]
                    ) -> Tuple[bool, Optional[torch.distributed.ProcessGroup]]:
    """(True, group) when TE reduces over `group` (None: the default group), else (False, None)."""
    import torch.distributed as dist
    if group is _NO_GROUP:
        group = None
    if not (dist.is_available() and dist.is_initialized()):
        return False, None
    if dist.get_world_size(group) <= 1:  # also -1: this rank is not a member
        return False, None
    return True, group


def _reduced_units(units):
    """{group key: (group, [units])} of the delayed-scaling layers whose amaxes TE reduces, in the
    order the groups first appear."""
    partitions = {}
    for unit in units:
        if not isinstance(unit.recipe, DelayedScaling):
            continue
        settings = unit._delayed if unit._delayed is not None else unit.recipe
        if not settings.reduce_amax:
            continue
        reduce, group = reduction_group(_group_of(unit))
        if not reduce:
            continue
        key = id(group) if group is not None else None
        partitions.setdefault(key, (group, []))[1].append(unit)
    return list(partitions.values())


def collective_error(what: str, error: BaseException) -> RuntimeError:
    """A collective that failed: the peer is gone, stuck or ran something else."""
    return RuntimeError(f"nvfp4.torch: {what} failed: a rank of the group did not take part in it (it raised, exited, "
                        f"or ran another collective first); torch.distributed said: {error}")


def check_same_everywhere(group: Optional[torch.distributed.ProcessGroup], signature: Tuple[int, ...], what: str,
                          describe: Callable[[Tuple[int, ...]], str]) -> None:
    """All-gathers `signature` (a tuple of ints) over `group` and raises, on every rank alike, when
    the ranks' signatures differ; describe(signature) says what one rank's means."""
    import torch.distributed as dist
    mine = torch.tensor(signature, dtype=torch.int64)
    everyone = [torch.empty_like(mine) for _ in range(dist.get_world_size(group))]
    try:
        dist.all_gather(everyone, mine, group=group)
    except RuntimeError as e:
        raise collective_error(what, e) from e
    if any(not torch.equal(t, everyone[0]) for t in everyone):
        ranks = "; ".join(f"rank {r}: {describe(tuple(int(v) for v in t))}" for r, t in enumerate(everyone))
        raise RuntimeError(f"nvfp4.torch: {what}: the ranks disagree ({ranks})")


def _layout(units, roles):
    text = repr([(u.in_features, u.out_features, len(u.core.scaling_state_dict()[f"{roles[0]}.amax_history"]))
                 for u in units])
    return len(units), zlib.crc32(text.encode()) & 0x7FFFFFFF


def _all_reduce_max(values, group, what):
    """MAX over the group with NCCL's fmaxf rule for NaN (amaxes are >= 0, so -1 stands for NaN)."""
    import torch.distributed as dist
    buffer = torch.from_numpy(np.array(values, dtype=np.float32))
    buffer[torch.isnan(buffer)] = -1.0
    try:
        dist.all_reduce(buffer, op=dist.ReduceOp.MAX, group=group)
    except RuntimeError as e:
        raise collective_error(what, e) from e
    out = buffer.numpy()
    out[out < 0] = np.nan
    return out


def _reduce(units, roles, direction):
    """The MAX all-reduce of the step's amaxes of `roles`, one per group, written back."""
    for group, members in _reduced_units(units):
        what = f"the {direction} amax reduction of delayed scaling"
        count, digest = _layout(members, roles)
        check_same_everywhere(group, (count, digest), what,
                              lambda s: f"{s[0]} delayed-scaling GEMM layers (layout digest {s[1]})")
        values = []
        for unit in members:
            with unit._lock:
                state = unit.core.scaling_state_dict()
            values += [state[f"{role}.amax_history"][0] for role in roles]
        reduced = _all_reduce_max(values, group, what)
        for i, unit in enumerate(members):
            with unit._lock:
                state = unit.core.scaling_state_dict()
                for j, role in enumerate(roles):
                    history = state[f"{role}.amax_history"]
                    # fmax: an amax a thread of this process recorded since the read above is kept
                    history[0] = np.fmax(reduced[i * len(roles) + j], history[0])
                unit.core.load_scaling_state_dict(state)


def end_forward(units: Sequence[LinearUnit], grad_enabled: bool, failed: bool = False) -> None:
    """The outermost region's exit for its layers: reduce (grad enabled, no exception), then update."""
    if grad_enabled and not failed:
        _reduce(units, _FORWARD_ROLES, "forward")
    for unit in units:
        unit.end_forward_region(grad_enabled)


def end_backward(units: Sequence[LinearUnit]) -> None:
    """The end of the backward of a region's first module: reduce the grad_output amaxes, then update."""
    _reduce(units, _BACKWARD_ROLES, "backward")
    for unit in units:
        unit.end_backward_region()
