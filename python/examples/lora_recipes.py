#!/usr/bin/env python3
"""LoRA fine-tuning over a frozen base whose weights are stored in NVFP4 (QLoRA with NVIDIA's 4-bit
format), under each TransformerEngine recipe on the CPU: the NVFP4 recipe's LoRA mode (--lora
--lora-rank 16 --lora-alpha 32 over q/k/v/o/gate/up/down) with its --skip-quant-first-layers /
--skip-quant-last-layers and --recompute-block, on a Qwen3-style decoder (qwen3_decoder.py).

The base model: either a short BF16 pretraining from scratch on the first play of the shipped text
(Coriolanus, the bytes of data/shakespeare.txt before Richard III begins; written to
<out>/base/ as config.json + model.safetensors in Hugging Face's layout), or --checkpoint DIR (a
Hugging Face directory of a byte-vocabulary Qwen3 model: the study feeds bytes, it has no
tokenizer). The fine-tuning task: the second play (Richard III), 90% train / 10% validation.

Each run freezes the base, stores the targeted projections of every layer as the run says (BF16, or
NVFP4 with 16x16 blocks: quantized once and dequantized, so the te.Linear holds exactly the NVFP4
values), and trains rank-r adapters (A uniform, B zero, in high precision: BF16 GEMMs, FP32 master
weights and AdamW state) with the base's GEMMs under the run's recipe. The layers --skip-quant-*
names keep BF16 storage and BF16 GEMMs. --recompute-block recomputes each layer's forward in the
backward (te.checkpoint where nvfp4.torch has it, else torch.utils.checkpoint).

examples:
  PYTHONPATH=build/release/python /usr/bin/python3 python/examples/lora_recipes.py
  ... lora_recipes.py --checkpoint reports/base --recipes bf16_lora,nvfp4_base_nvfp4 --steps 400
  ... lora_recipes.py --skip-quant-first-layers 1 --skip-quant-last-layers 1 --recompute-block

writes to --out: base/ (the pretrained checkpoint, unless --checkpoint), base_targets_nvfp4.safetensors
(the targeted weights as an NVFP4 checkpoint, to compare file sizes), lora_recipes.csv / .json /
.png / _table.md (per run: validation loss and perplexity before and after fine-tuning and against
the BF16 LoRA, the memory a GPU would hold by kind and what NVFP4 storage saves, tokens/s, step
time, peak RSS, NaN / spike counts), lora_table.md (the LoRA table) and adapters/<run>/ (each
run's adapters in PEFT's layout: adapter_model.safetensors, adapter_config.json).
"""

import contextlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
import torch.utils.checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import study_common as sc  # noqa: E402
import study_report as sr  # noqa: E402
import study_measures as sm  # noqa: E402
import qwen3_decoder as qd  # noqa: E402
import nvfp4  # noqa: E402
import nvfp4.torch as te  # noqa: E402
from nvfp4.torch import extras  # noqa: E402

CATALOG = {
    "bf16_lora": sc.Run("bf16_lora", "bf16", storage="bf16", about="LoRA over the BF16 base, BF16 GEMMs (the reference)"),
    "nvfp4_base_bf16": sc.Run("nvfp4_base_bf16", "bf16", storage="nvfp4",
                              about="base stored in NVFP4, its GEMMs in BF16 (classic QLoRA)"),
    "nvfp4_base_fp8": sc.Run("nvfp4_base_fp8", "fp8_current", storage="nvfp4",
                             about="base stored in NVFP4, its GEMMs under TE Float8CurrentScaling"),
    "nvfp4_base_mxfp8": sc.Run("nvfp4_base_mxfp8", "mxfp8", storage="nvfp4",
                               about="base stored in NVFP4, its GEMMs under TE MXFP8BlockScaling"),
    "nvfp4_base_nvfp4": sc.Run("nvfp4_base_nvfp4", "nvfp4", storage="nvfp4",
                               about="base stored in NVFP4, its GEMMs under TE NVFP4BlockScaling (the full FP4 path)"),
    "nvfp4_base_nvfp4_skip": sc.Run("nvfp4_base_nvfp4_skip", "nvfp4", storage="nvfp4", skip_first=1, skip_last=1,
                                    about="nvfp4_base_nvfp4 with the first and the last layer in BF16"),
    "nvfp4_base_nvfp4_recompute": sc.Run("nvfp4_base_nvfp4_recompute", "nvfp4", storage="nvfp4", recompute=True,
                                         about="nvfp4_base_nvfp4 recomputing each layer's forward in the backward"),
}
SECOND_PLAY = b"GLOUCESTER:\nNow is the winter of our discontent"


def split_domains(path):
    """(pretraining bytes, fine-tuning bytes): the text before and from Richard III's first line;
    a text without that line is cut in the middle."""
    with open(sc.resolve_path(path), "rb") as f:
        raw = f.read()
    cut = raw.find(SECOND_PLAY)
    cut = cut if cut > 0 else len(raw) // 2
    return raw[:cut], raw[cut:]


def as_tokens(raw):
    data = torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).astype(np.int64))
    split = int(len(data) * 0.9)
    return data[:split], data[split:]


def evaluate(model, data, args, recipe, seed=12345):
    rng = np.random.default_rng(seed)
    total = 0.0
    with torch.no_grad(), sc.precision(recipe):
        for _ in range(args.eval_batches):
            x, y = sc.batch_of(data, rng, args.batch, args.seq)
            logits = model(x)
            total += float(F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1)))
    return total / args.eval_batches


def pretrain(args, config, train_data, val_data, directory):
    """A short BF16 pretraining of a fresh model; the checkpoint in Hugging Face's layout."""
    torch.manual_seed(args.seed)
    model = qd.Qwen3ForCausalLM(config, mode=args.gemm)
    model.init_weights(args.seed)
    opt = extras.optim.AdamW(model.parameters(), lr=args.pretrain_lr, betas=(0.9, 0.95), weight_decay=0.1)
    rng = np.random.default_rng(args.seed + 100)
    every = max(1, args.pretrain_steps // 6)
    start = time.perf_counter()
    for step in range(args.pretrain_steps):
        x, y = sc.batch_of(train_data, rng, args.batch, args.seq)
        for g in opt.param_groups:
            g["lr"] = sc.lr_at(step, args.pretrain_steps, args.pretrain_lr, args.warmup)
        with sc.precision(None):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % every == 0 or step + 1 == args.pretrain_steps:
            print(f"[pretrain] step {step + 1}/{args.pretrain_steps} loss {float(loss):.4f} "
                  f"val {evaluate(model, val_data, args, None):.4f} "
                  f"tokens/s {args.batch * args.seq * (step + 1) / (time.perf_counter() - start):.0f}", flush=True)
    qd.save_checkpoint_dir(directory, config, model.hf_state_dict())
    return directory


def quantize_weight(w):
    """W's NVFP4 copy as TE quantizes weights (16x16 blocks, E4M3 block scales, an FP32 tensor
    scale), dequantized: the values an NVFP4-stored base holds."""
    return extras.functional.dequantize(extras.functional.quantize(w.detach().float().contiguous(), "nvfp4_16x16"))


def target_layers(model):
    """[(layer index, name, te.Linear)] of the targeted projections."""
    out = []
    for i, layer in enumerate(model.model.layers):
        for parent in (layer.self_attn, layer.mlp):
            for name in qd.LORA_TARGETS:
                if hasattr(parent, name):
                    out.append((i, name, getattr(parent, name)))
    return out


def skipped(run, args, index, layers):
    first = args.skip_quant_first_layers if args.skip_quant_first_layers is not None else run.options.get("skip_first", 0)
    last = args.skip_quant_last_layers if args.skip_quant_last_layers is not None else run.options.get("skip_last", 0)
    return index < first or index >= layers - last


def layer_runner(model, run, args, recipe, meter_box):
    """How the model runs layer i: under the run's recipe, or in BF16 for a skipped layer; with
    recomputation, through te.checkpoint / torch's checkpoint, re-entering the same regions (torch
    1.13's checkpoint restores only CUDA autocast, and TE's region is TE's own state)."""
    layers = len(model.model.layers)
    recompute = args.recompute_block or run.options.get("recompute", False)
    checkpoint = getattr(te, "checkpoint", None)

    def call(i, layer, x):
        layer_recipe = None if skipped(run, args, i, layers) else recipe

        def forward(h):
            with sc.precision(layer_recipe):
                return layer(h, model.rotary)

        if not (recompute and torch.is_grad_enabled()):
            return forward(x)
        meter = meter_box[0]
        with meter.suspended() if meter is not None else contextlib.nullcontext():
            out = (checkpoint(forward, x, use_reentrant=False) if checkpoint is not None else
                   torch.utils.checkpoint.checkpoint(forward, x, use_reentrant=False))
        if meter is not None:
            meter.add_saved(x)  # what the recomputation starts from
        return out
    return call


def lora_memory(model, run, args, optimizers, meter, adapters):
    """The bytes a GPU would hold: the frozen base (targets in their storage format, the rest in
    BF16), the recipe's weight copies of the targets it quantizes, activations, the adapters'
    FP32 master weights and gradients, and AdamW's state."""
    layers = len(model.model.layers)
    targets = target_layers(model)
    target_ids = {id(lin.base_layer.weight) for _, _, lin in targets}
    base = copies = 0
    for i, name, lin in targets:
        numel = lin.base_layer.weight.numel()
        quantized = not skipped(run, args, i, layers)
        base += sm.format_bytes("nvfp4" if run.options["storage"] == "nvfp4" and quantized else "bf16", numel)
        if quantized and run.recipe != "bf16":
            fmt, count, _ = sm.RECIPE_STORAGE[run.recipe]
            copies += count * sm.format_bytes(fmt, numel)
    base += sum(2 * p.numel() for p in model.parameters() if not p.requires_grad and id(p) not in target_ids)
    skip_names = {n for n, m in model.named_modules() if isinstance(m, te.Linear)
                  and skipped(run, args, int(n.split(".")[2]), layers)}
    torch_saved, linear_saved = meter.bytes_for(lambda n: "bf16" if n in skip_names else run.recipe)
    out = {"weights": base, "weight_copies": copies, "activations": torch_saved + linear_saved,
           "gradients": sum(4 * p.numel() for _, p in adapters), "optimizer": sc.state_bytes(optimizers),
           "adapters": sum(4 * p.numel() for _, p in adapters)}
    out["total"] = out["weights"] + out["weight_copies"] + out["activations"] + out["gradients"] + out["optimizer"] + out["adapters"]
    return out


def train(run, args, checkpoint_dir, train_data, val_data, old_val):
    torch.manual_seed(args.seed)
    config, tensors = qd.load_checkpoint_dir(checkpoint_dir)
    model = qd.Qwen3ForCausalLM(config, mode=args.gemm)
    model.load_hf_state_dict(tensors)
    layers = len(model.model.layers)
    if run.options["storage"] == "nvfp4":
        for i, _, lin in target_layers(model):
            if not skipped(run, args, i, layers):
                with torch.no_grad():
                    lin.weight.copy_(quantize_weight(lin.weight))
    adapters = qd.add_lora(model, args.lora_rank, args.lora_alpha, args.lora_targets, args.seed)
    recipe = sc.make_recipe(run.recipe)
    meter_box = [None]
    model.layer_call = layer_runner(model, run, args, recipe, meter_box)
    net = sc.wrap_data_parallel(model)
    opt = extras.optim.AdamW([p for _, p in adapters], lr=args.lr, betas=(0.9, 0.999), weight_decay=0.0)
    optimizers = [opt]
    watch = sc.AmaxWatch(model)
    rng = np.random.default_rng(args.seed)
    val_before = evaluate(model, val_data, args, recipe)
    curve, losses, step_seconds, memory = [{"step": 0, "train_loss": None, "val_loss": val_before}], [], [], None
    eval_every = max(1, args.steps // 6)
    val = val_before
    for step in range(args.steps):
        x, y = sc.rank_batch(train_data, rng, args.batch, args.seq)
        start = time.perf_counter()
        sc.set_lr(optimizers, sc.lr_at(step, args.steps, 1.0, args.warmup))
        meter_box[0] = sm.ActivationMeter(model) if memory is None else None
        with meter_box[0] or contextlib.nullcontext(), sc.precision(recipe):
            logits = net(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_([p for _, p in adapters], 1.0))
        opt.step()
        step_seconds.append(time.perf_counter() - start)
        if memory is None:
            memory = lora_memory(model, run, args, optimizers, meter_box[0], adapters)
            meter_box[0] = None
        train_loss = sc.mean_over_ranks(float(loss))
        losses.append(train_loss)
        point = {"step": step + 1, "train_loss": train_loss, "val_loss": None, "grad_norm": grad_norm,
                 "amax": watch.take_step_amax(), "step_seconds": step_seconds[-1]}
        if sc.world_size() > 1:
            point["train_loss_rank"] = float(loss)
        curve.append(point)
        if (step + 1) % eval_every == 0 or step + 1 == args.steps:
            val = point["val_loss"] = evaluate(model, val_data, args, recipe)
            if sc.rank() == 0:
                print(f"[{run.name}] step {step + 1}/{args.steps} loss {train_loss:.4f} val {val:.4f} "
                      f"tokens/s {args.batch * sc.world_size() * args.seq / np.mean(step_seconds):.0f}", flush=True)
    watch.close()
    nonfinite = sc.count_nonfinite(model) + watch.nonfinite() + sum(1 for v in losses if not math.isfinite(v))
    summary = sm.run_summary(losses, val, step_seconds, args.batch * args.seq * sc.world_size(), nonfinite)
    if sc.rank() == 0:
        save_adapters(os.path.join(args.out, "adapters", run.name), model, args, checkpoint_dir)
    return dict(
        run=run.name, recipe=run.recipe, storage=run.options["storage"],
        skip_first=args.skip_quant_first_layers if args.skip_quant_first_layers is not None else run.options.get("skip_first", 0),
        skip_last=args.skip_quant_last_layers if args.skip_quant_last_layers is not None else run.options.get("skip_last", 0),
        recompute=bool(args.recompute_block or run.options.get("recompute", False)), **summary,
        val_loss_before=val_before, val_ppl_before=math.exp(val_before),
        first_play_val_loss=evaluate(model, old_val, args, recipe),
        adapter_params=sum(p.numel() for _, p in adapters), base_params=sum(p.numel() for p in model.parameters()
                                                                              if not p.requires_grad),
        memory_bytes=memory["total"], gpu_memory=memory, layer_amax=watch.stats, curve=curve, rank=sc.rank(),
        weights_digest=sc.weights_digest(model), scaling_digest=sc.scaling_digest(model))


def save_adapters(directory, model, args, base):
    os.makedirs(directory, exist_ok=True)
    qd.save_safetensors(os.path.join(directory, "adapter_model.safetensors"), qd.adapter_state_dict(model))
    with open(os.path.join(directory, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "r": args.lora_rank, "lora_alpha": args.lora_alpha, "lora_dropout": 0.0,
                   "target_modules": list(args.lora_targets), "bias": "none", "base_model_name_or_path": base,
                   "task_type": "CAUSAL_LM"}, f, indent=1)


def checkpoint_sizes(out, checkpoint_dir):
    """The targeted weights of the base as an NVFP4 checkpoint (nvfp4.save_checkpoint, ModelOpt's
    layout) against the same tensors in BF16: the storage a quantized base saves on disk."""
    _, tensors = qd.load_checkpoint_dir(checkpoint_dir)
    targets = {k[:-len(".weight")]: v.float() for k, v in tensors.items()
               if any(f".{t}.weight" in k for t in qd.LORA_TARGETS)}
    path = os.path.join(out, "base_targets_nvfp4.safetensors")
    nvfp4.save_checkpoint(path, {k: extras.functional.quantize(v.contiguous(), "nvfp4_16x16") for k, v in targets.items()})
    bf16 = sum(2 * v.numel() for v in targets.values())
    return {"targets_bf16_bytes": bf16, "targets_nvfp4_file_bytes": os.path.getsize(path),
            "target_values": sum(v.numel() for v in targets.values())}


def write_lora_table(out, results, meta, sizes):
    ref = next((r for r in results if r["run"] == "bf16_lora"), results[0])
    lines = [f"<!-- {meta['command']} | commit {meta['commit']} | {meta['machine']} | {meta['isa']} -->",
             f"| run | base storage | recipe | BF16 layers (first, last) | recompute | val ppl before | val ppl after "
             f"| vs {ref['run']} | first-play ppl after | base weights MiB | GPU memory MiB | saved vs {ref['run']} | "
             f"tokens/s | peak RSS MiB | NaN/Inf | spikes |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        m = r["gpu_memory"]
        saved = 1 - m["total"] / ref["gpu_memory"]["total"]
        lines.append(f"| {r['run']} | {r['storage']} | {r['recipe']} | {r['skip_first']}, {r['skip_last']} | "
                     f"{'yes' if r['recompute'] else 'no'} | {r['val_ppl_before']:.3f} | {r['val_ppl']:.3f} | "
                     f"{100 * (r['val_ppl'] / ref['val_ppl'] - 1):+.2f}% | {math.exp(r['first_play_val_loss']):.3f} | "
                     f"{m['weights'] / 2**20:.3f} | {m['total'] / 2**20:.3f} | {100 * saved:+.1f}% | "
                     f"{r['tokens_per_s']:.0f} | {r['peak_rss_bytes'] / 2**20:.0f} | {r['nonfinite']} | {r['spikes']} |")
    lines.append("")
    lines.append(f"Targeted base weights ({sizes['target_values']} values): {sizes['targets_bf16_bytes']} bytes in BF16, "
                 f"{sizes['targets_nvfp4_file_bytes']} bytes as an NVFP4 checkpoint file (base_targets_nvfp4.safetensors, "
                 f"{100 * (1 - sizes['targets_nvfp4_file_bytes'] / sizes['targets_bf16_bytes']):.1f}% smaller).")
    with open(os.path.join(out, "lora_table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def arguments():
    p = sc.base_arguments(__doc__, CATALOG, steps=200, lr=2e-3)
    p.add_argument("--config", default=None,
                   help="a Hugging Face config.json (Qwen3Config keys) for the model to pretrain (default: the small "
                        "built-in one: hidden 128, 4 layers, 8 query / 4 key-value heads of 16, intermediate 384, "
                        "vocabulary 256)")
    p.add_argument("--checkpoint", default=None,
                   help="a Hugging Face model directory (config.json + model.safetensors or shards) to fine-tune "
                        "instead of pretraining one (default: none, pretrain one)")
    p.add_argument("--pretrain-steps", type=int, default=300, help="BF16 pretraining steps of the base model")
    p.add_argument("--pretrain-lr", type=float, default=3e-3, help="peak learning rate of the pretraining")
    p.add_argument("--lora-rank", type=int, default=16, help="adapter rank r")
    p.add_argument("--lora-alpha", type=float, default=32.0, help="adapter scale alpha (the update is alpha / r * B A x)")
    p.add_argument("--lora-targets", default=",".join(qd.LORA_TARGETS), help="projections that get adapters")
    p.add_argument("--skip-quant-first-layers", type=int, default=None,
                   help="for every run: keep the first N decoder layers in BF16, storage and GEMMs (default: each "
                        "run's own setting, 1 for nvfp4_base_nvfp4_skip, else 0)")
    p.add_argument("--skip-quant-last-layers", type=int, default=None,
                   help="for every run: keep the last N decoder layers in BF16 (default: each run's own setting, 1 "
                        "for nvfp4_base_nvfp4_skip, else 0)")
    p.add_argument("--recompute-block", action="store_true",
                   help="recompute every decoder layer's forward in the backward, in every run")
    p.add_argument("--seq", type=int, default=64, help="sequence length in bytes")
    p.add_argument("--batch", type=int, default=8, help="sequences per step (per rank with --nproc)")
    p.add_argument("--warmup", type=int, default=10, help="learning-rate warmup steps (pretraining and fine-tuning)")
    p.add_argument("--eval-batches", type=int, default=4, help="validation batches per evaluation")
    p.add_argument("--text", default=sc.SHAKESPEARE,
                   help="text read as bytes: the base is pretrained on what precedes Richard III's first line, the "
                        "adapters trained on the rest (a text without that line: halves)")
    return p


def main():
    started = time.time()
    args = arguments().parse_args()
    sc.check_common(args)
    args.lora_targets = [t.strip() for t in args.lora_targets.split(",") if t.strip()]
    unknown = [t for t in args.lora_targets if t not in qd.LORA_TARGETS]
    if unknown or not args.lora_targets:
        raise SystemExit(f"--lora-targets: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(qd.LORA_TARGETS)}")
    for name in ("pretrain_steps", "lora_rank", "seq", "batch", "eval_batches"):
        if getattr(args, name) < (0 if name == "pretrain_steps" else 1):
            raise SystemExit(f"--{name.replace('_', '-')} is out of range")
    if not args.lora_alpha > 0:
        raise SystemExit("--lora-alpha must be > 0")
    for name in ("skip_quant_first_layers", "skip_quant_last_layers"):
        if getattr(args, name) is not None and getattr(args, name) < 0:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 0")
    runs = sc.parse_runs(args.recipes, CATALOG)
    threads = sc.set_threads(args.threads)
    first_play, second_play = split_domains(args.text)
    old_train, old_val = as_tokens(first_play)
    new_train, new_val = as_tokens(second_play)
    if min(len(old_val), len(new_val)) <= args.seq + 1:
        raise SystemExit(f"--text is too short for --seq {args.seq}")
    try:
        if args.checkpoint:
            checkpoint_dir = args.checkpoint
            config, _ = qd.load_checkpoint_dir(checkpoint_dir)
        else:
            config = qd.SMALL_CONFIG
            if args.config:
                with open(args.config) as f:
                    config = json.load(f)
            qd.check_config(config)
            checkpoint_dir = os.path.join(args.out, "base")
    except (OSError, ValueError) as e:
        raise SystemExit(f"lora_recipes.py: {e}")
    layers = config["num_hidden_layers"]
    for run in runs:
        first = args.skip_quant_first_layers if args.skip_quant_first_layers is not None else run.options.get("skip_first", 0)
        last = args.skip_quant_last_layers if args.skip_quant_last_layers is not None else run.options.get("skip_last", 0)
        if first + last > layers:
            raise SystemExit(f"{run.name}: {first} first + {last} last BF16 layers, the model has {layers}")
    os.makedirs(args.out, exist_ok=True)
    if not args.checkpoint:
        print(f"pretraining the base ({config['num_hidden_layers']} layers of {config['hidden_size']}) for "
              f"{args.pretrain_steps} steps on {len(first_play)} bytes", flush=True)
        pretrain(args, config, old_train, old_val, checkpoint_dir)
    sizes = checkpoint_sizes(args.out, checkpoint_dir)
    world = int(os.environ.get("WORLD_SIZE", "1")) if sc.launched_by_torchrun() else args.nproc
    print(f"{len(runs)} LoRA runs x {args.steps} steps, rank {args.lora_rank}, alpha {args.lora_alpha}, batch "
          f"{args.batch} x {args.seq} bytes x {world} rank(s), {threads} thread(s) each", flush=True)
    results = sc.run_all(train, runs, args, checkpoint_dir, new_train, new_val, old_val)
    if sc.launched_by_torchrun() and sc.rank() != 0:
        return
    print(f"\n{'run':28s} {'ppl before':>10s} {'ppl after':>9s} {'tokens/s':>8s} {'GPU MiB':>8s} {'base MiB':>8s} "
          f"{'RSS MiB':>8s} {'NaN':>4s} {'spikes':>6s}")
    for r in results:
        print(f"{r['run']:28s} {r['val_ppl_before']:10.3f} {r['val_ppl']:9.3f} {r['tokens_per_s']:8.0f} "
              f"{r['gpu_memory']['total'] / 2**20:8.3f} {r['gpu_memory']['weights'] / 2**20:8.3f} "
              f"{r['peak_rss_bytes'] / 2**20:8.1f} {r['nonfinite']:4d} {r['spikes']:6d}")
    meta = sm.study_meta(args, "LoRA over an NVFP4 base", started, threads=threads, world_size=world,
                         tokens_per_step=args.batch * args.seq * world, base_checkpoint=checkpoint_dir,
                         model_config=config, checkpoint_sizes=sizes)
    sr.write_reports(args.out, "lora_recipes", results, ["train_loss", "val_loss", "grad_norm", "amax", "step_seconds"],
                     meta, baseline="bf16_lora" if any(r["run"] == "bf16_lora" for r in results) else None)
    write_lora_table(args.out, results, meta, sizes)
    if world > 1:
        sr.write_ddp_smoke(args.out, results, meta)
    print(f"wrote {args.out}/lora_recipes.csv, .json, .png, _table.md, lora_table.md, adapters/, base_targets_nvfp4.safetensors")


if __name__ == "__main__":
    main()
