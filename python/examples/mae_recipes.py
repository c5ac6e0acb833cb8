#!/usr/bin/env python3
"""A small ViT masked autoencoder (MAE) trained under TransformerEngine recipes on the CPU: 32x32
RGB images made deterministically from a seed (a gradient background, then circles, rectangles or
stripes; nothing downloaded) are cut into 64 patches of 4x4 pixels, a share of them hidden
(--mask-ratio), and the model reconstructs the hidden ones from the visible ones. Every Linear is a
te.Linear from nvfp4.torch.

examples:
  PYTHONPATH=build/release/python /usr/bin/python3 python/examples/mae_recipes.py
  ... mae_recipes.py --recipes bf16,nvfp4 --steps 600 --out my_reports
  ... mae_recipes.py --nproc 2 --recipes nvfp4      # data-parallel, DDP over gloo

writes to --out: mae_recipes.csv (every step of every run), mae_recipes.json (settings, machine,
per run: reconstruction loss, images and patches per second, step time, the memory a GPU would
hold by kind next to this process's peak RSS, NaN / spike counts), mae_recipes.png (loss curves and
each run's gap to bf16), mae_recipes_table.md (the recipe table) and mae_recon.png (originals |
visible patches | reconstructions, one row of images per run).
"""

import contextlib
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import study_common as sc  # noqa: E402
import study_report as sr  # noqa: E402
import study_measures as sm  # noqa: E402
import nvfp4.torch as te  # noqa: E402

CATALOG = {
    "bf16": sc.Run("bf16", "bf16", about="no quantization: BF16 operands, FP32 accumulation (the baseline)"),
    "fp8_current": sc.Run("fp8_current", "fp8_current", about="TE Float8CurrentScaling"),
    "mxfp8": sc.Run("mxfp8", "mxfp8", about="TE MXFP8BlockScaling"),
    "nvfp4": sc.Run("nvfp4", "nvfp4", about="TE NVFP4BlockScaling defaults (16x16 weights, RHT on wgrad, SR gradients)"),
}
IMAGE, PATCH, CHANNELS = 32, 4, 3
PATCHES, PATCH_DIM = (IMAGE // PATCH) ** 2, PATCH * PATCH * CHANNELS
# The patch embedding and the pixel head work on the 48 values of a patch followed by 16 zeros: TE's
# MXFP8 quantizer takes only dims divisible by 32 (pytorch/csrc/quantizer.cpp). The weights that
# meet the padding start at zero and stay there (no gradient reaches them: the embedding's extra
# inputs are zero, the head's extra outputs are not in the loss), so they change no product, amax
# or scale: the model is the 48-feature one.
PATCH_FEATURES = 64


def make_images(count, seed):
    """count images [count, 3, 32, 32] in [0, 1]: a smooth background gradient, then 1-3 filled
    circles, rectangles or stripe bands in random colours; all from one numpy generator."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:IMAGE, 0:IMAGE].astype(np.float32) / (IMAGE - 1)
    images = np.empty((count, CHANNELS, IMAGE, IMAGE), dtype=np.float32)
    for i in range(count):
        a, b = rng.uniform(0, 1, (2, CHANNELS, 1, 1)).astype(np.float32)
        angle = rng.uniform(0, 2 * math.pi)
        t = (math.cos(angle) * xx + math.sin(angle) * yy)[None]
        img = a + (b - a) * (t - t.min()) / max(1e-6, t.max() - t.min())
        for _ in range(rng.integers(1, 4)):
            colour = rng.uniform(0, 1, (CHANNELS, 1)).astype(np.float32)
            kind = rng.integers(0, 3)
            cx, cy, r = rng.uniform(0.2, 0.8), rng.uniform(0.2, 0.8), rng.uniform(0.1, 0.3)
            if kind == 0:
                mask = (xx - cx) ** 2 + (yy - cy) ** 2 < r * r
            elif kind == 1:
                mask = (abs(xx - cx) < r) & (abs(yy - cy) < r * rng.uniform(0.4, 1.0))
            else:
                mask = (np.sin((xx * math.cos(angle) - yy * math.sin(angle)) * rng.uniform(8, 20)) > 0.3)
            img[:, mask] = colour
        images[i] = np.clip(img, 0, 1)
    return torch.from_numpy(images)


def patchify(images):  # [B, 3, 32, 32] -> [B, 64, 48]
    b = images.shape[0]
    g = IMAGE // PATCH
    return images.reshape(b, CHANNELS, g, PATCH, g, PATCH).permute(0, 2, 4, 3, 5, 1).reshape(b, PATCHES, PATCH_DIM)


def unpatchify(patches):  # [B, 64, 48] -> [B, 3, 32, 32]
    b = patches.shape[0]
    g = IMAGE // PATCH
    return patches.reshape(b, g, g, PATCH, PATCH, CHANNELS).permute(0, 5, 1, 3, 2, 4).reshape(b, CHANNELS, IMAGE, IMAGE)


class MAE(nn.Module):
    def __init__(self, width, depth, decoder_width, decoder_depth, heads, mode="exact"):
        super().__init__()
        self.patch_embed = te.Linear(PATCH_FEATURES, width, mode=mode)
        self.pos = nn.Parameter(torch.randn(1, PATCHES, width) * 0.02)
        self.encoder = nn.ModuleList(sc.Block(width, heads, norm="layernorm", activation="gelu", causal=False, mode=mode)
                                     for _ in range(depth))
        self.encoder_norm = te.LayerNorm(width)
        self.to_decoder = te.Linear(width, decoder_width, mode=mode)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, decoder_width))
        self.decoder_pos = nn.Parameter(torch.randn(1, PATCHES, decoder_width) * 0.02)
        self.decoder = nn.ModuleList(sc.Block(decoder_width, heads, norm="layernorm", activation="gelu", causal=False, mode=mode)
                                     for _ in range(decoder_depth))
        self.decoder_norm = te.LayerNorm(decoder_width)
        self.to_pixels = te.Linear(decoder_width, PATCH_FEATURES, mode=mode)
        with torch.no_grad():
            self.patch_embed.weight[:, PATCH_DIM:] = 0
            self.to_pixels.weight[PATCH_DIM:] = 0
            if self.to_pixels.bias is not None:
                self.to_pixels.bias[PATCH_DIM:] = 0

    def forward(self, patches, keep):
        """patches [B, 64, 48]; keep [B, V] indices of the visible patches. Returns the predicted
        patches [B, 64, 48]."""
        b, v = keep.shape
        w = self.pos.shape[-1]
        features = torch.nn.functional.pad(patches.reshape(-1, PATCH_DIM), (0, PATCH_FEATURES - PATCH_DIM))
        x = self.patch_embed(features).reshape(b, PATCHES, w) + self.pos
        x = torch.gather(x, 1, keep[..., None].expand(b, v, w))
        for block in self.encoder:
            x = block(x)
        x = self.encoder_norm(x)
        dw = self.mask_token.shape[-1]
        x = self.to_decoder(x.reshape(b * v, w)).reshape(b, v, dw)
        full = self.mask_token.expand(b, PATCHES, dw).clone()
        full = full.scatter(1, keep[..., None].expand(b, v, dw), x.to(full.dtype)) + self.decoder_pos
        for block in self.decoder:
            full = block(full)
        pixels = self.to_pixels(self.decoder_norm(full).reshape(b * PATCHES, dw))[:, :PATCH_DIM]
        return pixels.reshape(b, PATCHES, PATCH_DIM)


def random_keep(generator, batch, visible):
    return torch.argsort(torch.rand(batch, PATCHES, generator=generator), dim=1)[:, :visible].sort(dim=1).values


def masked_loss(pred, target, keep):
    hidden = torch.ones(pred.shape[:2], dtype=torch.bool)
    hidden.scatter_(1, keep, False)
    return ((pred.float() - target) ** 2).mean(-1)[hidden].mean()


def evaluate(model, images, keep, recipe):
    with torch.no_grad(), sc.precision(recipe):
        patches = patchify(images)
        pred = model(patches, keep)
        return float(masked_loss(pred, patches, keep)), pred.float()


def train(run, args, train_images, val_images, val_keep):
    torch.manual_seed(args.seed)
    model = MAE(args.width, args.depth, args.decoder_width, args.decoder_depth, args.heads, mode=args.gemm)
    net = sc.wrap_data_parallel(model)
    optimizers = sc.make_optimizers(model, run, args.lr)
    watch = sc.AmaxWatch(model)
    recipe = sc.make_recipe(run.recipe)
    generator = torch.Generator().manual_seed(args.seed)
    visible = PATCHES - int(round(args.mask_ratio * PATCHES))
    world, rank = sc.world_size(), sc.rank()
    curve, losses, step_seconds, memory = [], [], [], None
    eval_every = max(1, args.steps // 6)
    val = float("nan")
    for step in range(args.steps):
        # Every rank draws the step's global batch and keeps its own rows (as the GPT does).
        idx = torch.randint(0, len(train_images), (args.batch * world,), generator=generator)
        keep = random_keep(generator, args.batch * world, visible)
        idx, keep = idx[rank * args.batch:(rank + 1) * args.batch], keep[rank * args.batch:(rank + 1) * args.batch]
        start = time.perf_counter()
        sc.set_lr(optimizers, sc.lr_at(step, args.steps, 1.0, args.warmup))
        patches = patchify(train_images[idx])
        meter = sm.ActivationMeter(model) if memory is None else None
        with meter or contextlib.nullcontext(), sc.precision(recipe):
            pred = net(patches, keep)
        loss = masked_loss(pred, patches, keep)
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        for opt in optimizers:
            opt.step()
        step_seconds.append(time.perf_counter() - start)
        if memory is None:
            memory = sm.gpu_memory(model, optimizers, meter, lambda name: run.recipe)
        loss_value = sc.mean_over_ranks(float(loss))
        losses.append(loss_value)
        point = {"step": step + 1, "train_loss": loss_value, "val_loss": None, "grad_norm": grad_norm,
                 "amax": watch.take_step_amax(), "step_seconds": step_seconds[-1]}
        if world > 1:
            point["train_loss_rank"] = float(loss)
        curve.append(point)
        if (step + 1) % eval_every == 0 or step + 1 == args.steps:
            val = point["val_loss"] = evaluate(model, val_images, val_keep, recipe)[0]
            if rank == 0:
                print(f"[{run.name}] step {step + 1}/{args.steps} loss {loss_value:.5f} val {val:.5f} "
                      f"images/s {args.batch * world / np.mean(step_seconds):.0f}", flush=True)
    watch.close()
    val, pred = evaluate(model, val_images, val_keep, recipe)
    nonfinite = sc.count_nonfinite(model) + watch.nonfinite() + sum(1 for v in losses if not math.isfinite(v))
    summary = sm.run_summary(losses, val, step_seconds, args.batch * PATCHES * world, nonfinite)
    return dict(
        run=run.name, recipe=run.recipe, **summary, images_per_s=args.batch * world / np.mean(step_seconds),
        weight_bytes=sc.weight_bytes(model), optimizer_state_bytes=sc.state_bytes(optimizers),
        memory_bytes=sc.weight_bytes(model) + sc.state_bytes(optimizers), gpu_memory=memory,
        layer_amax=watch.stats, curve=curve, rank=rank, weights_digest=sc.weights_digest(model),
        scaling_digest=sc.scaling_digest(model)), pred


def write_grid(path, images, keep, predictions, shown, meta):
    """One row per recipe: `shown` originals | the same with hidden patches greyed | reconstructions
    (visible patches pasted back, as MAE papers show them); the run's provenance underneath."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    patches = patchify(images[:shown])
    visible_mask = torch.zeros(shown, PATCHES, 1)
    visible_mask.scatter_(1, keep[:shown, :, None], 1.0)
    masked = unpatchify(patches * visible_mask + 0.5 * (1 - visible_mask))
    names = list(predictions)
    fig, axes = plt.subplots(len(names), 3 * shown, figsize=(1.1 * 3 * shown, 1.25 * len(names) + 0.4), squeeze=False)
    for row, name in enumerate(names):
        recon = unpatchify(predictions[name][:shown].clamp(0, 1) * (1 - visible_mask) + patches * visible_mask)
        for i in range(shown):
            for j, img in enumerate((images[i], masked[i], recon[i])):
                ax = axes[row][j * shown + i]
                ax.imshow(img.permute(1, 2, 0).numpy())
                ax.set_xticks([])
                ax.set_yticks([])
        axes[row][0].set_ylabel(name, fontsize=9)
    for j, title in enumerate(("originals", "visible patches", "reconstructions")):
        axes[0][j * shown].set_title(title, fontsize=9, loc="left")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.text(0.01, 0.005, f"{meta['steps']} steps, seed {meta['seed']}; {meta['machine']}, {meta['isa']}; "
                          f"commit {meta['commit']}", fontsize=7, color="#555555")
    fig.savefig(path, dpi=110)
    plt.close(fig)


def arguments():
    p = sc.base_arguments(__doc__, CATALOG, steps=300, lr=2e-3)
    p.add_argument("--width", type=int, default=64, help="encoder width")
    p.add_argument("--depth", type=int, default=2, help="encoder blocks")
    p.add_argument("--decoder-width", type=int, default=64, help="decoder width")
    p.add_argument("--decoder-depth", type=int, default=1, help="decoder blocks")
    p.add_argument("--heads", type=int, default=4, help="attention heads of encoder and decoder")
    p.add_argument("--batch", type=int, default=64, help="images per step (per rank with --nproc)")
    p.add_argument("--warmup", type=int, default=20, help="learning-rate warmup steps")
    p.add_argument("--mask-ratio", type=float, default=0.5,
                   help="hidden share of the 64 patches (MAE's 0.75 needs longer runs than a CPU study)")
    p.add_argument("--images", type=int, default=2048, help="training images made from the seed")
    return p


def main():
    started = time.time()
    args = arguments().parse_args()
    sc.check_common(args)
    if not 0 < args.mask_ratio < 1:
        raise SystemExit("--mask-ratio must be in (0, 1)")
    for name in ("width", "depth", "decoder_width", "decoder_depth", "heads", "batch", "images"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1")
    if args.width % args.heads or args.decoder_width % args.heads:
        raise SystemExit("--width and --decoder-width must be multiples of --heads")
    runs = sc.parse_runs(args.recipes, CATALOG)
    threads = sc.set_threads(args.threads)
    train_images = make_images(args.images, args.seed)
    val_images = make_images(64, args.seed + 1000)
    val_keep = random_keep(torch.Generator().manual_seed(args.seed + 2000), len(val_images),
                           PATCHES - int(round(args.mask_ratio * PATCHES)))
    world = int(os.environ.get("WORLD_SIZE", "1")) if sc.launched_by_torchrun() else args.nproc
    if not sc.launched_by_torchrun() or int(os.environ["RANK"]) == 0:
        print(f"{len(runs)} runs x {args.steps} steps, batch {args.batch} images x {world} rank(s), "
              f"{threads} thread(s) each", flush=True)
    outcomes = sc.run_all(train, runs, args, train_images, val_images, val_keep)
    if sc.launched_by_torchrun() and sc.rank() != 0:
        return
    results = [r for r, _ in outcomes]
    predictions = {run.name: pred for run, (_, pred) in zip(runs, outcomes)}
    print(f"\n{'run':12s} {'train loss':>10s} {'val loss':>9s} {'images/s':>9s} {'step ms':>8s} {'GPU MiB':>8s} "
          f"{'RSS MiB':>8s} {'NaN':>4s} {'spikes':>6s}")
    for r in results:
        print(f"{r['run']:12s} {r['train_loss_last10pct']:10.5f} {r['val_loss']:9.5f} {r['images_per_s']:9.1f} "
              f"{r['step_ms']:8.1f} {r['gpu_memory']['total'] / 2**20:8.2f} {r['peak_rss_bytes'] / 2**20:8.1f} "
              f"{r['nonfinite']:4d} {r['spikes']:6d}")
    meta = sm.study_meta(args, "MAE", started, threads=threads, world_size=world, tokens_per_step=args.batch * PATCHES * world)
    sr.write_reports(args.out, "mae_recipes", results, ["train_loss", "val_loss", "grad_norm", "amax", "step_seconds"],
                     meta, baseline="bf16" if "bf16" in predictions else None, quality="val_loss",
                     quality_label="val MSE", difference_format="{:+.5f}")
    write_grid(os.path.join(args.out, "mae_recon.png"), val_images, val_keep, predictions, shown=6, meta=meta)
    written = "mae_recipes.csv, .json, .png, _table.md and mae_recon.png"
    if world > 1:
        sr.write_ddp_smoke(args.out, results, meta)
        written += ", ddp_smoke.json, .png"
    print(f"wrote {args.out}/{written}")


if __name__ == "__main__":
    main()
