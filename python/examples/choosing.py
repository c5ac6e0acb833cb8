#!/usr/bin/env python3
"""The measurements behind docs/choosing.md: SQNR of every quantization mode on four kinds of
tensor, stochastic rounding's bias, and how far the relaxed GEMM is from the exact one.

    PYTHONPATH=build/release/python /usr/bin/python3 python/examples/choosing.py

Deterministic (numpy's PCG64 with fixed seeds); prints Markdown tables.
"""
import numpy as np

import nvfp4

ROWS, COLS = 1024, 4096


def tensors():
    rng = np.random.default_rng(1)
    normal = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    outliers = normal.copy().reshape(-1)
    idx = np.arange(498, outliers.size, 997)  # every 997th element, 40-100x larger, either sign
    outliers[idx] = np.where(idx % 2, -1, 1) * 40 * (1 + np.abs(rng.standard_normal(idx.size)))
    return {
        "weights: N(0, 1)": normal,
        "activations: N(0, 1) + 0.1% outliers 40-100x": outliers.reshape(ROWS, COLS).astype(np.float32),
        "heavy-tailed: Student-t, 3 dof": rng.standard_t(3, (ROWS, COLS)).astype(np.float32),
        "wide range: ±log-normal, sigma 1.5": (np.where(rng.random((ROWS, COLS)) < 0.5, -1, 1)
                                                * rng.lognormal(0, 1.5, (ROWS, COLS))).astype(np.float32),
    }


def rht_roundtrip(x):
    """NVFP4 1x16 of RHT(x) along rows, restored with the inverse RHT (error against x itself)."""
    q = nvfp4.quantize(x, "nvfp4_1x16", rht=True)
    return nvfp4.hadamard_rows(nvfp4.dequantize(q), inverse=True)


MODES = {
    "NVFP4 1x16": lambda x: nvfp4.dequantize(nvfp4.quantize(x, "nvfp4_1x16")),
    "NVFP4 16x16": lambda x: nvfp4.dequantize(nvfp4.quantize(x, "nvfp4_16x16")),
    "NVFP4 1x16 + RHT": rht_roundtrip,
    "NVFP4 1x16 SR": lambda x: nvfp4.dequantize(nvfp4.quantize(x, "nvfp4_1x16", rounding="stochastic", seed=1)),
    "MXFP4 OCP": lambda x: nvfp4.dequantize(nvfp4.quantize(x, "mxfp4")),
    "MXFP4 TE ceil": lambda x: nvfp4.dequantize(nvfp4.quantize(x, "mxfp4", mx_rule="te_ceil")),
    "MXFP8": lambda x: nvfp4.dequantize(nvfp4.quantize(x, "mxfp8")),
}


def main():
    data = tensors()
    print(f"SQNR in dB (higher is better), {ROWS} x {COLS} tensors, nvfp4 {nvfp4.__version__} ({nvfp4.compiled_isa})\n")
    print("| mode | " + " | ".join(data) + " |")
    print("|---|" + "---|" * len(data))
    for name, roundtrip in MODES.items():
        print(f"| {name} | " + " | ".join(f"{nvfp4.sqnr_db(x, roundtrip(x)):.2f}" for x in data.values()) + " |")

    # Stochastic rounding: one draw is noisier than RN, but unbiased: the mean of n draws converges.
    x = data["weights: N(0, 1)"][:256]
    rn = nvfp4.dequantize(nvfp4.quantize(x))
    print("\nStochastic rounding on N(0, 1), 256 x 4096: SQNR of the mean of n independent draws\n")
    print("| | SQNR dB |")
    print("|---|---|")
    print(f"| round to nearest | {nvfp4.sqnr_db(x, rn):.2f} |")
    total = np.zeros_like(x, dtype=np.float64)
    for n in range(1, 65):
        total += nvfp4.dequantize(nvfp4.quantize(x, rounding="stochastic", seed=n))
        if n in (1, 4, 16, 64):
            print(f"| SR, {'one draw' if n == 1 else f'mean of {n} draws'} | {nvfp4.sqnr_db(x, (total / n).astype(np.float32)):.2f} |")
    # Bias: blocks of one 6.0 and fifteen 0.2 (0.2 is below half the smallest E2M1 step at that scale).
    small = np.full((256, 4096), 0.2, np.float32)
    small[:, ::16] = 6.0
    mask = small == np.float32(0.2)
    rn_mean = nvfp4.dequantize(nvfp4.quantize(small))[mask].mean()
    sr_mean = nvfp4.dequantize(nvfp4.quantize(small, rounding="stochastic", seed=1))[mask].mean()
    print(f"\nBlocks of one 6.0 and fifteen 0.2: the 0.2s average {rn_mean:.4f} after RN, {sr_mean:.4f} after SR (one draw)")

    # GEMM: exact (the tensor core's bits) against relaxed (an fp32 FMA chain), and both against fp32.
    rng = np.random.default_rng(2)
    a = data["activations: N(0, 1) + 0.1% outliers 40-100x"][:512]
    w = rng.standard_normal((512, COLS)).astype(np.float32)
    qa, qw = nvfp4.quantize(a, "nvfp4_1x16"), nvfp4.quantize(w, "nvfp4_16x16")
    exact, relaxed = nvfp4.gemm(qa, qw), nvfp4.gemm(qa, qw, mode="relaxed")
    reference = (a.astype(np.float64) @ w.astype(np.float64).T).astype(np.float32)
    ulps = np.abs(exact.view(np.int32).astype(np.int64) - relaxed.view(np.int32).astype(np.int64))
    print(f"\nGEMM, A 512 x {COLS} (activations, 1x16) times W 512 x {COLS} (16x16) transposed:\n")
    print("| | SQNR vs fp64 product, dB | elements differing from exact | largest difference |")
    print("|---|---|---|---|")
    print(f"| exact | {nvfp4.sqnr_db(reference, exact):.2f} | - | - |")
    print(f"| relaxed | {nvfp4.sqnr_db(reference, relaxed):.2f} | {np.count_nonzero(ulps)} of {ulps.size} "
          f"({100 * np.count_nonzero(ulps) / ulps.size:.1f}%) | {ulps.max()} ulp |")

    # The same with random codes and random block scales over UE4M3's whole range (what the golden
    # GEMM cases do): the block terms then need more bits than an fp32 chain keeps.
    codes_a = rng.integers(0, 256, (256, 512), dtype=np.uint8)
    codes_b = rng.integers(0, 256, (256, 512), dtype=np.uint8)
    scales_a = rng.integers(0x08, 0x7F, (256, 64), dtype=np.uint8)
    scales_b = rng.integers(0x08, 0x7F, (256, 64), dtype=np.uint8)
    qa = nvfp4.QuantizedTensor.from_bytes("nvfp4_1x16", 256, 1024, codes_a, scales_a, amax=1.0)
    qb = nvfp4.QuantizedTensor.from_bytes("nvfp4_1x16", 256, 1024, codes_b, scales_b, amax=1.0)
    exact, relaxed = nvfp4.block_scaled_mma(qa, qb), nvfp4.block_scaled_mma(qa, qb, mode="relaxed")
    differing = np.count_nonzero(exact.view(np.uint32) != relaxed.view(np.uint32))
    print(f"\nRandom E2M1 codes, random UE4M3 scales in [2^-6, 448], 256 x 256 outputs, K = 1024: relaxed differs "
          f"from exact in {differing} of {exact.size} ({100 * differing / exact.size:.0f}%)")


if __name__ == "__main__":
    main()
