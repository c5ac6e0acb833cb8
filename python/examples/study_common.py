"""Shared pieces of the recipe studies (gpt_recipes.py, mae_recipes.py, hybrid_recipes.py,
lora_recipes.py): the recipes, the command line, running the runs (a process each, or
data-parallel ranks over torch.distributed), the data, and the training pieces a researcher writes
in plain PyTorch (every Linear a te.Linear). What the reports measure is study_measures.py; the
report files are study_report.py; docs/training.md describes both."""

import argparse
import contextlib
import datetime
import math
import os
import pickle
import socket
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F

import nvfp4.torch as te
from nvfp4.common import recipe as te_recipe
from nvfp4.torch import extras

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SHAKESPEARE = "data/shakespeare.txt"


def resolve_path(path):
    """A path as given, or relative to the repository when it is not there (the defaults are
    repository paths, so the studies run from any directory)."""
    if os.path.exists(path) or os.path.isabs(path):
        return path
    return os.path.join(REPO, path)

RECIPES = ["bf16", "fp8_delayed", "fp8_current", "fp8_block", "mxfp8", "nvfp4"]


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
    raise ValueError(f"unknown recipe {name!r}; known: {', '.join(RECIPES)}")


def amax_group():
    """The group TE reduces amaxes over (fp8_group / amax_reduction_group): every rank of a
    data-parallel run, None in one process. Passed as TE's scripts pass it, so the studies use the
    reduction wherever nvfp4.torch performs it."""
    return torch.distributed.group.WORLD if world_size() > 1 else None


@contextlib.contextmanager
def precision(recipe):
    """The regions of one forward: BF16 activations over FP32 master weights (torch autocast, which
    TE's layers follow as on the GPU) and, for a quantized recipe, TE's autocast with it."""
    with torch.autocast("cpu", dtype=torch.bfloat16), \
            te.autocast(enabled=recipe is not None, recipe=recipe, amax_reduction_group=amax_group()):
        yield


class Run:
    """One training run of a study: a recipe, and what varies around it. `options` holds what a
    study varies beyond the recipe (architecture switches, LoRA settings); `about` is the line
    --help prints for it."""

    def __init__(self, name, recipe, optimizer="adamw", state_dtype="float32", cooldown=0.0, fallback=None, about="",
                 **options):
        self.name, self.recipe, self.optimizer, self.state_dtype = name, recipe, optimizer, state_dtype
        self.cooldown, self.fallback, self.about, self.options = cooldown, fallback, about, options

    def quantized_at(self, step, steps):
        """True while the recipe is on: a cooldown runs its last fraction of the steps in BF16."""
        return self.recipe != "bf16" and step < steps - int(round(self.cooldown * steps))


def parse_runs(text, catalog):
    names = list(catalog) if text.strip() == "all" else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in catalog]
    if unknown:
        raise SystemExit(f"unknown run(s) {', '.join(unknown)}; known: {', '.join(catalog)}")
    if not names:
        raise SystemExit("--recipes needs at least one name")
    if len(set(names)) != len(names):
        raise SystemExit("--recipes names a run twice")
    return [catalog[n] for n in names]


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module docstring as written, and every option's default after its help (an option whose
    help states its default in words keeps its words)."""

    def _get_help_string(self, action):
        if "(default:" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def runs_epilog(catalog):
    width = max(len(n) for n in catalog)
    lines = ["runs (--recipes takes a comma-separated list of these names, or all):"]
    lines += [f"  {name:{width}s}  {run.about}" for name, run in catalog.items()]
    return "\n".join(lines)


def base_arguments(doc, catalog, *, steps, lr, default_out="reports"):
    """The options every study has. `doc` is the study's module docstring (printed whole)."""
    p = argparse.ArgumentParser(description=doc, epilog=runs_epilog(catalog), formatter_class=HelpFormatter)
    p.add_argument("--out", default=default_out, help="directory the report files are written to")
    p.add_argument("--steps", type=int, default=steps, help="training steps per run")
    p.add_argument("--recipes", default="all", metavar="LIST",
                   help="comma-separated run names (listed below), or all")
    p.add_argument("--seed", type=int, default=1, help="initialisation, data order and stochastic-rounding seed")
    p.add_argument("--threads", type=int, default=1,
                   help="threads per run or rank (0: all cores); the results do not depend on it")
    p.add_argument("--jobs", type=int, default=2,
                   help="runs trained at the same time, each in its own process; the results do not depend on it")
    p.add_argument("--nproc", type=int, default=1,
                   help="data-parallel ranks per run (torch.distributed, gloo, this machine); each rank trains on "
                        "its own --batch, so the global batch is nproc x batch. Under torchrun the launcher's "
                        "world is used instead")
    p.add_argument("--lr", type=float, default=lr, help="peak learning rate (warmup, then cosine decay to a tenth)")
    p.add_argument("--gemm", choices=("relaxed", "exact"), default="relaxed",
                   help="te.Linear GEMM mode: relaxed (fp32 accumulation of the recipe's exactly quantized operands, "
                        "the fastest) or exact (the GPU tensor core's accumulation bit for bit)")
    return p


def check_common(args):
    if args.steps < 1:
        raise SystemExit("--steps must be >= 1")
    if args.jobs < 1:
        raise SystemExit("--jobs must be >= 1")
    if args.nproc < 1:
        raise SystemExit("--nproc must be >= 1")
    if args.threads < 0:
        raise SystemExit("--threads must be >= 0")
    if not args.lr > 0:
        raise SystemExit("--lr must be > 0")


def set_threads(threads):
    """torch's threads and, through the OpenMP runtime they share, the library's."""
    n = threads if threads > 0 else (os.cpu_count() or 1)
    torch.set_num_threads(n)
    os.environ["OMP_NUM_THREADS"] = str(n)
    return n


# ---- running the runs -------------------------------------------------------------------------

def world_size():
    return torch.distributed.get_world_size() if torch.distributed.is_available() and torch.distributed.is_initialized() else 1


def rank():
    return torch.distributed.get_rank() if world_size() > 1 else 0


def launched_by_torchrun():
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "RANK" in os.environ


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


COLLECTIVE_TIMEOUT = datetime.timedelta(minutes=20)


def _rank_main(local_rank, world, port, outdir, threads, train, run, args, data):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.distributed.init_process_group("gloo", rank=local_rank, world_size=world, timeout=COLLECTIVE_TIMEOUT)
    try:
        set_threads(threads)
        result = train(run, args, *data)
        with open(os.path.join(outdir, f"rank{local_rank}.pkl"), "wb") as f:
            pickle.dump(result, f)
    finally:
        torch.distributed.destroy_process_group()


def run_ranks(train, run, args, data):
    """One run on args.nproc data-parallel ranks (spawned processes on this machine, gloo on the
    loopback). Returns the ranks' results in rank order; a rank that raises stops every rank."""
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as outdir:
        mp.spawn(_rank_main, args=(args.nproc, _free_port(), outdir, args.threads, train, run, args, data),
                 nprocs=args.nproc, join=True)
        results = []
        for r in range(args.nproc):
            with open(os.path.join(outdir, f"rank{r}.pkl"), "rb") as f:
                results.append(pickle.load(f))
    return results


def _in_worker(train, threads, *args):
    """A run in a pool worker. The result goes back as plain pickled bytes: torch would share a
    tensor's memory through a file descriptor of the worker, which exits after its run."""
    set_threads(threads)
    return pickle.dumps(train(*args))


def run_all(train, runs, args, *data):
    """train(run, args, *data) for every run: each run in a process of its own (spawned, so each has
    its own OpenMP runtime and its peak RSS is its own), `args.jobs` at a time; with --nproc N each
    run on N data-parallel ranks, one run after another; under torchrun every rank of the launcher's
    world trains every run in turn. Results in the order of `runs`, the same whatever the job
    count. A data-parallel result is rank 0's, with every rank's result under "ranks"."""
    if launched_by_torchrun():
        if not torch.distributed.is_initialized():
            torch.distributed.init_process_group("gloo", timeout=COLLECTIVE_TIMEOUT)
        results = []
        for run in runs:
            mine = train(run, args, *data)
            everyone = [None] * world_size()
            torch.distributed.all_gather_object(everyone, mine)
            results.append(merge_ranks(everyone))
        return results
    if args.nproc > 1:
        return [merge_ranks(run_ranks(train, run, args, data)) for run in runs]
    import concurrent.futures
    import multiprocessing
    jobs = max(1, min(args.jobs, len(runs)))
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                                max_tasks_per_child=1) as pool:
        futures = [pool.submit(_in_worker, train, args.threads, run, args, *data) for run in runs]
        return [pickle.loads(f.result()) for f in futures]


def merge_ranks(results):
    """Rank 0's result (a study may return (result, extra)), with every rank's under "ranks"."""
    first = results[0]
    main, extra = (first if isinstance(first, tuple) else (first, None))
    ranks = [r[0] if isinstance(r, tuple) else r for r in results]
    main = dict(main)
    main["ranks"] = [{k: r[k] for k in ("rank", "curve", "step_ms", "tokens_per_s", "final_loss", "peak_rss_bytes",
                                       "weights_digest", "scaling_digest") if k in r} for r in ranks]
    main["ranks_hold_equal_weights"] = len({r.get("weights_digest") for r in ranks}) == 1
    main["ranks_hold_equal_scaling_state"] = len({r.get("scaling_digest") for r in ranks}) == 1
    return (main, extra) if isinstance(first, tuple) else main


def wrap_data_parallel(model, find_unused=False):
    """DistributedDataParallel over the run's ranks (gloo), or the model itself in one process."""
    if world_size() == 1:
        return model
    return torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=find_unused)


def mean_over_ranks(value):
    """The mean of a float over the ranks (the logged loss of a data-parallel step)."""
    if world_size() == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64)
    torch.distributed.all_reduce(t)
    return float(t[0]) / world_size()


def digest_of(tensors):
    """A short hash of tensors' bytes (do two ranks hold the same weights / scales?)."""
    import hashlib
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().float().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def weights_digest(model):
    return digest_of([p for p in model.parameters()])


def _state_bytes(state):
    """The bytes of a module's extra state, whatever its form (TE's serialized tensor, a dict)."""
    import io
    if state is None:
        return b""
    if torch.is_tensor(state):
        return state.detach().contiguous().cpu().numpy().tobytes()
    if isinstance(state, dict):
        return b"".join(str(k).encode() + _state_bytes(state[k]) for k in sorted(state, key=str))
    if isinstance(state, (list, tuple)):
        return b"".join(_state_bytes(s) for s in state)
    if isinstance(state, (bytes, bytearray)):
        return bytes(state)
    if isinstance(state, io.BytesIO):
        return state.getvalue()
    if hasattr(state, "tobytes"):
        return state.tobytes()
    return repr(state).encode()


def scaling_digest(model):
    """A hash of every te GEMM module's extra state (TE's get_extra_state: delayed scaling's scales
    and amax histories); equal on every rank once the ranks' amaxes are reduced."""
    import hashlib
    h = hashlib.sha256()
    for name, m in sorted(((n, m) for n, m in model.named_modules() if isinstance(m, gemm_types())), key=lambda x: x[0]):
        # the layers' states themselves: TE's _extra_state is a pickle, whose bytes differ between
        # processes for equal states (torch pickles a storage with a per-process key)
        state = [u.extra_state() for u in m._te_units()] if hasattr(m, "_te_units") else m.get_extra_state()
        h.update(name.encode() + _state_bytes(state))
    return h.hexdigest()[:16]


# ---- data -------------------------------------------------------------------------------------

def load_bytes(path, start=0.0, end=1.0):
    """The bytes of a file (its [start, end) fraction) as int64 tokens, split 90% train / 10% validation."""
    import numpy as np
    with open(resolve_path(path), "rb") as f:
        raw = f.read()
    data = np.frombuffer(raw[int(len(raw) * start):int(len(raw) * end)], dtype=np.uint8)
    split = int(len(data) * 0.9)
    return torch.from_numpy(data[:split].astype(np.int64)), torch.from_numpy(data[split:].astype(np.int64))


def batch_of(data, rng, batch, seq):
    """`batch` random windows of seq + 1 bytes: inputs and next-byte targets [batch, seq]."""
    starts = rng.integers(0, len(data) - seq - 1, size=batch)
    x = torch.stack([data[s:s + seq] for s in starts])
    y = torch.stack([data[s + 1:s + seq + 1] for s in starts])
    return x, y


def rank_batch(data, rng, batch, seq):
    """This rank's rows of the step's global batch: every rank draws the same world x batch windows
    from the shared generator and keeps its own slice, so a data-parallel run sees the data a single
    process would see with the global batch."""
    x, y = batch_of(data, rng, batch * world_size(), seq)
    r = rank()
    return x[r * batch:(r + 1) * batch], y[r * batch:(r + 1) * batch]


# ---- training pieces --------------------------------------------------------------------------

def lr_at(step, steps, peak, warmup):
    """Linear warmup, then cosine decay to a tenth of the peak."""
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def make_optimizers(model, run, lr, params=None):
    """AdamW on every parameter (or on `params`), or Muon on the hidden matrices (2-D weights of the
    blocks) with AdamW for the rest, as nanochat splits them; moments stored in run.state_dtype."""
    named = list(model.named_parameters()) if params is None else params
    named = [(n, p) for n, p in named if p.requires_grad]
    if run.optimizer == "adamw":
        return [extras.optim.AdamW([p for _, p in named], lr=lr, betas=(0.9, 0.95), weight_decay=0.1,
                                   state_dtype=run.state_dtype)]
    hidden = [p for n, p in named if p.dim() == 2 and "blocks" in n]
    ids = {id(p) for p in hidden}
    rest = [p for _, p in named if id(p) not in ids]
    return [extras.optim.Muon(hidden, lr=lr * 10, momentum=0.95, state_dtype=run.state_dtype),
            extras.optim.AdamW(rest, lr=lr, betas=(0.9, 0.95), weight_decay=0.1, state_dtype=run.state_dtype)]


def state_bytes(optimizers):
    """Bytes the optimizers keep (moments, their scales)."""
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


def gemm_types():
    """The recipe's GEMM modules: te.Linear and, where nvfp4.torch has it, te.GroupedLinear."""
    return tuple(t for t in (te.Linear, getattr(te, "GroupedLinear", None)) if t is not None)


def gemm_weight_numels(module):
    """The element count of each weight of a GEMM module (one per expert for te.GroupedLinear)."""
    if isinstance(module, te.Linear):
        return [module.weight.numel()]
    return [getattr(module, f"weight{i}").numel() for i in range(module.num_gemms)]


class AmaxWatch:
    """Per te.Linear: the largest |input|, |weight| and |grad of output| seen during a run, the
    count of non-finite values among them (the NaN watch), and the largest |input| of the current
    step over every layer (the stability curve; reset by take_step_amax)."""

    def __init__(self, model):
        self.stats, self.handles, self.step_amax = {}, [], 0.0
        for name, module in model.named_modules():
            if isinstance(module, gemm_types()):
                self.stats[name] = {"input": 0.0, "weight": 0.0, "grad_output": 0.0, "nonfinite": 0}
                self.handles.append(module.register_forward_hook(self._forward(name)))
                self.handles.append(module.register_full_backward_hook(self._backward(name)))

    def _record(self, name, key, t):
        s = self.stats[name]
        amax = float(t.detach().abs().max()) if t.numel() else 0.0
        if math.isfinite(amax):  # the common case: one reduction, no mask
            s[key] = max(s[key], amax)
            return amax
        t = t.detach().float()
        finite = torch.isfinite(t)
        s["nonfinite"] += int((~finite).sum())
        amax = float(t[finite].abs().max()) if finite.any() else 0.0
        s[key] = max(s[key], amax)
        return amax

    def _forward(self, name):
        def hook(module, inputs, output):
            if torch.is_grad_enabled():
                self.step_amax = max(self.step_amax, self._record(name, "input", inputs[0]))
                for w in ([module.weight] if isinstance(module, te.Linear) else
                          [getattr(module, f"weight{i}") for i in range(module.num_gemms)]):
                    self._record(name, "weight", w)
        return hook

    def _backward(self, name):
        def hook(module, grad_input, grad_output):
            if grad_output[0] is not None:
                self._record(name, "grad_output", grad_output[0])
        return hook

    def take_step_amax(self):
        value, self.step_amax = self.step_amax, 0.0
        return value

    def nonfinite(self):
        return sum(s["nonfinite"] for s in self.stats.values())

    def close(self):
        for h in self.handles:
            h.remove()


class Rotary(nn.Module):
    """Rotary position embedding (RoPE) of the query and key heads (pairs of adjacent features)."""

    def __init__(self, head_dim, max_len, base=10000.0):
        super().__init__()
        inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):  # x [B, H, T, D]
        t = x.shape[-2]
        if t > self.cos.shape[0]:
            raise ValueError(f"sequence of {t} positions, rotary table has {self.cos.shape[0]}")
        x1, x2 = x[..., 0::2], x[..., 1::2]
        cos, sin = self.cos[:t].to(x.dtype), self.sin[:t].to(x.dtype)
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def attend(q, k, v, causal):
    """Softmax attention of [B, H, T, D] heads (k / v may have fewer heads: grouped queries),
    scores in float32, output in v's dtype."""
    if k.shape[1] != q.shape[1]:
        repeat = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
    t = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return scores.float().softmax(-1).to(v.dtype) @ v


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
        out = attend(q, k, v, self.causal).transpose(1, 2).reshape(b * t, w)
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


