// nvfp4/gemm/fp8/detail/layout.hpp: FP8 / MXFP8 GEMM operands as the fast kernels read them: the codes in
// place with per-step maxima, scales and specials beside them; a few rows of A decoded into a
// staging buffer (values, §9 exponents, bf16 pairs); tiles of 16 rows of B (output columns) laid
// out K-major; and the scalar step every kernel falls back to. Large buffers are kept per thread
// and reused (they only grow): fresh memory is expensive to touch, most of all by many threads at
// once, whose page faults serialize in the kernel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "nvfp4/config.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/gemm/fp8/mma_model.hpp"
#include "nvfp4/gemm/operands.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4::fp8_gemm_detail {

inline constexpr int lanes = 16;  ///< output columns per tile (one zmm of fp32)

/// Decode tables of one FP8 format: value, §9 exponent, bf16 bits, NaN/Inf; and the smallest
/// magnitude code (c & 0x7F) that is NaN or Inf. Both formats put those codes on top (E4M3 0x7F,
/// E5M2 0x7C-0x7F), and below them the exponent never decreases as the magnitude code grows, so
/// the largest exponent of some codes is that of their largest finite magnitude code.
struct code_tables {
  float value[256];
  std::int8_t exponent[256];
  std::uint16_t bf16_bits[256];
  bool special[256];
  std::uint8_t first_special = 0x80;
  explicit code_tables(fp8_format format) {
    for (int c = 0; c < 256; ++c) {
      const auto code = static_cast<std::uint8_t>(c);
      const auto parts = fp8::mma::decompose(code, format);
      value[c] = static_cast<float>(fp8::mma::value_of(code, format));
      exponent[c] = static_cast<std::int8_t>(parts.exponent);
      bf16_bits[c] = bf16::from_float(value[c]).bits();
      special[c] = parts.is_nan || parts.is_inf;
      if (special[c] && c < first_special) first_special = code;
    }
  }
};

struct column_tile;

/// One operand: rows of K codes (row r at codes + r * stride, read in place), steps = ceil(K /
/// 32), and per row and step the max §9 exponent of its 32 elements (zero padding past K included,
/// as -126), the E8M0 scale byte (127 = 1 when unscaled) and whether it has a NaN / Inf code or a
/// NaN scale.
struct operand_rows {
  const std::uint8_t* codes = nullptr;
  index_t stride = 0, rows = 0, cols = 0, steps = 0;
  fp8_format format = fp8_format::e4m3;
  const code_tables* tables = nullptr;
  std::vector<std::int32_t> max_exponent;
  std::vector<std::uint8_t> scale;
  std::vector<float> scale_value;  ///< 2^(scale - 127), NaN for a NaN scale
  std::vector<std::uint8_t> special;
  /// Per row: no step with a NaN / Inf code or a NaN scale (what the relaxed kernels' finite loop
  /// needs: no lane of the row takes the scalar step).
  std::vector<std::uint8_t> finite;
  /// Per row: finite and every step unscaled (E8M0 127) (what the relaxed kernels' plain loop
  /// needs: each step's result is then partial + c).
  std::vector<std::uint8_t> plain;
  /// Every tile of this operand packed beforehand (tile t: rows 16t .. 16t + 15), as an operand B
  /// packed once for many products (fp8_packed_weight); null: the driver packs panels as it goes.
  const column_tile* packed_tiles = nullptr;
  std::size_t at(index_t r, index_t s) const { return static_cast<std::size_t>(r * steps + s); }
  /// The 32 codes of row r, step s, zero past K (`pad` holds them when the step is partial).
  const std::uint8_t* step_codes(index_t r, index_t s, std::uint8_t* pad) const {
    const index_t k0 = s * fp8::mma::step_k;
    const std::uint8_t* row = codes + r * stride;
    if (k0 + fp8::mma::step_k <= cols) return row + k0;
    std::memset(pad, 0, fp8::mma::step_k);
    if (k0 < cols) std::memcpy(pad, row + k0, static_cast<std::size_t>(cols - k0));
    return pad;
  }
};

/// Fills `o` for an operand (see operand_rows); `scales(r, s)` gives the E8M0 byte of row r, step
/// s and must be safe to call from several threads. o's vectors only grow (they may end up longer
/// than rows * steps; readers index them through at()), so an operand_rows kept from call to call
/// touches no fresh memory once it has seen the largest operand. Rows are split over the
/// library's threads; each row's statistics depend on that row alone, so the result does not
/// depend on the thread count.
template <class Scales>
void fill_operand(operand_rows& o, const std::uint8_t* codes, index_t stride, index_t rows, index_t cols, fp8_format format,
                  const code_tables& tables, Scales&& scales) {
  o.codes = codes;
  o.stride = stride;
  o.rows = rows;
  o.cols = cols;
  o.steps = (cols + fp8::mma::step_k - 1) / fp8::mma::step_k;
  o.format = format;
  o.tables = &tables;
  o.packed_tiles = nullptr;
  const auto grow = [](auto& v, index_t size) {
    if (v.size() < static_cast<std::size_t>(size)) v.resize(static_cast<std::size_t>(size));
  };
  grow(o.max_exponent, rows * o.steps);
  grow(o.scale, rows * o.steps);
  grow(o.scale_value, rows * o.steps);
  grow(o.special, rows * o.steps);
  grow(o.finite, rows);
  grow(o.plain, rows);
  // Per step, the largest finite magnitude code and whether any code is NaN / Inf; the first's
  // exponent is the step's maximum (code_tables), -126 for zeros alone. Two byte maxima over the
  // step (the second: every magnitude, NaN / Inf ones included), in locals and a loop of fixed
  // length for a whole step so that the compiler vectorizes them: a loop over [k0, k1) updating
  // a flag ran a byte at a time (its cost: docs/benchmarks.md, "Figures behind code choices").
  const std::uint8_t first_special = tables.first_special;
  const auto step_maxima = [first_special](const std::uint8_t* step, index_t count, std::uint8_t& top_finite, std::uint8_t& top_any) {
    std::uint8_t finite = 0, any = 0;
    const auto add = [&](std::uint8_t code) {
      const auto magnitude = static_cast<std::uint8_t>(code & 0x7F);
      finite = std::max(finite, magnitude < first_special ? magnitude : std::uint8_t{0});
      any = std::max(any, magnitude);
    };
    if (count == fp8::mma::step_k) {
      for (index_t k = 0; k < fp8::mma::step_k; ++k) add(step[k]);
    } else {
      for (index_t k = 0; k < count; ++k) add(step[k]);
    }
    top_finite = finite;
    top_any = any;
  };
  simd::parallel_ranges(rows, simd::worth_parallel(rows * cols), [&](index_t begin, index_t end) {
    for (index_t r = begin; r < end; ++r) {
      bool row_finite = true, row_plain = true;
      for (index_t s = 0; s < o.steps; ++s) {
        const index_t k0 = s * fp8::mma::step_k, k1 = std::min(cols, k0 + fp8::mma::step_k);
        std::uint8_t top = 0, top_any = 0;
        step_maxima(codes + r * stride + k0, k1 - k0, top, top_any);
        const bool special = top_any >= first_special;
        const std::uint8_t scale = scales(r, s);
        const std::size_t at = o.at(r, s);
        o.max_exponent[at] = tables.exponent[top];
        o.scale[at] = scale;
        o.scale_value[at] = e8m0::from_bits(scale).to_float();
        o.special[at] = special || scale == 0xFF;
        if (o.special[at]) row_finite = false;
        if (special || scale != 127) row_plain = false;
      }
      o.finite[static_cast<std::size_t>(r)] = row_finite;
      o.plain[static_cast<std::size_t>(r)] = row_plain;
    }
  });
}

/// A fresh operand_rows (see fill_operand), for an operand kept on its own (fp8_packed_weight).
template <class Scales>
operand_rows make_operand(const std::uint8_t* codes, index_t stride, index_t rows, index_t cols, fp8_format format,
                          const code_tables& tables, Scales&& scales) {
  operand_rows o;
  fill_operand(o, codes, stride, rows, cols, format, tables, scales);
  return o;
}

/// Rows of A decoded for broadcasting, steps [s0, s1) of them: element k of step s of staged row
/// r at r * padded_k + (s - s0) * 32 + k.
struct row_staging {
  index_t i0 = 0, s0 = 0, padded_k = 0;
  int rows = 0;
  std::vector<float> value;
  std::vector<std::int32_t> exponent;  ///< int32, so a kernel can broadcast it from memory
  std::vector<std::uint32_t> pair;     ///< bf16(value[2q]) | bf16(value[2q + 1]) << 16
};

/// Which element parts of the staged rows and of the packed tiles a kernel set reads (its
/// `staging(mode)`); the scalar fallback reads the codes.
struct staged_parts {
  bool value = false;
  bool exponent = false;
  bool pair = false;
};

/// Stages the parts of the rows that `parts` asks for.
inline void stage_rows(const operand_rows& a, index_t i0, int rows, index_t s0, index_t s1, staged_parts parts, row_staging& out) {
  out.i0 = i0;
  out.s0 = s0;
  out.rows = rows;
  out.padded_k = (s1 - s0) * fp8::mma::step_k;
  const std::size_t size = static_cast<std::size_t>(rows * out.padded_k);
  if (out.value.size() < size) {
    out.value.resize(size);
    out.exponent.resize(size);
    out.pair.resize(size / 2);
  }
  const code_tables& t = *a.tables;
  const index_t k_begin = s0 * fp8::mma::step_k;
  for (int r = 0; r < rows; ++r) {
    const std::uint8_t* row = a.codes + (i0 + r) * a.stride;
    float* value = out.value.data() + r * out.padded_k;
    std::int32_t* exponent = out.exponent.data() + r * out.padded_k;
    std::uint32_t* pair = out.pair.data() + r * out.padded_k / 2;
    const index_t full = std::max<index_t>(0, std::min(out.padded_k, a.cols - k_begin));
    if (parts.value) {
      for (index_t k = 0; k < full; ++k) value[k] = t.value[row[k_begin + k]];
      std::fill(value + full, value + out.padded_k, 0.0f);
    }
    if (parts.exponent) {
      for (index_t k = 0; k < full; ++k) exponent[k] = t.exponent[row[k_begin + k]];
      std::fill(exponent + full, exponent + out.padded_k, std::int32_t{t.exponent[0]});
    }
    if (!parts.pair) continue;
    const std::uint8_t* const codes = row + k_begin;
    const index_t full_pairs = full / 2;
    for (index_t q = 0; q < full_pairs; ++q)
      pair[q] = t.bf16_bits[codes[2 * q]] | (static_cast<std::uint32_t>(t.bf16_bits[codes[2 * q + 1]]) << 16);
    for (index_t q = full_pairs; q < out.padded_k / 2; ++q) {  // the pair K ends in, and zero padding
      const std::uint8_t c0 = 2 * q < full ? codes[2 * q] : 0, c1 = 2 * q + 1 < full ? codes[2 * q + 1] : 0;
      pair[q] = t.bf16_bits[c0] | (static_cast<std::uint32_t>(t.bf16_bits[c1]) << 16);
    }
  }
}

/// 16 rows of B (output columns j0 .. j0 + 15) laid out K-major for the vector kernels: per step
/// and k the 16 columns' values, exponents and pairs side by side (those packed: empty otherwise),
/// and per step the 16 columns' max exponents, scale exponents and specials (bit j). Zero past
/// the real columns.
struct column_tile {
  index_t steps = 0;
  int columns = 0;
  std::vector<float> value;                  ///< [steps][32][16]
  std::vector<std::int8_t> exponent;         ///< [steps][32][16]
  std::vector<std::uint32_t> pair;           ///< [steps][16][16]
  std::vector<std::int32_t> max_exponent;    ///< [steps][16]
  std::vector<std::int32_t> scale_exponent;  ///< [steps][16]
  std::vector<float> scale_value;            ///< [steps][16]: 2^scale_exponent (NaN for a NaN scale)
  std::vector<std::uint16_t> special;        ///< [steps]
  bool finite = true;                        ///< no step of any column with a NaN / Inf code or a NaN scale
  bool plain = true;                         ///< finite, and every step of every column unscaled
};

/// Packs the tile of B's rows j0 .. j0 + 15: the element parts that `parts` asks for (a kernel
/// set's staging(mode); a tile packed for any kernel takes all three) and every statistic.
inline void pack_tile(const operand_rows& b, index_t j0, column_tile& t, staged_parts parts = {true, true, true}) {
  const index_t steps = b.steps, padded = steps * fp8::mma::step_k;
  const std::size_t elements = static_cast<std::size_t>(padded * lanes);
  t.steps = steps;
  t.columns = static_cast<int>(std::min<index_t>(lanes, b.rows - j0));
  t.value.assign(parts.value ? elements : 0, 0.0f);
  t.exponent.assign(parts.exponent ? elements : 0, static_cast<std::int8_t>(-126));
  t.pair.assign(parts.pair ? elements / 2 : 0, 0u);
  t.max_exponent.assign(static_cast<std::size_t>(steps * lanes), -126);
  t.scale_exponent.assign(t.max_exponent.size(), 0);
  t.scale_value.assign(t.max_exponent.size(), 1.0f);
  t.special.assign(static_cast<std::size_t>(steps), 0);
  t.finite = true;
  t.plain = true;
  const code_tables& tables = *b.tables;
  for (int lane = 0; lane < t.columns; ++lane) {
    const index_t j = j0 + lane;
    const std::uint8_t* row = b.codes + j * b.stride;
    if (parts.value)
      for (index_t k = 0; k < b.cols; ++k) t.value[static_cast<std::size_t>(k * lanes + lane)] = tables.value[row[k]];
    if (parts.exponent)
      for (index_t k = 0; k < b.cols; ++k) t.exponent[static_cast<std::size_t>(k * lanes + lane)] = tables.exponent[row[k]];
    for (index_t q = 0; parts.pair && q < padded / 2; ++q) {
      const std::uint8_t c0 = 2 * q < b.cols ? row[2 * q] : 0, c1 = 2 * q + 1 < b.cols ? row[2 * q + 1] : 0;
      t.pair[static_cast<std::size_t>(q * lanes + lane)] = tables.bf16_bits[c0] | (static_cast<std::uint32_t>(tables.bf16_bits[c1]) << 16);
    }
    for (index_t s = 0; s < steps; ++s) {
      t.max_exponent[static_cast<std::size_t>(s * lanes + lane)] = b.max_exponent[b.at(j, s)];
      const e8m0 scale = e8m0::from_bits(b.scale[b.at(j, s)]);
      t.scale_exponent[static_cast<std::size_t>(s * lanes + lane)] = scale.exponent();
      t.scale_value[static_cast<std::size_t>(s * lanes + lane)] = scale.to_float();
      if (b.special[b.at(j, s)]) t.special[static_cast<std::size_t>(s)] |= static_cast<std::uint16_t>(1u << lane);
    }
    t.finite = t.finite && b.finite[static_cast<std::size_t>(j)];
    t.plain = t.plain && b.plain[static_cast<std::size_t>(j)];
  }
}

/// What the kernels need to run steps for `rows` rows (staged rows row_offset ..) against
/// `tile_count` tiles (1 to 4). The accumulators of the block live at acc[r * acc_stride + t * 16
/// + lane] (see run_steps).
struct step_block {
  const operand_rows* a;
  const row_staging* staged;
  int row_offset;
  int rows;
  const operand_rows* b;
  const column_tile* tiles[4];
  index_t j0[4];
  int tile_count;
  fp8::mma::tensor_core core;
  gemm_mode mode;
  index_t i0() const { return staged->i0 + row_offset; }
};

/// Whether every row of the block has the per-row flag `row_flag` and every tile `tile_flag`.
inline bool every_row_and_tile(const step_block& blk, std::vector<std::uint8_t> operand_rows::*row_flag, bool column_tile::*tile_flag) {
  const std::vector<std::uint8_t>& rows = blk.a->*row_flag;
  for (int r = 0; r < blk.rows; ++r)
    if (!rows[static_cast<std::size_t>(blk.i0() + r)]) return false;
  for (int t = 0; t < blk.tile_count; ++t)
    if (!(blk.tiles[t]->*tile_flag)) return false;
  return true;
}

/// Whether every row and tile of the block is finite (operand_rows::finite, column_tile::finite):
/// no lane of a relaxed step then takes the scalar step.
inline bool finite_block(const step_block& blk) { return every_row_and_tile(blk, &operand_rows::finite, &column_tile::finite); }

/// Whether every row and tile of the block is plain (operand_rows::plain, column_tile::plain):
/// each relaxed step's result is then partial + c, with no scale and no lane for the scalar step.
inline bool plain_block(const step_block& blk) { return every_row_and_tile(blk, &operand_rows::plain, &column_tile::plain); }

/// A staged row of a step block: its element data and statistics for step s (what every vector
/// kernel reads per row and step).
struct staged_row_step {
  const float* value;
  const std::int32_t* exponent;
  const std::uint32_t* pair;
  int max_exponent;
  int scale_exponent;
  bool special;
};
NVFP4_ALWAYS_INLINE staged_row_step staged_row_at(const step_block& blk, int r, index_t s) {
  const row_staging& st = *blk.staged;
  const index_t base = (blk.row_offset + r) * st.padded_k + (s - st.s0) * fp8::mma::step_k;
  const std::size_t at = blk.a->at(blk.i0() + r, s);
  return {st.value.data() + base,
          st.exponent.data() + base,
          st.pair.data() + base / 2,
          blk.a->max_exponent[at],
          static_cast<int>(blk.a->scale[at]) - 127,
          blk.a->special[at] != 0};
}

/// One output's step by the scalar model (the portable path, and the vector kernels' fallback for
/// lanes with NaN / Inf codes, NaN scales or a non-finite accumulator).
inline float scalar_step(const step_block& blk, int r, int t, int lane, index_t s, float c) {
  const index_t i = blk.i0() + r, j = blk.j0[t] + lane;
  const auto sa = e8m0::from_bits(blk.a->scale[blk.a->at(i, s)]);
  const auto sb = e8m0::from_bits(blk.b->scale[blk.b->at(j, s)]);
  std::uint8_t pad_a[fp8::mma::step_k], pad_b[fp8::mma::step_k];
  const std::uint8_t* as = blk.a->step_codes(i, s, pad_a);
  const std::uint8_t* bs = blk.b->step_codes(j, s, pad_b);
  return blk.mode == gemm_mode::exact ? fp8::mma::step(as, blk.a->format, bs, blk.b->format, c, blk.core, sa, sb)
                                      : fp8::mma::relaxed_step(as, blk.a->format, bs, blk.b->format, c, sa, sb);
}

}  // namespace nvfp4::fp8_gemm_detail
