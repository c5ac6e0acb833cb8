#!/usr/bin/env python3
"""A small decoder-only GPT in the style of nanochat (RMSNorm, rotary positions, ReLU² MLP, untied
head), trained on the shipped Shakespeare bytes under each TransformerEngine recipe on the CPU:
every Linear is a te.Linear from nvfp4.torch, so this is the script a researcher would run with
TransformerEngine on a GPU, with `import transformer_engine.pytorch as te` swapped for nvfp4's.

    PYTHONPATH=build/release/python /usr/bin/python3 python/examples/gpt_recipes.py
    ... --recipes bf16,nvfp4 --steps 300 --out reports/

Writes gpt_recipes.csv / .json / .png to --out: per run the final train and validation loss,
tokens per second, bytes of weights + optimizer state, the count of non-finite values seen, and
the largest |input|, |weight|, |grad| per layer.
"""

import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import study_common as sc  # noqa: E402
import nvfp4.torch as te  # noqa: E402

# The runs: every recipe with AdamW (fp32 moments), NVFP4 with a BF16 cooldown, and optimizer
# states in BF16 / FP8 for AdamW and Muon.
CATALOG = {
    "bf16": sc.Run("bf16", "bf16"),
    "fp8_delayed": sc.Run("fp8_delayed", "fp8_delayed"),
    "fp8_current": sc.Run("fp8_current", "fp8_current"),
    "fp8_block": sc.Run("fp8_block", "fp8_block"),
    "mxfp8": sc.Run("mxfp8", "mxfp8"),
    "nvfp4": sc.Run("nvfp4", "nvfp4"),
    "nvfp4_cooldown": sc.Run("nvfp4_cooldown", "nvfp4", cooldown=0.2),
    "bf16_adamw_bf16_states": sc.Run("bf16_adamw_bf16_states", "bf16", state_dtype="bfloat16"),
    "bf16_adamw_fp8_states": sc.Run("bf16_adamw_fp8_states", "bf16", state_dtype="float8_e4m3"),
    "bf16_muon": sc.Run("bf16_muon", "bf16", optimizer="muon"),
    "bf16_muon_fp8_states": sc.Run("bf16_muon_fp8_states", "bf16", optimizer="muon", state_dtype="float8_e4m3"),
}


class GPT(nn.Module):
    def __init__(self, vocab, width, depth, heads, seq_len, *, positions="rotary", activation="relu2", tied=False, mode="exact"):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(seq_len, width) if positions == "learned" else None
        rotary = sc.Rotary(width // heads, seq_len) if positions == "rotary" else None
        self.blocks = nn.ModuleList(
            sc.Block(width, heads, norm="rmsnorm", activation=activation, causal=True, rotary=rotary, mode=mode)
            for _ in range(depth))
        self.norm = te.RMSNorm(width)
        self.tied = tied
        self.head = None if tied else te.Linear(width, vocab, bias=False, mode=mode)
        nn.init.normal_(self.embed.weight, std=0.5)
        for name, p in self.named_parameters():
            if p.dim() == 2 and "embed" not in name and "positions" not in name:
                nn.init.normal_(p, std=1.0 / math.sqrt(p.shape[1]))
        for block in self.blocks:  # nanochat starts each residual branch's output projection at zero
            nn.init.zeros_(block.proj.weight)
            nn.init.zeros_(block.fc_out.weight)

    def forward(self, tokens):
        b, t = tokens.shape
        x = self.embed(tokens)
        if self.positions is not None:
            x = x + self.positions.weight[:t]
        for block in self.blocks:
            x = block(x)
        x = self.norm(x).reshape(b * t, -1)
        logits = x @ self.embed.weight.t() if self.tied else self.head(x)
        return logits.reshape(b, t, -1)


def load_bytes(path):
    data = np.frombuffer(open(path, "rb").read(), dtype=np.uint8)
    split = int(len(data) * 0.9)
    return torch.from_numpy(data[:split].astype(np.int64)), torch.from_numpy(data[split:].astype(np.int64))


def batch_of(data, rng, batch, seq):
    starts = rng.integers(0, len(data) - seq - 1, size=batch)
    x = torch.stack([data[s:s + seq] for s in starts])
    y = torch.stack([data[s + 1:s + seq + 1] for s in starts])
    return x, y


def evaluate(model, data, args, recipe):
    """Mean validation loss over fixed batches; under the run's recipe, without gradients (TE's
    evaluation: the layers quantize as in training)."""
    rng = np.random.default_rng(12345)
    total = 0.0
    with torch.no_grad(), sc.precision(recipe):
        for _ in range(args.eval_batches):
            x, y = batch_of(data, rng, args.batch, args.seq)
            total += float(F.cross_entropy(model(x).float().reshape(-1, 256), y.reshape(-1)))
    return total / args.eval_batches


def train(run, args, train_data, val_data):
    torch.manual_seed(args.seed)
    model = GPT(256, args.width, args.depth, args.heads, args.seq, positions=args.positions,
                activation=args.activation, tied=args.tied, mode=args.gemm)
    optimizers = sc.make_optimizers(model, run, args.lr)
    watch = sc.AmaxWatch(model)
    recipe = sc.make_recipe(run.recipe)
    rng = np.random.default_rng(args.seed)
    curve, timer, nonfinite = [], sc.Timer(), 0
    eval_every, log_every = max(1, args.steps // 6), max(1, args.steps // 60)
    train_loss = float("nan")
    for step in range(args.steps):
        x, y = batch_of(train_data, rng, args.batch, args.seq)
        quantized = run.quantized_at(step, args.steps)
        with timer:
            sc.set_lr(optimizers, sc.lr_at(step, args.steps, 1.0, args.warmup))
            with sc.precision(recipe if quantized else None):
                logits = model(x)
            loss = F.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1))
            for opt in optimizers:
                opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            for opt in optimizers:
                opt.step()
        train_loss = float(loss)
        nonfinite += 0 if math.isfinite(train_loss) else 1
        evaluating = (step + 1) % eval_every == 0 or step + 1 == args.steps
        if evaluating or (step + 1) % log_every == 0:
            curve.append({"step": step + 1, "train_loss": train_loss, "val_loss": None})
        if evaluating:
            active = recipe if run.quantized_at(step, args.steps) else None
            val = curve[-1]["val_loss"] = evaluate(model, val_data, args, active)
            print(f"[{run.name}] step {step + 1}/{args.steps} loss {train_loss:.4f} val {val:.4f} "
                  f"tokens/s {args.batch * args.seq * (step + 1) / timer.seconds:.0f}", flush=True)
    watch.close()
    nonfinite += sc.count_nonfinite(model) + sum(s["nonfinite"] for s in watch.stats.values())
    return {
        "run": run.name, "recipe": run.recipe, "optimizer": run.optimizer, "state_dtype": run.state_dtype,
        "cooldown": run.cooldown, "final_loss": train_loss, "val_loss": val,
        "tokens_per_s": args.batch * args.seq * args.steps / timer.seconds,
        "weight_bytes": sc.weight_bytes(model), "optimizer_state_bytes": sc.state_bytes(optimizers),
        "memory_bytes": sc.weight_bytes(model) + sc.state_bytes(optimizers),
        "nonfinite": nonfinite, "layer_amax": watch.stats, "curve": curve,
    }


def main():
    p = sc.base_arguments(__doc__.split("\n")[0])
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--positions", choices=["rotary", "learned"], default="rotary")
    p.add_argument("--activation", choices=["relu2", "gelu"], default="relu2")
    p.add_argument("--tied", action="store_true", help="tie the LM head to the embedding (high precision)")
    p.add_argument("--text", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "shakespeare.txt"))
    args = p.parse_args()
    args.steps = args.steps if args.steps is not None else 300
    args.lr = args.lr if args.lr is not None else 3e-3
    if args.steps < 1:
        raise SystemExit("--steps must be >= 1")
    if args.width % args.heads or (args.width // args.heads) % 2:
        raise SystemExit("--width must be a multiple of --heads with an even head size")
    runs = sc.parse_runs(args.recipes or ",".join(CATALOG), CATALOG)
    threads = sc.set_threads(args.threads)
    train_data, val_data = load_bytes(args.text)
    print(f"{len(runs)} runs x {args.steps} steps, batch {args.batch} x {args.seq} tokens, "
          f"{args.jobs} job(s) x {threads} thread(s)")
    results = sc.run_all(train, runs, args, train_data, val_data)
    print(f"\n{'run':26s} {'train loss':>10s} {'val loss':>9s} {'tokens/s':>9s} {'weights+opt':>12s} {'non-finite':>10s}")
    for r in results:
        print(f"{r['run']:26s} {r['final_loss']:10.4f} {r['val_loss']:9.4f} {r['tokens_per_s']:9.0f} "
              f"{r['memory_bytes'] / 1024:9.1f} KiB {r['nonfinite']:10d}")
    meta = {"title": "GPT", "steps": args.steps, "width": args.width, "depth": args.depth, "heads": args.heads,
            "seq": args.seq, "batch": args.batch, "seed": args.seed, "threads": threads, "jobs": args.jobs, "lr": args.lr}
    sc.write_reports(args.out, "gpt_recipes", results, ["train_loss", "val_loss"], meta)
    print(f"wrote {args.out}/gpt_recipes.csv, .json, .png")


if __name__ == "__main__":
    main()
