// Tests for nvfp4/gemm/fp4/simd/mma_amx.hpp: the AMX kernels equal the reference bit for bit (exact
// and relaxed, NVFP4 and MXFP4, 1 and 2 threads) on random operands of every style they accept,
// through the real tile unit where the machine has AMX (otherwise skipped, saying so) and through
// a model of the tile unit everywhere (tests/gemm/emulated_tiles.hpp), which checks the kernels'
// logic on any AVX-512 machine. Also: which operands the kernels accept, and the edges of the
// exact kernels' fp32 sum, AMX and AVX-512 (a span of 3 binades stays in fp32, 4 goes to double).
#include "nvfp4/gemm/fp4/simd/mma_amx.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gemm/emulated_tiles.hpp"
#include "nvfp4/gemm/fp4/gemm.hpp"
#include "random_operands.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

namespace nvfp4 {
namespace {
namespace gemm_fp4_mma_amx_test {

#if NVFP4_HAS_AVX512_VNNI

using gemm_test_data::count_mismatches;
using gemm_test_data::emulated_tiles;
using gemm_test_data::random_accumulator;
using gemm_test_data::random_operand;
using gemm_test_data::style;

/// The AMX driver's output callback for a row-major [m, n] buffer.
auto into(std::vector<float>& out, index_t n) {
  return [&out, n](index_t i, index_t j, float value) { out[static_cast<std::size_t>(i * n + j)] = value; };
}

const char* const no_amx_reason =
    "this CPU or OS does not offer AMX-BF16 (CPUID, XCR0 or Linux's arch_prctl permission): the hardware AMX kernels "
    "are tested on machines with AMX (the device machine's Xeon); the emulated tile unit ran here";

/// Reference vs the AMX kernel on tile unit `Tiles`, 1 and 2 threads. Returns the outputs compared
/// (0 when the operands are not for the AMX kernels, which is then checked to be rare enough).
template <class Tiles, class Format>
index_t check_problem(index_t m, index_t n, index_t k, style s, gemm_mode mode, unsigned seed, bool prepack) {
  std::mt19937 rng(seed);
  const auto a_bytes = random_operand<Format>(m, k, s, rng);
  const auto b_bytes = random_operand<Format>(n, k, s, rng);
  const auto a = quantized_tensor<Format>::from_bytes(m, k, a_bytes.data, a_bytes.scales);
  const auto b = quantized_tensor<Format>::from_bytes(n, k, b_bytes.data, b_bytes.scales);
  if (!detail::amx::eligible(a, b, mode)) return 0;
  const auto c = random_accumulator(m * n, s, rng);
  const auto c_view = matrix_view<const float>::row_major(c.data(), m, n);
  std::vector<float> expected(c.size()), got(c.size());
  {
    // These kernels' relaxed mode is the vector chain (fp4::mma::relaxed_step), also on machines
    // whose relaxed GEMMs take the BF16 tile path (gemm/fp4/detail/tile_path.hpp).
    const gemm_test_data::relaxed_tiles_scope vector_chain(false);
    reference::block_scaled_mma(a, b, c_view, matrix_view<float>::row_major(expected.data(), m, n), mode);
  }
  std::vector<detail::amx::tile_block_step> packed;
  if (prepack) {
    const index_t steps = (k + 63) / 64, tiles = (n + 15) / 16;
    packed.resize(static_cast<std::size_t>(((tiles + 7) / 8) * 8 * steps));
    for (index_t t = 0; t < tiles; ++t) detail::amx::pack_tile(b, t * 16, packed.data() + t * steps);
  }
  for (int threads : {1, 2}) {
#if NVFP4_HAS_OPENMP
    omp_set_num_threads(threads);
#endif
    std::fill(got.begin(), got.end(), std::bit_cast<float>(0x7FC0DEADu));  // poison: every output must be written
    // Both schedules of the kernel: interleaved on odd seeds, phased on even ones.
    if (seed & 1)
      detail::amx::block_scaled_mma<Tiles, detail::amx::schedule::interleaved>(a, b, prepack ? packed.data() : nullptr, c_view,
                                                                               into(got, n), mode);
    else
      detail::amx::block_scaled_mma<Tiles, detail::amx::schedule::phased>(a, b, prepack ? packed.data() : nullptr, c_view, into(got, n),
                                                                          mode);
    EXPECT_EQ(count_mismatches(got, expected, n,
                               std::string("amx, ") + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + ", style " +
                                   std::to_string(static_cast<int>(s)) + (mode == gemm_mode::exact ? ", exact, " : ", relaxed, ") +
                                   std::to_string(threads) + " threads"),
              0);
  }
#if NVFP4_HAS_OPENMP
  omp_set_num_threads(2);
#endif
  return m * n;
}

/// Every style and shape of the GEMM tests; returns the outputs compared.
template <class Tiles, class Format>
index_t check_all_styles(const std::vector<std::tuple<index_t, index_t, index_t>>& shapes) {
  index_t outputs = 0, problems = 0, accepted = 0;
  unsigned seed = 100;
  for (auto mode : {gemm_mode::exact, gemm_mode::relaxed})
    for (auto s : {style::normal, style::wide_scales, style::cancel, style::zero_groups, style::nan_scales, style::extremes})
      for (auto [m, n, k] : shapes) {
        const bool prepack = (seed & 2) != 0;
        const index_t compared = check_problem<Tiles, Format>(m, n, k, s, mode, seed++, prepack);
        outputs += compared;
        ++problems;
        accepted += compared > 0;
      }
  // NaN scales are never accepted; the other styles mostly are (MXFP4's widest ones are not).
  EXPECT_GE(accepted, problems / 2);
  return outputs;
}

template <class Format>
class AmxKernels : public ::testing::Test {};
using AmxFormats = ::testing::Types<nvfp4_1x16, mxfp4>;
TYPED_TEST_SUITE(AmxKernels, AmxFormats);

TYPED_TEST(AmxKernels, EmulatedTileUnitEqualsTheReference) {
  const std::vector<std::tuple<index_t, index_t, index_t>> shapes = {{1, 1, 1}, {3, 17, 70}, {17, 33, 130}, {40, 47, 200}, {33, 20, 64}};
  EXPECT_GT((check_all_styles<emulated_tiles, TypeParam>(shapes)), 10000);
}

#if NVFP4_AMX_COMPILED
TYPED_TEST(AmxKernels, HardwareTileUnitEqualsTheReference) {
  if (!simd::amx::available()) GTEST_SKIP() << no_amx_reason;
  const std::vector<std::tuple<index_t, index_t, index_t>> shapes = {
      {1, 1, 1}, {1, 1, 64}, {3, 17, 70}, {5, 33, 130}, {33, 47, 200}, {16, 8, 256}, {64, 48, 512}, {97, 101, 96}, {130, 260, 1100}};
  EXPECT_GT((check_all_styles<simd::amx::hardware_tiles, TypeParam>(shapes)), 100000);
}

TYPED_TEST(AmxKernels, HardwareTileUnitOnALargeProblem) {
  if (!simd::amx::available()) GTEST_SKIP() << no_amx_reason;
  for (auto mode : {gemm_mode::exact, gemm_mode::relaxed})
    EXPECT_EQ((check_problem<simd::amx::hardware_tiles, TypeParam>(1024, 1024, 256, style::normal, mode, 7, mode == gemm_mode::exact)),
              1 << 20);
}

TEST(AmxKernels, PublicGemmRunsThemWhenTurnedOn) {
  if (!simd::amx::available()) GTEST_SKIP() << no_amx_reason;
  // Off by default (simd/amx/tiles.hpp says why); on, the public entry points take them.
  simd::amx::set_allowed(true);
  EXPECT_TRUE(simd::amx::usable());
  std::mt19937 rng(8);
  for (auto mode : {gemm_mode::exact, gemm_mode::relaxed}) {
    const auto a_bytes = random_operand<nvfp4_1x16>(70, 300, style::normal, rng),
               b_bytes = random_operand<nvfp4_1x16>(90, 300, style::normal, rng);
    const auto a = quantized_tensor<nvfp4_1x16>::from_bytes(70, 300, a_bytes.data, a_bytes.scales);
    const auto b = quantized_tensor<nvfp4_1x16>::from_bytes(90, 300, b_bytes.data, b_bytes.scales);
    std::vector<float> expected(70 * 90), got(expected.size());
    reference::block_scaled_mma(a, b, {}, matrix_view<float>::row_major(expected.data(), 70, 90), mode);
    block_scaled_mma(a, b, {}, matrix_view<float>::row_major(got.data(), 70, 90), mode);
    EXPECT_EQ(got, expected);
  }
  simd::amx::set_allowed(false);
}
#endif

/// One K step of NVFP4 built so that the fp32 sum T of the exact kernel needs 21 + span bits:
/// A's groups 0-2 hold 6.0 everywhere under the scale 1.875·2^4, group 3 one 0.5 under
/// 1.875·2^(4 - span); B holds 6.0 everywhere but a 1.5 at element 48, all under 1.875. The group
/// terms are 32400 (three times) and 2.63671875·2^(4 - span): T = (3·518400·2^span + 675) units
/// of 2^(-4 - span), odd, below 2^24 units for a span of 3 and above for 4.
std::pair<quantized_tensor<nvfp4_1x16>, quantized_tensor<nvfp4_1x16>> span_operands(int span, index_t rows, index_t cols) {
  const auto ue4m3_code = [](int e) { return static_cast<std::uint8_t>(((e + 7) << 3) | 7); };  // 1.875·2^e
  std::vector<std::uint8_t> a_bytes, b_bytes, a_scales, b_scales;
  for (index_t r = 0; r < rows; ++r) {
    for (int byte = 0; byte < 32; ++byte) a_bytes.push_back(byte < 24 ? 0x77 : (byte == 24 ? 0x01 : 0x00));
    for (int e : {4, 4, 4, 4 - span}) a_scales.push_back(ue4m3_code(e));
  }
  for (index_t j = 0; j < cols; ++j) {
    for (int byte = 0; byte < 32; ++byte) b_bytes.push_back(byte == 24 ? 0x73 : 0x77);
    for (int g = 0; g < 4; ++g) b_scales.push_back(ue4m3_code(0));
  }
  return {quantized_tensor<nvfp4_1x16>::from_bytes(rows, 64, a_bytes, a_scales),
          quantized_tensor<nvfp4_1x16>::from_bytes(cols, 64, b_bytes, b_scales)};
}

TEST(AmxExactSum, SpansOfThreeStayExactInFloatAndFourGoToDouble) {
  for (int span : {3, 4}) {
    const index_t m = 20, n = 18;
    const auto [a, b] = span_operands(span, m, n);
    ASSERT_TRUE(detail::amx::eligible(a, b, gemm_mode::exact));
    std::vector<float> expected(static_cast<std::size_t>(m * n)), got(expected.size());
    reference::block_scaled_mma(a, b, {}, matrix_view<float>::row_major(expected.data(), m, n));
    // The hand-worked §6 value: T exactly, rounded toward zero (c = 0, nothing truncated).
    const double t = 3 * 32400.0 + std::ldexp(2.63671875, 4 - span);
    float by_hand = static_cast<float>(t);
    if (static_cast<double>(by_hand) > t) by_hand = std::nextafter(by_hand, 0.0f);
    EXPECT_EQ(expected[0], by_hand);
    // The same sum in fp32 (round to nearest) is right for a span of 3 and wrong for 4.
    const float in_float = 3 * 32400.0f + std::ldexp(2.63671875f, 4 - span);
    EXPECT_EQ(in_float == by_hand, span == 3) << "span " << span << ": not a telling case, fp32 sum " << std::hexfloat << in_float;
    // The AVX-512 kernel (every block shape of it) takes the same fp32 sum.
    block_scaled_mma(a, b, {}, matrix_view<float>::row_major(got.data(), m, n));
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(expected[i]))
          << "avx512, span " << span << ", output " << i;
    detail::amx::block_scaled_mma<emulated_tiles>(a, b, nullptr, {}, into(got, n), gemm_mode::exact);
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(expected[i])) << "span " << span << ", output " << i;
#if NVFP4_AMX_COMPILED
    if (simd::amx::available()) {
      detail::amx::block_scaled_mma<simd::amx::hardware_tiles>(a, b, nullptr, {}, into(got, n), gemm_mode::exact);
      for (std::size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(expected[i])) << "hardware, span " << span;
    }
#endif
  }
}

TEST(AmxSignedZeros, AMinusZeroAccumulatorWithZeroProductsGivesPlusZero) {
  // A is all +0, B all -6: every product is -0; the group sums must come out +0 (the tile unit
  // adds them to a +0 tile), else fma(-0, s, -0) would keep the -0 that §6 step 6 (exact) and
  // fma(+0·s, -0) (relaxed) turn into +0.
  const index_t m = 17, n = 19, k = 128;
  const std::vector<std::uint8_t> a_bytes(static_cast<std::size_t>(m * 64), 0x00), b_bytes(static_cast<std::size_t>(n * 64), 0xFF);
  const std::vector<std::uint8_t> a_scales(static_cast<std::size_t>(m * 8), 0x38), b_scales(static_cast<std::size_t>(n * 8), 0x38);
  const auto a = quantized_tensor<nvfp4_1x16>::from_bytes(m, k, a_bytes, a_scales);
  const auto b = quantized_tensor<nvfp4_1x16>::from_bytes(n, k, b_bytes, b_scales);
  const std::vector<float> c(static_cast<std::size_t>(m * n), -0.0f);
  const auto c_view = matrix_view<const float>::row_major(c.data(), m, n);
  for (auto mode : {gemm_mode::exact, gemm_mode::relaxed}) {
    std::vector<float> expected(c.size()), got(c.size());
    reference::block_scaled_mma(a, b, c_view, matrix_view<float>::row_major(expected.data(), m, n), mode);
    ASSERT_EQ(std::bit_cast<std::uint32_t>(expected[0]), 0u);
    detail::amx::block_scaled_mma<emulated_tiles>(a, b, nullptr, c_view, into(got, n), mode);
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), 0u) << "output " << i;
#if NVFP4_AMX_COMPILED
    if (simd::amx::available()) {
      detail::amx::block_scaled_mma<simd::amx::hardware_tiles>(a, b, nullptr, c_view, into(got, n), mode);
      for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), 0u) << "hardware, output " << i;
    }
#endif
  }
}

TEST(AmxEligibility, NanScalesAndOutOfRangeE8m0AreLeftToTheVectorKernels) {
  std::vector<std::uint8_t> bytes(32, 0x22), scales_nvfp4(4, 0x38), scales_mx(2, 127);
  auto nv = [&](std::vector<std::uint8_t> s) { return quantized_tensor<nvfp4_1x16>::from_bytes(1, 64, bytes, s); };
  auto mx = [&](std::vector<std::uint8_t> s) { return quantized_tensor<mxfp4>::from_bytes(1, 64, bytes, s); };
  EXPECT_TRUE(detail::amx::eligible(nv(scales_nvfp4), nv(scales_nvfp4), gemm_mode::exact));
  EXPECT_TRUE(detail::amx::eligible(nv({0x38, 0x7E, 0x01, 0}), nv(scales_nvfp4), gemm_mode::relaxed));
  EXPECT_FALSE(detail::amx::eligible(nv({0x38, 0x7F, 0x38, 0x38}), nv(scales_nvfp4), gemm_mode::exact));
  EXPECT_FALSE(detail::amx::eligible(nv(scales_nvfp4), nv({0x38, 0x38, 0xFF, 0x38}), gemm_mode::relaxed));
  EXPECT_TRUE(detail::amx::eligible(mx(scales_mx), mx({127 + 120, 127 - 120}), gemm_mode::exact));
  EXPECT_FALSE(detail::amx::eligible(mx(scales_mx), mx({127 + 121, 127}), gemm_mode::exact));
  EXPECT_FALSE(detail::amx::eligible(mx(scales_mx), mx({127, 127 - 121}), gemm_mode::exact));
  EXPECT_FALSE(detail::amx::eligible(mx({0xFF, 127}), mx(scales_mx), gemm_mode::exact));
  // Relaxed: every scale product in [2^-124, 2^128).
  EXPECT_TRUE(detail::amx::eligible(mx({127 + 7, 127}), mx({127 + 120, 127}), gemm_mode::relaxed));
  EXPECT_FALSE(detail::amx::eligible(mx({127 + 8, 127}), mx({127 + 120, 127}), gemm_mode::relaxed));
  EXPECT_TRUE(detail::amx::eligible(mx({127 + 8, 127}), mx({127 + 120, 127}), gemm_mode::exact));
}

#else
TEST(AmxKernels, NeedAnAvx512Build) { GTEST_SKIP() << "the AMX kernels are compiled in AVX-512 VNNI builds only"; }
#endif

}  // namespace gemm_fp4_mma_amx_test
}  // namespace
}  // namespace nvfp4
