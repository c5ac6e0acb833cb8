// Tests of nvfp4/gemm/detail/tile_gemm.hpp, the relaxed GEMMs' engine on BF16 tiles, and of the
// families' tile paths (gemm/fp4/detail/tile_path.hpp, gemm/fp8/detail/tile_path.hpp, float_gemm):
// every path equals its tile-model reference bit for bit (ragged shapes, several K chunks and K
// blocks, with and without C, 1 and 2 threads) through a model of the tile unit on every machine
// and through the real unit where the machine has AMX; which operands they take (the packer's
// vector statistics against the references' scalar ones, on each side of every limit); on AMX
// machines, the real TDPBF16PS against the SDM's order on values chosen to expose it, and the
// public GEMMs in relaxed mode following the tile path (or the vector chain when it is turned
// off); and the documented bound of relaxed against exact (docs/gemm.md), on any machine.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/gemm/detail/tile_gemm.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gemm/emulated_tiles.hpp"
#include "gemm/fp4/random_operands.hpp"
#include "nvfp4/gemm/float_gemm.hpp"
#include "nvfp4/gemm/fp4/gemm.hpp"
#include "nvfp4/gemm/fp8/gemm.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace gemm_detail_tile_gemm_test {

using gemm_test_data::count_mismatches;
using gemm_test_data::emulated_tiles;
using gemm_test_data::random_operand;
using gemm_test_data::relaxed_tiles_scope;
using gemm_test_data::style;
using hardware_tiles = simd::amx::hardware_tiles;

const char* const no_amx_reason =
    "this CPU or OS does not offer AMX-BF16 (CPUID, XCR0 or Linux's arch_prctl permission): the real tile unit is tested on "
    "machines with AMX (the device machine's Xeon); the model of the tile unit ran here";

/// f.template operator()<Tiles>(name) with the model of the tile unit, then with the real one
/// where this machine has it.
template <class F>
void for_each_tile_unit(F&& f) {
  f.template operator()<emulated_tiles>("emulated tiles");
  if (simd::amx::available()) f.template operator()<hardware_tiles>("hardware tiles");
}

const float poison = std::bit_cast<float>(0x7FC0DEADu);

std::string shape_text(index_t m, index_t n, index_t k) { return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k); }

// ---- FP4 -------------------------------------------------------------------------------------

template <class Format>
std::pair<quantized_tensor<Format>, quantized_tensor<Format>> fp4_pair(index_t m, index_t n, index_t k, style s, unsigned seed) {
  std::mt19937 rng(seed);
  const auto a = random_operand<Format>(m, k, s, rng), b = random_operand<Format>(n, k, s, rng);
  return {quantized_tensor<Format>::from_bytes(m, k, a.data, a.scales), quantized_tensor<Format>::from_bytes(n, k, b.data, b.scales)};
}

template <class Format>
class TilePathFp4 : public ::testing::Test {};
using Fp4Formats = ::testing::Types<nvfp4_1x16, mxfp4>;
TYPED_TEST_SUITE(TilePathFp4, Fp4Formats);

TYPED_TEST(TilePathFp4, EqualsTheTileModelAndTakesWhatTheReferenceTakes) {
  // Shapes: one element; edges of a tile, of a 2 x 2 block, of a work item (128 rows, 256
  // columns) and of a K chunk (16 steps of 32); K not a multiple of 32.
  const std::vector<std::tuple<index_t, index_t, index_t>> shapes = {{1, 1, 1},     {17, 33, 64},   {40, 47, 300},
                                                                     {33, 16, 520}, {130, 260, 96}, {5, 290, 1100}};
  index_t compared = 0, refused = 0;
  for_each_tile_unit([&]<class Tiles>(const char* unit) {
    unsigned seed = 1;
    for (auto [m, n, k] : shapes)
      for (style s : {style::normal, style::zero_groups, style::cancel, style::wide_scales, style::nan_scales}) {
        const auto [a, b] = fp4_pair<TypeParam>(m, n, k, s, seed++);
        const bool fits = reference::fp4_fits_tiles(a, b);
        std::mt19937 rng(seed);
        const auto c = gemm_test_data::random_accumulator(m * n, style::normal, rng);
        for (bool with_c : {false, true}) {
          const auto c_view = with_c ? matrix_view<const float>::row_major(c.data(), m, n) : matrix_view<const float>{};
          std::vector<float> want(static_cast<std::size_t>(m * n));
          if (fits) reference::block_scaled_mma_on_tiles(a, b, c_view, matrix_view<float>::row_major(want.data(), m, n));
          for (int threads : {1, 2}) {
            test::set_threads(threads);
            std::vector<float> got(want.size(), poison);
            const bool ran = detail::fp4_mma_on_tiles<Tiles>(
                a, b, c_view, [&](index_t i, index_t j, float v) { got[static_cast<std::size_t>(i * n + j)] = v; });
            const std::string what = std::string(unit) + ", " + shape_text(m, n, k) + ", style " + std::to_string(int(s)) +
                                     (with_c ? ", C" : "") + ", " + std::to_string(threads) + " threads";
            ASSERT_EQ(ran, fits) << what;
            if (fits)
              EXPECT_EQ(count_mismatches(got, want, n, what), 0);
            else
              EXPECT_EQ(test::float_bits(got), test::float_bits(std::vector<float>(want.size(), poison))) << what << ": wrote";
            compared += fits ? m * n : 0;
            refused += !fits;
          }
        }
      }
  });
  test::set_threads(2);
  EXPECT_GT(compared, 100000);
  EXPECT_GT(refused, 0);  // NaN scales always, MXFP4's widest scales often
}

TEST(TilePathFp4Limits, NvFp4AlwaysFitsExceptNaNScales) {
  // E2M1 x UE4M3 has at most 6 significant bits and lies in [2^-10, 2688]: every finite NVFP4
  // operand folds into normal bf16 values whose products and sums stay in fp32's normal range.
  for (style s : {style::normal, style::wide_scales, style::extremes, style::zero_groups}) {
    const auto [a, b] = fp4_pair<nvfp4_1x16>(20, 20, 4096, s, 5);
    EXPECT_TRUE(reference::fp4_fits_tiles(a, b)) << int(s);
  }
  auto [a, b] = fp4_pair<nvfp4_1x16>(4, 4, 64, style::normal, 6);
  a.scales()[3] = ue4m3::from_bits(0x7F);  // NaN
  EXPECT_FALSE(reference::fp4_fits_tiles(a, b));
  EXPECT_FALSE(detail::fp4_mma_on_tiles<emulated_tiles>(a, b, {}, [](index_t, index_t, float) { FAIL(); }));
}

/// MXFP4 operands of one value v (E2M1 code) under one E8M0 scale 2^e each.
quantized_tensor<mxfp4> mxfp4_constant(index_t rows, index_t k, std::uint8_t code, int e) {
  std::vector<std::uint8_t> data(static_cast<std::size_t>(rows * ((k + 1) / 2)), static_cast<std::uint8_t>(code | code << 4));
  std::vector<std::uint8_t> scales(static_cast<std::size_t>(rows * ((k + 31) / 32)), static_cast<std::uint8_t>(e + 127));
  return quantized_tensor<mxfp4>::from_bytes(rows, k, data, scales);
}

TEST(TilePathFp4Limits, TheVectorPackerAndTheScalarCheckAgreeOnEachSideOfEveryLimit) {
  // Products must be multiples of 2^-126: the least exponents of the folded values (0.5 x 2^e:
  // e - 1) add up to at least -112. Sums must stay below 2^127: largest exponents (6 x 2^e: e + 2)
  // + 2 + log2(padded K) <= 127. A folded value must be a normal bf16 (0.5 x 2^-127 is not).
  struct limit_case {
    std::uint8_t code_a;
    int e_a;
    std::uint8_t code_b;
    int e_b;
    index_t k;
    bool fits;
  };
  const limit_case cases[] = {
      {1, -55, 1, -55, 32, true}, {1, -55, 1, -56, 32, false},  // (e_a - 1) + (e_b - 1) = -112 / -113
      {7, 58, 7, 58, 32, true},   {7, 58, 7, 59, 32, false},    // 60 + 60 + 2 + 5 = 127 / 128
      {7, 58, 7, 57, 64, true},   {7, 58, 7, 58, 64, false},    // log2(64) = 6
      {1, -125, 1, 30, 32, true}, {1, -126, 1, 30, 32, false},  // 0.5 x 2^-125 is normal, 0.5 x 2^-126 is not
      {7, 125, 0, 0, 32, true},   {7, 126, 1, 0, 32, false},    // 6 x 2^125 < 2^128; 6 x 2^126 is Inf
  };
  for (const limit_case& lc : cases) {
    const auto a = mxfp4_constant(3, lc.k, lc.code_a, lc.e_a), b = mxfp4_constant(5, lc.k, lc.code_b, lc.e_b);
    const std::string what = "e_a " + std::to_string(lc.e_a) + ", e_b " + std::to_string(lc.e_b) + ", K " + std::to_string(lc.k);
    EXPECT_EQ(reference::fp4_fits_tiles(a, b), lc.fits) << what;
    std::vector<float> got(15, poison), want(15);
    const bool ran = detail::fp4_mma_on_tiles<emulated_tiles>(
        a, b, {}, [&](index_t i, index_t j, float v) { got[static_cast<std::size_t>(i * 5 + j)] = v; });
    EXPECT_EQ(ran, lc.fits) << what;
    if (ran) {
      reference::block_scaled_mma_on_tiles(a, b, {}, matrix_view<float>::row_major(want.data(), 3, 5));
      EXPECT_EQ(test::float_bits(got), test::float_bits(want)) << what;
    }
  }
}

// ---- FP8 -------------------------------------------------------------------------------------

/// Random finite FP8 codes (no NaN, no Inf) in a tensor of the given scaling, scales near 1.
fp8_tensor random_fp8(index_t rows, index_t cols, fp8_format f, index_t block_rows, index_t block_cols, std::mt19937& rng) {
  fp8_tensor t = block_cols == 0 ? fp8_tensor(rows, cols, f) : fp8_tensor(rows, cols, f, block_rows, block_cols);
  std::uniform_int_distribution<int> code(0, 255);
  std::uniform_real_distribution<float> scale(0.3f, 3.0f);
  for (auto& c : t.codes()) {
    int v;
    do v = code(rng);
    while (f == fp8_format::e4m3 ? (v & 0x7F) == 0x7F : (v & 0x7F) >= 0x7C);
    c = static_cast<std::uint8_t>(v);
  }
  for (auto& s : t.scale_inv()) s = scale(rng);
  return t;
}

/// How a pair of FP8 tensors is scaled: block shapes of A and B (0 columns: per tensor).
struct fp8_scaling {
  index_t a_rows, a_cols, b_rows, b_cols;
  const char* name;
};

TEST(TilePathFp8, GemmEqualsTheTileModelForEveryScaling) {
  const index_t k_row = 300;  // per-row scaling: blocks of 1 x K, K != 128
  const fp8_scaling scalings[] = {{0, 0, 0, 0, "per tensor"},
                                  {1, k_row, 1, k_row, "per row"},
                                  {1, 128, 128, 128, "1x128 x 128x128"},
                                  {1, 128, 1, 128, "1x128 x 1x128"},
                                  {128, 128, 1, 128, "128x128 x 1x128"}};
  // A row of tiles, a ragged block, a panel edge (256 columns); the FP4 test covers the item edges.
  const std::vector<std::tuple<index_t, index_t>> shapes = {{1, 1}, {37, 45}, {20, 270}};
  index_t compared = 0;
  for_each_tile_unit([&]<class Tiles>(const char* unit) {
    std::mt19937 rng(3);
    for (const fp8_scaling& sc : scalings)
      for (auto [m, n] : shapes)
        for (fp8_format fb : {fp8_format::e4m3, fp8_format::e5m2}) {
          const fp8_tensor a = random_fp8(m, k_row, fp8_format::e4m3, sc.a_rows, sc.a_cols, rng);
          const fp8_tensor b = random_fp8(n, k_row, fb, sc.b_rows, sc.b_cols, rng);
          std::vector<float> bias(static_cast<std::size_t>(n));
          for (auto& v : bias) v = std::uniform_real_distribution<float>(-1, 1)(rng);
          for (auto epilogue : {fp8_block_epilogue::hardware, fp8_block_epilogue::te_reference}) {
            if (epilogue == fp8_block_epilogue::te_reference && (sc.a_cols != 128 || sc.b_cols != 128)) continue;  // block scaling only
            const fp8_gemm_options options{.mode = gemm_mode::relaxed, .bias = bias, .block_epilogue = epilogue};
            ASSERT_TRUE(detail::fp8_fits_tiles(a, b));
            std::vector<float> want(static_cast<std::size_t>(m * n));
            for (index_t i = 0; i < m; ++i)
              for (index_t j = 0; j < n; ++j)
                detail::store_output(matrix_view<float>::row_major(want.data(), m, n), i, j,
                                     detail::fp8_gemm_tile_output(a, b, i, j, options), options.bias);
            for (int threads : {1, 2}) {
              test::set_threads(threads);
              std::vector<float> got(want.size(), poison);
              ASSERT_TRUE(detail::fp8_gemm_on_tiles<Tiles>(a, b, matrix_view<float>::row_major(got.data(), m, n), options));
              EXPECT_EQ(count_mismatches(got, want, n, std::string(unit) + ", " + sc.name + ", " + shape_text(m, n, k_row)), 0);
              compared += m * n;
            }
          }
        }
  });
  test::set_threads(2);
  EXPECT_GT(compared, 40000);
}

// FP8 block scaling over more K blocks than a chunk holds (the driver walks K 32 tile steps, 8
// K blocks, at a time, each K block's multiplies issued before the last one's partials are
// merged): 1100 = 8 whole K blocks in the first chunk, then 4 more and a partial one of 76.
TEST(TilePathFp8, BlockScalingOverSeveralKChunksEqualsTheTileModel) {
  const index_t m = 37, n = 45, k = 1100;
  const fp8_scaling scalings[] = {
      {1, 128, 128, 128, "1x128 x 128x128"}, {1, 128, 1, 128, "1x128 x 1x128"}, {128, 128, 1, 128, "128x128 x 1x128"}};
  index_t compared = 0;
  for_each_tile_unit([&]<class Tiles>(const char* unit) {
    std::mt19937 rng(5);
    for (const fp8_scaling& sc : scalings) {
      const fp8_tensor a = random_fp8(m, k, fp8_format::e4m3, sc.a_rows, sc.a_cols, rng);
      const fp8_tensor b = random_fp8(n, k, fp8_format::e5m2, sc.b_rows, sc.b_cols, rng);
      for (auto epilogue : {fp8_block_epilogue::hardware, fp8_block_epilogue::te_reference}) {
        const fp8_gemm_options options{.mode = gemm_mode::relaxed, .block_epilogue = epilogue};
        ASSERT_TRUE(detail::fp8_fits_tiles(a, b));
        std::vector<float> want(static_cast<std::size_t>(m * n));
        for (index_t i = 0; i < m; ++i)
          for (index_t j = 0; j < n; ++j)
            detail::store_output(matrix_view<float>::row_major(want.data(), m, n), i, j, detail::fp8_gemm_tile_output(a, b, i, j, options),
                                 options.bias);
        for (int threads : {1, 2}) {
          test::set_threads(threads);
          std::vector<float> got(want.size(), poison);
          ASSERT_TRUE(detail::fp8_gemm_on_tiles<Tiles>(a, b, matrix_view<float>::row_major(got.data(), m, n), options));
          EXPECT_EQ(count_mismatches(got, want, n, std::string(unit) + ", " + sc.name + ", " + shape_text(m, n, k)), 0);
          compared += m * n;
        }
      }
    }
  });
  test::set_threads(2);
  EXPECT_GE(compared, 12 * 37 * 45);
}

TEST(TilePathFp8, MxFp8AndTheMmasEqualTheTileModel) {
  index_t compared = 0;
  for_each_tile_unit([&]<class Tiles>(const char* unit) {
    std::mt19937 rng(4);
    for (auto [m, n, k] : std::vector<std::tuple<index_t, index_t, index_t>>{{3, 5, 40}, {40, 33, 520}, {140, 60, 96}}) {
      // MXFP8: E4M3 x E5M2 codes under E8M0 scales 2^-20 .. 2^10.
      std::uniform_int_distribution<int> byte(0, 255), exponent(-20, 10);
      const auto mx = [&](index_t rows, bool e5m2) {
        std::vector<std::uint8_t> data(static_cast<std::size_t>(rows * k)), scales(static_cast<std::size_t>(rows * ((k + 31) / 32)));
        for (auto& d : data) {
          do d = static_cast<std::uint8_t>(byte(rng));
          while (e5m2 ? (d & 0x7F) >= 0x7C : (d & 0x7F) == 0x7F);
        }
        for (auto& s : scales) s = static_cast<std::uint8_t>(exponent(rng) + 127);
        return std::pair{data, scales};
      };
      const auto [ad, as] = mx(m, false);
      const auto [bd, bs] = mx(n, true);
      const auto a = quantized_tensor<mxfp8>::from_bytes(m, k, ad, as);
      const auto b = quantized_tensor<mxfp8_e5m2>::from_bytes(n, k, bd, bs);
      ASSERT_TRUE(detail::fp8_fits_tiles(a, b));
      const fp8_gemm_options options{.mode = gemm_mode::relaxed};
      std::vector<float> want(static_cast<std::size_t>(m * n)), got(want.size(), poison);
      {
        const auto sa = detail::tiles::source_of(a), sb = detail::tiles::source_of(b);
        for (index_t i = 0; i < m; ++i)
          for (index_t j = 0; j < n; ++j) want[static_cast<std::size_t>(i * n + j)] = detail::fp8_tile_chain(sa, sb, i, j, 0, k);
      }
      ASSERT_TRUE(detail::mxfp8_gemm_on_tiles<Tiles>(a, b, matrix_view<float>::row_major(got.data(), m, n), options));
      EXPECT_EQ(count_mismatches(got, want, n, std::string(unit) + ", mxfp8 " + shape_text(m, n, k)), 0);
      // The MMAs: D = C + the chain.
      const fp8_tensor a8 = random_fp8(m, k, fp8_format::e5m2, 0, 0, rng), b8 = random_fp8(n, k, fp8_format::e4m3, 0, 0, rng);
      std::vector<float> c(want.size());
      for (auto& v : c) v = std::normal_distribution<float>(0, 100)(rng);
      const auto c_view = matrix_view<const float>::row_major(c.data(), m, n);
      const auto sa = detail::tiles::source_of(a8), sb = detail::tiles::source_of(b8);
      for (index_t i = 0; i < m; ++i)
        for (index_t j = 0; j < n; ++j)
          want[static_cast<std::size_t>(i * n + j)] = c_view(i, j) + detail::fp8_tile_chain(sa, sb, i, j, 0, k);
      std::fill(got.begin(), got.end(), poison);
      ASSERT_TRUE(detail::mma_on_tiles<Tiles>(a8, b8, c_view, matrix_view<float>::row_major(got.data(), m, n)));
      EXPECT_EQ(count_mismatches(got, want, n, std::string(unit) + ", fp8 mma " + shape_text(m, n, k)), 0);
      compared += 2 * m * n;
    }
  });
  EXPECT_GT(compared, 15000);
}

TEST(TilePathFp8, NaNAndInfCodesAreRefused) {
  std::mt19937 rng(9);
  fp8_tensor a = random_fp8(20, 64, fp8_format::e4m3, 0, 0, rng), b = random_fp8(20, 64, fp8_format::e5m2, 0, 0, rng);
  EXPECT_TRUE(detail::fp8_fits_tiles(a, b));
  for (std::uint8_t special : {std::uint8_t{0x7C}, std::uint8_t{0xFE}}) {  // E5M2 +Inf, NaN
    fp8_tensor b2 = b;
    b2.codes()[77] = special;
    EXPECT_FALSE(detail::fp8_fits_tiles(a, b2));
    float out = 0;
    EXPECT_FALSE(detail::fp8_gemm_on_tiles<emulated_tiles>(a, b2, matrix_view<float>::row_major(&out, 1, 1), {.mode = gemm_mode::relaxed}));
  }
  a.codes()[5] = 0x7F;  // E4M3 NaN
  EXPECT_FALSE(detail::fp8_fits_tiles(a, b));
}

// ---- float (the BF16 recipe) -----------------------------------------------------------------

TEST(TilePathFloat, Bf16ValuesInAnyLayoutEqualTheTileModel) {
  index_t compared = 0;
  for_each_tile_unit([&]<class Tiles>(const char* unit) {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto [m, n, k] : std::vector<std::tuple<index_t, index_t, index_t>>{{1, 1, 3}, {33, 18, 100}, {130, 270, 520}}) {
      // A row-major, B stored transposed ([K, N], read as [N, K] through a K-major view), as the
      // BF16 recipe's dgrad and wgrad read theirs.
      std::vector<float> a(static_cast<std::size_t>(m * k)), bt(static_cast<std::size_t>(k * n));
      for (auto& v : a) v = bf16::from_float(normal(rng)).to_float();
      for (auto& v : bt) v = bf16::from_float(normal(rng)).to_float();
      const auto av = matrix_view<const float>::row_major(a.data(), m, k);
      const matrix_view<const float> bv(bt.data(), n, k, 1, n);
      std::vector<float> want(static_cast<std::size_t>(m * n));
      for (index_t i = 0; i < m; ++i)
        for (index_t j = 0; j < n; ++j)
          want[static_cast<std::size_t>(i * n + j)] = tile_model::chain(
              k, 0.0f, [&](index_t kk) { return av(i, kk); }, [&](index_t kk) { return bv(j, kk); });
      for (int threads : {1, 2}) {
        test::set_threads(threads);
        std::vector<float> got(want.size(), poison);
        ASSERT_TRUE(detail::float_gemm_on_tiles<Tiles>(av, bv, {}, matrix_view<float>::row_major(got.data(), m, n)));
        EXPECT_EQ(count_mismatches(got, want, n, std::string(unit) + ", float " + shape_text(m, n, k)), 0);
        compared += m * n;
      }
      // A value that is not a bf16: refused, nothing written.
      a[static_cast<std::size_t>(a.size() / 2)] = 1.0f + 0x1p-20f;
      std::vector<float> got(want.size(), poison);
      EXPECT_FALSE(detail::float_gemm_on_tiles<Tiles>(av, bv, {}, matrix_view<float>::row_major(got.data(), m, n)));
      EXPECT_TRUE(std::isnan(got[0]));
    }
  });
  test::set_threads(2);
  EXPECT_GT(compared, 70000);
}

// ---- the real tile unit ----------------------------------------------------------------------

/// One TDPBF16PS of a 16 x 16 tile over 32 K on the real unit: out[m][n].
void hardware_instruction(const float (&a)[16][32], const float (&b)[16][32], const float (&c)[16][16], float (&out)[16][16]) {
  alignas(64) std::uint32_t at[16][16], bt[16][16];
  alignas(64) float ct[16][16];
  const auto hi = [](float v) { return std::bit_cast<std::uint32_t>(v) >> 16; };
  for (int r = 0; r < 16; ++r)
    for (int p = 0; p < 16; ++p) {
      at[r][p] = hi(a[r][2 * p]) | hi(a[r][2 * p + 1]) << 16;
      bt[p][r] = hi(b[r][2 * p]) | hi(b[r][2 * p + 1]) << 16;  // B's row p holds pair p of every column
    }
  std::memcpy(ct, c, sizeof ct);
  {
    const detail::tiles::tile_session<hardware_tiles> session;
    hardware_tiles::load<0>(ct, 64);
    hardware_tiles::load<4>(at, 64);
    hardware_tiles::load<6>(bt, 64);
    hardware_tiles::dot_bf16<0, 4, 6>();
    hardware_tiles::store<0>(ct, 64);
  }
  std::memcpy(out, ct, sizeof ct);
}

TEST(TileUnit, HardwareInstructionFollowsTheSdmsOrder) {
  if (!simd::amx::available()) GTEST_SKIP() << no_amx_reason;
  // Values with wide exponent spreads and cancellation, so that the order of the roundings shows:
  // bf16 significands, exponents over 40 binades, C as large as the products or zero.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> exponent(-20, 20), mantissa(0, 127), coin(0, 3);
  const auto value = [&] {
    const float v = std::ldexp(1.0f + mantissa(rng) / 128.0f, exponent(rng));
    return coin(rng) == 0 ? 0.0f : (coin(rng) < 2 ? -v : v);
  };
  index_t outputs = 0, differ = 0, single_chain = 0, pairs_first = 0, exact_once = 0;
  for (int trial = 0; trial < 200; ++trial) {
    float a[16][32], b[16][32], c[16][16], got[16][16];
    for (auto& row : a)
      for (float& v : row) v = value();
    for (auto& row : b)
      for (float& v : row) v = value();
    for (auto& row : c)
      for (float& v : row) v = trial % 2 ? value() * 64.0f : 0.0f;
    hardware_instruction(a, b, c, got);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        ++outputs;
        const float want = tile_model::instruction(a[m], b[n], c[m][n]);
        differ += std::bit_cast<std::uint32_t>(got[m][n]) != std::bit_cast<std::uint32_t>(want);
        // Other orders a reader might assume, counted to say which one the unit follows if not the SDM's.
        float chain = c[m][n], paired = 0.0f;
        double exact = 0.0;
        for (int k = 0; k < 32; ++k) {
          chain = std::fma(a[m][k], b[n][k], chain);
          exact += double(a[m][k]) * double(b[n][k]);
        }
        for (int p = 0; p < 16; ++p) paired += std::fma(a[m][2 * p + 1], b[n][2 * p + 1], a[m][2 * p] * b[n][2 * p]);
        single_chain += got[m][n] == chain;
        pairs_first += got[m][n] == c[m][n] + paired;
        exact_once += got[m][n] == static_cast<float>(double(c[m][n]) + exact);
      }
  }
  EXPECT_EQ(differ, 0) << "of " << outputs << " outputs; the unit matched one chain in element order on " << single_chain
                       << ", pair sums chained on " << pairs_first << ", the exact sum rounded once on " << exact_once;
}

TEST(TileUnit, PublicRelaxedGemmsFollowTheTilesOnAmxAndTheVectorChainWhenTurnedOff) {
  if (!simd::amx::available()) GTEST_SKIP() << no_amx_reason;
  // Wide scale spreads, so that fp32 sums round and the two orders differ somewhere (on narrow
  // NVFP4 data every partial sum is exact in fp32, and both orders give the same bits).
  const index_t m = 140, n = 150, k = 300;  // both sides >= tiles::min_tile_product_side
  const auto [a, b] = fp4_pair<nvfp4_1x16>(m, n, k, style::wide_scales, 21);
  std::vector<float> on_tiles(static_cast<std::size_t>(m * n)), vector_chain(on_tiles.size()), got(on_tiles.size());
  const auto out = [&](std::vector<float>& v) { return matrix_view<float>::row_major(v.data(), m, n); };
  reference::block_scaled_mma_on_tiles(a, b, {}, out(on_tiles));
  {
    const relaxed_tiles_scope off(false);
    reference::block_scaled_mma(a, b, {}, out(vector_chain), gemm_mode::relaxed);
    block_scaled_mma(a, b, {}, out(got), gemm_mode::relaxed);
    EXPECT_EQ(test::float_bits(got), test::float_bits(vector_chain));
  }
  const relaxed_tiles_scope on(true);
  block_scaled_mma(a, b, {}, out(got), gemm_mode::relaxed);
  EXPECT_EQ(test::float_bits(got), test::float_bits(on_tiles));
  EXPECT_NE(test::float_bits(on_tiles), test::float_bits(vector_chain));  // the two orders differ somewhere here
  // A product with a side below min_tile_product_side (a decode shape) stays on the vector chain.
  {
    const auto [a16, b16] = fp4_pair<nvfp4_1x16>(16, n, k, style::wide_scales, 22);
    std::vector<float> want(static_cast<std::size_t>(16 * n)), got16(want.size()), tiles16(want.size());
    {
      const relaxed_tiles_scope off(false);
      reference::block_scaled_mma(a16, b16, {}, matrix_view<float>::row_major(want.data(), 16, n), gemm_mode::relaxed);
    }
    block_scaled_mma(a16, b16, {}, matrix_view<float>::row_major(got16.data(), 16, n), gemm_mode::relaxed);
    reference::block_scaled_mma_on_tiles(a16, b16, {}, matrix_view<float>::row_major(tiles16.data(), 16, n));
    EXPECT_EQ(test::float_bits(got16), test::float_bits(want));
    EXPECT_NE(test::float_bits(got16), test::float_bits(tiles16));
  }
  // FP8, FP8 blocks, MXFP8 and the float GEMM take their tile paths through the public functions.
  std::mt19937 rng(22);
  const fp8_tensor a8 = random_fp8(m, k, fp8_format::e4m3, 0, 0, rng), b8 = random_fp8(n, k, fp8_format::e4m3, 0, 0, rng);
  std::vector<float> want(on_tiles.size());
  reference::fp8_gemm(a8, b8, out(want), {.mode = gemm_mode::relaxed});
  fp8_gemm(a8, b8, out(got), {.mode = gemm_mode::relaxed});
  EXPECT_EQ(test::float_bits(got), test::float_bits(want));
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(want[static_cast<std::size_t>(i * n + j)]),
                std::bit_cast<std::uint32_t>(detail::fp8_gemm_tile_output(a8, b8, i, j, {.mode = gemm_mode::relaxed})));
  const fp8_tensor ab = random_fp8(m, k, fp8_format::e4m3, 1, 128, rng), bb = random_fp8(n, k, fp8_format::e4m3, 128, 128, rng);
  reference::fp8_gemm(ab, bb, out(want), {.mode = gemm_mode::relaxed});
  fp8_gemm(ab, bb, out(got), {.mode = gemm_mode::relaxed});
  EXPECT_EQ(test::float_bits(got), test::float_bits(want));
  EXPECT_EQ(want[5], detail::fp8_gemm_tile_output(ab, bb, 0, 5, {.mode = gemm_mode::relaxed}));
  std::vector<float> x(static_cast<std::size_t>(m * k)), w(static_cast<std::size_t>(n * k));
  for (auto& v : x) v = bf16::from_float(std::normal_distribution<float>(0, 1)(rng)).to_float();
  for (auto& v : w) v = bf16::from_float(std::normal_distribution<float>(0, 1)(rng)).to_float();
  const auto xv = matrix_view<const float>::row_major(x.data(), m, k), wv = matrix_view<const float>::row_major(w.data(), n, k);
  reference::float_gemm(xv, wv, {}, out(want), gemm_mode::relaxed);
  float_gemm(xv, wv, {}, out(got), gemm_mode::relaxed);
  EXPECT_EQ(test::float_bits(got), test::float_bits(want));
  EXPECT_EQ(want[7], tile_model::chain(
                         k, 0.0f, [&](index_t kk) { return xv(0, kk); }, [&](index_t kk) { return wv(7, kk); }));
}

// ---- how far relaxed is from exact (docs/gemm.md, "Relaxed mode") ----------------------------

/// γ(n) = n·u / (1 - n·u), u = 2^-24: the relative error bound of a sum whose terms pass through
/// at most n roundings to nearest.
double gamma(double n) { return n * 0x1p-24 / (1 - n * 0x1p-24); }

/// The documented bound of |relaxed - exact| for products over K with S = Σ|a_k b_k| (the folded
/// values), P = the largest product bound (FP4: the largest scale product; FP8: the largest
/// |a_k b_k|), an exact step of kappa elements with n_terms truncations to F fractional bits and a
/// result cut to f bits, and fp32 promotions every `interval` elements (0: none).
double documented_bound(index_t k, double s, double p, int kappa, int n_terms, int f_align, int f_result, double lambda, index_t interval) {
  const double steps = std::ceil(double(k) / kappa);
  double bound = gamma(std::ceil(double(k) / 16) + 34) * s;
  bound += steps * ((1 + std::ldexp(1.0, -f_result)) * std::ldexp(1.0, -f_result) + n_terms * std::ldexp(1.0, -f_align)) * (s + lambda * p);
  if (interval > 0) bound += std::ceil(double(k) / interval) * 0x1p-24 * s;
  return bound;
}

TEST(RelaxedBound, RelaxedIsWithinTheDocumentedBoundOfExact) {
  std::mt19937 rng(31);
  index_t checked = 0;
  double worst = 0;  // largest |relaxed - exact| / bound seen
  const auto check = [&](float relaxed, float exact, double bound, const std::string& what) {
    const double diff = std::fabs(double(relaxed) - double(exact));
    EXPECT_LE(diff, bound) << what;
    worst = std::max(worst, bound > 0 ? diff / bound : 0.0);
    ++checked;
  };
  for (index_t k : {64, 1000, 4096}) {
    const index_t m = 6, n = 7;
    // NVFP4 and MXFP4: the scaled-domain MMA.
    const auto fp4_case = [&]<class Format>(Format, const char* name) {
      const auto [a, b] = fp4_pair<Format>(m, n, k, style::normal, static_cast<unsigned>(k));
      std::vector<float> exact(static_cast<std::size_t>(m * n)), relaxed(exact.size());
      block_scaled_mma(a, b, {}, matrix_view<float>::row_major(exact.data(), m, n), gemm_mode::exact);
      block_scaled_mma(a, b, {}, matrix_view<float>::row_major(relaxed.data(), m, n), gemm_mode::relaxed);
      const detail::tiles::fp4_source<Format> sa{a}, sb{b};
      for (index_t i = 0; i < m; ++i)
        for (index_t j = 0; j < n; ++j) {
          double s = 0, p = 0;
          for (index_t kk = 0; kk < k; ++kk) {
            s += std::fabs(double(sa.folded(i, kk)) * sb.folded(j, kk));
            const double scale_a = a.scale(i, kk / Format::block_cols).to_float(), scale_b = b.scale(j, kk / Format::block_cols).to_float();
            p = std::max(p, scale_a * scale_b);
          }
          check(relaxed[static_cast<std::size_t>(i * n + j)], exact[static_cast<std::size_t>(i * n + j)],
                documented_bound(k, s, p, 64, 5, 35, 23, 8, 0), std::string(name) + " K " + std::to_string(k));
        }
    };
    fp4_case(nvfp4_1x16{}, "nvfp4");
    fp4_case(mxfp4{}, "mxfp4");
    // FP8 codes: Hopper with and without promotion, Blackwell.
    const fp8_tensor a = random_fp8(m, k, fp8_format::e4m3, 0, 0, rng), b = random_fp8(n, k, fp8_format::e5m2, 0, 0, rng);
    for (auto [core, interval] :
         {std::pair{fp8::mma::tensor_core::hopper, index_t{128}}, std::pair{fp8::mma::tensor_core::hopper, index_t{0}},
          std::pair{fp8::mma::tensor_core::blackwell, index_t{0}}}) {
      std::vector<float> exact(static_cast<std::size_t>(m * n)), relaxed(exact.size());
      fp8_mma(a, b, {}, matrix_view<float>::row_major(exact.data(), m, n), {.core = core, .promotion_interval = interval});
      fp8_mma(a, b, {}, matrix_view<float>::row_major(relaxed.data(), m, n),
              {.core = core, .mode = gemm_mode::relaxed, .promotion_interval = interval});
      const bool hopper = core == fp8::mma::tensor_core::hopper;
      for (index_t i = 0; i < m; ++i)
        for (index_t j = 0; j < n; ++j) {
          double s = 0, p = 0;
          for (index_t kk = 0; kk < k; ++kk) {
            const double prod = std::fabs(double(a.element(i, kk)) * b.element(j, kk));
            s += prod;
            p = std::max(p, prod);
          }
          check(relaxed[static_cast<std::size_t>(i * n + j)], exact[static_cast<std::size_t>(i * n + j)],
                documented_bound(k, s, p, 32, 33, hopper ? 13 : 25, hopper ? 13 : 23, 64, interval),
                std::string("fp8 K ") + std::to_string(k) + (hopper ? " hopper" : " blackwell"));
        }
    }
    // The float GEMM (bf16 values): exact is one fp32 chain of K roundings.
    std::vector<float> x(static_cast<std::size_t>(m * k)), w(static_cast<std::size_t>(n * k));
    for (auto& v : x) v = bf16::from_float(std::normal_distribution<float>(0, 1)(rng)).to_float();
    for (auto& v : w) v = bf16::from_float(std::normal_distribution<float>(0, 1)(rng)).to_float();
    const auto xv = matrix_view<const float>::row_major(x.data(), m, k), wv = matrix_view<const float>::row_major(w.data(), n, k);
    std::vector<float> exact(static_cast<std::size_t>(m * n)), relaxed(exact.size());
    float_gemm(xv, wv, {}, matrix_view<float>::row_major(exact.data(), m, n));
    float_gemm(xv, wv, {}, matrix_view<float>::row_major(relaxed.data(), m, n), gemm_mode::relaxed);
    for (index_t i = 0; i < m; ++i)
      for (index_t j = 0; j < n; ++j) {
        double s = 0;
        for (index_t kk = 0; kk < k; ++kk) s += std::fabs(double(xv(i, kk)) * wv(j, kk));
        check(relaxed[static_cast<std::size_t>(i * n + j)], exact[static_cast<std::size_t>(i * n + j)],
              (gamma(std::ceil(double(k) / 16) + 34) + gamma(double(k))) * s, "float K " + std::to_string(k));
      }
  }
  EXPECT_GT(checked, 600);
  RecordProperty("worst_fraction_of_bound", std::to_string(worst));
}

}  // namespace gemm_detail_tile_gemm_test
}  // namespace
}  // namespace nvfp4
