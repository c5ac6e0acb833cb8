// Tests of nvfp4/gemm/fp8/detail/layout.hpp: the decode tables' order (what make_operand's per-step
// maxima rely on), make_operand's per-step maximum exponent, scale and NaN / Inf flag (from every
// position of a step) and its finite and plain rows against their definition on codes with
// specials and a ragged K, finite and plain tiles with their scales as floats, stage_rows
// against the tables, and a kept operand refilled for other shapes on 1 and 2 threads.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/gemm/fp8/detail/layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "test_support.hpp"

namespace nvfp4::fp8_gemm_detail {
namespace {
namespace gemm_fp8_detail_layout_test {

TEST(Fp8Layout, TablesPutSpecialsOnTopOfNonDecreasingExponents) {
  for (fp8_format format : {fp8_format::e4m3, fp8_format::e5m2}) {
    const code_tables t(format);
    EXPECT_EQ(t.first_special, format == fp8_format::e4m3 ? 0x7F : 0x7C);
    for (int c = 0; c < 128; ++c) {
      EXPECT_EQ(t.special[c], c >= t.first_special) << c;
      EXPECT_EQ(t.special[c | 0x80], t.special[c]) << c;
      EXPECT_EQ(t.exponent[c | 0x80], t.exponent[c]) << c;
      if (c > 0 && c < t.first_special) {
        EXPECT_GE(t.exponent[c], t.exponent[c - 1]) << c;
      }
    }
    EXPECT_EQ(t.exponent[0], -126);
  }
}

// Each position of a step, in whole steps and in the partial last one, can hold the step's only
// largest code and its only NaN / Inf code.
TEST(Fp8Layout, EveryPositionOfAStepCountsForItsMaximumAndFlag) {
  for (fp8_format format : {fp8_format::e4m3, fp8_format::e5m2}) {
    const code_tables t(format);
    const index_t cols = 2 * 32 + 5, rows = cols;  // row p: the one large code at column p
    const auto small = std::uint8_t{0x09}, large = static_cast<std::uint8_t>(t.first_special - 1);
    ASSERT_LT(t.exponent[small], t.exponent[large]);
    for (bool special : {false, true}) {
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(rows * cols), small);
      for (index_t p = 0; p < cols; ++p) codes[static_cast<std::size_t>(p * cols + p)] = special ? t.first_special : large;
      const operand_rows o = make_operand(codes.data(), cols, rows, cols, format, t, [](index_t, index_t) { return std::uint8_t{127}; });
      for (index_t p = 0; p < rows; ++p)
        for (index_t s = 0; s < o.steps; ++s) {
          const bool here = p / 32 == s;
          EXPECT_EQ(o.max_exponent[o.at(p, s)], here && !special ? t.exponent[large] : t.exponent[small]) << p << "," << s;
          EXPECT_EQ(o.special[o.at(p, s)] != 0, here && special) << p << "," << s;
        }
    }
  }
}

/// What a step of an operand row is by definition: the largest exponent of its finite codes
/// (-126 when none) and whether any code is NaN / Inf.
struct step_expectation {
  int max_exponent = -126;
  bool special = false;
};
step_expectation expected_step(const std::vector<std::uint8_t>& codes, index_t stride, index_t r, index_t s, index_t cols,
                               const code_tables& t) {
  step_expectation e;
  for (index_t k = s * 32; k < std::min(cols, s * 32 + 32); ++k) {
    const std::uint8_t c = codes[static_cast<std::size_t>(r * stride + k)];
    if (!t.special[c]) e.max_exponent = std::max<int>(e.max_exponent, t.exponent[c]);
    e.special = e.special || t.special[c];
  }
  return e;
}

TEST(Fp8Layout, OperandStepsFollowTheirDefinition) {
  std::mt19937 gen(3);
  for (fp8_format format : {fp8_format::e4m3, fp8_format::e5m2}) {
    const code_tables t(format);
    const index_t rows = 9, cols = 150, stride = 160;                                // five steps, the last partial
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(rows * stride), 0xAA);  // past cols: never read
    for (index_t r = 0; r < rows; ++r)
      for (index_t k = 0; k < cols; ++k) {
        const unsigned draw = gen() % 64;
        auto& c = codes[static_cast<std::size_t>(r * stride + k)];
        c = draw == 0   ? static_cast<std::uint8_t>(t.first_special | (gen() & 0x83))
            : draw < 20 ? std::uint8_t{0}
                        : static_cast<std::uint8_t>(gen() % t.first_special | (gen() & 0x80));
      }
    for (index_t k = 0; k < 32; ++k) codes[static_cast<std::size_t>(2 * stride + 32 + k)] = k % 2 ? 0x80 : 0;  // signed zeros only
    const operand_rows o = make_operand(codes.data(), stride, rows, cols, format, t,
                                        [](index_t r, index_t s) { return static_cast<std::uint8_t>(r == 4 && s == 1 ? 0xFF : 120 + s); });
    ASSERT_EQ(o.steps, 5);
    for (index_t r = 0; r < rows; ++r)
      for (index_t s = 0; s < o.steps; ++s) {
        const step_expectation e = expected_step(codes, stride, r, s, cols, t);
        EXPECT_EQ(o.max_exponent[o.at(r, s)], e.max_exponent) << r << "," << s;
        EXPECT_EQ(o.special[o.at(r, s)] != 0, e.special || (r == 4 && s == 1)) << r << "," << s;
        EXPECT_EQ(o.scale[o.at(r, s)], r == 4 && s == 1 ? 0xFF : 120 + s);
      }
    EXPECT_EQ(o.max_exponent[o.at(2, 1)], -126);

    // Finite rows (no NaN / Inf code, no NaN scale), plain rows (finite and every step unscaled)
    // and tiles (all their columns finite / plain).
    for (index_t r = 0; r < rows; ++r) {
      bool finite = r != 4;  // row 4 has the NaN scale
      for (index_t k = 0; k < cols; ++k) finite = finite && !t.special[codes[static_cast<std::size_t>(r * stride + k)]];
      EXPECT_EQ(o.finite[static_cast<std::size_t>(r)] != 0, finite) << r;
      EXPECT_EQ(o.plain[static_cast<std::size_t>(r)], 0) << r;  // scales are not 127
    }
    const operand_rows unscaled =
        make_operand(codes.data(), stride, rows, cols, format, t, [](index_t, index_t) { return std::uint8_t{127}; });
    std::vector<bool> row_plain(rows, true);
    for (index_t r = 0; r < rows; ++r) {
      for (index_t k = 0; k < cols; ++k) row_plain[r] = row_plain[r] && !t.special[codes[static_cast<std::size_t>(r * stride + k)]];
      EXPECT_EQ(unscaled.plain[static_cast<std::size_t>(r)] != 0, row_plain[r]) << r;
    }
    std::vector<std::uint8_t> tame = codes;  // small finite codes, but row 5 holds a NaN / Inf
    for (auto& c : tame) c &= 0x83;
    tame[static_cast<std::size_t>(5 * stride + 7)] = t.first_special;
    const auto unit = [](index_t, index_t) { return std::uint8_t{127}; };
    const operand_rows b = make_operand(tame.data(), stride, rows, cols, format, t, unit);
    column_tile tile;
    pack_tile(b, 0, tile);
    EXPECT_FALSE(tile.finite);
    EXPECT_FALSE(tile.plain);
    pack_tile(make_operand(tame.data(), stride, 5, cols, format, t, unit), 0, tile);
    EXPECT_TRUE(tile.finite);
    EXPECT_TRUE(tile.plain);
    // Scaled finite columns: finite, not plain, and each step's scale as a float, 2^(code - 127).
    const auto scaled = [](index_t j, index_t s) { return static_cast<std::uint8_t>(j == 0 ? 0 : j == 1 ? 254 : 100 + 10 * s + j); };
    pack_tile(make_operand(tame.data(), stride, 5, cols, format, t, scaled), 0, tile);
    EXPECT_TRUE(tile.finite);
    EXPECT_FALSE(tile.plain);
    for (index_t s = 0; s < tile.steps; ++s)
      for (index_t j = 0; j < 5; ++j)
        EXPECT_EQ(tile.scale_value[static_cast<std::size_t>(s * lanes + j)], std::ldexp(1.0f, scaled(j, s) - 127)) << j << "," << s;
    EXPECT_EQ(tile.scale_value[0], 0x1p-127f);  // E8M0 0: a subnormal float, still exact
    EXPECT_EQ(tile.scale_value[1], 0x1p127f);

    // Staged rows: values, exponents and bf16 pairs of the codes, zero past K.
    row_staging staged;
    stage_rows(o, 3, 5, 2, 5, {.value = true, .exponent = true, .pair = true}, staged);
    ASSERT_EQ(staged.padded_k, 96);
    for (int r = 0; r < 5; ++r)
      for (index_t k = 0; k < staged.padded_k; ++k) {
        const index_t col = 64 + k;
        const std::uint8_t c = col < cols ? codes[static_cast<std::size_t>((3 + r) * stride + col)] : 0;
        const std::size_t at = static_cast<std::size_t>(r * staged.padded_k + k);
        EXPECT_EQ(std::bit_cast<std::uint32_t>(staged.value[at]), std::bit_cast<std::uint32_t>(t.value[c])) << r << "," << k;
        EXPECT_EQ(staged.exponent[at], t.exponent[c]) << r << "," << k;
        EXPECT_EQ(staged.pair[at / 2] >> (16 * (k % 2)) & 0xFFFF, t.bf16_bits[c]) << r << "," << k;
      }
  }
}

// A kept operand_rows (the GEMMs' per-thread workspace) refilled for a smaller, then a larger
// operand holds what the definition says, whatever it held before; the operand is large enough
// that its rows are split over threads, and 1 and 2 threads agree with the definition.
TEST(Fp8Layout, RefilledOperandFollowsItsDefinitionForAnyThreadCount) {
  std::mt19937 gen(9);
  const code_tables t(fp8_format::e4m3);
  const index_t stride = 300;
  std::vector<std::uint8_t> all_special(static_cast<std::size_t>(400 * stride), t.first_special);
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(400 * stride));
  for (auto& c : codes) {
    const unsigned draw = gen() % 128;
    c = draw == 0 ? t.first_special : draw < 30 ? std::uint8_t{0} : static_cast<std::uint8_t>(gen() % t.first_special | (gen() & 0x80));
  }
  const auto scales = [](index_t r, index_t s) { return static_cast<std::uint8_t>(r % 7 == 0 ? 127 : 100 + (r + s) % 50); };
  const auto check = [&](const operand_rows& o, index_t rows, index_t cols, const char* what) {
    ASSERT_EQ(o.rows, rows);
    ASSERT_EQ(o.steps, (cols + 31) / 32);
    for (index_t r = 0; r < rows; ++r) {
      bool finite = true, plain = true;
      for (index_t s = 0; s < o.steps; ++s) {
        const step_expectation e = expected_step(codes, stride, r, s, cols, t);
        ASSERT_EQ(o.max_exponent[o.at(r, s)], e.max_exponent) << what << " " << r << "," << s;
        ASSERT_EQ(o.special[o.at(r, s)] != 0, e.special) << what << " " << r << "," << s;
        ASSERT_EQ(o.scale[o.at(r, s)], scales(r, s)) << what;
        ASSERT_EQ(o.scale_value[o.at(r, s)], std::ldexp(1.0f, scales(r, s) - 127)) << what;
        finite = finite && !e.special;
        plain = plain && !e.special && scales(r, s) == 127;
      }
      ASSERT_EQ(o.finite[static_cast<std::size_t>(r)] != 0, finite) << what << " " << r;
      ASSERT_EQ(o.plain[static_cast<std::size_t>(r)] != 0, plain) << what << " " << r;
    }
  };
  for (int threads : {1, 2}) {
    test::set_threads(threads);
    operand_rows o;
    fill_operand(o, all_special.data(), stride, 400, 290, fp8_format::e4m3, t, [](index_t, index_t) { return std::uint8_t{0xFF}; });
    fill_operand(o, codes.data(), stride, 50, 70, fp8_format::e4m3, t, scales);  // smaller: storage kept, not shrunk
    check(o, 50, 70, "smaller");
    fill_operand(o, codes.data(), stride, 380, 260, fp8_format::e4m3, t, scales);  // 98,800 codes: split over threads
    check(o, 380, 260, "larger");
  }
}

}  // namespace gemm_fp8_detail_layout_test
}  // namespace
}  // namespace nvfp4::fp8_gemm_detail
