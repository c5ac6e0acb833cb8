// Tests for nvfp4/gemm/fp4/detail/fast_gemm.hpp: the exact kernels add a step's terms without truncation only
// where §6's truncation provably removes nothing, and hand the other lanes to the §6 step. Each
// case below sits on one edge of that test (accumulator too small, accumulator too large, terms
// too far apart, subnormal accumulator, overflow), one binade inside and one outside, with values
// for which the untruncated sum and the §6 result differ, so a bound off by one would show. Every
// case fills a 6 x 37 output (all kernel block shapes) and is compared with the reference bit for bit.
// The AVX-512 kernel's vector form of the tests answers as the scalar rules on scale codes from
// every edge.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/gemm/fp4/detail/fast_gemm.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "nvfp4/gemm/fp4/gemm.hpp"

namespace nvfp4 {
namespace {
namespace gemm_fp4_detail_fast_gemm_test {

/// One K = 64 step: E2M1 codes of A's and B's row, their scale bytes (one per block), and c.
struct step_case {
  std::string name;
  std::vector<int> a_codes, b_codes;  // 64 each
  std::vector<std::uint8_t> a_scales, b_scales;
  float c;
};

constexpr int e2m1_half = 0x1, e2m1_one = 0x2, e2m1_six = 0x7, e2m1_minus = 0x8;

template <class Format>
quantized_tensor<Format> operand(const std::vector<int>& codes, const std::vector<std::uint8_t>& scales, index_t rows) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * 32), 0), scale_bytes;
  for (index_t r = 0; r < rows; ++r) {
    for (int k = 0; k < 64; ++k) bytes[static_cast<std::size_t>(r * 32 + k / 2)] |= static_cast<std::uint8_t>(codes[k] << ((k & 1) * 4));
    scale_bytes.insert(scale_bytes.end(), scales.begin(), scales.end());
  }
  return quantized_tensor<Format>::from_bytes(rows, 64, bytes, scale_bytes);
}

/// c + Σ P_g s_a s_b without §6's truncation, rounded toward zero to fp32 (the sums here are
/// exact in double): what a fast path that skipped the truncation test would return.
double untruncated_sum(const step_case& t, int block_cols, bool nvfp4) {
  auto scale = [&](std::uint8_t code) {
    return nvfp4 ? static_cast<double>(ue4m3::from_bits(code).to_float()) : std::ldexp(1.0, e8m0::from_bits(code).exponent());
  };
  double sum = t.c;
  for (int k = 0; k < 64; ++k)
    sum += static_cast<double>(e2m1::from_bits(static_cast<std::uint8_t>(t.a_codes[k])).to_float()) *
           e2m1::from_bits(static_cast<std::uint8_t>(t.b_codes[k])).to_float() * scale(t.a_scales[k / block_cols]) *
           scale(t.b_scales[k / block_cols]);
  return sum;
}
float round_toward_zero(double x) {
  float f = static_cast<float>(x);
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return f;
}

template <class Format>
void check_case(const step_case& t, bool truncation_matters) {
  constexpr index_t m = 6, n = 37;
  const auto a = operand<Format>(t.a_codes, t.a_scales, m);
  const auto b = operand<Format>(t.b_codes, t.b_scales, n);
  const std::vector<float> c(static_cast<std::size_t>(m * n), t.c);
  std::vector<float> expected(c.size()), got(c.size());
  const auto c_view = matrix_view<const float>::row_major(c.data(), m, n);
  reference::block_scaled_mma(a, b, c_view, matrix_view<float>::row_major(expected.data(), m, n));
  block_scaled_mma(a, b, c_view, matrix_view<float>::row_major(got.data(), m, n));
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(expected[i]))
        << t.name << ": output " << i << " fast " << std::hexfloat << got[i] << " reference " << expected[i];
  const float naive = round_toward_zero(untruncated_sum(t, Format::block_cols, std::is_same_v<typename Format::scale_type, ue4m3>));
  if (truncation_matters)
    EXPECT_NE(std::bit_cast<std::uint32_t>(naive), std::bit_cast<std::uint32_t>(expected[0])) << t.name << ": not a telling case";
  else
    EXPECT_EQ(std::bit_cast<std::uint32_t>(naive), std::bit_cast<std::uint32_t>(expected[0])) << t.name;
}

std::vector<int> codes_at(std::initializer_list<std::pair<int, int>> placed) {
  std::vector<int> codes(64, 0);
  for (auto [k, code] : placed) codes[static_cast<std::size_t>(k)] = code;
  return codes;
}

constexpr std::uint8_t ue4m3_one = 0x38, ue4m3_256 = 0x78, ue4m3_smallest = 0x01, ue4m3_2_pow_minus5 = 0x10;

TEST(ExactFastPathEdges, AccumulatorBelowTheLargestTerm) {
  // Groups 0 and 1 cancel (+1 - 1, E = 0): E_max = 0 and the unit is 2^-35, so c = (1 + 2^-23) 2^d
  // keeps its last bit for d >= -12 and loses it below.
  for (int d = -15; d <= -9; ++d) {
    const float c = std::ldexp(1.0f + std::ldexp(1.0f, -23), d);
    step_case t{"floor d=" + std::to_string(d),
                codes_at({{0, e2m1_one}, {16, e2m1_one}}),
                codes_at({{0, e2m1_one}, {16, e2m1_one | e2m1_minus}}),
                {ue4m3_one, ue4m3_one, ue4m3_one, ue4m3_one},
                {ue4m3_one, ue4m3_one, ue4m3_one, ue4m3_one},
                c};
    check_case<nvfp4_1x16>(t, d < -12);
    t.c = -c;
    check_case<nvfp4_1x16>(t, d < -12);
  }
}

TEST(ExactFastPathEdges, AccumulatorFarAboveTheSmallestTerm) {
  // One term -2^-20 (0.5 * -0.5 * 2^-9 * 2^-9, E = -12, lsb 2^-20); c = 2^e. The unit is
  // 2^(e - 35): the term survives up to e = 15 (result: the float below c) and is cut above.
  for (int e = 12; e <= 19; ++e) {
    const step_case t{"ceiling e=" + std::to_string(e),
                      codes_at({{3, e2m1_half}}),
                      codes_at({{3, e2m1_half | e2m1_minus}}),
                      {ue4m3_smallest, ue4m3_one, ue4m3_one, ue4m3_one},
                      {ue4m3_smallest, ue4m3_one, ue4m3_one, ue4m3_one},
                      std::ldexp(1.0f, e)};
    check_case<nvfp4_1x16>(t, e > 15);
  }
}

TEST(ExactFastPathEdges, TermsTooFarApart) {
  // Groups 0 and 1 cancel at E = 16 (scales 256); group 2 holds one small term of lsb 2^(E_2 - 8)
  // with an odd significand. E_2 = -12 is 28 binades down (cut: result +0); E_2 = -11, 27 down, stays.
  for (bool cut : {true, false}) {
    const std::uint8_t small_a = cut ? ue4m3_smallest : ue4m3_2_pow_minus5;  // e = -6 or e = -5
    const step_case t{cut ? "span 28" : "span 27",
                      codes_at({{0, e2m1_one}, {16, e2m1_one}, {40, e2m1_half}}),
                      codes_at({{0, e2m1_one}, {16, e2m1_one | e2m1_minus}, {40, e2m1_half}}),
                      {ue4m3_256, ue4m3_256, small_a, ue4m3_one},
                      {ue4m3_256, ue4m3_256, ue4m3_smallest, ue4m3_one},
                      0.0f};
    check_case<nvfp4_1x16>(t, cut);
  }
}

std::uint8_t pow2(int e) { return e8m0::from_exponent(e).bits(); }

TEST(ExactFastPathEdges, E8M0AccumulatorFloorAndCeiling) {
  // MXFP4, groups 0-1 share block 0. Cancelling pair at E = -100, c = (1 + 2^-23) 2^(-100 + d).
  for (int d = -14; d <= -10; ++d) {
    const step_case t{"mx floor d=" + std::to_string(d),
                      codes_at({{0, e2m1_one}, {16, e2m1_one}}),
                      codes_at({{0, e2m1_one}, {16, e2m1_one | e2m1_minus}}),
                      {pow2(-50), pow2(-50)},
                      {pow2(-50), pow2(-50)},
                      std::ldexp(1.0f + std::ldexp(1.0f, -23), -100 + d)};
    check_case<mxfp4>(t, d < -12);
  }
  // One term -2^-122 (0.5 * -0.5 * 2^-60 * 2^-60, E = -120), c = 2^e: the fast path takes it up
  // to e = -93 (it assumes a term's lowest bit may be 2^(E - 8)); its real lowest bit, 2^-122,
  // survives truncation to e = -87.
  for (int e = -96; e <= -85; ++e) {
    const step_case t{"mx ceiling e=" + std::to_string(e),
                      codes_at({{5, e2m1_half}}),
                      codes_at({{5, e2m1_half | e2m1_minus}}),
                      {pow2(-60), pow2(-60)},
                      {pow2(-60), pow2(-60)},
                      std::ldexp(1.0f, e)};
    check_case<mxfp4>(t, e > -87);
  }
}

TEST(ExactFastPathEdges, SubnormalAccumulatorAgainstATinyTerm) {
  // A subnormal c aligns at exponent -126, so the unit is 2^-161 once terms are smaller: a term
  // -2^-162 (E = -160) is cut (result c), one of -2^-150 (E = -148) stays (result: c minus one
  // subnormal step, rounded toward zero).
  const float c = std::ldexp(3.0f, -149);
  for (int half_e : {-80, -74}) {
    const step_case t{"subnormal c, E=" + std::to_string(2 * half_e),
                      codes_at({{7, e2m1_half}}),
                      codes_at({{7, e2m1_half | e2m1_minus}}),
                      {pow2(half_e), pow2(half_e)},
                      {pow2(half_e), pow2(half_e)},
                      c};
    check_case<mxfp4>(t, half_e == -80);
  }
}

TEST(ExactFastPathEdges, AllZeroGroupsStillRaiseTheAlignment) {
  // §6 step 3: group 0 has no non-zero product (A is non-zero only at k = 0, B only at k = 1)
  // but carries scales 448 * 448 (E_0 = 16); group 1 is 0.5 * 0.5 at 2^-9 * 2^-9 (term 2^-20,
  // E_1 = -12), below the unit 2^(16 - 35): cut, D = +0. With group 0's scales 1 (E_0 = 0) the
  // term stays. Group 2 has zero scales (m = 0, e = -126) and group 3 a product with a zero scale.
  for (bool large : {true, false}) {
    const std::uint8_t zero_group_scale = large ? 0x7E : ue4m3_one;
    const step_case t{large ? "zero group, scales 448" : "zero group, scales 1",
                      codes_at({{0, e2m1_six}, {16, e2m1_half}, {32, e2m1_one}, {48, e2m1_six}}),
                      codes_at({{1, e2m1_six}, {16, e2m1_half}, {32, e2m1_one}, {48, e2m1_six}}),
                      {zero_group_scale, ue4m3_smallest, 0x00, 0x00},
                      {zero_group_scale, ue4m3_smallest, 0x00, 0x7E},
                      0.0f};
    check_case<nvfp4_1x16>(t, large);
  }
}

TEST(ExactFastPathEdges, AZeroAccumulatorAlignsAtMinus126) {
  // MXFP4: group 0 is sixteen 6 * 6 at 2^-77 * 2^-78 (9 * 2^-149), group 2 is -2^-182 (0.5 *
  // -0.5 at 2^-90 * 2^-90). c = 0 has E_c = -126, so the unit is 2^-161 and group 2 is cut:
  // D = 9 * 2^-149, where the untruncated sum rounds toward zero to 8 * 2^-149.
  std::vector<int> a_codes(64, 0), b_codes(64, 0);
  for (int k = 0; k < 16; ++k) a_codes[static_cast<std::size_t>(k)] = b_codes[static_cast<std::size_t>(k)] = e2m1_six;
  a_codes[32] = e2m1_half;
  b_codes[32] = e2m1_half | e2m1_minus;
  const step_case t{"zero accumulator", a_codes, b_codes, {pow2(-77), pow2(-90)}, {pow2(-78), pow2(-90)}, 0.0f};
  check_case<mxfp4>(t, true);
}

TEST(ExactFastPathEdges, SumsNearTheTopOfTheFloatRange) {
  // 16 products 6 * 6 = 576 per group at 2^118 (block 0 scales 2^59): group 0 alone gives
  // 1.125 * 2^127 (a float); groups 0 and 1 give 1.125 * 2^128, which §6 turns into +Inf where
  // rounding toward zero alone would give FLT_MAX. B's block 1 (no products) is 2^32, which keeps
  // every other bound of the fast path satisfied, so only its overflow bound decides.
  std::vector<int> one_group(64, 0);
  for (int k = 0; k < 16; ++k) one_group[static_cast<std::size_t>(k)] = e2m1_six;
  std::vector<int> two_groups = one_group;
  for (int k = 16; k < 32; ++k) two_groups[static_cast<std::size_t>(k)] = e2m1_six;
  const step_case one{"one big group", one_group, one_group, {pow2(59), pow2(59)}, {pow2(59), pow2(32)}, 0.0f};
  check_case<mxfp4>(one, false);
  const step_case two{"overflow", two_groups, two_groups, {pow2(59), pow2(59)}, {pow2(59), pow2(32)}, 0.0f};
  check_case<mxfp4>(two, true);
  float d = 0;
  block_scaled_mma(operand<mxfp4>(two.a_codes, two.a_scales, 1), operand<mxfp4>(two.b_codes, two.b_scales, 1), matrix_view<const float>{},
                   matrix_view<float>::row_major(&d, 1, 1));
  EXPECT_EQ(d, std::numeric_limits<float>::infinity());
}

#if NVFP4_HAS_AVX512_VNNI  // the AVX-512 kernel set's own checks: builds without that set have nothing to check here
// The AVX-512 exact kernel tests a block's rows against a tile at once (fast_step_tests, over
// row_step::fast_step_key); it must answer what terms_add_exactly_in_float and
// scales_allow_fast_step answer for every row and tile. Compares the two for every row of `a`
// against every tile of `b` at every step; returns how often each rule held, and how many pairs.
struct rule_counts {
  index_t compared = 0, float_rule = 0, scale_rule = 0;
};
template <class Format>
rule_counts compare_vector_fast_step_tests(const quantized_tensor<Format>& a, const quantized_tensor<Format>& b) {
  rule_counts counts;
  using kernels = detail::mma_kernels<isa::avx512_vnni>;
  const auto broadcast = kernels::packers::make_broadcast_rows(a);
  const index_t steps = broadcast.steps, tile_count = b.rows() / detail::tile_lanes;
  std::vector<detail::tile_step> tiles(static_cast<std::size_t>(tile_count * steps));
  for (index_t t = 0; t < tile_count; ++t) kernels::packers::pack_tile(b, t * detail::tile_lanes, tiles.data() + t * steps);
  for (index_t s = 0; s < steps; ++s)
    for (index_t r0 = 0; r0 + 4 <= a.rows(); r0 += 4)
      for (index_t t0 = 0; t0 + 2 <= tile_count; t0 += 2) {
        const detail::row_step* ra[4];
        const detail::tile_step* tb[2];
        for (int r = 0; r < 4; ++r) ra[r] = broadcast.row(r0 + r) + s;
        for (int c = 0; c < 2; ++c) tb[c] = tiles.data() + (t0 + c) * steps + s;
        __mmask16 in_float[2], scales_ok[2];
        kernels::fast_step_tests<4, 2>(ra, tb, in_float, scales_ok);
        for (int r = 0; r < 4; ++r)
          for (int c = 0; c < 2; ++c) {
            const bool float_rule = detail::terms_add_exactly_in_float(*ra[r], *tb[c]);
            const bool scale_rule = detail::scales_allow_fast_step(*ra[r], *tb[c]);
            EXPECT_EQ(kernels::row_passes(in_float[c], r), float_rule) << "row " << r0 + r << ", tile " << t0 + c << ", step " << s;
            EXPECT_EQ(kernels::row_passes(scales_ok[c], r), scale_rule) << "row " << r0 + r << ", tile " << t0 + c << ", step " << s;
            ++counts.compared;
            counts.float_rule += float_rule;
            counts.scale_rule += scale_rule;
          }
      }
  return counts;
}

/// An operand of `rows` rows whose row r has scale code codes(r, block); random E2M1 values.
template <class Format, class Codes>
quantized_tensor<Format> operand_with_scales(index_t rows, index_t k, Codes&& codes, std::mt19937& rng) {
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * k / 2));
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  const index_t scale_cols = (k + Format::block_cols - 1) / Format::block_cols;
  std::vector<std::uint8_t> scales(static_cast<std::size_t>(rows * scale_cols));
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < scale_cols; ++c) scales[static_cast<std::size_t>(r * scale_cols + c)] = codes(r, c);
  return quantized_tensor<Format>::from_bytes(rows, k, bytes, scales);
}

/// Random scale codes from windows of `codes`: three rows in four near the list's middle, the rest
/// anywhere, so that both answers of every rule occur; 8 steps of K, the last one partial.
template <class Format>
void check_vector_fast_step_tests(const std::vector<std::uint8_t>& codes) {
  std::mt19937 rng(11);
  std::size_t base = 0, width = 1;
  const auto windowed = [&](index_t, index_t block) {
    if (block == 0) {  // a new row: a new window
      base = rng() % 4 ? codes.size() / 2 - 2 + rng() % 4 : rng() % codes.size();
      width = 1 + rng() % 3;
    }
    return codes[(base + rng() % width) % codes.size()];
  };
  const index_t k = 8 * 64 - 40;
  const auto a = operand_with_scales<Format>(64, k, windowed, rng);
  const auto b = operand_with_scales<Format>(128, k, windowed, rng);
  const rule_counts counts = compare_vector_fast_step_tests(a, b);
  EXPECT_EQ(counts.compared, 8 * 16 * 4 * 8);
  for (index_t held : {counts.float_rule, counts.scale_rule}) {  // both answers of each rule occur
    EXPECT_GT(held, counts.compared / 20);
    EXPECT_LT(held, counts.compared - counts.compared / 20);
  }
}

TEST(ExactFastPathEdges, VectorTestsAnswerAsTheScalarRulesMxfp4) {
  // E8M0: 2^-127, 2^-126, 2^-120, 2^-100, 2^-30, every power 2^-9 .. 2^7, 2^20, 2^90, 2^100,
  // 2^110, 2^113, 2^127, NaN.
  std::vector<std::uint8_t> codes = {0, 1, 7, 27, 97};
  for (int e = -9; e <= 7; ++e) codes.push_back(static_cast<std::uint8_t>(127 + e));
  codes.insert(codes.end(), {147, 217, 227, 237, 240, 254, 255});
  check_vector_fast_step_tests<mxfp4>(codes);
}
TEST(ExactFastPathEdges, VectorTestsAnswerAsTheScalarRulesNvfp4) {
  // UE4M3: zero, subnormals, 2^-6 .. 448, NaN.
  check_vector_fast_step_tests<nvfp4_1x16>(
      {0x00, 0x01, 0x05, 0x08, 0x10, 0x20, 0x30, 0x38, 0x3C, 0x40, 0x48, 0x50, 0x60, 0x70, 0x7E, 0x7F});
}

// Every limit of the two rules, one binade inside and one outside: MXFP4 rows and tiles whose E8M0
// exponents put each sum exactly on a limit or one past it, with the other conditions holding.
TEST(ExactFastPathEdges, VectorTestsAnswerAsTheScalarRulesOnEveryLimit) {
  // {low, high} exponent of each row (its two scale blocks per step) and of each tile (all lanes).
  const std::vector<std::pair<int, int>> row_exponents = {
      {-70, -70}, {-71, -71}, {-76, -76}, {-77, -77},  // e_min + e_min_low: -141 / -142 (float), -153 / -154 (scales)
      {49, 49},   {50, 50},                            // e_min + e_min_high: 98 / 99
      {30, 56},   {30, 57},                            // e_max + e_max_high: 113 / 114, span 26 / 27
      {0, 3},     {0, 4},     {0, 0},     {0, 27},     // spans against max_float_sum_span and max_term_span
      {-1, -1},   {29, 56},   {-2, 1},    {2, 2}};
  const std::vector<std::pair<int, int>> tile_exponents = {{-71, -71}, {-77, -77}, {49, 49}, {57, 57}, {0, 0}, {0, 1}, {56, 57}, {-1, 2}};
  const auto code = [](int e) { return static_cast<std::uint8_t>(127 + e); };
  std::mt19937 rng(12);
  const index_t k = 4 * 64;  // two E8M0 blocks per step
  const auto a = operand_with_scales<mxfp4>(
      static_cast<index_t>(row_exponents.size()), k,
      [&](index_t r, index_t block) {
        const auto [low, high] = row_exponents[static_cast<std::size_t>(r)];
        return code(block % 2 ? high : low);
      },
      rng);
  const auto b = operand_with_scales<mxfp4>(
      static_cast<index_t>(tile_exponents.size()) * detail::tile_lanes, k,
      [&](index_t j, index_t block) {
        const auto [low, high] = tile_exponents[static_cast<std::size_t>(j / detail::tile_lanes)];
        return code(block % 2 ? high : low);
      },
      rng);
  const rule_counts counts = compare_vector_fast_step_tests(a, b);
  EXPECT_EQ(counts.compared, 4 * 4 * 4 * 8);
}
#endif  // NVFP4_HAS_AVX512_VNNI

}  // namespace gemm_fp4_detail_fast_gemm_test
}  // namespace
}  // namespace nvfp4
