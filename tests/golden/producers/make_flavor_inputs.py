#!/usr/bin/env python3
"""Inputs of the `nvfp4_flavor` golden kind: bf16 matrices (stored widened to float32) that each
peer quantizer (ModelOpt, torchao, compressed-tensors, ggml) is run on. Deterministic (numpy
PCG64, seed 2026). Writes OUT/flavor_x<i>.npy and OUT/flavor_inputs.json. numpy only.

Distributions, chosen to reach every place where the peers' rules differ:
  normal     N(0, 1)                                     ordinary weights
  outliers   N(0, 0.02) with a few values 100x larger    real LLM weight statistics
  ties       tensor amax 2688 (so S_enc = 1), block maxima 6 * 2^k, elements on E2M1 midpoints
  zeros      blocks of exact zeros, of -0.0, and blocks so small their E4M3 scale underflows
  wide       magnitudes log-uniform over 2^-30 .. 2^12: scale subnormals and saturation
  tiny       whole tensor near 1e-37 (the tensor scale leaves the normal range)
  huge       whole tensor near the bf16 maximum
  allzero    every element zero (the zero-amax rules)
"""
import json
import os
import sys

import numpy as np


def to_bf16(a):
    """Round float32 to the nearest bf16 (ties to even), returned widened to float32."""
    a = np.asarray(a, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return rounded.astype(np.uint32).view(np.float32)


def make(dist, rows, cols, rng):
    if dist == "normal":
        x = rng.standard_normal((rows, cols))
    elif dist == "outliers":
        x = rng.standard_normal((rows, cols)) * 0.02
        idx = rng.choice(rows * cols, size=max(1, rows * cols // 512), replace=False)
        x.flat[idx] *= 100.0
    elif dist == "ties":
        mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 0.5, 1.0, 3.0, 6.0])
        x = np.empty((rows, cols))
        for r in range(rows):
            for b in range(cols // 16):
                k = int(rng.integers(-6, 7))
                block = rng.choice(mids, size=16) * rng.choice([-1.0, 1.0], size=16)
                block[int(rng.integers(0, 16))] = 6.0 * rng.choice([-1.0, 1.0])
                x[r, b * 16:(b + 1) * 16] = block * 2.0 ** k
        x[0, 0] = 2688.0  # tensor amax: S_enc = 1, S_dec = 1 exactly in every peer
    elif dist == "zeros":
        x = rng.standard_normal((rows, cols))
        for r in range(rows):
            for b in range(cols // 16):
                kind = int(rng.integers(0, 6))
                sl = slice(b * 16, (b + 1) * 16)
                if kind == 0:
                    x[r, sl] = 0.0
                elif kind == 1:
                    x[r, sl] = -0.0
                elif kind == 2:
                    x[r, sl] = rng.standard_normal(16) * 1e-7  # scale underflows to E4M3 zero
                elif kind == 3:
                    x[r, sl] = rng.standard_normal(16) * 3e-5  # subnormal E4M3 scales
                elif kind == 4:
                    v = rng.standard_normal(16)
                    v[rng.integers(0, 16, size=5)] = -0.0
                    x[r, sl] = v
        x[0, 0] = 40.0
    elif dist == "wide":
        mag = 2.0 ** rng.uniform(-30, 12, size=(rows, cols))
        x = mag * rng.choice([-1.0, 1.0], size=(rows, cols))
    elif dist == "tiny":
        x = rng.standard_normal((rows, cols)) * 1e-37
    elif dist == "huge":
        x = rng.uniform(-1.0, 1.0, size=(rows, cols)) * 3.0e38
    elif dist == "allzero":
        x = np.zeros((rows, cols))
    else:
        raise ValueError(dist)
    return to_bf16(x.astype(np.float32))


CASES = [
    ("normal", 64, 256), ("normal", 128, 512), ("outliers", 128, 512), ("ties", 64, 256),
    ("zeros", 64, 256), ("wide", 64, 256), ("tiny", 16, 128), ("huge", 16, 128),
    ("allzero", 16, 64), ("normal", 32, 48),
]


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.Generator(np.random.PCG64(2026))
    listing = []
    for i, (dist, rows, cols) in enumerate(CASES):
        x = make(dist, rows, cols, rng)
        name = f"flavor_x{i}.npy"
        np.save(os.path.join(out, name), x)
        listing.append({"id": i, "dist": dist, "shape": [rows, cols], "input": name})
    with open(os.path.join(out, "flavor_inputs.json"), "w") as f:
        json.dump(listing, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "flavor_vectors")
