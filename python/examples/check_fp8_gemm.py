#!/usr/bin/env python3
"""Checks an FP8 GEMM's output against the tensor-core model, output by output.

Give it what your kernel read and wrote (FP8 codes as uint8 .npy files, A [M, K] and B [N, K]
with K contiguous, their per-tensor decode scales, and the kernel's float32 output [M, N]):

    PYTHONPATH=build/release/python /usr/bin/python3 python/examples/check_fp8_gemm.py \\
        --a a_codes.npy --b b_codes.npy --a-scale-inv 0.01 --b-scale-inv 0.02 --out d.npy \\
        [--format-a e4m3] [--format-b e4m3] [--core hopper] [--promotion-interval 128]

It prints how many outputs match nvfp4.fp8_gemm bit for bit and how far the others are, in units
in the last place. Without arguments it runs a demonstration: a product computed the way a
hand-written kernel often does it (decode to float32, multiply, sum in float32) checked against
Hopper's FP8 tensor core, which truncates every product to 13 bits below the step's largest
exponent and keeps 13 fraction bits per 32-element step (docs/numerics_spec.md §9).
"""
import argparse

import numpy as np

import nvfp4


def ulp_distance(x, y):
    """|x - y| in units in the last place of float32 (0 for equal bits; NaN-aware)."""
    def ordered(v):
        bits = np.ascontiguousarray(v, np.float32).view(np.int32).astype(np.int64)
        return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)
    return np.abs(ordered(x) - ordered(y))


def report(got, want):
    """A few lines on how `got` compares with the model's `want`; returns the bitwise match count."""
    same = np.ascontiguousarray(got, np.float32).view(np.uint32) == np.ascontiguousarray(want, np.float32).view(np.uint32)
    ulps = ulp_distance(got, want)
    print(f"outputs: {want.size}, bit-exact: {int(same.sum())} ({100.0 * same.mean():.2f}%)")
    if not same.all():
        bad = ~same
        print(f"the others: median {np.median(ulps[bad]):.0f} ulp, max {int(ulps[bad].max())} ulp")
        i, j = np.unravel_index(np.argmax(np.where(bad, ulps, -1)), want.shape)
        print(f"farthest at ({i}, {j}): got {got[i, j]!r}, the tensor core gives {want[i, j]!r}")
    return int(same.sum())


def check(a_codes, b_codes, a_scale_inv, b_scale_inv, out, format_a="e4m3", format_b="e4m3", core="hopper",
          promotion_interval=128):
    a = nvfp4.Fp8Tensor.from_bytes(format_a, a_codes, a_scale_inv)
    b = nvfp4.Fp8Tensor.from_bytes(format_b, b_codes, b_scale_inv)
    want = nvfp4.fp8_gemm(a, b, core=core, promotion_interval=promotion_interval)
    if out.shape != want.shape:
        raise SystemExit(f"the output is {out.shape}, the product is {want.shape}")
    return report(np.asarray(out, np.float32), want)


def demonstration(m=64, n=64, k=1024):
    rng = np.random.default_rng(3)
    a = nvfp4.quantize_fp8_current(rng.standard_normal((m, k)).astype(np.float32))
    b = nvfp4.quantize_fp8_current(rng.standard_normal((n, k)).astype(np.float32))
    # A "kernel": decode to float32, one float32 dot product per output, then the scales.
    codes_only = lambda t: nvfp4.dequantize(nvfp4.Fp8Tensor.from_bytes(t.format, t.codes, 1.0))
    naive = (codes_only(a) @ codes_only(b).T) * np.float32(a.scale_inv[0, 0] * b.scale_inv[0, 0])
    print("A float32 kernel against Hopper's FP8 tensor core (split accumulator every 128 elements):")
    matches = check(a.codes, b.codes, a.scale_inv[0, 0], b.scale_inv[0, 0], naive.astype(np.float32))
    print("\nThe tensor core's own output checked the same way (what a bit-exact kernel shows):")
    check(a.codes, b.codes, a.scale_inv[0, 0], b.scale_inv[0, 0], nvfp4.fp8_gemm(a, b))
    return matches


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", help="A's FP8 codes, uint8 [M, K] .npy")
    parser.add_argument("--b", help="B's FP8 codes, uint8 [N, K] .npy")
    parser.add_argument("--a-scale-inv", type=float, default=1.0)
    parser.add_argument("--b-scale-inv", type=float, default=1.0)
    parser.add_argument("--out", help="the kernel's output, float32 [M, N] .npy")
    parser.add_argument("--format-a", default="e4m3", choices=["e4m3", "e5m2"])
    parser.add_argument("--format-b", default="e4m3", choices=["e4m3", "e5m2"])
    parser.add_argument("--core", default="hopper", choices=["hopper", "blackwell"])
    parser.add_argument("--promotion-interval", type=int, default=128,
                        help="K elements between promotions into fp32 (TE's split accumulator); 0: never")
    args = parser.parse_args()
    given = [args.a, args.b, args.out]
    if not any(given):
        demonstration()
        return
    if not all(given):
        raise SystemExit("--a, --b and --out go together")
    check(np.load(args.a), np.load(args.b), args.a_scale_inv, args.b_scale_inv, np.load(args.out), args.format_a,
          args.format_b, args.core, args.promotion_interval)


if __name__ == "__main__":
    main()
