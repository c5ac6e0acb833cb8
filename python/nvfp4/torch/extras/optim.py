"""Optimizers whose state can be kept in low precision: ``AdamW`` and ``Muon`` (torch.optim.Optimizer
subclasses) with ``state_dtype`` "float32", "bfloat16", "float8_e4m3" or "float8_e5m2". The update
math is float32 whatever the storage; the parameter is written back in its own dtype (bf16: RNE).

FP8 storage ("scaled FP8"): each moment is flattened and cut into blocks of 128 consecutive
elements; each block is quantized by the library's FP8 block quantizer (nvfp4.quantize_fp8_blockwise,
1x128, fp32 scale = fp8_max / block amax, round-to-nearest-even, saturating) and kept as one byte
per element (uint8 codes) plus one float32 decode scale per block (1.03 bytes per element).
AdamW's second moment v is stored as sqrt(v): its exponent range is halved, so small entries of a
block survive (v itself would span twice the range and flush to zero, turning m / sqrt(v) into
m / eps). Decoding is the library's dequantize (code value times the block's decode scale).

The contracts (docs/errors.md, "The Python layer's guarantees"):
- Resume: ``load_state_dict`` restores every state tensor as it was saved (same dtype, same bits).
  torch's own Optimizer.load_state_dict casts floating state to the parameter's dtype by value
  (torch 1.13 casts every state tensor but "step", integer ones included), which would turn FP8
  codes and bf16 moments into other numbers; so the state is restored here, and only the groups
  go through torch's checks.
- step() is atomic: every group's settings, every parameter and gradient, and (FP8 state) the
  finiteness of the new moments are checked, and every new value computed, before the first
  parameter or state entry changes; a refused step raises and changes nothing.
- Each parameter's state records the storage it was written in (``state_dtype``), so a group's
  ``state_dtype`` may change between steps: the next step reads the old storage and writes the new.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Dict, Iterable, Optional, Tuple, Union

import torch

import nvfp4 as _lib

from .._tensors import check_cpu

__all__ = ["AdamW", "Muon", "STATE_DTYPES"]

STATE_DTYPES = ("float32", "bfloat16", "float8_e4m3", "float8_e5m2")
_FP8 = {"float8_e4m3": "e4m3", "float8_e5m2": "e5m2"}
_BLOCK = 128
_TORCH_DTYPE = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _check_state_dtype(state_dtype, who="state_dtype"):
    if not isinstance(state_dtype, str) or state_dtype not in STATE_DTYPES:
        raise ValueError(f"{who} must be one of {STATE_DTYPES}, got {state_dtype!r}")


# ---- storage: one float32 tensor <-> its entries in a state dict ----------------------------------

def _encode(value, name, state_dtype):
    """{key: tensor} keeping float32 `value` under `name` in state_dtype's storage (new tensors)."""
    if state_dtype in _TORCH_DTYPE:
        return {name: value.to(_TORCH_DTYPE[state_dtype], copy=True)}
    n = value.numel()
    if n == 0:
        return {name: torch.empty(0, dtype=torch.uint8), name + "_scale_inv": torch.empty(0, dtype=torch.float32)}
    flat = value.detach().reshape(1, n).contiguous()
    q = _lib.quantize_fp8_blockwise(flat.numpy(), _FP8[state_dtype], "1x128", power_2_scale=False)
    return {name: torch.from_numpy(q.codes.copy()).reshape(-1),
            name + "_scale_inv": torch.from_numpy(q.scale_inv.copy()).reshape(-1)}


def _load(state, name, shape, state_dtype):
    """The float32 value kept under `name` in state_dtype's storage (zeros when absent)."""
    if name not in state:
        return torch.zeros(shape, dtype=torch.float32)
    if state_dtype in _TORCH_DTYPE:
        return state[name].to(torch.float32, copy=True).reshape(shape)
    codes = state[name]
    if codes.numel() == 0:
        return torch.zeros(shape, dtype=torch.float32)
    scale_inv = state[name + "_scale_inv"].reshape(1, -1).numpy()
    t = _lib.Fp8Tensor.from_bytes(_FP8[state_dtype], codes.reshape(1, -1).numpy(), scale_inv, block="1x128")
    return torch.from_numpy(_lib.dequantize(t)).reshape(shape)


def _stored_dtype(state, group):
    """The storage a parameter's state was written in (older states without the key: the group's)."""
    return state.get("state_dtype", group["state_dtype"])


# ---- checks made before a step changes anything ----------------------------------------------------

def _real(group, key, who, low=0.0, high=math.inf, high_open=False):
    value = group.get(key)
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, torch.Tensor)) or \
            (torch.is_tensor(value) and value.numel() != 1):
        raise TypeError(f"{who}: the group's {key} must be a real number, got {value!r}")
    v = float(value)
    if not (low <= v and (v < high if high_open else v <= high)):
        bound = f"[{low}, {high})" if high_open else f"[{low}, {high}]"
        raise ValueError(f"{who}: the group's {key} must be in {bound}, got {value!r}")
    return v


def _check_param(p, who):
    check_cpu(p, f"{who}: a parameter")
    if p.dtype not in (torch.float32, torch.bfloat16):
        raise TypeError(f"{who}: parameters must be float32 or bfloat16, got {p.dtype} "
                        f"(convert the module with .float() or .bfloat16())")
    g = p.grad
    if g.is_sparse:
        raise RuntimeError(f"{who} does not support sparse gradients")  # torch.optim.AdamW's error type
    check_cpu(g, f"{who}: a gradient")
    if g.shape != p.shape or g.dtype not in (torch.float32, torch.bfloat16):
        raise TypeError(f"{who}: a gradient must be a float32 or bfloat16 tensor of its parameter's shape "
                        f"{tuple(p.shape)}, got {g.dtype} {tuple(g.shape)}")


def _with_grads(groups, who, check_group):
    """[(group, settings, [params with a gradient])], every group and parameter checked first."""
    plan = []
    for group in groups:
        settings = check_group(group)
        params = [p for p in group["params"] if p.grad is not None]
        for p in params:
            _check_param(p, who)
        plan.append((group, settings, params))
    return plan


def _finite_or_refuse(value, what, who, state_dtype):
    if not bool(torch.isfinite(value).all()):
        raise ValueError(f"{who}: {what} is not finite (a NaN / Inf gradient, or one so large that its square overflows "
                         f"float32), and {state_dtype} state cannot hold it; the step was refused and nothing changed "
                         f"(skip the step, lower the loss scale or clip the gradients)")


class _LowPrecisionStateOptimizer(torch.optim.Optimizer):
    """What AdamW and Muon share: the two-phase step (plan, then commit) and the state restore."""

    _NAME = "optimizer"

    def _commit(self, updates):
        """Writes the planned parameters and states (nothing here can fail on checked input)."""
        for p, w, state in updates:
            p.copy_(w)
            self.state[p] = state

    def load_state_dict(self, state_dict: Dict[str, Any]) -> None:
        """Restores a state_dict() as it was saved: every state tensor keeps its dtype and bits (a
        copy), the groups' settings are the saved ones. The state is checked against the parameters
        before anything changes; a state_dict that does not fit raises ValueError."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError(f"{self._NAME}.load_state_dict: expected what state_dict() returns ({{'state': ..., 'param_groups': ...}})")
        groups, saved_groups = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match the size of optimizer's group")
        owner = {}
        for group, saved in zip(groups, saved_groups):
            for key, p in zip(saved["params"], group["params"]):
                owner[key] = (p, saved)
        restored = {}
        for key, value in state_dict["state"].items():
            if key not in owner:
                continue
            p, saved_group = owner[key]
            restored[p] = self._restored(p, value, saved_group)
        super().load_state_dict(dict(state_dict, state={}))  # the groups, through torch's checks and hooks
        for p, value in restored.items():
            self.state[p] = value

    def _restored(self, p, value, group):
        """A copy of one parameter's saved state, checked against the parameter."""
        if not isinstance(value, dict):
            raise ValueError(f"{self._NAME}.load_state_dict: a parameter's state must be a dict, got {type(value).__name__}")
        out = {k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in value.items()}
        sd = out.get("state_dtype", group.get("state_dtype"))
        _check_state_dtype(sd, f"{self._NAME}.load_state_dict: a parameter's state_dtype")
        out["state_dtype"] = sd
        expected = self._moments(sd)
        present = [name for name in self._ALL_MOMENTS if name in out]
        if present and sorted(present) != sorted(expected):
            raise ValueError(f"{self._NAME}.load_state_dict: a parameter's state stored as {sd} must hold {list(expected)}, "
                             f"got {present}")
        for name in present:
            self._check_stored(out, name, p, sd)
        if "step" in out:
            out["step"] = int(out["step"])
        return out

    def _check_stored(self, state, name, p, sd):
        n = p.numel()
        where = f"{self._NAME}.load_state_dict: state '{name}' of a parameter of shape {tuple(p.shape)}"
        t = state[name]
        if not torch.is_tensor(t):
            raise ValueError(f"{where} must be a tensor, got {type(t).__name__}")
        if sd in _TORCH_DTYPE:
            if t.dtype == {"float32": torch.int32, "bfloat16": torch.int16}[sd]:
                t = state[name] = t.view(_TORCH_DTYPE[sd])  # nvfp4 <= 0.x stored the values by their bits
            expected = [(_TORCH_DTYPE[sd], n)]
            got = [(t.dtype, t.numel())]
        else:
            scale = state.get(name + "_scale_inv")
            if not torch.is_tensor(scale):
                raise ValueError(f"{where}: its '{name}_scale_inv' is missing")
            if scale.dtype == torch.int32:
                scale = state[name + "_scale_inv"] = scale.view(torch.float32)  # stored by its bits before
            expected = [(torch.uint8, n), (torch.float32, -(-n // _BLOCK))]
            got = [(t.dtype, t.numel()), (scale.dtype, scale.numel())]
        if got != expected:
            raise ValueError(f"{where} does not fit: stored as {sd}, expected (dtype, elements) {expected}, got {got}")


class AdamW(_LowPrecisionStateOptimizer):
    """AdamW (decoupled weight decay, bias-corrected moments), as torch.optim.AdamW computes it
    in float32, with the moments kept in ``state_dtype``. A NaN / Inf moment propagates as in
    torch.optim.AdamW with float32 or bfloat16 state; FP8 state cannot hold one, so such a step is
    refused (ValueError) with nothing changed."""

    _NAME = "AdamW"
    _ALL_MOMENTS = ("exp_avg", "exp_avg_sq", "exp_avg_sq_sqrt")

    @staticmethod
    def _moments(state_dtype):
        return ("exp_avg", "exp_avg_sq_sqrt") if state_dtype in _FP8 else ("exp_avg", "exp_avg_sq")

    def __init__(self, params: Iterable[Union[torch.Tensor, Dict[str, Any]]], lr: Union[float, torch.Tensor] = 1e-3,
                 betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2, *,
                 state_dtype: str = "float32") -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, state_dtype=state_dtype)
        self._check_group(defaults)
        defaults["betas"] = tuple(betas)
        super().__init__(params, defaults)

    @staticmethod
    def _check_group(group):
        lr = _real(group, "lr", "AdamW")
        eps = _real(group, "eps", "AdamW")
        wd = _real(group, "weight_decay", "AdamW")
        betas = group.get("betas")
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"AdamW: betas must be a pair of numbers, got {betas!r}")
        pair = {"betas[0]": betas[0], "betas[1]": betas[1]}
        beta1 = _real(pair, "betas[0]", "AdamW", 0.0, 1.0, high_open=True)
        beta2 = _real(pair, "betas[1]", "AdamW", 0.0, 1.0, high_open=True)
        _check_state_dtype(group.get("state_dtype"), "AdamW: the group's state_dtype")
        return lr, beta1, beta2, eps, wd, group["state_dtype"]

    def _planned(self, p, settings, state):
        lr, beta1, beta2, eps, wd, sd = settings
        old = _stored_dtype(state, {"state_dtype": sd})
        step = int(state.get("step", 0)) + 1
        g = p.grad.to(torch.float32)
        m = _load(state, "exp_avg", p.shape, old)
        v = _load(state, "exp_avg_sq_sqrt", p.shape, old).square() if old in _FP8 else _load(state, "exp_avg_sq", p.shape, old)
        m.mul_(beta1).add_(g, alpha=1.0 - beta1)
        v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
        w = p.to(torch.float32, copy=True)
        w.mul_(1.0 - lr * wd)
        bias1, bias2 = 1.0 - beta1 ** step, 1.0 - beta2 ** step
        denom = (v.sqrt() / math.sqrt(bias2)).add_(eps)
        w.addcdiv_(m, denom, value=-lr / bias1)
        if sd in _FP8:
            _finite_or_refuse(m, "the first moment", "AdamW", sd)
            _finite_or_refuse(v, "the second moment", "AdamW", sd)
        new = {"step": step, "state_dtype": sd}
        new.update(_encode(m, "exp_avg", sd))
        new.update(_encode(v.sqrt(), "exp_avg_sq_sqrt", sd) if sd in _FP8 else _encode(v, "exp_avg_sq", sd))
        return w.to(p.dtype), new

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], float]] = None) -> Optional[float]:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        plan = _with_grads(self.param_groups, "AdamW", self._check_group)
        updates = [(p, *self._planned(p, settings, self.state.get(p, {}))) for _, settings, params in plan for p in params]
        self._commit(updates)
        return loss


def _newton_schulz(g, steps):
    """The orthogonalised direction of a 2-D g: Muon's quintic Newton-Schulz iteration (coefficients
    3.4445, -4.7750, 2.0315, from Keller Jordan's Muon), in float32."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g / (g.norm() + 1e-7)
    transposed = x.shape[0] > x.shape[1]
    if transposed:
        x = x.T
    for _ in range(steps):
        s = x @ x.T
        x = a * x + (b * s + c * (s @ s)) @ x
    return x.T if transposed else x


class Muon(_LowPrecisionStateOptimizer):
    """Muon (momentum, then the update orthogonalised by Newton-Schulz, scaled by
    sqrt(max(1, rows / cols))) for parameters of 2 or more dimensions (flattened to
    [shape[0], -1]); the momentum buffer kept in ``state_dtype``. Give biases and norms to AdamW.
    A parameter with no elements has nothing to update and is left alone."""

    _NAME = "Muon"
    _ALL_MOMENTS = ("momentum_buffer",)

    @staticmethod
    def _moments(state_dtype):
        return ("momentum_buffer",)

    def __init__(self, params: Iterable[Union[torch.Tensor, Dict[str, Any]]], lr: Union[float, torch.Tensor] = 0.02,
                 momentum: float = 0.95, nesterov: bool = True, ns_steps: int = 5, weight_decay: float = 0.0, *,
                 state_dtype: str = "float32") -> None:
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps, weight_decay=weight_decay,
                        state_dtype=state_dtype)
        self._check_group(defaults)
        defaults["ns_steps"] = int(ns_steps)
        super().__init__(params, defaults)

    @staticmethod
    def _check_group(group):
        lr = _real(group, "lr", "Muon")
        mu = _real(group, "momentum", "Muon", 0.0, 1.0, high_open=True)
        wd = _real(group, "weight_decay", "Muon")
        ns = group.get("ns_steps")
        if isinstance(ns, bool) or not isinstance(ns, numbers.Integral) or ns < 1:
            raise ValueError(f"Muon: the group's ns_steps must be an integer >= 1, got {ns!r}")
        if not isinstance(group.get("nesterov"), bool):
            raise TypeError(f"Muon: the group's nesterov must be True or False, got {group.get('nesterov')!r}")
        _check_state_dtype(group.get("state_dtype"), "Muon: the group's state_dtype")
        return lr, mu, wd, int(ns), group["nesterov"], group["state_dtype"]

    def _planned(self, p, settings, state):
        lr, mu, wd, ns_steps, nesterov, sd = settings
        old = _stored_dtype(state, {"state_dtype": sd})
        g = p.grad.to(torch.float32).reshape(p.shape[0], -1)
        buf = _load(state, "momentum_buffer", g.shape, old)
        buf.mul_(mu).add_(g)
        direction = g.add(buf, alpha=mu) if nesterov else buf
        update = _newton_schulz(direction, ns_steps) * math.sqrt(max(1.0, g.shape[0] / g.shape[1]))
        w = p.to(torch.float32, copy=True)
        w.mul_(1.0 - lr * wd).add_(update.reshape(p.shape), alpha=-lr)
        if sd in _FP8:
            _finite_or_refuse(buf, "the momentum", "Muon", sd)
        new = {"state_dtype": sd}
        new.update(_encode(buf, "momentum_buffer", sd))
        return w.to(p.dtype), new

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], float]] = None) -> Optional[float]:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        plan = _with_grads(self.param_groups, "Muon", self._check_group)
        for _, _, params in plan:
            for p in params:
                if p.dim() < 2:
                    raise ValueError(f"Muon updates matrices only; a parameter of shape {tuple(p.shape)} belongs in AdamW")
        updates = [(p, *self._planned(p, settings, self.state.get(p, {})))
                   for _, settings, params in plan for p in params if p.numel() > 0]
        self._commit(updates)
        return loss
