#!/usr/bin/env python3
"""Encodes an H100's reciprocal (PTX div.full.f32 with dividend 1, what Triton emits for 1 / x)
over one binade as a compact C++ table: include/nvfp4/recipes/detail/div_full_reciprocal_table.hpp.

Input: sweep.npz from run_te_compiled_update.py (run on the GPU machine), whose
`tritonrcp_minus_rn` holds, for every x = 1 + m / 2^23 (m = 0 .. 2^23 - 1), the GPU's 1 / x minus
the correctly rounded 1 / x, in units of the last place: -1, 0 or +1.

The GPU's result is faithful, so where it is off it is off towards the exact quotient's other
neighbour, and the direction follows from which side of the midpoint the exact quotient lies.
What remains is one bit per mantissa: off or not. It is predictable from a smooth error curve:
with g = 0.5 - frac(exact quotient in ulps), the GPU is off when its own error e(x) pushes past
the midpoint (e > g where g > 0, e < g where g < 0). Per block of 4096 mantissas a line e(t) is
fitted (linear programming: the smallest worst-case violation v); outside the band |e - g| <= v
the line decides, inside it one stored bit does. The band holds under 4% of the mantissas.

All arithmetic that decides band membership and the line's prediction is integer (units of
2^-28 ulp, truncating division, arithmetic shifts), written identically in the C++ decoder, and
the script decodes all 2^23 mantissas with it and refuses to write a table that differs from
the sweep anywhere. It also prints the sweep's counts and FNV-1a hash, which the C++ test
compares with its own full decode.

usage: make_div_full_table.py SWEEP_NPZ OUT_HPP
Needs numpy and scipy.
"""
import sys

import numpy as np
from scipy.optimize import linprog

MANTISSAS = 1 << 23
BLOCK_BITS = 12
BLOCK = 1 << BLOCK_BITS
UNIT_BITS = 27  # g and the line in units of 2^-(UNIT_BITS + 1) ulp


def midpoint_gap(m):
    """(0.5 - frac(2^47 / (2^23 + m))) * 2^(UNIT_BITS + 1), truncated towards zero (int64)."""
    den = np.int64(MANTISSAS) + m
    rem = (np.int64(1) << 47) % den
    n = den - 2 * rem
    return np.sign(n) * ((np.abs(n) << UNIT_BITS) // den)


def fit(delta, gap):
    lower = np.full(MANTISSAS, -np.inf)
    upper = np.full(MANTISSAS, np.inf)
    g = gap.astype(np.float64)
    above = gap > 0
    upper[above & (delta == 0)] = g[above & (delta == 0)]
    lower[above & (delta > 0)] = g[above & (delta > 0)]
    lower[~above & (delta == 0)] = g[~above & (delta == 0)]
    upper[~above & (delta < 0)] = g[~above & (delta < 0)]
    blocks = MANTISSAS // BLOCK
    a = np.zeros(blocks, np.int64)
    b = np.zeros(blocks, np.int64)
    v = np.zeros(blocks, np.int64)
    t = np.arange(BLOCK, dtype=np.float64) / BLOCK
    ones = np.ones(BLOCK)
    for k in range(blocks):
        lo, hi = lower[k * BLOCK:(k + 1) * BLOCK], upper[k * BLOCK:(k + 1) * BLOCK]
        fl, fu = np.isfinite(lo), np.isfinite(hi)
        line = np.vstack([ones, t]).T
        a_ub = np.vstack([np.hstack([-line[fl], -np.ones((fl.sum(), 1))]), np.hstack([line[fu], -np.ones((fu.sum(), 1))])])
        b_ub = np.concatenate([-lo[fl], hi[fu]])
        res = linprog([0, 0, 1], A_ub=a_ub, b_ub=b_ub, bounds=[(None, None), (None, None), (0, None)], method="highs")
        assert res.status == 0, (k, res.message)
        a[k], b[k] = int(round(res.x[0])), int(round(res.x[1]))
        v[k] = int(np.ceil(res.x[2])) + 4  # the rounding of a and b, and the shift's floor
    return a, b, v


def decode(a, b, v, bits, offsets, gap):
    """The C++ decoder's rule over every mantissa at once: -1, 0 or +1."""
    m = np.arange(MANTISSAS, dtype=np.int64)
    k, t = m >> BLOCK_BITS, m & (BLOCK - 1)
    line = a[k] + ((b[k] * t) >> BLOCK_BITS)
    band = (np.abs(line - gap) <= v[k]) | (gap == 0)
    off = np.where(gap > 0, line > gap, line < gap)
    rank = np.cumsum(band) - band  # band members before m, over the whole binade
    stored = np.unpackbits(bits.view(np.uint8), bitorder="little")[rank].astype(bool)
    off = np.where(band, stored, off)
    assert np.array_equal(offsets, rank[::BLOCK]), "block offsets"
    return np.where(off, np.where(gap > 0, 1, -1), 0), band


def main(sweep, out):
    delta = np.load(sweep)["tritonrcp_minus_rn"].astype(np.int64)
    assert delta.shape == (MANTISSAS,) and set(np.unique(delta)) <= {-1, 0, 1}
    gap = midpoint_gap(np.arange(MANTISSAS, dtype=np.int64))
    a, b, v = fit(delta, gap)
    for arr in (a, b, v):
        assert np.abs(arr).max() < 2**31
    m = np.arange(MANTISSAS, dtype=np.int64)
    k, t = m >> BLOCK_BITS, m & (BLOCK - 1)
    line = a[k] + ((b[k] * t) >> BLOCK_BITS)
    band = (np.abs(line - gap) <= v[k]) | (gap == 0)
    stored = (delta != 0)[band]
    words = np.packbits(np.concatenate([stored, np.zeros((-stored.size) % 64, bool)]), bitorder="little").view("<u8")
    offsets = (np.cumsum(band) - band)[::BLOCK].astype(np.int64)
    decoded, _ = decode(a, b, v, words, offsets, gap)
    assert np.array_equal(decoded, delta), "the table does not reproduce the sweep"
    counts = (int((delta > 0).sum()), int((delta < 0).sum()))
    digest = fnv1a64(delta)
    print(f"band {int(band.sum())} of {MANTISSAS}; off up {counts[0]}, off down {counts[1]}; "
          f"FNV-1a 64 of the int8 deltas 0x{digest:016x}")

    def rows(values, fmt, per_line):
        items = [fmt(x) for x in values]
        return "\n".join("    " + " ".join(items[i:i + per_line]) for i in range(0, len(items), per_line))

    with open(out, "w") as f:
        f.write(f"""// nvfp4/recipes/detail/div_full_reciprocal_table.hpp: GENERATED by
// tests/golden/producers/make_div_full_table.py from an H100's div.full.f32 reciprocal sweep
// (run_te_compiled_update.py; torch 2.11, Triton 3.6, sm_90). Do not edit: regenerate.
// Per block of {BLOCK} mantissas: a line (a + b * t / {BLOCK}) in units of 2^-{UNIT_BITS + 1} ulp, the
// band half-width v, and the index of the block's first stored bit; then the stored bits.
// The decoder is div_full_reciprocal.hpp. Off up {counts[0]}, off down {counts[1]} of {MANTISSAS}.
#pragma once

#include <cstdint>

namespace nvfp4::detail::div_full_table {{

inline constexpr int block_bits = {BLOCK_BITS};
inline constexpr int unit_bits = {UNIT_BITS};

inline constexpr std::int32_t line_at_start[{a.size}] = {{
{rows(a, lambda x: f"{x},", 48)}
}};
inline constexpr std::int32_t line_slope[{b.size}] = {{
{rows(b, lambda x: f"{x},", 48)}
}};
inline constexpr std::int32_t band_half_width[{v.size}] = {{
{rows(v, lambda x: f"{x},", 48)}
}};
inline constexpr std::uint32_t first_bit[{offsets.size}] = {{
{rows(offsets, lambda x: f"{x},", 48)}
}};
inline constexpr std::uint64_t bits[{words.size}] = {{
{rows(words, lambda x: f"0x{int(x):016x},", 24)}
}};

}}  // namespace nvfp4::detail::div_full_table
""")


def fnv1a64(delta):
    """FNV-1a (64-bit) over the deltas as int8 bytes, mantissa order."""
    data = delta.astype(np.int8).view(np.uint8)
    h = 0xcbf29ce484222325
    prime = 0x100000001b3
    mask = 0xFFFFFFFFFFFFFFFF
    for byte in data.tolist():
        h = ((h ^ byte) * prime) & mask
    return h


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
