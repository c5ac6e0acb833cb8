// Tests for nvfp4/scaling/detail/block_kernels.hpp's one-pass NVFP4 1x16 row kernel, its kernel
// of blocks held across lanes (the columnwise copy's), its E2M1 encoder of scaled rows (also the
// NVFP4 16x16 and MXFP4 one) and the lane primitives they stand on (simd/<isa>/ops.hpp:
// reduce_max_each, narrow_to_words, widen_words, store_nibble_words_x4, store_lanes2/4, the
// AVX-512 E2M1 word encoder), in the build's ISA: codes against the E2M1 codec on every rounding
// threshold and around it, rows against nvfp4::reference.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/scaling/detail/block_kernels.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "nvfp4/scaling/mxfp8_quantize.hpp"
#include "nvfp4/scaling/reference.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace scaling_detail_block_kernels_test {

using kernels = detail::fast_block_kernels;
using ops = simd::ops;
constexpr int width = ops::width;

/// Values where E2M1's round-to-nearest-even is decided: every grid value and midpoint, each
/// with its float neighbours and nearby values, both signs; zeros, subnormals, the saturating
/// range up to Inf; and a sweep of every exponent from 2^-30 to 2^30 with assorted mantissas.
std::vector<float> e2m1_probe_values() {
  std::vector<float> magnitudes = {0.0f,    std::numeric_limits<float>::denorm_min(), FLT_MIN, 6.0f, 7.0f, 7.99f, 8.0f, 8.5f, 12.0f, 1e30f,
                                   FLT_MAX, std::numeric_limits<float>::infinity()};
  for (float t : {0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f}) {
    magnitudes.push_back(t);
    magnitudes.push_back(std::nextafter(t, 0.0f));
    magnitudes.push_back(std::nextafter(t, 100.0f));
    for (float nudge : {1e-6f, 1e-3f, 0.03f}) {
      magnitudes.push_back(t * (1.0f + nudge));
      magnitudes.push_back(t * (1.0f - nudge));
    }
  }
  std::mt19937 gen(11);
  for (std::uint32_t exponent = 127 - 30; exponent <= 127 + 30; ++exponent)
    for (std::uint32_t top = 0; top < 16; ++top)  // the top 4 mantissa bits
      for (std::uint32_t low : {0u, 1u, 0x7FFFFu, 0x80000u, static_cast<std::uint32_t>(gen()) & 0x7FFFFu})
        magnitudes.push_back(std::bit_cast<float>(exponent << 23 | top << 19 | low));
  std::vector<float> values;
  for (float m : magnitudes) {
    values.push_back(m);
    values.push_back(-m);
  }
  while (values.size() % (8 * width) != 0) values.push_back(0.0f);
  return values;
}

TEST(E2m1WordCodes, PackedCodesEqualTheCodecOnEveryThresholdAndAround) {
  const std::vector<float> values = e2m1_probe_values();
  std::vector<std::uint8_t> packed(values.size() / 2);
  for (std::size_t i = 0; i < values.size(); i += 8 * width) {
    ops::vi words[4];
    for (int p = 0; p < 4; ++p)
      words[p] =
          kernels::e2m1_codes_as_words(ops::load(values.data() + i + 2 * p * width), ops::load(values.data() + i + (2 * p + 1) * width));
    ops::store_nibble_words_x4(packed.data() + i / 2, words);
  }
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const unsigned got = (packed[i / 2] >> (4 * (i % 2))) & 0xFu;
    const unsigned expected = detail::encode_minifloat<e2m1_traits>(values[i], overflow_policy::saturate);
    if (got != expected && mismatches++ < 5)
      ADD_FAILURE() << "element " << i << " = " << values[i] << " (bits 0x" << std::hex << std::bit_cast<std::uint32_t>(values[i])
                    << std::dec << "): code " << got << ", the codec's " << expected;
  }
  EXPECT_EQ(mismatches, 0u) << ops::name;
}

TEST(E2m1Codes, EachLaneEqualsTheCodecOnEveryThresholdAndAround) {
  // The codes in lanes (the columnwise kernels' form): the word encoder widened back where the
  // ISA has one (ops::widen_words), encode_bits per vector elsewhere.
  const std::vector<float> values = e2m1_probe_values();
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < values.size(); i += 2 * width) {
    ops::vi codes[2];
    kernels::e2m1_codes(ops::load(values.data() + i), ops::load(values.data() + i + width), codes[0], codes[1]);
    alignas(64) std::uint32_t lanes[2][width];
    for (int h = 0; h < 2; ++h) ops::store_bits(lanes[h], codes[h]);
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < width; ++l) {
        const float value = values[i + static_cast<std::size_t>(h * width + l)];
        const unsigned expected = detail::encode_minifloat<e2m1_traits>(value, overflow_policy::saturate);
        if (lanes[h][l] != expected && mismatches++ < 5)
          ADD_FAILURE() << value << " (bits 0x" << std::hex << std::bit_cast<std::uint32_t>(value) << std::dec << "): code " << lanes[h][l]
                        << ", the codec's " << expected;
      }
  }
  EXPECT_EQ(mismatches, 0u) << ops::name;
}

TEST(ReduceMaxEach, LaneIIsTheMaxOfVectorI) {
  std::mt19937 gen(5);
  for (int trial = 0; trial < 200; ++trial) {
    alignas(64) std::uint32_t lanes[width][width];
    ops::vi rows[width];
    for (int r = 0; r < width; ++r) {
      for (int l = 0; l < width; ++l) lanes[r][l] = static_cast<std::uint32_t>(gen()) >> (1 + gen() % 31);  // [0, 2^31)
      // One trial in four puts the largest value in a chosen lane, so every position wins somewhere.
      if (trial % 4 == 0) lanes[r][(r + trial) % width] = 0x7FFFFFFFu - static_cast<std::uint32_t>(r);
      rows[r] = ops::load_bits(lanes[r]);
    }
    alignas(64) std::uint32_t result[width];
    ops::store_bits(result, ops::reduce_max_each(rows));
    for (int r = 0; r < width; ++r) {
      std::uint32_t expected = 0;
      for (int l = 0; l < width; ++l) expected = std::max(expected, lanes[r][l]);
      ASSERT_EQ(result[r], expected) << ops::name << ", trial " << trial << ", vector " << r;
    }
  }
}

/// encode_e2m1_scaled<Block> against the codec applied element by element: code of
/// x[i] * factors[i / Block] (rounded to float first, as the kernels multiply), two per byte.
template <int Block>
void expect_scaled_codes_match_the_codec(index_t n, unsigned seed) {
  SCOPED_TRACE("block " + std::to_string(Block) + ", n " + std::to_string(n));
  const std::vector<float> x = test::random_values(n, seed, {1.0, 4.0, 9});
  std::vector<float> factors(static_cast<std::size_t>((n + Block - 1) / Block));
  std::mt19937 gen(seed);
  for (float& f : factors) f = std::ldexp(1.0f + static_cast<float>(gen() % 8) / 8.0f, static_cast<int>(gen() % 9) - 4);
  std::vector<std::uint8_t> packed(static_cast<std::size_t>((n + 1) / 2), 0xEE);
  kernels::encode_e2m1_scaled<Block>(x.data(), n, factors.data(), packed.data());
  for (index_t i = 0; i < n; ++i) {
    const float scaled = x[static_cast<std::size_t>(i)] * factors[static_cast<std::size_t>(i / Block)];
    const unsigned expected = detail::encode_minifloat<e2m1_traits>(scaled, overflow_policy::saturate);
    ASSERT_EQ((packed[static_cast<std::size_t>(i / 2)] >> (4 * (i % 2))) & 0xFu, expected) << "element " << i;
  }
}

TEST(EncodeE2m1Scaled, EqualsTheCodecForNvfp4AndMxBlocks) {
  unsigned seed = 3;
  for (const index_t n : {1, 15, 16, 33, 255, 256, 257, 511, 512, 4096 + 47}) {
    expect_scaled_codes_match_the_codec<16>(n, seed++);
    expect_scaled_codes_match_the_codec<32>(n, seed++);
  }
}

/// quantize_nvfp4_1x16 on one row of n values (float or bf16) against the reference quantization
/// of that row (the same global amax): scale codes and packed elements, byte for byte.
template <class T>
void expect_row_matches_reference(const std::vector<T>& row, float global_amax, const std::string& label) {
  SCOPED_TRACE(label);
  const auto n = static_cast<index_t>(row.size());
  const auto expected = reference::quantize_with_amax<nvfp4_1x16>(matrix_view<const T>::row_major(row.data(), 1, n), global_amax);
  std::vector<std::uint8_t> scale_codes(static_cast<std::size_t>(expected.scale_cols()), 0xEE);
  std::vector<std::uint8_t> data(static_cast<std::size_t>(expected.data_row_stride()), 0xEE);
  kernels::quantize_nvfp4_1x16(row.data(), n, nvfp4_tensor_scale(global_amax), scale_codes.data(), data.data());
  for (std::size_t b = 0; b < scale_codes.size(); ++b) ASSERT_EQ(scale_codes[b], expected.scales()[b].bits()) << "scale of block " << b;
  for (std::size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], expected.data()[i].bits()) << "data byte " << i;
}

TEST(QuantizeNvfp4Row, EqualsTheReferenceForEveryLengthAndSpread) {
  // Lengths around the kernel's step (16 * width), its 64-block chunk and the partial block.
  const index_t lengths[] = {1, 2, 15, 16, 17, 31, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025, 1040, 2048 + 272, 4096};
  unsigned seed = 1;
  for (const index_t n : lengths) {
    for (const test::value_spread spread :
         {test::value_spread{}, test::value_spread{1.0, 6.0, 0}, test::value_spread{1e-30, 2.0, 7}, test::value_spread{1e30, 3.0, 0}}) {
      std::vector<float> row = test::random_values(n, seed++, spread);
      if (n > 40)  // a block of zeros, and one of ties (the grid's midpoints, times a power of two)
        for (index_t i = 16; i < 32; ++i) {
          row[static_cast<std::size_t>(i)] = 0.0f;
          row[static_cast<std::size_t>(i + 16)] = (i % 2 ? -1.0f : 1.0f) * std::ldexp(0.25f + 0.5f * static_cast<float>(i % 8), 3);
        }
      float amax = 0.0f;
      for (float v : row) amax = std::max(amax, std::fabs(v));
      const std::string label = "n " + std::to_string(n) + ", seed " + std::to_string(seed);
      expect_row_matches_reference(row, amax, label);
      // An amax below the data's (delayed scaling's): blocks above it saturate.
      expect_row_matches_reference(row, amax / 1000.0f, label + ", amax / 1000");
      // The same row as bf16, which the kernel reads without a float copy.
      std::vector<bf16> row_bf16(row.size());
      float amax_bf16 = 0.0f;
      for (std::size_t i = 0; i < row.size(); ++i) {
        row_bf16[i] = bf16::from_float(row[i]);
        amax_bf16 = std::max(amax_bf16, std::fabs(row_bf16[i].to_float()));
      }
      expect_row_matches_reference(row_bf16, amax_bf16, label + ", bf16");
      expect_row_matches_reference(row_bf16, amax_bf16 / 1000.0f, label + ", bf16, amax / 1000");
      if (::testing::Test::HasFailure()) return;
    }
  }
}

TEST(Mxfp8TeScaleLanes, EqualsTheScalarRuleAtEveryEdge) {
  // Block amaxes where TE's round-up rule turns: 0, subnormals, the products at and around 2^-127
  // (bits 0x400000, which round down to code 0) and 2^-126, powers of two and one ulp above,
  // 448 / 57344 (the formats' largest), saturation near FLT_MAX; then random bits.
  std::vector<float> amaxes = {0.0f, std::numeric_limits<float>::denorm_min(), FLT_MIN, FLT_MAX, 1.0f, 448.0f, 449.0f, 57344.0f};
  for (const float product : {std::ldexp(1.0f, -127), std::ldexp(1.0f, -126), std::ldexp(1.5f, -127), std::ldexp(1.0f, 127)})
    for (const float reciprocal_of : {448.0f, 57344.0f})
      for (float a = std::min(product * reciprocal_of, FLT_MAX), k = 0; k < 3; ++k, a = std::nextafter(a, 0.0f)) amaxes.push_back(a);
  for (int e = -149; e <= 127; ++e) {
    amaxes.push_back(std::ldexp(1.0f, e));
    amaxes.push_back(std::nextafter(std::ldexp(1.0f, e), FLT_MAX));
  }
  std::mt19937 gen(9);
  for (int i = 0; i < 2000; ++i) amaxes.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(gen()) % 0x7F800000u));
  while (amaxes.size() % width != 0) amaxes.push_back(1.0f);
  for (const float fp8_max : {448.0f, 57344.0f}) {
    const float reciprocal = static_cast<float>(1.0 / static_cast<double>(fp8_max));
    for (std::size_t i = 0; i < amaxes.size(); i += width) {
      ops::vi code;
      ops::vf factor;
      kernels::mxfp8_te_scale_lanes(ops::load_bits(reinterpret_cast<const std::uint32_t*>(amaxes.data() + i)), reciprocal, code, factor);
      alignas(64) std::uint32_t codes[width];
      alignas(64) float factors[width];
      ops::store_bits(codes, code);
      ops::store(factors, factor);
      for (int l = 0; l < width; ++l) {
        const e8m0 expected = e8m0_round_up(amaxes[i + static_cast<std::size_t>(l)] * reciprocal);
        ASSERT_EQ(codes[l], expected.bits()) << ops::name << ", amax " << amaxes[i + static_cast<std::size_t>(l)] << ", max " << fp8_max;
        ASSERT_EQ(std::bit_cast<std::uint32_t>(factors[l]), std::bit_cast<std::uint32_t>(mxfp8_te_encode_factor(expected)))
            << ops::name << ", amax " << amaxes[i + static_cast<std::size_t>(l)];
      }
    }
  }
}

TEST(QuantizeNvfp4Across, EachLaneIsTheReferenceQuantizationOfItsRow) {
  // One step of the columnwise walk: blocks_across_per_step blocks side by side in each of
  // `width` lanes (element e of lane l at source[e * width + l]), quantized across the lanes and
  // stored as rows; each row against the reference quantization of that lane's elements.
  constexpr int per_step = kernels::blocks_across_per_step;
  constexpr index_t row_length = 16 * per_step;
  unsigned seed = 40;
  for (const test::value_spread spread :
       {test::value_spread{}, test::value_spread{1.0, 6.0, 0}, test::value_spread{1e-30, 2.0, 7}, test::value_spread{1e30, 3.0, 0}}) {
    for (int trial = 0; trial < 8; ++trial) {
      std::vector<float> source = test::random_values(row_length * width, seed++, spread);
      // A lane of zeros, and a lane of the grid's midpoints (ties), where there are such lanes.
      for (index_t e = 0; e < row_length; ++e) {
        source[static_cast<std::size_t>(e * width + trial % width)] = 0.0f;
        if (width > 1)
          source[static_cast<std::size_t>(e * width + (trial + 1) % width)] =
              (e % 2 ? -1.0f : 1.0f) * std::ldexp(0.25f + 0.5f * static_cast<float>(e % 8), trial - 4);
      }
      float amax = 0.0f;
      for (float v : source) amax = std::max(amax, std::fabs(v));
      for (const float global_amax : {amax, amax / 1000.0f}) {  // the second saturates blocks, as delayed scaling may
        const typename kernels::nvfp4_scale_constants constants(nvfp4_tensor_scale(global_amax));
        ops::vi packed[per_step][2] = {}, codes[per_step] = {};
        for (int k = 0; k < per_step; ++k) {
          ops::vf v[16];
          kernels::load_across(source.data() + 16 * k * width, width, v);
          kernels::quantize_nvfp4_1x16_across(v, constants, codes[k], packed[k]);
        }
        std::vector<std::uint8_t> data(static_cast<std::size_t>(width * row_length / 2), 0xEE),
            scales(static_cast<std::size_t>(width * per_step), 0xEE);
        kernels::store_across(packed, codes, per_step, data.data(), row_length / 2, scales.data(), per_step);
        for (int lane = 0; lane < width; ++lane) {
          std::vector<float> row(static_cast<std::size_t>(row_length));
          for (index_t e = 0; e < row_length; ++e) row[static_cast<std::size_t>(e)] = source[static_cast<std::size_t>(e * width + lane)];
          const auto expected =
              reference::quantize_with_amax<nvfp4_1x16>(matrix_view<const float>::row_major(row.data(), 1, row_length), global_amax);
          for (int b = 0; b < per_step; ++b)
            ASSERT_EQ(scales[static_cast<std::size_t>(lane * per_step + b)], expected.scales()[static_cast<std::size_t>(b)].bits())
                << ops::name << ", seed " << seed << ", lane " << lane << ", block " << b;
          for (index_t i = 0; i < row_length / 2; ++i)
            ASSERT_EQ(data[static_cast<std::size_t>(lane * row_length / 2 + i)], expected.data()[static_cast<std::size_t>(i)].bits())
                << ops::name << ", seed " << seed << ", lane " << lane << ", byte " << i;
        }
      }
    }
  }
}

}  // namespace scaling_detail_block_kernels_test
}  // namespace
}  // namespace nvfp4
