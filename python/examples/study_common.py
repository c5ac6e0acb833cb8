"""Shared pieces of the recipe studies (gpt_recipes.py, mae_recipes.py): the recipe catalog, a
transformer block written as a researcher writes one in plain PyTorch (every Linear a te.Linear),
the command line, measurements and the report files (CSV, JSON, PNG)."""

import argparse
import contextlib
import csv
import json
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import nvfp4.torch as te
from nvfp4.common import recipe as te_recipe
from nvfp4.torch import extras

# One colour per recipe in every chart of every report (matplotlib's tab10 order); a run that
# varies a recipe (cooldown, optimizer states) keeps its recipe's colour and gets its own dashes
# and markers, so no line hides another.
RECIPE_COLOURS = {
    "bf16": "#1f77b4",
    "fp8_delayed": "#ff7f0e",
    "fp8_current": "#2ca02c",
    "fp8_block": "#d62728",
    "mxfp8": "#9467bd",
    "nvfp4": "#8c564b",
}
LINE_STYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def make_recipe(name):
    """The TE recipe object of a recipe name (None: no quantization, BF16)."""
    if name == "bf16":
        return None
    if name == "fp8_delayed":
        return te_recipe.DelayedScaling()
    if name == "fp8_current":
        return te_recipe.Float8CurrentScaling()
    if name == "fp8_block":
        return te_recipe.Float8BlockScaling()
    if name == "mxfp8":
        return te_recipe.MXFP8BlockScaling()
    if name == "nvfp4":
        return te_recipe.NVFP4BlockScaling()
    raise ValueError(f"unknown recipe {name!r}; known: {', '.join(RECIPE_COLOURS)}")


@contextlib.contextmanager
def precision(recipe):
    """The regions of one forward: BF16 activations over FP32 master weights (torch autocast, which
    TE's layers follow as on the GPU) and, for a quantized recipe, TE's autocast with it."""
    with torch.autocast("cpu", dtype=torch.bfloat16), te.autocast(enabled=recipe is not None, recipe=recipe):
        yield


class Run:
    """One training run of a study: a recipe, and what varies around it."""

    def __init__(self, name, recipe, optimizer="adamw", state_dtype="float32", cooldown=0.0):
        self.name, self.recipe, self.optimizer, self.state_dtype, self.cooldown = name, recipe, optimizer, state_dtype, cooldown

    def quantized_at(self, step, steps):
        """True while the recipe is on: a cooldown runs its last fraction of the steps in BF16."""
        return self.recipe != "bf16" and step < steps - int(round(self.cooldown * steps))


def parse_runs(text, catalog):
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in catalog]
    if unknown:
        raise SystemExit(f"unknown run(s) {', '.join(unknown)}; known: {', '.join(catalog)}")
    if not names:
        raise SystemExit("--recipes needs at least one name")
    return [catalog[n] for n in names]


def base_arguments(description, default_out="reports"):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--out", default=default_out, help="report directory (default: %(default)s)")
    p.add_argument("--steps", type=int, default=None, help="training steps per run")
    p.add_argument("--recipes", default=None, help="comma-separated run names (default: all)")
    p.add_argument("--seed", type=int, default=1, help="initialisation, data order and SR seed")
    p.add_argument("--threads", type=int, default=1, help="threads per run (tiny models gain nothing from more)")
    p.add_argument("--jobs", type=int, default=2, help="runs trained at the same time, each in its own process")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate")
    p.add_argument("--gemm", choices=("relaxed", "exact"), default="relaxed",
                   help="te.Linear GEMM mode: relaxed (default; fp32 accumulation, fastest) or exact (the GPU "
                        "tensor cores' accumulation bit for bit); quantization is exact either way")
    return p


def set_threads(threads):
    """torch's threads and, through the OpenMP runtime they share, the library's."""
    n = threads if threads > 0 else (os.cpu_count() or 1)
    torch.set_num_threads(n)
    os.environ["OMP_NUM_THREADS"] = str(n)
    return n


def _in_worker(train, threads, *args):
    set_threads(threads)
    return train(*args)


def run_all(train, runs, args, *data):
    """train(run, args, *data) for every run, `args.jobs` processes at a time (spawned, so each
    has its own OpenMP runtime); results in the order of `runs`, the same whatever the job count."""
    jobs = max(1, min(args.jobs, len(runs)))
    if jobs == 1:
        return [train(run, args, *data) for run in runs]
    import concurrent.futures
    import multiprocessing
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_in_worker, train, args.threads, run, args, *data) for run in runs]
        return [f.result() for f in futures]


def lr_at(step, steps, peak, warmup):
    """Linear warmup, then cosine decay to a tenth of the peak."""
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def make_optimizers(model, run, lr):
    """AdamW on every parameter, or Muon on the hidden matrices (2-D te.Linear weights) with AdamW for
    the rest, as nanochat splits them; moments stored in run.state_dtype."""
    if run.optimizer == "adamw":
        return [extras.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, state_dtype=run.state_dtype)]
    hidden = [p for n, p in model.named_parameters() if p.dim() == 2 and "blocks" in n]
    ids = {id(p) for p in hidden}
    rest = [p for p in model.parameters() if id(p) not in ids]
    return [extras.optim.Muon(hidden, lr=lr * 10, momentum=0.95, state_dtype=run.state_dtype),
            extras.optim.AdamW(rest, lr=lr, betas=(0.9, 0.95), weight_decay=0.1, state_dtype=run.state_dtype)]


def state_bytes(optimizers):
    """Bytes the optimizers keep per parameter (moments, their scales)."""
    total = 0
    for opt in optimizers:
        for state in opt.state.values():
            for v in state.values():
                if torch.is_tensor(v):
                    total += v.numel() * v.element_size()
    return total


def weight_bytes(model):
    return sum(p.numel() * p.element_size() for p in model.parameters())


def set_lr(optimizers, scale):
    for opt in optimizers:
        for g in opt.param_groups:
            g.setdefault("peak_lr", g["lr"])
            g["lr"] = g["peak_lr"] * scale


class AmaxWatch:
    """Per te.Linear: the largest |input|, |weight| and |grad of output| seen during a run, and the
    count of non-finite values among them (the NaN watch)."""

    def __init__(self, model):
        self.stats, self.handles = {}, []
        for name, module in model.named_modules():
            if isinstance(module, te.Linear):
                self.stats[name] = {"input": 0.0, "weight": 0.0, "grad_output": 0.0, "nonfinite": 0}
                self.handles.append(module.register_forward_hook(self._forward(name)))
                self.handles.append(module.register_full_backward_hook(self._backward(name)))

    def _record(self, name, key, t):
        s = self.stats[name]
        amax = float(t.detach().abs().max()) if t.numel() else 0.0
        if math.isfinite(amax):  # the common case: one reduction, no mask
            s[key] = max(s[key], amax)
            return
        t = t.detach().float()
        finite = torch.isfinite(t)
        s["nonfinite"] += int((~finite).sum())
        if finite.any():
            s[key] = max(s[key], float(t[finite].abs().max()))

    def _forward(self, name):
        def hook(module, inputs, output):
            self._record(name, "input", inputs[0])
            self._record(name, "weight", module.weight)
        return hook

    def _backward(self, name):
        def hook(module, grad_input, grad_output):
            if grad_output[0] is not None:
                self._record(name, "grad_output", grad_output[0])
        return hook

    def close(self):
        for h in self.handles:
            h.remove()


class Rotary(nn.Module):
    """Rotary position embedding (RoPE) of the query and key heads."""

    def __init__(self, head_dim, max_len, base=10000.0):
        super().__init__()
        inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):  # x [B, H, T, D]
        t = x.shape[-2]
        x1, x2 = x[..., 0::2], x[..., 1::2]
        cos, sin = self.cos[:t].to(x.dtype), self.sin[:t].to(x.dtype)
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    """A pre-norm transformer block; its four matrices are te.Linear layers (the recipe's GEMMs),
    its norms TE's norms (high precision), attention and softmax in the activation dtype."""

    def __init__(self, width, heads, *, norm="rmsnorm", activation="relu2", causal=True, rotary=None, params_dtype=torch.float32,
                 mode="exact"):
        super().__init__()
        norm_type = te.RMSNorm if norm == "rmsnorm" else te.LayerNorm
        self.heads, self.causal, self.rotary, self.activation = heads, causal, rotary, activation
        self.norm1 = norm_type(width, params_dtype=params_dtype)
        self.qkv = te.Linear(width, 3 * width, bias=False, params_dtype=params_dtype, mode=mode)
        self.proj = te.Linear(width, width, bias=False, params_dtype=params_dtype, mode=mode)
        self.norm2 = norm_type(width, params_dtype=params_dtype)
        self.fc = te.Linear(width, 4 * width, bias=False, params_dtype=params_dtype, mode=mode)
        self.fc_out = te.Linear(4 * width, width, bias=False, params_dtype=params_dtype, mode=mode)

    def attention(self, x):
        b, t, w = x.shape
        q, k, v = self.qkv(x.reshape(b * t, w)).reshape(b, t, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if self.causal:
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        out = (scores.float().softmax(-1).to(v.dtype) @ v).transpose(1, 2).reshape(b * t, w)
        return self.proj(out).reshape(b, t, w)

    def mlp(self, x):
        b, t, w = x.shape
        h = self.fc(x.reshape(b * t, w))
        h = F.relu(h).square() if self.activation == "relu2" else F.gelu(h)
        return self.fc_out(h).reshape(b, t, w)

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def count_nonfinite(model):
    n = 0
    for p in model.parameters():
        n += int((~torch.isfinite(p.detach().float())).sum())
        if p.grad is not None:
            n += int((~torch.isfinite(p.grad.detach().float())).sum())
    return n


class Timer:
    def __init__(self):
        self.seconds = 0.0

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds += time.perf_counter() - self.start


def write_reports(out, stem, runs, curve_keys, meta):
    """{stem}.csv (one row per run and logged step; a value not measured at that step is empty),
    {stem}.json (meta and the runs), {stem}.png (one chart per curve key)."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{stem}.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "recipe", "step"] + list(curve_keys))
        for r in runs:
            for point in r["curve"]:
                w.writerow([r["run"], r["recipe"], point["step"]] +
                           ["" if point.get(k) is None else f"{point[k]:.6g}" for k in curve_keys])
    with open(os.path.join(out, f"{stem}.json"), "w") as f:
        json.dump({"meta": meta, "runs": runs}, f, indent=1)
    plot_curves(os.path.join(out, f"{stem}.png"), runs, curve_keys, meta.get("title", stem))


def style_of(runs):
    """(colour, dashes, marker, marker offset) per run: colour by recipe, dashes by position among
    the runs of that recipe, a marker of its own placed at points of its own, so that a curve lying
    exactly on another (two recipes that round alike) still shows."""
    seen, styles = {}, {}
    for n, r in enumerate(runs):
        i = seen.get(r["recipe"], 0)
        seen[r["recipe"]] = i + 1
        styles[r["run"]] = (RECIPE_COLOURS[r["recipe"]], LINE_STYLES[i % len(LINE_STYLES)], MARKERS[n % len(MARKERS)], n)
    return styles


def smoothed(values, weight=0.9):
    """An exponential moving average (debiased), so that per-step noise does not hide the trend."""
    out, avg = [], 0.0
    for i, v in enumerate(values):
        avg = weight * avg + (1 - weight) * v
        out.append(avg / (1 - weight ** (i + 1)))
    return out


def plot_curves(path, runs, curve_keys, title):
    """One chart per curve key (the first, train loss, smoothed, its y range from the end of the
    steepest descent) and a bar chart of each run's last value of the last key minus the first
    run's (the baseline), labelled with the difference."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = style_of(runs)
    fig, axes = plt.subplots(1, len(curve_keys) + 1, figsize=(6.0 * (len(curve_keys) + 1), 4.8), squeeze=False)
    for index, (ax, key) in enumerate(zip(axes[0], curve_keys)):
        tail = []
        for r in runs:
            colour, dashes, marker, n = styles[r["run"]]
            points = [p for p in r["curve"] if p.get(key) is not None]
            xs = [p["step"] for p in points]
            ys = [p[key] for p in points]
            if index == 0:
                ys = smoothed(ys)
                tail += ys[len(ys) // 5:]
            every = max(1, len(runs))
            ax.plot(xs, ys, color=colour, linestyle=dashes, marker=marker, markersize=5,
                    markevery=(n % every, every) if len(xs) > 3 * every else None,
                    linewidth=1.4, alpha=0.85, label=r["run"])
        if tail:
            low, high = min(tail), max(tail)
            ax.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low))
        ax.set_xlabel("step")
        label = key.replace("_", " ") + (" (smoothed)" if index == 0 else "")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.set_title(f"{title}: {label}")
    axes[0][0].legend(fontsize=8)
    bars = axes[0][-1]
    key = curve_keys[-1]
    last = [[p[key] for p in r["curve"] if p.get(key) is not None][-1] for r in runs]
    deltas = [v - last[0] for v in last]
    colours = [styles[r["run"]][0] for r in runs]
    hatches = ["" if styles[r["run"]][1] == "-" else "//" for r in runs]
    ypos = list(range(len(runs)))[::-1]
    for y, d, c, h in zip(ypos, deltas, colours, hatches):
        bars.barh(y, d, color=c, hatch=h, edgecolor="black", linewidth=0.5)
        bars.annotate(f"{d:+.4f}", (d, y), xytext=(3 if d >= 0 else -3, 0), textcoords="offset points",
                      ha="left" if d >= 0 else "right", va="center", fontsize=8)
    bars.set_yticks(ypos)
    bars.set_yticklabels([r["run"] for r in runs], fontsize=8)
    bars.axvline(0, color="black", linewidth=0.8)
    span = max(1e-9, max(abs(d) for d in deltas))
    bars.set_xlim(-1.35 * span, 1.35 * span)
    bars.set_xlabel(f"last {key.replace('_', ' ')} minus {runs[0]['run']}'s ({last[0]:.4f})")
    bars.set_title(f"{title}: difference from {runs[0]['run']} (lower is better)")
    bars.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
