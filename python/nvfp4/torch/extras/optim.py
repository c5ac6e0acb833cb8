"""Optimizers whose state can be kept in low precision: ``AdamW`` and ``Muon`` (torch.optim.Optimizer
subclasses) with ``state_dtype`` "float32", "bfloat16", "float8_e4m3" or "float8_e5m2". The update
math is float32 whatever the storage; the parameter is written back in its own dtype (bf16: RNE).

FP8 storage ("scaled FP8"): each moment is flattened and cut into blocks of 128 consecutive
elements; each block is quantized by the library's FP8 block quantizer (nvfp4.quantize_fp8_blockwise,
1x128, fp32 scale = fp8_max / block amax, round-to-nearest-even, saturating) and kept as one byte
per element plus one float32 decode scale per block (1.03 bytes per element). AdamW's second
moment v is stored as sqrt(v): its exponent range is halved, so small entries of a block survive
(v itself would span twice the range and flush to zero, turning m / sqrt(v) into m / eps).
Decoding is the library's dequantize (code value times the block's decode scale).

State tensors are stored as integer tensors (float32 and bfloat16 values by their bits), so that
torch's Optimizer.load_state_dict, which casts floating state to the parameter's dtype, leaves
them as they were saved.
"""
import math

import torch

import nvfp4 as _lib

from .._tensors import check_cpu

__all__ = ["AdamW", "Muon", "STATE_DTYPES"]

STATE_DTYPES = ("float32", "bfloat16", "float8_e4m3", "float8_e5m2")
_FP8 = {"float8_e4m3": "e4m3", "float8_e5m2": "e5m2"}
_BLOCK = 128


def _check_state_dtype(state_dtype):
    if state_dtype not in STATE_DTYPES:
        raise ValueError(f"state_dtype must be one of {STATE_DTYPES}, got {state_dtype!r}")


def _store(state, name, value, state_dtype):
    """Keeps float32 `value` in state under `name` in state_dtype's storage."""
    if state_dtype == "float32":
        state[name] = value.contiguous().view(torch.int32).clone()
    elif state_dtype == "bfloat16":
        state[name] = value.to(torch.bfloat16).view(torch.int16)
    else:
        flat = value.detach().reshape(1, -1).contiguous()
        q = _lib.quantize_fp8_blockwise(flat.numpy(), _FP8[state_dtype], "1x128", power_2_scale=False)
        state[name] = torch.from_numpy(q.codes.copy()).reshape(-1)
        state[name + "_scale_inv"] = torch.from_numpy(q.scale_inv.copy()).reshape(-1).view(torch.int32)


def _load(state, name, shape, state_dtype):
    """The float32 value kept under `name` (zeros when absent)."""
    if name not in state:
        return torch.zeros(shape, dtype=torch.float32)
    if state_dtype == "float32":
        return state[name].view(torch.float32).reshape(shape).clone()
    if state_dtype == "bfloat16":
        return state[name].view(torch.bfloat16).to(torch.float32).reshape(shape)
    codes = state[name].reshape(1, -1).numpy()
    scale_inv = state[name + "_scale_inv"].view(torch.float32).reshape(1, -1).numpy()
    t = _lib.Fp8Tensor.from_bytes(_FP8[state_dtype], codes, scale_inv, block="1x128")
    return torch.from_numpy(_lib.dequantize(t)).reshape(shape)


def _params_of(group, name):
    for p in group["params"]:
        if p.grad is None:
            continue
        check_cpu(p, f"{name}: a parameter")
        if p.grad.is_sparse:
            raise ValueError(f"{name} does not support sparse gradients")
        if p.dtype not in (torch.float32, torch.bfloat16):
            raise TypeError(f"{name}: parameters must be float32 or bfloat16, got {p.dtype}")
        yield p


class AdamW(torch.optim.Optimizer):
    """AdamW (decoupled weight decay, bias-corrected moments), as torch.optim.AdamW computes it
    in float32, with the moments kept in ``state_dtype``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, *, state_dtype="float32"):
        _check_state_dtype(state_dtype)
        if not lr >= 0.0 or not eps >= 0.0 or not weight_decay >= 0.0:
            raise ValueError(f"AdamW: lr, eps and weight_decay must be non-negative, got {lr}, {eps}, {weight_decay}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"AdamW: betas must be in [0, 1), got {betas}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, state_dtype=state_dtype))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2), eps, wd, sd = group["lr"], group["betas"], group["eps"], group["weight_decay"], group["state_dtype"]
            _check_state_dtype(sd)
            for p in _params_of(group, "AdamW"):
                state = self.state[p]
                step = int(state.get("step", 0)) + 1
                g = p.grad.to(torch.float32)
                m = _load(state, "exp_avg", p.shape, sd)
                if sd in _FP8:
                    v = _load(state, "exp_avg_sq_sqrt", p.shape, sd).square()
                else:
                    v = _load(state, "exp_avg_sq", p.shape, sd)
                m.mul_(beta1).add_(g, alpha=1.0 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
                w = p.to(torch.float32)
                w.mul_(1.0 - lr * wd)
                bias1, bias2 = 1.0 - beta1 ** step, 1.0 - beta2 ** step
                denom = (v.sqrt() / math.sqrt(bias2)).add_(eps)
                w.addcdiv_(m, denom, value=-lr / bias1)
                p.copy_(w)
                _store(state, "exp_avg", m, sd)
                if sd in _FP8:
                    _store(state, "exp_avg_sq_sqrt", v.sqrt(), sd)
                else:
                    _store(state, "exp_avg_sq", v, sd)
                state["step"] = step
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


class Muon(torch.optim.Optimizer):
    """Muon (momentum, then the update orthogonalised by Newton-Schulz, scaled by
    sqrt(max(1, rows / cols))) for parameters of 2 or more dimensions (flattened to
    [shape[0], -1]); the momentum buffer kept in ``state_dtype``. Give biases and norms to AdamW."""

    def __init__(self, params, lr=0.02, momentum=0.95, nesterov=True, ns_steps=5, weight_decay=0.0, *, state_dtype="float32"):
        _check_state_dtype(state_dtype)
        if not lr >= 0.0 or not 0.0 <= momentum < 1.0 or ns_steps < 1 or not weight_decay >= 0.0:
            raise ValueError("Muon: lr >= 0, 0 <= momentum < 1, ns_steps >= 1 and weight_decay >= 0 are required")
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=int(ns_steps),
                                      weight_decay=weight_decay, state_dtype=state_dtype))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, mu, sd = group["lr"], group["momentum"], group["state_dtype"]
            _check_state_dtype(sd)
            for p in _params_of(group, "Muon"):
                if p.dim() < 2:
                    raise ValueError(f"Muon updates matrices only; a parameter of shape {tuple(p.shape)} belongs in AdamW")
                state = self.state[p]
                g = p.grad.to(torch.float32).reshape(p.shape[0], -1)
                buf = _load(state, "momentum_buffer", g.shape, sd)
                buf.mul_(mu).add_(g)
                direction = g.add(buf, alpha=mu) if group["nesterov"] else buf
                update = _newton_schulz(direction, group["ns_steps"]) * math.sqrt(max(1.0, g.shape[0] / g.shape[1]))
                w = p.to(torch.float32)
                w.mul_(1.0 - lr * group["weight_decay"]).add_(update.reshape(p.shape), alpha=-lr)
                p.copy_(w)
                _store(state, "momentum_buffer", buf, sd)
        return loss
