#!/usr/bin/env python3
"""A small decoder-only GPT in the style of nanochat (RMSNorm, rotary positions, ReLU^2 MLP, untied
head), trained on the shipped Shakespeare bytes (data/shakespeare.txt, 90% train, 10% validation)
under each TransformerEngine recipe on the CPU. Every Linear is a te.Linear from nvfp4.torch, so
this is the script a researcher would run with TransformerEngine on a GPU, with
`import transformer_engine.pytorch as te` swapped for nvfp4's.

examples:
  PYTHONPATH=build/release/python /usr/bin/python3 python/examples/gpt_recipes.py
  ... gpt_recipes.py --recipes bf16,nvfp4 --steps 1000 --seed 2 --out my_reports
  ... gpt_recipes.py --nproc 2 --recipes fp8_delayed,nvfp4     # data-parallel, DDP over gloo
  torchrun --nproc-per-node 2 python/examples/gpt_recipes.py    # the same under torchrun

writes to --out: gpt_recipes.csv (every step of every run), gpt_recipes.json (settings, machine,
per run: losses, perplexity, tokens/s, step time, the memory a GPU would hold by kind next to this
process's peak RSS, NaN / spike counts, per-layer amax), gpt_recipes.png (loss curves and each
run's gap to bf16), gpt_recipes_table.md (the recipe table) and, with --nproc > 1, ddp_smoke.json
and ddp_smoke.png (loss and step time per rank).
"""

import copy
import contextlib
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import study_common as sc  # noqa: E402
import study_report as sr  # noqa: E402
import study_measures as sm  # noqa: E402
import nvfp4.torch as te  # noqa: E402

# The runs: every recipe with AdamW (fp32 moments), NVFP4 with a BF16 cooldown, NVFP4 that falls
# back to FP8 if it diverges (the training guide's advice, as a run), and optimizer states in
# BF16 / FP8 for AdamW and Muon.
CATALOG = {
    "bf16": sc.Run("bf16", "bf16", about="no quantization: BF16 operands, FP32 accumulation (the baseline)"),
    "fp8_delayed": sc.Run("fp8_delayed", "fp8_delayed", about="TE DelayedScaling (E4M3 forward, E5M2 gradients, amax history)"),
    "fp8_current": sc.Run("fp8_current", "fp8_current", about="TE Float8CurrentScaling (per-tensor scale from the tensor's amax)"),
    "fp8_block": sc.Run("fp8_block", "fp8_block", about="TE Float8BlockScaling (1x128 activations, 128x128 weights)"),
    "mxfp8": sc.Run("mxfp8", "mxfp8", about="TE MXFP8BlockScaling (1x32 blocks, E8M0 scales)"),
    "nvfp4": sc.Run("nvfp4", "nvfp4", about="TE NVFP4BlockScaling defaults (16x16 weights, RHT on wgrad, SR gradients)"),
    "nvfp4_cooldown": sc.Run("nvfp4_cooldown", "nvfp4", cooldown=0.2, about="NVFP4, the last 20% of the steps in BF16"),
    "nvfp4_fallback": sc.Run("nvfp4_fallback", "nvfp4", fallback="fp8_current",
                             about="NVFP4 that goes back to its last checkpoint and continues in FP8 (current "
                                   "scaling) at the first NaN or loss spike"),
    "bf16_adamw_bf16_states": sc.Run("bf16_adamw_bf16_states", "bf16", state_dtype="bfloat16",
                                     about="bf16, AdamW moments stored in BF16"),
    "bf16_adamw_fp8_states": sc.Run("bf16_adamw_fp8_states", "bf16", state_dtype="float8_e4m3",
                                    about="bf16, AdamW moments in E4M3 with an fp32 scale per 128 values"),
    "bf16_muon": sc.Run("bf16_muon", "bf16", optimizer="muon", about="bf16, Muon on the blocks' matrices, AdamW on the rest"),
    "bf16_muon_fp8_states": sc.Run("bf16_muon_fp8_states", "bf16", optimizer="muon", state_dtype="float8_e4m3",
                                   about="bf16_muon with E4M3 momentum"),
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


def evaluate(model, data, args, recipe):
    """Mean validation loss over fixed batches; under the run's recipe, without gradients (TE's
    evaluation: the layers quantize as in training)."""
    rng = np.random.default_rng(12345)
    total = 0.0
    with torch.no_grad(), sc.precision(recipe):
        for _ in range(args.eval_batches):
            x, y = sc.batch_of(data, rng, args.batch, args.seq)
            total += float(F.cross_entropy(model(x).float().reshape(-1, 256), y.reshape(-1)))
    return total / args.eval_batches


def train(run, args, train_data, val_data):
    torch.manual_seed(args.seed)
    model = GPT(256, args.width, args.depth, args.heads, args.seq, positions=args.positions,
                activation=args.activation, tied=args.tied, mode=args.gemm)
    net = sc.wrap_data_parallel(model)
    optimizers = sc.make_optimizers(model, run, args.lr)
    watch = sc.AmaxWatch(model)
    rng = np.random.default_rng(args.seed)
    active = run.recipe                    # the recipe in use (a fallback run switches it)
    fallback_step, checkpoint = None, None
    curve, losses, step_seconds, memory = [], [], [], None
    eval_every = max(1, args.steps // 6)
    val = float("nan")
    step = 0
    while step < args.steps:
        if run.fallback and active == run.recipe and step % args.fallback_every == 0:
            checkpoint = (step, copy.deepcopy(model.state_dict()), [copy.deepcopy(o.state_dict()) for o in optimizers],
                          copy.deepcopy(rng.bit_generator.state))
        x, y = sc.rank_batch(train_data, rng, args.batch, args.seq)
        recipe = sc.make_recipe(active) if run.quantized_at(step, args.steps) else None
        start = time.perf_counter()
        sc.set_lr(optimizers, sc.lr_at(step, args.steps, 1.0, args.warmup))
        meter = sm.ActivationMeter(model) if memory is None else None
        with meter or contextlib.nullcontext(), sc.precision(recipe):
            logits = net(x)
        loss = F.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1))
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        for opt in optimizers:
            opt.step()
        step_seconds.append(time.perf_counter() - start)
        if memory is None:
            memory = sm.gpu_memory(model, optimizers, meter, lambda name: run.recipe)
        train_loss = sc.mean_over_ranks(float(loss))
        if run.fallback and active == run.recipe and (not math.isfinite(train_loss) or sm.is_spike(losses, train_loss)):
            # The guide's advice: back to the last checkpoint, and on in FP8 from there.
            at, model_state, optimizer_states, rng_state = checkpoint
            model.load_state_dict(model_state)
            for opt, state in zip(optimizers, optimizer_states):
                opt.load_state_dict(state)
            rng.bit_generator.state = rng_state
            fallback_step, active = step + 1, run.fallback
            if sc.rank() == 0:
                print(f"[{run.name}] step {step + 1}: loss {train_loss:.4f} is a spike or not finite: back to step {at}, "
                      f"on in {active}", flush=True)
            del curve[at:], losses[at:]
            step = at
            continue
        losses.append(train_loss)
        point = {"step": step + 1, "train_loss": train_loss, "val_loss": None, "grad_norm": grad_norm,
                 "amax": watch.take_step_amax(), "step_seconds": step_seconds[-1], "recipe": active if recipe else "bf16"}
        if sc.world_size() > 1:
            point["train_loss_rank"] = float(loss)  # this rank's own batch (the mean over ranks is train_loss)
        curve.append(point)
        if (step + 1) % eval_every == 0 or step + 1 == args.steps:
            val = point["val_loss"] = evaluate(model, val_data, args, recipe)
            if sc.rank() == 0:
                print(f"[{run.name}] step {step + 1}/{args.steps} loss {train_loss:.4f} val {val:.4f} "
                      f"tokens/s {args.batch * sc.world_size() * args.seq / np.mean(step_seconds):.0f}", flush=True)
        step += 1
    watch.close()
    nonfinite = sc.count_nonfinite(model) + watch.nonfinite() + sum(1 for v in losses if not math.isfinite(v))
    summary = sm.run_summary(losses, val, step_seconds, args.batch * args.seq * sc.world_size(), nonfinite)
    return dict(
        run=run.name, recipe=run.recipe, optimizer=run.optimizer, state_dtype=run.state_dtype, cooldown=run.cooldown,
        fallback=run.fallback, fallback_step=fallback_step, **summary,
        weight_bytes=sc.weight_bytes(model), optimizer_state_bytes=sc.state_bytes(optimizers),
        memory_bytes=sc.weight_bytes(model) + sc.state_bytes(optimizers), gpu_memory=memory,
        layer_amax=watch.stats, curve=curve, rank=sc.rank(), weights_digest=sc.weights_digest(model),
        scaling_digest=sc.scaling_digest(model))


def arguments():
    p = sc.base_arguments(__doc__, CATALOG, steps=300, lr=3e-3)
    p.add_argument("--width", type=int, default=64, help="model width (embedding and residual stream)")
    p.add_argument("--depth", type=int, default=2, help="transformer blocks")
    p.add_argument("--heads", type=int, default=4, help="attention heads (width / heads must be even)")
    p.add_argument("--seq", type=int, default=64, help="sequence length in bytes")
    p.add_argument("--batch", type=int, default=8, help="sequences per step (per rank with --nproc)")
    p.add_argument("--warmup", type=int, default=20, help="warmup steps of the learning rate")
    p.add_argument("--eval-batches", type=int, default=4,
                   help="validation batches at each evaluation (six per run and after the last step)")
    p.add_argument("--positions", choices=["rotary", "learned"], default="rotary", help="position encoding")
    p.add_argument("--activation", choices=["relu2", "gelu"], default="relu2", help="MLP activation")
    p.add_argument("--tied", action="store_true", help="tie the LM head to the embedding (then in high precision)")
    p.add_argument("--fallback-every", type=int, default=25,
                   help="checkpoint interval of the fallback run (where it goes back to on a spike)")
    p.add_argument("--text", default=sc.SHAKESPEARE, help="training text, read as bytes")
    return p


def main():
    started = time.time()
    args = arguments().parse_args()
    sc.check_common(args)
    if args.width % args.heads or (args.width // args.heads) % 2:
        raise SystemExit("--width must be a multiple of --heads with an even head size")
    for name in ("depth", "heads", "seq", "batch", "eval_batches", "fallback_every"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1")
    runs = sc.parse_runs(args.recipes, CATALOG)
    threads = sc.set_threads(args.threads)
    train_data, val_data = sc.load_bytes(args.text)
    if len(val_data) <= args.seq + 1:
        raise SystemExit(f"--text is too short for --seq {args.seq}")
    world = int(os.environ.get("WORLD_SIZE", "1")) if sc.launched_by_torchrun() else args.nproc
    if not sc.launched_by_torchrun() or int(os.environ["RANK"]) == 0:
        print(f"{len(runs)} runs x {args.steps} steps, batch {args.batch} x {args.seq} bytes x {world} rank(s), "
              f"{args.jobs if world == 1 else 1} job(s) x {threads} thread(s)", flush=True)
    results = sc.run_all(train, runs, args, train_data, val_data)
    if sc.launched_by_torchrun() and sc.rank() != 0:
        return
    print(f"\n{'run':24s} {'train loss':>10s} {'val loss':>9s} {'ppl':>7s} {'tokens/s':>9s} {'step ms':>8s} "
          f"{'GPU MiB':>8s} {'RSS MiB':>8s} {'NaN':>4s} {'spikes':>6s}")
    for r in results:
        print(f"{r['run']:24s} {r['train_loss_last10pct']:10.4f} {r['val_loss']:9.4f} {r['val_ppl']:7.3f} "
              f"{r['tokens_per_s']:9.0f} {r['step_ms']:8.1f} {r['gpu_memory']['total'] / 2**20:8.2f} "
              f"{r['peak_rss_bytes'] / 2**20:8.1f} {r['nonfinite']:4d} {r['spikes']:6d}"
              + (f"  (fell back to {r['fallback']} at step {r['fallback_step']})" if r.get("fallback_step") else ""))
    meta = sm.study_meta(args, "GPT", started, threads=threads, world_size=world,
                         tokens_per_step=args.batch * args.seq * world)
    sr.write_reports(args.out, "gpt_recipes", results, ["train_loss", "val_loss", "grad_norm", "amax", "step_seconds"],
                     meta, baseline="bf16" if any(r["run"] == "bf16" for r in results) else None)
    written = "gpt_recipes.csv, .json, .png, _table.md"
    if world > 1:
        sr.write_ddp_smoke(args.out, results, meta)
        written += ", ddp_smoke.json, .png"
    print(f"wrote {args.out}/{written}")


if __name__ == "__main__":
    main()
