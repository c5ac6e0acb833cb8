#!/usr/bin/env python3
"""A byte-level language model with three of DeepSeek's sparse / multi-stream ideas, trained under
TransformerEngine recipes on the CPU (the NVFP4 pretraining playground's hybrid suite, on the
shipped Shakespeare bytes):

  - conditional memory in the style of Engram (DeepSeek, arXiv:2601.07372): the byte n-grams
    (orders 2 and 3) ending at each position index hashed embedding tables; the looked-up rows
    are projected into a key and a value, the value is gated by how well the key matches the
    hidden state, passed through a causal depthwise convolution and added to the block's input;
  - hyper-connections with n residual streams (HC, arXiv:2409.19606), constrained as in mHC
    (DeepSeek, arXiv:2512.24880): the stream-mixing matrix is projected onto the doubly
    stochastic matrices by Sinkhorn iterations, so the product over depth cannot grow;
  - a top-k mixture of experts (a float32 router; each expert an MLP of te.Linear layers, or of
    te.GroupedLinear layers where nvfp4.torch has them; a load-balancing loss).

Every GEMM of attention, the Engram projections, the experts and the head is a te.Linear, so the
recipe covers them; the router, the hashing, the mixing and the convolution stay in high
precision. Runs: the architecture ladder in BF16 (dense, moe, engram, hc, hybrid) and the hybrid
under FP8 (current scaling), MXFP8 and NVFP4; then a sparsity-allocation sweep (a fixed budget of
sparse parameters split between experts and Engram memory) and a long-context evaluation.

examples:
  PYTHONPATH=build/release/python /usr/bin/python3 python/examples/hybrid_recipes.py
  ... hybrid_recipes.py --recipes dense,hybrid_nvfp4 --steps 600 --alloc-ratios ''
  ... hybrid_recipes.py --nproc 2 --recipes hybrid_nvfp4 --alloc-ratios ''   # data-parallel

writes to --out: hybrid_recipes.csv / .json / .png / _table.md (as every study), hybrid_loss.png,
hybrid_throughput.png, hybrid_memory.png (what a GPU would hold, by kind), hybrid_alloc.png
(the allocation sweep), hybrid_long_context.png, hybrid_gate.png (Engram's gate over a line of
text), hybrid_stability.png (the composite residual gain, te.Linear input amax, gradient norm),
hybrid_poster.png (all of it on one page) and, with --nproc > 1, ddp_smoke.json / .png.
"""

import contextlib
import math
import os
import sys
import time
from collections import Counter

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import study_common as sc  # noqa: E402
import study_report as sr  # noqa: E402
import study_measures as sm  # noqa: E402
import nvfp4.torch as te  # noqa: E402

ARCH_DENSE = dict(engram=False, moe=False, streams=1, sinkhorn=False)
CATALOG = {
    "dense": sc.Run("dense", "bf16", about="plain pre-norm transformer, dense MLP, BF16", **ARCH_DENSE),
    "moe": sc.Run("moe", "bf16", about="dense with the MLP replaced by the top-k experts, BF16",
                  **dict(ARCH_DENSE, moe=True)),
    "engram": sc.Run("engram", "bf16", about="dense plus Engram memory in every block, BF16",
                     **dict(ARCH_DENSE, engram=True)),
    "hc": sc.Run("hc", "bf16", about="Engram + experts + unconstrained hyper-connections (n streams), BF16",
                 **dict(engram=True, moe=True, streams=4, sinkhorn=False)),
    "hybrid": sc.Run("hybrid", "bf16", about="Engram + experts + mHC (Sinkhorn-constrained mixing), BF16",
                     **dict(engram=True, moe=True, streams=4, sinkhorn=True)),
    "hybrid_fp8": sc.Run("hybrid_fp8", "fp8_current", about="hybrid under TE Float8CurrentScaling",
                         **dict(engram=True, moe=True, streams=4, sinkhorn=True)),
    "hybrid_mxfp8": sc.Run("hybrid_mxfp8", "mxfp8", about="hybrid under TE MXFP8BlockScaling",
                           **dict(engram=True, moe=True, streams=4, sinkhorn=True)),
    "hybrid_nvfp4": sc.Run("hybrid_nvfp4", "nvfp4", about="hybrid under TE NVFP4BlockScaling (defaults)",
                           **dict(engram=True, moe=True, streams=4, sinkhorn=True)),
}
GROUP_ROWS = 32  # expert groups padded to a multiple of this (MXFP8's block; NVFP4 needs 16)
PAD = 256        # the byte before the start of a sequence, for the n-gram hash (bytes are 0..255)


def sinkhorn(logits, iterations):
    """A doubly stochastic matrix (every row and column sums to 1) from exp(logits), by alternately
    normalising rows and columns (Sinkhorn-Knopp), in float32."""
    m = torch.exp(logits.float() - logits.float().max())
    for _ in range(iterations):
        m = m / m.sum(dim=1, keepdim=True)
        m = m / m.sum(dim=0, keepdim=True)
    return m


class StreamMixer(nn.Module):
    """How a block reads and writes n residual streams: it reads sum_j pre_j x_j, and the streams
    become res @ x + post (x) branch. HC learns pre, post and res freely (res starts at the
    identity, so the model starts as an ordinary residual network); mHC keeps pre in (0, 1) and
    post in (0, 2) by sigmoids and res doubly stochastic (Sinkhorn). Small seeded perturbations of
    the starting values make the streams differ (identical streams would stay identical). Float32,
    outside autocast."""

    def __init__(self, streams, sinkhorn_on, iterations=20):
        super().__init__()
        self.sinkhorn_on, self.iterations = sinkhorn_on, iterations
        self.pre = nn.Parameter(torch.empty(streams))
        self.post = nn.Parameter(torch.empty(streams))
        self.res = nn.Parameter(torch.empty(streams, streams))
        self.start(torch.Generator().manual_seed(0))

    def start(self, generator):
        """The starting values (see the class), perturbed from `generator`."""
        n = self.pre.numel()
        noise = lambda *shape: 0.02 * torch.randn(*shape, generator=generator)  # noqa: E731
        with torch.no_grad():
            if self.sinkhorn_on:
                self.pre.copy_(torch.full((n,), -math.log(n - 1)) + noise(n))
                self.post.copy_(noise(n))
                self.res.copy_(4.0 * torch.eye(n) + noise(n, n))
            else:
                self.pre.copy_(torch.full((n,), 1.0 / n) + noise(n))
                self.post.copy_(torch.ones(n) + noise(n))
                self.res.copy_(torch.eye(n) + noise(n, n))

    def weights(self):
        if self.sinkhorn_on:
            return torch.sigmoid(self.pre), 2.0 * torch.sigmoid(self.post), sinkhorn(self.res, self.iterations)
        return self.pre, self.post, self.res

    def read(self, streams):  # [B, T, n, D] -> [B, T, D]
        pre, _, _ = self.weights()
        return torch.einsum("n,btnd->btd", pre, streams)

    def write(self, streams, branch):
        _, post, res = self.weights()
        return torch.einsum("mn,btnd->btmd", res, streams) + post[None, None, :, None] * branch.float()[:, :, None, :]


def ngram_buckets(tokens, order, salt, buckets):
    """For every position, the bucket of the `order` bytes ending there (positions before the start
    read PAD): an FNV-style hash (xor a byte, multiply by an odd constant, keep 31 bits) started
    from a per-table salt, then taken modulo `buckets`."""
    b, t = tokens.shape
    padded = torch.cat([torch.full((b, order - 1), PAD, dtype=torch.int64), tokens], dim=1)
    h = torch.full((b, t), salt, dtype=torch.int64)
    for i in range(order):
        h = torch.bitwise_xor(h, padded[:, i:i + t]) * 16777619 % (1 << 31)
    return h % buckets


class Engram(nn.Module):
    """Conditional memory: per n-gram order, `heads` hashed tables (different salts, so two n-grams
    that collide in one table rarely collide in all); the rows of every table, concatenated to the
    model width, give a key and a value (te.Linear); the gate sigmoid(<rms(h), rms(key)> / sqrt(D))
    scales the value; a causal depthwise convolution (kernel 4, dilation 3) widens its reach. The
    value projection starts at zero, so the memory starts switched off."""

    def __init__(self, width, orders, heads, buckets, mode):
        super().__init__()
        tables = len(orders) * heads
        if width % tables:
            raise ValueError(f"width {width} must be a multiple of the Engram tables ({tables} = orders x heads)")
        self.orders, self.heads, self.buckets = list(orders), heads, buckets
        self.tables = nn.ModuleList(nn.Embedding(buckets, width // tables) for _ in range(tables))
        self.salts = [1000 * order + 7 * head + 1 for order in self.orders for head in range(heads)]
        self.key = te.Linear(width, width, bias=False, mode=mode)
        self.value = te.Linear(width, width, bias=False, mode=mode)
        self.conv = nn.Conv1d(width, width, kernel_size=4, dilation=3, groups=width, bias=False)
        for table in self.tables:
            nn.init.normal_(table.weight, std=1.0)
        nn.init.zeros_(self.value.weight)

    def lookup(self, tokens):
        rows, i = [], 0
        for order in self.orders:
            for _ in range(self.heads):
                rows.append(self.tables[i](ngram_buckets(tokens, order, self.salts[i], self.buckets)))
                i += 1
        return torch.cat(rows, dim=-1)

    def forward(self, h, tokens):
        b, t, w = h.shape
        memory = self.lookup(tokens).reshape(b * t, w)
        key = self.key(memory).reshape(b, t, w).float()
        value = self.value(memory).reshape(b, t, w).float()
        rms = lambda v: v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + 1e-6)  # noqa: E731
        gate = torch.sigmoid((rms(h.float()) * rms(key)).sum(-1, keepdim=True) / math.sqrt(w))
        gated = (gate * value).transpose(1, 2)                                   # [B, D, T]
        reach = (self.conv.kernel_size[0] - 1) * self.conv.dilation[0]
        delta = self.conv(F.pad(gated, (reach, 0))).transpose(1, 2)              # causal: left padding
        return delta, gate[..., 0]


class Expert(nn.Module):
    """One expert's MLP; expert i's layers draw their stochastic-rounding streams from seed i, as
    te.GroupedLinear's expert i does (seed + i), so both layouts compute the same bits."""

    def __init__(self, width, hidden, mode, seed=0):
        super().__init__()
        self.fc = te.Linear(width, hidden, bias=False, mode=mode, seed=seed)
        self.fc_out = te.Linear(hidden, width, bias=False, mode=mode, seed=seed)

    def forward(self, x):
        return self.fc_out(F.gelu(self.fc(x)))


class MoE(nn.Module):
    """Top-k experts: a float32 router scores E experts per token, the k best are run and their
    outputs summed with the softmax of their scores; each expert's tokens are gathered into a group
    padded with zero rows to a multiple of GROUP_ROWS (TE's FP8 / FP4 GEMMs take 16- or 32-row
    multiples; Megatron pads expert groups the same way). The load-balancing loss is Switch's:
    E * sum_e (share of routed slots going to e) * (mean router probability of e)."""

    def __init__(self, width, hidden, experts, top_k, mode, grouped=False):
        super().__init__()
        self.experts_count, self.top_k, self.grouped = experts, top_k, grouped
        self.router = nn.Linear(width, experts, bias=False)
        if grouped:
            self.fc = te.GroupedLinear(experts, width, hidden, bias=False, mode=mode)
            self.fc_out = te.GroupedLinear(experts, hidden, width, bias=False, mode=mode)
        else:
            self.experts = nn.ModuleList(Expert(width, hidden, mode, seed=i) for i in range(experts))
        self.last_load = torch.zeros(experts)

    def forward(self, x):
        b, t, w = x.shape
        x2 = x.reshape(b * t, w)
        with torch.autocast("cpu", enabled=False):
            probs = F.linear(x2.float(), self.router.weight.float()).softmax(-1)
        top_p, top_e = probs.topk(self.top_k, dim=-1)
        weights = top_p / top_p.sum(-1, keepdim=True)
        slots_expert = top_e.reshape(-1)
        slots_token = torch.arange(b * t).repeat_interleave(self.top_k)
        slots_weight = weights.reshape(-1)
        counts = torch.bincount(slots_expert, minlength=self.experts_count)
        share = counts.float() / slots_expert.numel()
        aux = self.experts_count * (share * probs.mean(0)).sum()
        self.last_load = share.detach()
        order = torch.argsort(slots_expert, stable=True)
        groups = torch.split(order, counts.tolist())
        padded = [int(math.ceil(int(c) / GROUP_ROWS) * GROUP_ROWS) for c in counts]
        rows = torch.cat([torch.cat([x2[slots_token[g]], x2.new_zeros(p - len(g), w)]) for g, p in zip(groups, padded)])
        if self.grouped:
            out_rows = self.fc_out(F.gelu(self.fc(rows, padded)), padded)
        else:
            pieces, start = [], 0
            for expert, p in zip(self.experts, padded):
                if p:  # an expert without tokens is not called (its weights get no gradient this step)
                    pieces.append(expert(rows[start:start + p]))
                start += p
            out_rows = torch.cat(pieces)
        keep = torch.cat([torch.arange(s, s + len(g)) for g, s in zip(groups, np.cumsum([0] + padded[:-1]).tolist())])
        out = torch.zeros(b * t, w, dtype=torch.float32)
        out.index_add_(0, slots_token[order], out_rows[keep].float() * slots_weight[order, None])
        return out.reshape(b, t, w), aux


class DenseMLP(nn.Module):
    def __init__(self, width, hidden, mode):
        super().__init__()
        self.expert = Expert(width, hidden, mode)

    def forward(self, x):
        b, t, w = x.shape
        return self.expert(x.reshape(b * t, w)).reshape(b, t, w), x.new_zeros(())


class HybridBlock(nn.Module):
    """Read the block's input from the streams; add Engram's memory, attention and the MLP / experts
    to it (pre-norm, each branch's output projection starting at zero); write what the block added
    back into the streams."""

    def __init__(self, width, heads, arch, rotary, args):
        super().__init__()
        self.heads, self.rotary = heads, rotary
        self.mixer = StreamMixer(arch["streams"], arch["sinkhorn"], args.sinkhorn_iterations) if arch["streams"] > 1 else None
        self.engram = Engram(width, args.engram_orders, args.engram_heads, arch.get("buckets", args.engram_buckets),
                             args.gemm) if arch["engram"] else None
        self.norm1, self.norm2 = te.RMSNorm(width), te.RMSNorm(width)
        self.qkv = te.Linear(width, 3 * width, bias=False, mode=args.gemm)
        self.proj = te.Linear(width, width, bias=False, mode=args.gemm)
        experts = arch.get("experts", args.experts)
        if arch["moe"]:
            self.ffn = MoE(width, args.expert_hidden, experts, args.top_k, args.gemm, grouped=args.experts_as == "grouped")
        else:
            self.ffn = DenseMLP(width, args.expert_hidden * args.top_k, args.gemm)

    def attention(self, x):
        b, t, w = x.shape
        q, k, v = self.qkv(x.reshape(b * t, w)).reshape(b, t, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        out = sc.attend(self.rotary(q), self.rotary(k), v, causal=True).transpose(1, 2).reshape(b * t, w)
        return self.proj(out).reshape(b, t, w)

    def forward(self, streams, tokens):
        if self.mixer is not None:
            with torch.autocast("cpu", enabled=False):
                x = self.mixer.read(streams)
        else:
            x = streams[:, :, 0]
        u, gate = x, None
        if self.engram is not None:
            delta, gate = self.engram(u, tokens)
            u = u + delta
        u = u + self.attention(self.norm1(u))
        f, aux = self.ffn(self.norm2(u))
        u = u + f
        if self.mixer is None:
            return u[:, :, None], aux, gate
        with torch.autocast("cpu", enabled=False):
            return self.mixer.write(streams, u.float() - x.float()), aux, gate


class HybridLM(nn.Module):
    def __init__(self, arch, args, max_len):
        super().__init__()
        width = args.width
        self.streams = arch["streams"]
        self.embed = nn.Embedding(256, width)
        rotary = sc.Rotary(width // args.heads, max_len)
        self.blocks = nn.ModuleList(HybridBlock(width, args.heads, arch, rotary, args) for _ in range(args.depth))
        self.norm = te.RMSNorm(width)
        self.head = te.Linear(width, 256, bias=False, mode=args.gemm)
        self.initialise(args.seed)

    def initialise(self, seed):
        """Every parameter from one generator, in an order that does not depend on how the experts
        are held (te.Linear pairs or te.GroupedLinear), so both layouts start from the same
        weights: embeddings normal(0, 0.5), Engram tables normal(0, 1), matrices of the te layers
        normal(0, 1 / sqrt(fan_in)) except each branch's output projection (attention's proj,
        Engram's value, the experts' and the MLP's second layer), which starts at zero; the router
        and the convolution uniform(+-1 / sqrt(fan_in)) as torch's defaults; the stream mixers as
        StreamMixer says; norms at one."""
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in sorted(self.canonical_parameters(), key=lambda item: item[0]):
                if name.endswith(("norm.weight", "norm1.weight", "norm2.weight")) or ".mixer." in name:
                    continue
                fan_in = p[0].numel() if p.dim() > 1 else 1
                if name == "embed.weight":
                    p.copy_(0.5 * torch.randn(p.shape, generator=g))
                elif ".engram.tables." in name:
                    p.copy_(torch.randn(p.shape, generator=g))
                elif name.endswith(("router.weight", "conv.weight")):
                    p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) / math.sqrt(fan_in))
                elif name.endswith(("proj.weight", "value.weight", "fc_out.weight")) and not name.endswith("qkv.weight"):
                    p.zero_()
                else:
                    p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
            for block in self.blocks:
                if block.mixer is not None:
                    block.mixer.start(g)

    def canonical_parameters(self):
        """(name, parameter) with te.GroupedLinear's weight<i> named as the i-th expert's te.Linear."""
        for name, p in self.named_parameters():
            parts = name.split(".")
            if len(parts) >= 4 and parts[2] == "ffn" and parts[3] in ("fc", "fc_out") and parts[-1].startswith("weight"):
                i = parts[-1][len("weight"):]
                name = ".".join(parts[:3] + ["experts", i, parts[3], "weight"])
            yield name, p

    def forward(self, tokens):
        b, t = tokens.shape
        streams = self.embed(tokens)[:, :, None, :].expand(b, t, self.streams, -1).float()
        aux, gates = 0.0, []
        for block in self.blocks:
            streams, block_aux, gate = block(streams, tokens)
            aux = aux + block_aux
            gates.append(gate)
        x = self.norm(streams.mean(dim=2)).reshape(b * t, -1)
        return self.head(x).reshape(b, t, -1), aux, gates

    def composite_gain(self):
        """The largest absolute row or column sum of the product of the blocks' mixing matrices (how
        much the residual path can amplify a signal over depth; 1 for any product of doubly
        stochastic matrices)."""
        m = torch.eye(self.streams)
        with torch.no_grad():
            for block in self.blocks:
                if block.mixer is not None:
                    m = block.mixer.weights()[2] @ m
        return float(max(m.abs().sum(1).max(), m.abs().sum(0).max()))


def frequent_bigrams(data, top):
    pairs = Counter(zip(data[:-1].tolist(), data[1:].tolist()))
    return {p for p, _ in pairs.most_common(top)}


def evaluate(model, data, args, recipe, seq=None, batches=None):
    """Mean validation loss over fixed batches under the run's recipe (and milliseconds per
    forward), without gradients."""
    seq = seq or args.seq
    rng = np.random.default_rng(12345)
    total, seconds = 0.0, 0.0
    with torch.no_grad(), sc.precision(recipe):
        for _ in range(batches or args.eval_batches):
            x, y = sc.batch_of(data, rng, args.batch, seq)
            start = time.perf_counter()
            logits = model(x)[0]
            seconds += time.perf_counter() - start
            total += float(F.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1)))
    n = batches or args.eval_batches
    return total / n, 1000.0 * seconds / n


def bigram_accuracy(model, data, args, recipe, bigrams):
    """Next-byte accuracy at the positions whose (previous byte, byte) pair is one of the most
    frequent training bigrams: the short patterns a hashed n-gram memory holds."""
    rng = np.random.default_rng(777)
    hits = total = 0
    with torch.no_grad(), sc.precision(recipe):
        for _ in range(args.eval_batches):
            x, y = sc.batch_of(data, rng, args.batch, args.seq)
            pred = model(x)[0].argmax(-1)
            mask = torch.zeros_like(x, dtype=torch.bool)
            for i in range(x.shape[0]):
                for j in range(1, x.shape[1]):
                    mask[i, j] = (int(x[i, j - 1]), int(x[i, j])) in bigrams
            hits += int((pred == y)[mask].sum())
            total += int(mask.sum())
    return hits / max(1, total)


def gate_trace(model, text, recipe):
    """Engram's gate at every byte of `text`, per block."""
    tokens = torch.tensor([list(text.encode("latin-1"))], dtype=torch.int64)
    with torch.no_grad(), sc.precision(recipe):
        gates = model(tokens)[2]
    return [g[0].float().tolist() if g is not None else None for g in gates]


def train(run, args, train_data, val_data, bigrams, gate_text):
    torch.manual_seed(args.seed)
    arch = run.options
    steps = arch.get("steps", args.steps)
    lengths = sorted(set([args.seq] + args.long_context))
    model = HybridLM(arch, args, max(lengths))
    net = sc.wrap_data_parallel(model, find_unused=arch["moe"] and args.experts_as == "linear")
    optimizers = sc.make_optimizers(model, run, args.lr)
    watch = sc.AmaxWatch(model)
    recipe = sc.make_recipe(run.recipe)
    rng = np.random.default_rng(args.seed)
    curve, losses, step_seconds, memory = [], [], [], None
    eval_every = max(1, steps // 6)
    val = float("nan")
    for step in range(steps):
        x, y = sc.rank_batch(train_data, rng, args.batch, args.seq)
        start = time.perf_counter()
        sc.set_lr(optimizers, sc.lr_at(step, steps, 1.0, args.warmup))
        meter = sm.ActivationMeter(model) if memory is None else None
        with meter or contextlib.nullcontext(), sc.precision(recipe):
            logits, aux, gates = net(x)
        lm_loss = F.cross_entropy(logits.float().reshape(-1, 256), y.reshape(-1))
        loss = lm_loss + args.balance * aux
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        for opt in optimizers:
            opt.step()
        step_seconds.append(time.perf_counter() - start)
        if memory is None:
            memory = sm.gpu_memory(model, optimizers, meter, lambda name: run.recipe)
        train_loss = sc.mean_over_ranks(float(lm_loss))
        losses.append(train_loss)
        live = [g for g in gates if g is not None]
        point = {"step": step + 1, "train_loss": train_loss, "val_loss": None, "grad_norm": grad_norm,
                 "amax": watch.take_step_amax(), "composite_gain": model.composite_gain(),
                 "gate_mean": float(torch.stack([g.float().mean() for g in live]).mean()) if live else None,
                 "balance_loss": float(aux), "step_seconds": step_seconds[-1]}
        if sc.world_size() > 1:
            point["train_loss_rank"] = float(lm_loss)
        curve.append(point)
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            val = point["val_loss"] = evaluate(model, val_data, args, recipe)[0]
            if sc.rank() == 0:
                print(f"[{run.name}] step {step + 1}/{steps} loss {train_loss:.4f} val {val:.4f} "
                      f"tokens/s {args.batch * sc.world_size() * args.seq / np.mean(step_seconds):.0f}", flush=True)
    watch.close()
    nonfinite = sc.count_nonfinite(model) + watch.nonfinite() + sum(1 for v in losses if not math.isfinite(v))
    summary = sm.run_summary(losses, val, step_seconds, args.batch * args.seq * sc.world_size(), nonfinite)
    long_context = []
    sweep = arch.get("sweep", False)
    for length in [] if sweep else lengths:
        loss_at, ms = evaluate(model, val_data, args, recipe, seq=length, batches=2)
        long_context.append({"seq": length, "val_loss": loss_at, "forward_ms": ms,
                             "tokens_per_s": args.batch * length / (ms / 1000.0)})
    loads = [block.ffn.last_load.tolist() for block in model.blocks if isinstance(block.ffn, MoE)]
    return dict(
        run=run.name, recipe=run.recipe, arch=arch, **summary,
        params=sum(p.numel() for p in model.parameters()),
        engram_params=sum(p.numel() for n, p in model.named_parameters() if ".engram.tables." in n),
        expert_params=sum(p.numel() for n, p in model.named_parameters() if ".ffn." in n and "router" not in n),
        weight_bytes=sc.weight_bytes(model), optimizer_state_bytes=sc.state_bytes(optimizers),
        memory_bytes=sc.weight_bytes(model) + sc.state_bytes(optimizers), gpu_memory=memory,
        composite_gain=model.composite_gain(), long_context=long_context,
        bigram_accuracy=None if sweep else bigram_accuracy(model, val_data, args, recipe, bigrams),
        gate_trace=gate_trace(model, gate_text, recipe) if arch["engram"] and not sweep else None,
        expert_load=loads, layer_amax=watch.stats, curve=curve, rank=sc.rank(),
        weights_digest=sc.weights_digest(model), scaling_digest=sc.scaling_digest(model))


def allocation_runs(args):
    """The sparsity-allocation sweep: the parameters of the experts beyond the top-k (a fixed
    budget) split between more experts (a fraction rho) and Engram tables (the rest); rho = 0 is
    top_k experts (all active: a dense MLP) with the whole budget as Engram memory, rho = 1 is every
    expert and no memory. The compute per token is the same at every rho."""
    per_expert = 2 * args.width * args.expert_hidden
    budget = (args.experts - args.top_k) * per_expert
    runs = []
    for rho in args.alloc_ratios:
        experts = args.top_k + int(round(rho * (args.experts - args.top_k)))
        rows = (budget - (experts - args.top_k) * per_expert) // args.width  # every table's rows: rows x width values
        runs.append(sc.Run(f"alloc_{rho:.2f}", args.alloc_recipe, about=f"allocation sweep, rho {rho}", engram=rows >= 16,
                           moe=True, streams=args.streams, sinkhorn=True, experts=experts, buckets=max(16, rows),
                           steps=args.alloc_steps, rho=rho, sweep=True))
    return runs


def arguments():
    p = sc.base_arguments(__doc__, CATALOG, steps=300, lr=3e-3)
    p.add_argument("--width", type=int, default=64, help="model width")
    p.add_argument("--depth", type=int, default=2, help="blocks")
    p.add_argument("--heads", type=int, default=4, help="attention heads (width / heads must be even)")
    p.add_argument("--seq", type=int, default=64, help="training sequence length in bytes")
    p.add_argument("--batch", type=int, default=8, help="sequences per step (per rank with --nproc)")
    p.add_argument("--warmup", type=int, default=20, help="learning-rate warmup steps")
    p.add_argument("--eval-batches", type=int, default=4, help="validation batches per evaluation")
    p.add_argument("--experts", type=int, default=4, help="experts per MoE layer")
    p.add_argument("--top-k", type=int, default=2, help="experts run per token")
    p.add_argument("--expert-hidden", type=int, default=128,
                   help="hidden width of an expert (a dense MLP has top-k times this, the same compute per token)")
    p.add_argument("--experts-as", choices=("linear", "grouped"), default="grouped" if hasattr(te, "GroupedLinear") else "linear",
                   help="each expert's two layers as te.Linear modules, or every expert's layer as one te.GroupedLinear")
    p.add_argument("--balance", type=float, default=0.01, help="weight of the experts' load-balancing loss")
    p.add_argument("--streams", type=int, default=4, help="residual streams of the hc / hybrid runs")
    p.add_argument("--sinkhorn-iterations", type=int, default=20, help="Sinkhorn iterations of mHC's mixing matrix")
    p.add_argument("--engram-buckets", type=int, default=2048, help="rows of each Engram table")
    p.add_argument("--engram-heads", type=int, default=4, help="hashed tables per n-gram order")
    p.add_argument("--engram-orders", default="2,3", help="n-gram orders of the Engram memory")
    p.add_argument("--long-context", default="128,256",
                   help="sequence lengths evaluated after training beside --seq (comma-separated)")
    p.add_argument("--alloc-ratios", default="0,0.5,1",
                   help="the allocation sweep's rho values (share of the sparse budget given to experts); '' skips it")
    p.add_argument("--alloc-steps", type=int, default=150, help="training steps of each allocation-sweep run")
    p.add_argument("--alloc-recipe", choices=sc.RECIPES, default="nvfp4", help="recipe of the sweep's runs")
    p.add_argument("--text", default=sc.SHAKESPEARE, help="training text, read as bytes")
    return p


def parse_ints(text, what):
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"{what} must be comma-separated integers, got {text!r}")


def main():
    started = time.time()
    args = arguments().parse_args()
    sc.check_common(args)
    args.engram_orders = parse_ints(args.engram_orders, "--engram-orders")
    args.long_context = parse_ints(args.long_context, "--long-context")
    try:
        args.alloc_ratios = [float(v) for v in args.alloc_ratios.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"--alloc-ratios must be comma-separated numbers, got {args.alloc_ratios!r}")
    if any(not 0 <= r <= 1 for r in args.alloc_ratios):
        raise SystemExit("--alloc-ratios must lie in [0, 1]")
    if args.width % args.heads or (args.width // args.heads) % 2:
        raise SystemExit("--width must be a multiple of --heads with an even head size")
    if not 1 <= args.top_k <= args.experts:
        raise SystemExit("--top-k must be between 1 and --experts")
    if not args.engram_orders or min(args.engram_orders) < 1 or args.engram_heads < 1 or args.engram_buckets < 1:
        raise SystemExit("--engram-orders, --engram-heads and --engram-buckets must be positive")
    if args.width % (len(args.engram_orders) * args.engram_heads):
        raise SystemExit("--width must be a multiple of the Engram tables (orders x heads)")
    if args.streams < 2:
        raise SystemExit("--streams must be >= 2 (the single-stream runs are dense, moe and engram)")
    if args.experts_as == "grouped" and not hasattr(te, "GroupedLinear"):
        raise SystemExit("--experts-as grouped needs te.GroupedLinear, which this nvfp4.torch does not have yet")
    for name in ("depth", "seq", "batch", "eval_batches", "expert_hidden", "sinkhorn_iterations", "alloc_steps"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1")
    if any(v < 1 for v in args.long_context):
        raise SystemExit("--long-context lengths must be >= 1")
    for run in CATALOG.values():
        if run.options["streams"] > 1:
            run.options["streams"] = args.streams
    runs = sc.parse_runs(args.recipes, CATALOG)
    sweep = allocation_runs(args)
    threads = sc.set_threads(args.threads)
    train_data, val_data = sc.load_bytes(args.text)
    if len(val_data) <= max([args.seq] + args.long_context) + 1:
        raise SystemExit("--text is too short for the longest sequence")
    bigrams = frequent_bigrams(train_data, 500)
    text = bytes(val_data[:4000].tolist()).decode("latin-1")
    line = text.index("\n") + 1
    gate_text = text[line:line + 64]  # a validation line: bytes the memory was not trained on in this order
    world = int(os.environ.get("WORLD_SIZE", "1")) if sc.launched_by_torchrun() else args.nproc
    if not sc.launched_by_torchrun() or int(os.environ["RANK"]) == 0:
        print(f"{len(runs)} runs x {args.steps} steps + {len(sweep)} allocation runs x {args.alloc_steps} steps, "
              f"batch {args.batch} x {args.seq} bytes x {world} rank(s), {threads} thread(s) each", flush=True)
    results = sc.run_all(train, runs + sweep, args, train_data, val_data, bigrams, gate_text)
    if sc.launched_by_torchrun() and sc.rank() != 0:
        return
    main_results, sweep_results = results[:len(runs)], results[len(runs):]
    print(f"\n{'run':14s} {'train':>7s} {'val':>7s} {'ppl':>6s} {'tokens/s':>8s} {'step ms':>8s} {'GPU MiB':>8s} "
          f"{'RSS MiB':>8s} {'gain':>6s} {'bigram':>6s} {'NaN':>4s} {'spikes':>6s}")
    for r in main_results:
        print(f"{r['run']:14s} {r['train_loss_last10pct']:7.4f} {r['val_loss']:7.4f} {r['val_ppl']:6.3f} "
              f"{r['tokens_per_s']:8.0f} {r['step_ms']:8.1f} {r['gpu_memory']['total'] / 2**20:8.2f} "
              f"{r['peak_rss_bytes'] / 2**20:8.1f} {r['composite_gain']:6.3f} {r['bigram_accuracy']:6.3f} "
              f"{r['nonfinite']:4d} {r['spikes']:6d}")
    for r in sweep_results:
        print(f"{r['run']:14s} experts {r['arch']['experts']} engram rows {r['engram_params']:7d} val {r['val_loss']:.4f}")
    sweep_summary = [{"run": r["run"], "rho": r["arch"]["rho"], "experts": r["arch"]["experts"],
                      "engram_params": r["engram_params"], "expert_params": r["expert_params"], "steps": len(r["curve"]),
                      "final_loss": r["final_loss"], "val_loss": r["val_loss"]} for r in sweep_results]
    meta = sm.study_meta(args, "Hybrid (Engram + mHC + MoE)", started, threads=threads, world_size=world,
                         tokens_per_step=args.batch * args.seq * world, gate_text=gate_text,
                         allocation_sweep=sweep_summary)
    baseline = "hybrid" if any(r["run"] == "hybrid" for r in main_results) else None
    sr.write_reports(args.out, "hybrid_recipes", main_results,
                     ["train_loss", "val_loss", "grad_norm", "amax", "composite_gain", "gate_mean", "balance_loss",
                      "step_seconds"], meta, baseline=baseline)
    import hybrid_report
    hybrid_report.write_all(args.out, main_results, sweep_results, meta)
    written = "hybrid_recipes.csv, .json, .png, _table.md, hybrid_{loss,throughput,memory,alloc,long_context,gate,stability,poster}.png"
    if world > 1:
        sr.write_ddp_smoke(args.out, main_results, meta)
        written += ", ddp_smoke.json, .png"
    print(f"wrote {args.out}/{written}")


if __name__ == "__main__":
    main()
