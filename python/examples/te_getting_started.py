"""TransformerEngine's PyTorch getting-started guide (TE docs/getting_started/getting_started_pytorch.py)
retold on a CPU: one transformer layer built six ways, each timed for a forward and backward pass,
and the comparison table written as TE's guide writes it.

1. Baseline: plain PyTorch (torch.nn.Linear / LayerNorm, attention from torch operations).
2. TE unfused: te.Linear and te.LayerNorm in place of torch's.
3. TE unfused + TE attention: te.DotProductAttention (causal) in place of the hand-written one.
4. The same + FP8: te.autocast with DelayedScaling(HYBRID, amax_history_len=16, "max").
5. TE fused + FP8: te.LayerNormLinear for norm + QKV, te.LayerNormMLP for norm + MLP.
6. te.TransformerLayer + FP8.

What changes from TE's script: the import (nvfp4.torch for transformer_engine.pytorch,
nvfp4.common.recipe for transformer_engine.common.recipe), no .cuda(), sizes reduced to fit a CPU
(the guide uses hidden 4096, sequence 2048, batch 8, FFN 16384, 32 heads) and timing with
time.perf_counter instead of CUDA events. The times are the emulator's: each FP8 GEMM is computed as
the GPU's tensor core computes it, bit for bit, which on a CPU costs more than a plain GEMM, so the
speedups of TE's table (measured on a GPU) are not reproduced here; the table shows the emulation's
cost. Run:

    PYTHONPATH=build/release/python python3 python/examples/te_getting_started.py [--hidden-size 256 ...]
"""
import argparse
import math
import time
from typing import Optional

import torch

import nvfp4.torch as te
from nvfp4.common.recipe import DelayedScaling, Format


def speedometer(module, x, forward_kwargs=None, autocast_kwargs=None, timing_iters=3, warmup_iters=1):
    """Mean milliseconds of a forward + backward pass (loss = output sum), each forward inside te.autocast."""
    forward_kwargs = forward_kwargs or {}
    autocast_kwargs = autocast_kwargs or {"enabled": False}

    def step():
        with te.autocast(**autocast_kwargs):
            y = module(x, **forward_kwargs)
            loss = y.float().sum()
        loss.backward()

    for _ in range(warmup_iters):
        step()
    start = time.perf_counter()
    for _ in range(timing_iters):
        step()
    mean_ms = (time.perf_counter() - start) * 1000 / timing_iters
    print(f"Mean time: {mean_ms:.3f} ms")
    return mean_ms


class TorchAttention(torch.nn.Module):
    """Scaled dot-product attention from torch operations on [sequence, batch, heads, head_dim]
    inputs, an optional boolean mask (True = masked), dropout on the probabilities."""

    def __init__(self, num_attention_heads, kv_channels, attention_dropout):
        super().__init__()
        self.projection_size = kv_channels * num_attention_heads
        self.norm_factor = math.sqrt(kv_channels)
        self.dropout = torch.nn.Dropout(attention_dropout)

    def forward(self, query, key, value, attention_mask=None):
        sq, b, heads, head_dim = query.shape
        sk = key.size(0)
        q = query.reshape(sq, b * heads, head_dim).transpose(0, 1)
        k = key.reshape(sk, b * heads, head_dim).transpose(0, 1)
        scores = torch.bmm(q, k.transpose(1, 2)) / self.norm_factor
        scores = scores.view(b, heads, sq, sk)
        if attention_mask is not None:
            scores = scores.masked_fill(attention_mask, -10000.0)
        probs = self.dropout(torch.softmax(scores, dim=-1)).view(b * heads, sq, sk)
        context = torch.bmm(probs, value.reshape(sk, b * heads, head_dim).transpose(0, 1))
        return context.view(b, heads, sq, head_dim).permute(2, 0, 1, 3).reshape(sq, b, self.projection_size)


class Mlp(torch.nn.Module):
    """Linear -> tanh GELU -> Linear, from the given Linear class (torch's or TE's)."""

    def __init__(self, linear, hidden_size, ffn_hidden_size):
        super().__init__()
        self.linear1 = linear(hidden_size, ffn_hidden_size, bias=True)
        self.linear2 = linear(ffn_hidden_size, hidden_size, bias=True)

    def forward(self, x):
        return self.linear2(torch.nn.functional.gelu(self.linear1(x), approximate="tanh"))


class UnfusedLayer(torch.nn.Module):
    """Pre-LN transformer layer of separate modules: norm, QKV projection, attention, output
    projection, dropout, residual; norm, MLP, dropout, residual. `linear` / `norm` are torch's or
    TE's classes, `attention` a module of (q, k, v, mask)."""

    def __init__(self, linear, norm, attention, hidden_size, ffn_hidden_size, num_attention_heads, layernorm_eps=1e-5,
                 hidden_dropout=0.1):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.kv_channels = hidden_size // num_attention_heads
        self.ln1 = norm(hidden_size, eps=layernorm_eps)
        self.qkv_projection = linear(hidden_size, 3 * hidden_size, bias=True)
        self.attention = attention
        self.projection = linear(hidden_size, hidden_size, bias=True)
        self.dropout1 = torch.nn.Dropout(hidden_dropout)
        self.ln2 = norm(hidden_size, eps=layernorm_eps)
        self.mlp = Mlp(linear, hidden_size, ffn_hidden_size)
        self.dropout2 = torch.nn.Dropout(hidden_dropout)

    def forward(self, x, attention_mask: Optional[torch.Tensor] = None):
        residual = x
        qkv = self.qkv_projection(self.ln1(x))
        qkv = qkv.view(qkv.size(0), qkv.size(1), self.num_attention_heads, 3 * self.kv_channels)
        q, k, v = torch.split(qkv, self.kv_channels, dim=3)
        x = residual + self.dropout1(self.projection(self.attention(q, k, v, attention_mask)))
        return x + self.dropout2(self.mlp(self.ln2(x)))


class FusedLayer(torch.nn.Module):
    """The same layer from TE's fused modules: LayerNormLinear (norm + QKV), DotProductAttention,
    Linear, LayerNormMLP (norm + MLP)."""

    def __init__(self, hidden_size, ffn_hidden_size, num_attention_heads, layernorm_eps=1e-5, attention_dropout=0.1,
                 hidden_dropout=0.1):
        super().__init__()
        self.num_attention_heads = num_attention_heads
        self.kv_channels = hidden_size // num_attention_heads
        self.ln_qkv = te.LayerNormLinear(hidden_size, 3 * hidden_size, eps=layernorm_eps, bias=True)
        self.attention = te.DotProductAttention(num_attention_heads=num_attention_heads, kv_channels=self.kv_channels,
                                                attention_dropout=attention_dropout, attn_mask_type="causal")
        self.projection = te.Linear(hidden_size, hidden_size, bias=True)
        self.dropout1 = torch.nn.Dropout(hidden_dropout)
        self.ln_mlp = te.LayerNormMLP(hidden_size, ffn_hidden_size, eps=layernorm_eps, bias=True)
        self.dropout2 = torch.nn.Dropout(hidden_dropout)

    def forward(self, x, attention_mask: Optional[torch.Tensor] = None):
        residual = x
        qkv = self.ln_qkv(x)
        qkv = qkv.view(qkv.size(0), qkv.size(1), self.num_attention_heads, 3 * self.kv_channels)
        q, k, v = torch.split(qkv, self.kv_channels, dim=3)
        x = residual + self.dropout1(self.projection(self.attention(q, k, v, attention_mask)))
        return x + self.dropout2(self.ln_mlp(x))


VARIANTS = ("Baseline PyTorch", "TE Unfused", "TE Unfused + TE Attention", "TE Unfused + TE Attention + FP8",
            "TE Fused + TE Attention + FP8", "TE TransformerLayer + FP8")


def build(name, hidden_size, ffn_hidden_size, heads, dtype):
    kv = hidden_size // heads
    if name == "Baseline PyTorch":
        model = UnfusedLayer(torch.nn.Linear, torch.nn.LayerNorm, TorchAttention(heads, kv, 0.1), hidden_size, ffn_hidden_size, heads)
    elif name == "TE Unfused":
        model = UnfusedLayer(te.Linear, te.LayerNorm, TorchAttention(heads, kv, 0.1), hidden_size, ffn_hidden_size, heads)
    elif name in ("TE Unfused + TE Attention", "TE Unfused + TE Attention + FP8"):
        attention = te.DotProductAttention(num_attention_heads=heads, kv_channels=kv, attention_dropout=0.1, attn_mask_type="causal")
        model = UnfusedLayer(te.Linear, te.LayerNorm, attention, hidden_size, ffn_hidden_size, heads)
    elif name == "TE Fused + TE Attention + FP8":
        model = FusedLayer(hidden_size, ffn_hidden_size, heads)
    else:
        model = te.TransformerLayer(hidden_size=hidden_size, ffn_hidden_size=ffn_hidden_size, num_attention_heads=heads,
                                    self_attn_mask_type="causal", layernorm_epsilon=1e-5, bias=True, hidden_dropout=0.0,
                                    attention_dropout=0.0)
    return model.to(dtype=dtype)


def run(hidden_size=128, sequence_length=32, batch_size=2, ffn_hidden_size=512, num_attention_heads=4, dtype=torch.bfloat16,
        timing_iters=3, warmup_iters=1, csv_path=None, variants=VARIANTS):
    """Times each variant; returns {variant: mean ms} and writes TE's summary CSV to `csv_path`."""
    torch.manual_seed(1234)
    x = torch.rand(sequence_length, batch_size, hidden_size).to(dtype=dtype)
    recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, amax_compute_algo="max")
    times = {}
    for name in variants:
        print(f"{name}:")
        model = build(name, hidden_size, ffn_hidden_size, num_attention_heads, dtype)
        autocast_kwargs = {"enabled": True, "recipe": recipe} if name.endswith("FP8") else None
        times[name] = speedometer(model, x, {"attention_mask": None}, autocast_kwargs, timing_iters, warmup_iters)
    baseline = times.get(VARIANTS[0])
    lines = ["Implementation,Time (ms),Speedup"]
    for name, ms in times.items():
        lines.append(f"{name},{ms:.2f},{baseline / ms:.2f}x" if baseline else f"{name},{ms:.2f},")
    table = "\n".join(lines) + "\n"
    if csv_path:
        with open(csv_path, "w") as f:
            f.write(table)
    print()
    print(table, end="")
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--ffn-hidden-size", type=int, default=1024)
    parser.add_argument("--num-attention-heads", type=int, default=4)
    parser.add_argument("--timing-iters", type=int, default=3)
    parser.add_argument("--warmup-iters", type=int, default=1)
    parser.add_argument("--csv", default="getting_started_pytorch_summary.csv")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    run(args.hidden_size, args.sequence_length, args.batch_size, args.ffn_hidden_size, args.num_attention_heads,
        timing_iters=args.timing_iters, warmup_iters=args.warmup_iters, csv_path=args.csv)


if __name__ == "__main__":
    main()
