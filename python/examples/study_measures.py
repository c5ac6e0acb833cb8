"""What every study's report measures: loss spikes, the process's peak RSS, the memory a GPU would
hold for a run (from the tensors' formats), the per-run summary, and where a report came from (the
command, the commit, the machine and its ISA). docs/training.md, "What every report holds"."""

import contextlib
import datetime
import math
import os
import platform
import resource
import subprocess
import sys
import time

import torch

import study_common as sc

SPIKE_WINDOW, SPIKE_FACTOR = 20, 1.25


def is_spike(history, loss):
    """A loss spike: a finite loss more than SPIKE_FACTOR times the median of the previous
    SPIKE_WINDOW finite losses (counted once SPIKE_WINDOW / 2 of them exist)."""
    previous = [v for v in history[-SPIKE_WINDOW:] if math.isfinite(v)]
    if len(previous) < SPIKE_WINDOW // 2 or not math.isfinite(loss):
        return False
    return loss > SPIKE_FACTOR * sorted(previous)[len(previous) // 2]


def count_spikes(losses):
    return sum(1 for i, v in enumerate(losses) if is_spike(losses[:i], v))


def peak_rss_bytes():
    """The peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# How a GPU holds a tensor in each format: bytes per value, bytes per scale and values per scale.
# Per-tensor FP8 and NVFP4 add one float32 per tensor (scale_inv / the global amax).
FORMATS = {
    "fp32": (4.0, 0, 1),
    "bf16": (2.0, 0, 1),
    "fp8": (1.0, 0, 1),
    "fp8_1x128": (1.0, 4, 128),
    "fp8_128x128": (1.0, 4, 128 * 128),
    "mxfp8": (1.0, 1, 32),
    "nvfp4": (0.5, 1, 16),
}
# Per recipe: the format of a te.Linear's weight copies, how many copies TE keeps (rowwise for
# fprop and columnwise for dgrad; one bf16 copy in the BF16 recipe), and the format of the input
# it saves for wgrad (the columnwise copy).
RECIPE_STORAGE = {
    "bf16": ("bf16", 1, "bf16"),
    "fp8_delayed": ("fp8", 2, "fp8"),
    "fp8_current": ("fp8", 2, "fp8"),
    "fp8_block": ("fp8_128x128", 2, "fp8_1x128"),
    "mxfp8": ("mxfp8", 2, "mxfp8"),
    "nvfp4": ("nvfp4", 2, "nvfp4"),
}


def format_bytes(fmt, numel):
    data, scale, per = FORMATS[fmt]
    whole_tensor = 4 if fmt in ("fp8", "nvfp4") else 0
    return int(math.ceil(numel * data + math.ceil(numel / per) * scale)) + whole_tensor


class ActivationMeter:
    """What one training forward keeps for backward: the tensors autograd saves (torch operations:
    each storage once, parameters excluded, at their dtype) and the inputs of every te.Linear called
    with gradients on (counted as elements; their bytes depend on the recipe's format, applied by
    bytes_for). Used around one forward of a run."""

    def __init__(self, model):
        self.model, self.linear_inputs, self.saved, self.paused = model, [], {}, False
        self.inside_gemm = 0  # > 0 inside a te.Linear's forward: what it saves is counted as its input
        self.params = {p.storage().data_ptr() for p in model.parameters()}

    @contextlib.contextmanager
    def suspended(self):
        """Inside: te.Linear inputs are not counted (a recomputed block saves none of them)."""
        self.paused = True
        try:
            yield
        finally:
            self.paused = False

    def add_saved(self, t):
        """A tensor kept for backward outside autograd's saved tensors (a recomputed block's input)."""
        self.saved[t.storage().data_ptr()] = t.storage().nbytes()

    def _pack(self, t):
        # te.Linear saves its input through autograd as TE's ctx.save_for_backward does; that input
        # is counted in the recipe's format (linear_inputs), its weight among the weight copies.
        if self.inside_gemm == 0 and t.layout == torch.strided and t.device.type == "cpu":
            s = t.storage()
            if s.data_ptr() not in self.params:
                self.saved[s.data_ptr()] = s.nbytes()
        return t

    def __enter__(self):
        gemms = [(n, m) for n, m in self.model.named_modules() if isinstance(m, sc.gemm_types())]
        self.handles = [m.register_forward_pre_hook(self._linear_hook(n)) for n, m in gemms]
        self.handles += [m.register_forward_hook(self._leave_gemm) for _, m in gemms]
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self.hooks.__enter__()
        return self

    def _linear_hook(self, name):
        def hook(module, inputs):
            self.inside_gemm += 1
            if torch.is_grad_enabled() and not self.paused:
                self.linear_inputs.append((name, inputs[0].numel()))
        return hook

    def _leave_gemm(self, module, inputs, output):
        self.inside_gemm -= 1

    def __exit__(self, *exc):
        self.hooks.__exit__(*exc)
        for h in self.handles:
            h.remove()

    def bytes_for(self, storage_recipe_of):
        """(torch-saved bytes, te.Linear saved-input bytes) with each layer's input in the format of
        storage_recipe_of(layer name)."""
        linear = sum(format_bytes(RECIPE_STORAGE[storage_recipe_of(n)][2], numel) for n, numel in self.linear_inputs)
        return sum(self.saved.values()), linear


def gpu_memory(model, optimizers, meter, storage_recipe_of, trainable=None):
    """The bytes a GPU would hold for this run, by kind: the master
    weights (as held: float32), the recipe's weight copies of every te.Linear, the activations
    saved for backward, the gradients of the trained parameters (float32) and the optimizer state
    (docs/training.md, "What every report holds")."""
    copies = 0
    for n, m in model.named_modules():
        if isinstance(m, sc.gemm_types()):
            fmt, count, _ = RECIPE_STORAGE[storage_recipe_of(n)]
            copies += sum(count * format_bytes(fmt, numel) for numel in sc.gemm_weight_numels(m))
    torch_saved, linear_saved = meter.bytes_for(storage_recipe_of)
    params = [p for p in model.parameters() if p.requires_grad] if trainable is None else trainable
    out = {"weights": sc.weight_bytes(model), "weight_copies": copies, "activations": torch_saved + linear_saved,
           "gradients": sum(4 * p.numel() for p in params), "optimizer": sc.state_bytes(optimizers)}
    out["total"] = sum(out.values())
    return out


def run_summary(losses, val_loss, step_seconds, tokens_per_step, nonfinite):
    """What every run of every study reports beside its own measures."""
    step_s = sum(step_seconds) / max(1, len(step_seconds))
    tail = [v for v in losses[-max(1, len(losses) // 10):] if math.isfinite(v)]
    return {
        "final_loss": losses[-1] if losses else float("nan"),
        "train_loss_last10pct": sum(tail) / len(tail) if tail else float("nan"),
        "val_loss": val_loss,
        "val_ppl": math.exp(val_loss) if math.isfinite(val_loss) and val_loss < 700 else float("inf"),
        "step_ms": 1000.0 * step_s,
        "tokens_per_s": tokens_per_step / step_s if step_s > 0 else 0.0,
        "nonfinite": nonfinite,
        "nonfinite_steps": sum(1 for v in losses if not math.isfinite(v)),
        "spikes": count_spikes(losses),
        "peak_rss_bytes": peak_rss_bytes(),
    }


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _isa():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return "unknown"
    parts = []
    if "avx512f" in flags:
        parts.append("AVX-512" + (" (BF16)" if "avx512_bf16" in flags else ""))
    elif "avx2" in flags:
        parts.append("AVX2")
    if "amx_bf16" in flags:
        parts.append("AMX-BF16")
    return " + ".join(parts) or "no AVX2"


def _git(*argv):
    try:
        return subprocess.run(["git", "-C", sc.REPO, *argv], capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def study_meta(args, title, started, **extra):
    """What made a report: the command, the commit (and whether the tree had local changes), the
    machine and its ISA, the software, the load, the settings."""
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    script = os.path.relpath(os.path.abspath(sys.argv[0]), sc.REPO)
    import nvfp4
    meta = {
        "title": title,
        "command": " ".join(["python3", script] + sys.argv[1:]),
        "commit": commit + (" (with local changes)" if dirty else ""),
        "machine": f"{_cpu_model()}, {os.cpu_count()} cores",
        "isa": _isa(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "nvfp4_extension": os.path.dirname(os.path.abspath(nvfp4.__file__)),
        "nvfp4_compiled_isa": nvfp4.compiled_isa,
        "load_average_at_end": [round(v, 2) for v in os.getloadavg()],
        "wall_seconds": round(time.time() - started, 1),
        "cpu_seconds": round(sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                                 for f in ("ru_utime", "ru_stime")), 1),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    meta.update({k: v for k, v in vars(args).items() if k not in ("recipes",)})
    meta["runs"] = args.recipes
    meta.update(extra)
    return meta
