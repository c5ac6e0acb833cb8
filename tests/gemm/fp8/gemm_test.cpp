// Tests of nvfp4/gemm/fp8/gemm.hpp: the split accumulator against the plain chain on a hand-worked
// case, the per-tensor and block-scaled epilogues (which scale is applied first), bias and bf16
// output, the MXFP8 GEMM against its MMA, fast == reference on every ISA build for any thread
// count (kernels, their edges, the epilogue with bias, bf16 and strided outputs), repeated calls
// of changing shapes through the per-thread operand workspace, and bad input.
// NVFP4_TEST_ALL_ISAS
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "nvfp4/gemm/fp8/gemm.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace gemm_fp8_gemm_test {

using fp8::mma::tensor_core;

fp8_tensor codes(index_t rows, index_t cols, fp8_format f, std::initializer_list<std::pair<index_t, std::uint8_t>> set) {
  fp8_tensor t(rows, cols, f);
  for (auto [i, code] : set) t.codes()[static_cast<std::size_t>(i)] = code;
  return t;
}

TEST(Fp8Gemm, SplitAccumulatorKeepsWhatTheChainTruncates) {
  // K = 64: step 0 holds 32 * 32 = 1024 (E4M3 0x60 = 32), step 1 holds 0.25 * 0.25 (0x28 = 0.25).
  // The Hopper chain adds 2^-4 to c = 1024 with a unit of 2^(10-13): truncated, 1024. Promoted every
  // 32 elements, the second partial 2^-4 is added in fp32: 1024.0625.
  const auto a = codes(1, 64, fp8_format::e4m3, {{0, 0x60}, {40, 0x28}});
  const auto b = codes(1, 64, fp8_format::e4m3, {{0, 0x60}, {40, 0x28}});
  float d = 0.0f;
  const auto d_view = matrix_view<float>::row_major(&d, 1, 1);
  fp8_mma(a, b, {}, d_view, {.core = tensor_core::hopper, .promotion_interval = 0});
  EXPECT_EQ(d, 1024.0f);
  fp8_mma(a, b, {}, d_view, {.core = tensor_core::hopper, .promotion_interval = 32});
  EXPECT_EQ(d, 1024.0625f);
  fp8_mma(a, b, {}, d_view, {.core = tensor_core::blackwell, .promotion_interval = 0});
  EXPECT_EQ(d, 1024.0625f);  // 25 bits keep it
  // A promotion interval covering all of K is the chain from zero.
  fp8_mma(a, b, {}, d_view, {.core = tensor_core::hopper, .promotion_interval = 64});
  EXPECT_EQ(d, 1024.0f);
}

TEST(Fp8Gemm, PerTensorEpilogue) {
  // A·Bᵀ = 3 (1 * 3), scale_inv 0.5 and 1/3: out = (0.5 * fp32(1/3)) * 3, + bias 0.25.
  auto a = codes(1, 32, fp8_format::e4m3, {{0, 0x38}});
  auto b = codes(1, 32, fp8_format::e4m3, {{0, 0x44}});  // 3.0
  a.scale_inv()[0] = 0.5f;
  b.scale_inv()[0] = 1.0f / 3.0f;
  const std::vector<float> bias = {0.25f};
  float out = 0.0f;
  fp8_gemm(a, b, matrix_view<float>::row_major(&out, 1, 1), {.bias = bias});
  const float alpha = 0.5f * (1.0f / 3.0f);
  const float product = alpha * 3.0f;
  EXPECT_EQ(out, product + 0.25f);
  bf16 out16;
  fp8_gemm(a, b, matrix_view<bf16>::row_major(&out16, 1, 1), {.bias = bias});
  EXPECT_EQ(out16, bf16::from_float(product + 0.25f));
}

TEST(Fp8Gemm, BlockEpilogueFollowsTheGpuOrTesReference) {
  // K = 256 (two K blocks); A 1x128-scaled [1, 256], B 128x128-scaled [1, 256]. Block 0: P = 3,
  // block 1: P = 1. Scales chosen so the orders of the multiplies show. The hardware's orders
  // (measured on an H100, golden kind gemm_fp8_block_cublas): fma(P, fl(sa * sb), y) when an
  // operand is 128x128, fma(fl(P * sa), sb, y) for 1x128 x 1x128; TE's reference puts the 1x128
  // scale first always.
  fp8_tensor a(1, 256, fp8_format::e4m3, 1, 128), b(1, 256, fp8_format::e4m3, 128, 128), b1(1, 256, fp8_format::e4m3, 1, 128);
  for (fp8_tensor* t : {&a, &b, &b1}) t->codes()[130] = 0x38;  // 1
  a.codes()[0] = 0x44;                                         // 3
  b.codes()[0] = b1.codes()[0] = 0x38;
  const float sa0 = 1.0f / 3.0f, sa1 = 1.1f, sb0 = 3.0000002f, sb1 = 0.7f;
  a.scale_inv()[0] = sa0;
  a.scale_inv()[1] = sa1;
  b.scale_inv()[0] = b1.scale_inv()[0] = sb0;
  b.scale_inv()[1] = b1.scale_inv()[1] = sb1;
  const float combined = std::fma(1.0f, sa1 * sb1, std::fma(3.0f, sa0 * sb0, 0.0f));
  const float a_first = std::fma(1.0f * sa1, sb1, std::fma(3.0f * sa0, sb0, 0.0f));
  ASSERT_NE(combined, a_first);  // the test can tell the orders apart
  const auto run = [](const fp8_tensor& x, const fp8_tensor& y, fp8_block_epilogue e) {
    float out = 0.0f;
    fp8_gemm(x, y, matrix_view<float>::row_major(&out, 1, 1), {.block_epilogue = e});
    float want = 0.0f;
    reference::fp8_gemm(x, y, matrix_view<float>::row_major(&want, 1, 1), {.block_epilogue = e});
    EXPECT_EQ(std::bit_cast<std::uint32_t>(out), std::bit_cast<std::uint32_t>(want));
    return out;
  };
  EXPECT_EQ(run(a, b, fp8_block_epilogue::hardware), combined);     // 1x128 x 128x128
  EXPECT_EQ(run(b, a, fp8_block_epilogue::hardware), combined);     // 128x128 x 1x128
  EXPECT_EQ(run(a, b1, fp8_block_epilogue::hardware), a_first);     // 1x128 x 1x128
  EXPECT_EQ(run(a, b, fp8_block_epilogue::te_reference), a_first);  // the 1x128 scale first
  EXPECT_EQ(run(b, a, fp8_block_epilogue::te_reference), a_first);
  EXPECT_EQ(run(a, b1, fp8_block_epilogue::te_reference), a_first);
  // 1x128 x 1x128 with K = 128 (one block): the H100 applies B's scale first.
  fp8_tensor a128(1, 128, fp8_format::e4m3, 1, 128), b128(1, 128, fp8_format::e4m3, 1, 128);
  a128.codes()[0] = 0x44;
  b128.codes()[0] = 0x38;
  a128.scale_inv()[0] = sa0;
  b128.scale_inv()[0] = sb0;
  ASSERT_NE((3.0f * sa0) * sb0, (3.0f * sb0) * sa0);
  EXPECT_EQ(run(a128, b128, fp8_block_epilogue::hardware), (3.0f * sb0) * sa0);
  EXPECT_EQ(run(a128, b128, fp8_block_epilogue::te_reference), (3.0f * sa0) * sb0);
  fp8_gemm_options defaults;
  EXPECT_EQ(defaults.block_epilogue, fp8_block_epilogue::hardware);
}

TEST(Fp8Gemm, RowScaledEpilogueAppliesTheColumnScaleFirst) {
  // One scale per row of A and of B (blocks of 1 x K, K = 64): out = fl(fl(S * s_B[j]) * s_A[i]),
  // the order an H100 uses for torch's rowwise scaling (golden kind gemm_fp8_h100_epilogue).
  fp8_tensor a(2, 64, fp8_format::e4m3, 1, 0), b(1, 64, fp8_format::e4m3, 1, 0);
  a.codes()[0] = 0x44;       // A[0][0] = 3
  a.codes()[64 + 1] = 0x38;  // A[1][1] = 1
  b.codes()[0] = b.codes()[1] = 0x38;
  a.scale_inv()[0] = 1.0f / 3.0f;
  a.scale_inv()[1] = 1.1f;
  b.scale_inv()[0] = 3.0000002f;
  float out[2] = {};
  fp8_gemm(a, b, matrix_view<float>::row_major(out, 2, 1));
  const float s0 = 3.0f * 3.0000002f, s1 = 1.0f * 3.0000002f;
  EXPECT_EQ(out[0], s0 * (1.0f / 3.0f));
  EXPECT_EQ(out[1], s1 * 1.1f);
  EXPECT_NE(out[0], (3.0f * (1.0f / 3.0f)) * 3.0000002f);  // the other order differs here
  float want[2] = {};
  reference::fp8_gemm(a, b, matrix_view<float>::row_major(want, 2, 1));
  EXPECT_EQ(out[0], want[0]);
  EXPECT_EQ(out[1], want[1]);
  // A row-scaled operand with a per-tensor one is refused.
  fp8_tensor per_tensor(1, 64, fp8_format::e4m3);
  EXPECT_THROW(fp8_gemm(a, per_tensor, matrix_view<float>::row_major(out, 2, 1)), nvfp4::error);
}

// Random operands of every format pairing, K not a multiple of 32, both tensor cores, both modes,
// several promotion intervals: the public path equals the reference bit for bit, with 1 and 2
// threads.
TEST(Fp8Gemm, FastEqualsReference) {
  std::mt19937 gen(5);
  const index_t m = 39, n = 45, k = 200;  // blocks of 7 rows and of 3 tiles (the relaxed kernels' wide block)
  const auto random_codes = [&](fp8_tensor& t) {
    for (auto& c : t.codes()) {
      c = static_cast<std::uint8_t>(gen());
      if ((c & 0x7F) >= 0x7C) c &= 0xBB;  // keep them finite (NaN/Inf are the model test's)
    }
  };
  for (fp8_format fa : {fp8_format::e4m3, fp8_format::e5m2})
    for (fp8_format fb : {fp8_format::e4m3, fp8_format::e5m2}) {
      fp8_tensor a(m, k, fa), b(n, k, fb);
      random_codes(a);
      random_codes(b);
      a.scale_inv()[0] = 0.75f;
      b.scale_inv()[0] = 3.0f;
      for (tensor_core core : {tensor_core::hopper, tensor_core::blackwell})
        for (gemm_mode mode : {gemm_mode::exact, gemm_mode::relaxed})
          for (index_t interval : {index_t{0}, index_t{32}, index_t{128}}) {
            const fp8_gemm_options options{.core = core, .mode = mode, .promotion_interval = interval};
            std::vector<float> want(m * n), got(m * n);
            reference::fp8_gemm(a, b, matrix_view<float>::row_major(want.data(), m, n), options);
            for (int threads : {1, 2}) {
#if defined(_OPENMP)
              omp_set_num_threads(threads);
#endif
              fp8_gemm(a, b, matrix_view<float>::row_major(got.data(), m, n), options);
              ASSERT_EQ(test::float_bits(got), test::float_bits(want)) << int(core) << int(mode) << interval << threads;
            }
          }
    }
  // Block-scaled operands and MXFP8.
  std::normal_distribution<float> normal;
  std::vector<float> xa(m * k), xb(n * k);
  for (auto& v : xa) v = normal(gen);
  for (auto& v : xb) v = normal(gen) * 100.0f;
  const auto va = matrix_view<const float>::row_major(xa.data(), m, k), vb = matrix_view<const float>::row_major(xb.data(), n, k);
  const auto a1 = quantize_fp8_blockwise(va, fp8_format::e4m3, fp8_block_shape::block_1x128);
  const auto b2 = quantize_fp8_blockwise(vb, fp8_format::e5m2, fp8_block_shape::block_128x128);
  std::vector<float> want(m * n), got(m * n);
  reference::fp8_gemm(a1, b2, matrix_view<float>::row_major(want.data(), m, n));
  fp8_gemm(a1, b2, matrix_view<float>::row_major(got.data(), m, n));
  EXPECT_EQ(test::float_bits(got), test::float_bits(want));
  const auto ma = quantize_mxfp8_te<mxfp8>(va);
  const auto mb = quantize_mxfp8_te<mxfp8_e5m2>(vb);
  reference::mxfp8_gemm(ma, mb, matrix_view<float>::row_major(want.data(), m, n));
  mxfp8_gemm(ma, mb, matrix_view<float>::row_major(got.data(), m, n));
  EXPECT_EQ(test::float_bits(got), test::float_bits(want));
  // The GEMM is the MMA from zero with its outputs rounded as asked.
  std::vector<float> d(m * n);
  mxfp8_mma(ma, mb, {}, matrix_view<float>::row_major(d.data(), m, n), {.promotion_interval = 0});
  mxfp8_gemm(ma, mb, matrix_view<float>::row_major(got.data(), m, n), {.promotion_interval = 0});
  EXPECT_EQ(test::float_bits(got), test::float_bits(d));
}

// The epilogue of the fast path (row segments of each item) against the reference's, output by
// output: bias, bf16 output, an output view whose columns are not contiguous, C into fp8_mma,
// for per-tensor, block-scaled and MXFP8 operands whose N is not a multiple of 16 or of a panel.
TEST(Fp8Gemm, FastEpilogueEqualsReference) {
  std::mt19937 gen(9);
  const index_t m = 70, n = 275, k = 160;
  std::normal_distribution<float> normal;
  std::vector<float> xa(m * k), xb(n * k), bias(n), c(m * n);
  for (auto& v : xa) v = normal(gen);
  for (auto& v : xb) v = normal(gen) * 10.0f;
  for (auto& v : bias) v = normal(gen);
  for (auto& v : c) v = normal(gen) * 100.0f;
  const auto va = matrix_view<const float>::row_major(xa.data(), m, k), vb = matrix_view<const float>::row_major(xb.data(), n, k);
  const auto check = [&](const auto& a, const auto& b, auto gemm, auto reference_gemm, const char* what) {
    for (gemm_mode mode : {gemm_mode::exact, gemm_mode::relaxed})
      for (bool with_bias : {false, true}) {
        const fp8_gemm_options options{.mode = mode, .bias = with_bias ? std::span<const float>(bias) : std::span<const float>()};
        std::vector<float> want(m * n), got(m * n), got_columns(m * n);
        reference_gemm(a, b, matrix_view<float>::row_major(want.data(), m, n), options);
        gemm(a, b, matrix_view<float>::row_major(got.data(), m, n), options);
        ASSERT_EQ(test::float_bits(got), test::float_bits(want)) << what << " " << int(mode) << with_bias;
        gemm(a, b, matrix_view<float>(got_columns.data(), m, n, 1, m), options);  // column-major storage
        for (index_t i = 0; i < m; ++i)
          for (index_t j = 0; j < n; ++j)
            ASSERT_EQ(std::bit_cast<std::uint32_t>(got_columns[std::size_t(j * m + i)]),
                      std::bit_cast<std::uint32_t>(want[std::size_t(i * n + j)]))
                << what << " column-major " << i << "," << j;
        std::vector<bf16> want16(m * n), got16(m * n);
        reference_gemm(a, b, matrix_view<bf16>::row_major(want16.data(), m, n), options);
        gemm(a, b, matrix_view<bf16>::row_major(got16.data(), m, n), options);
        ASSERT_EQ(got16, want16) << what << " bf16 " << int(mode) << with_bias;
      }
  };
  const auto fast = [](const auto& a, const auto& b, auto out, const fp8_gemm_options& o) { fp8_gemm(a, b, out, o); };
  const auto slow = [](const auto& a, const auto& b, auto out, const fp8_gemm_options& o) { reference::fp8_gemm(a, b, out, o); };
  check(quantize_fp8_current(va, fp8_format::e4m3), quantize_fp8_current(vb, fp8_format::e5m2), fast, slow, "per tensor");
  check(quantize_fp8_blockwise(va, fp8_format::e4m3, fp8_block_shape::block_1x128),
        quantize_fp8_blockwise(vb, fp8_format::e4m3, fp8_block_shape::block_128x128), fast, slow, "block");
  check(
      quantize_mxfp8_te<mxfp8>(va), quantize_mxfp8_te<mxfp8>(vb),
      [](const auto& a, const auto& b, auto out, const fp8_gemm_options& o) { mxfp8_gemm(a, b, out, o); },
      [](const auto& a, const auto& b, auto out, const fp8_gemm_options& o) { reference::mxfp8_gemm(a, b, out, o); }, "mxfp8");
  // fp8_mma with C, into a column-major D.
  const auto a8 = quantize_fp8_current(va, fp8_format::e4m3), b8 = quantize_fp8_current(vb, fp8_format::e4m3);
  const auto c_view = matrix_view<const float>::row_major(c.data(), m, n);
  std::vector<float> want(m * n), got(m * n);
  reference::fp8_mma(a8, b8, c_view, matrix_view<float>::row_major(want.data(), m, n));
  fp8_mma(a8, b8, c_view, matrix_view<float>(got.data(), m, n, 1, m));
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[std::size_t(j * m + i)]), std::bit_cast<std::uint32_t>(want[std::size_t(i * n + j)]))
          << "fp8_mma " << i << "," << j;
}

// The entry points keep their operands' statistics in the calling thread's workspace: calls of
// changing shapes and kinds, one after another (large, small, large again; A and B of different
// sizes, so the two parts of the workspace hold other operands' data from before), each equal to
// the reference; the large operands' statistics are split over threads (1 and 2).
TEST(Fp8Gemm, RepeatedCallsOfChangingShapesEqualReference) {
  std::mt19937 gen(13);
  std::normal_distribution<float> normal;
  const auto data = [&](index_t rows, index_t cols, float scale) {
    std::vector<float> v(static_cast<std::size_t>(rows * cols));
    for (auto& x : v) x = normal(gen) * scale;
    return v;
  };
  struct shape {
    index_t m, n, k;
  };
  // 300 x 260 and 270 x 260: above the threads' threshold (65,536 codes); 9 x 33 x 40: a partial
  // step; 70 x 530: two row groups by two panels of B (its tiles packed once for the team).
  const shape shapes[] = {{300, 40, 260}, {9, 33, 40}, {20, 270, 260}, {70, 530, 64}, {300, 40, 260}};
  for (int threads : {1, 2}) {
    test::set_threads(threads);
    for (const shape& sh : shapes) {
      const std::vector<float> xa = data(sh.m, sh.k, 1.0f), xb = data(sh.n, sh.k, 30.0f);
      const auto va = matrix_view<const float>::row_major(xa.data(), sh.m, sh.k);
      const auto vb = matrix_view<const float>::row_major(xb.data(), sh.n, sh.k);
      std::vector<float> want(static_cast<std::size_t>(sh.m * sh.n)), got(want.size());
      const auto out = [&](std::vector<float>& v) { return matrix_view<float>::row_major(v.data(), sh.m, sh.n); };
      const auto a8 = quantize_fp8_current(va, fp8_format::e4m3), b8 = quantize_fp8_current(vb, fp8_format::e5m2);
      reference::fp8_gemm(a8, b8, out(want));
      fp8_gemm(a8, b8, out(got));
      ASSERT_EQ(test::float_bits(got), test::float_bits(want)) << "per tensor " << sh.m << "x" << sh.n << "x" << sh.k << " " << threads;
      const auto a1 = quantize_fp8_blockwise(va, fp8_format::e4m3, fp8_block_shape::block_1x128);
      const auto b2 = quantize_fp8_blockwise(vb, fp8_format::e4m3, fp8_block_shape::block_128x128);
      reference::fp8_gemm(a1, b2, out(want), {.mode = gemm_mode::relaxed});
      fp8_gemm(a1, b2, out(got), {.mode = gemm_mode::relaxed});
      ASSERT_EQ(test::float_bits(got), test::float_bits(want)) << "block " << sh.m << "x" << sh.n << "x" << sh.k << " " << threads;
      const auto ma = quantize_mxfp8_te<mxfp8>(va);
      const auto mb = quantize_mxfp8_te<mxfp8_e5m2>(vb);
      reference::mxfp8_gemm(ma, mb, out(want));
      mxfp8_gemm(ma, mb, out(got));
      ASSERT_EQ(test::float_bits(got), test::float_bits(want)) << "mxfp8 " << sh.m << "x" << sh.n << "x" << sh.k << " " << threads;
    }
  }
}

// The vector kernels' edges against the reference MMA, bit for bit: NaN / Inf codes, accumulators
// that are NaN, Inf, huge, subnormal or signed zeros, steps whose 32 codes are all zero (their
// products' factor leaves fp32's range above), and (MXFP8) E8M0 scales over the whole code range
// with NaN scales among them (factors that leave it below, and relaxed scales that take the
// fallback), then the same scales on finite operands. Both tensor cores, both modes, 1 and 2
// threads.
TEST(Fp8Gemm, FastEqualsReferenceAtTheEdges) {
  std::mt19937 gen(11);
  const index_t m = 21, n = 35, k = 100;
  // Codes of a [rows, k] operand; about a quarter of its rows' 32-element steps all zero (sparse
  // data, underflowed gradients), whose products then have no exponent to align with.
  const auto random_codes = [&](std::span<std::uint8_t> codes, index_t rows) {
    for (auto& c : codes) {
      c = static_cast<std::uint8_t>(gen());
      if (gen() % 32 != 0 && (c & 0x7F) >= 0x7C) c &= 0xBB;  // NaN / Inf codes in about 1 of 32 draws
    }
    for (index_t r = 0; r < rows; ++r)
      for (index_t k0 = 0; k0 < k; k0 += 32)
        if (gen() % 4 == 0)
          for (index_t i = k0; i < std::min(k, k0 + 32); ++i) codes[static_cast<std::size_t>(r * k + i)] = 0;
  };
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            0x1.8p126f,
                            -0x1.fffffep127f,
                            0x1p-140f,
                            -0x1.4p-127f,
                            3.0f};
  std::vector<float> c(m * n);
  for (auto& v : c)
    v = gen() % 3 == 0 ? specials[gen() % std::size(specials)]
                       : std::ldexp(static_cast<float>(gen() % 2001) - 1000.0f, static_cast<int>(gen() % 40) - 30);
  const auto c_view = matrix_view<const float>::row_major(c.data(), m, n);
  std::vector<float> want(m * n), got(m * n);
  const auto compare = [&](const char* what) { ASSERT_EQ(test::float_bits(got), test::float_bits(want)) << what; };
  for (fp8_format fa : {fp8_format::e4m3, fp8_format::e5m2})
    for (fp8_format fb : {fp8_format::e4m3, fp8_format::e5m2}) {
      fp8_tensor a(m, k, fa), b(n, k, fb);
      random_codes(a.codes(), m);
      random_codes(b.codes(), n);
      for (tensor_core core : {tensor_core::hopper, tensor_core::blackwell})
        for (gemm_mode mode : {gemm_mode::exact, gemm_mode::relaxed}) {
          const fp8_gemm_options options{.core = core, .mode = mode, .promotion_interval = 0};
          reference::fp8_mma(a, b, c_view, matrix_view<float>::row_major(want.data(), m, n), options);
          for (int threads : {1, 2}) {
            test::set_threads(threads);
            fp8_mma(a, b, c_view, matrix_view<float>::row_major(got.data(), m, n), options);
            compare("fp8_mma");
          }
        }
    }
  // MXFP8: scales anywhere in E8M0's range, 0xFF (NaN) among them; the centre more often, so that
  // most outputs stay finite and the vector path is what runs.
  quantized_tensor<mxfp8> ma(m, k);
  quantized_tensor<mxfp8_e5m2> mb(n, k);
  random_codes(std::span(reinterpret_cast<std::uint8_t*>(ma.data().data()), ma.data().size()), m);
  random_codes(std::span(reinterpret_cast<std::uint8_t*>(mb.data().data()), mb.data().size()), n);
  const auto random_scale = [&] {
    const unsigned draw = gen() % 16;
    const unsigned bits = draw == 0  ? 0xFFu
                          : draw < 6 ? static_cast<unsigned>(gen() % 255)
                                     : 127u - 20u + static_cast<unsigned>(gen() % 41);
    return e8m0::from_bits(static_cast<std::uint8_t>(bits));
  };
  for (auto& s : ma.scales()) s = random_scale();
  for (auto& s : mb.scales()) s = random_scale();
  const auto compare_mxfp8 = [&](const char* what) {
    for (gemm_mode mode : {gemm_mode::exact, gemm_mode::relaxed}) {
      const fp8_gemm_options options{.mode = mode, .promotion_interval = 0};
      reference::mxfp8_mma(ma, mb, c_view, matrix_view<float>::row_major(want.data(), m, n), options);
      for (int threads : {1, 2}) {
        test::set_threads(threads);
        mxfp8_mma(ma, mb, c_view, matrix_view<float>::row_major(got.data(), m, n), options);
        compare(what);
      }
    }
  };
  compare_mxfp8("mxfp8_mma");
  // Then without NaN / Inf codes and NaN scales: every row and tile is finite, so the relaxed
  // kernels' finite loop meets the whole scale range (2^(s_a + s_b) subnormal, zero or Inf).
  const auto make_finite = [](std::span<std::uint8_t> codes) {
    for (auto& c : codes)
      if ((c & 0x7F) >= 0x7C) c &= 0xBB;
  };
  make_finite(std::span(reinterpret_cast<std::uint8_t*>(ma.data().data()), ma.data().size()));
  make_finite(std::span(reinterpret_cast<std::uint8_t*>(mb.data().data()), mb.data().size()));
  for (auto& s : ma.scales())
    if (s.is_nan()) s = e8m0::from_bits(254);
  for (auto& s : mb.scales())
    if (s.is_nan()) s = e8m0::from_bits(0);
  compare_mxfp8("mxfp8_mma, finite operands");
}

TEST(Fp8Gemm, QuantizedProductIsClose) {
  // Current scaling of N(0,1) data, E4M3 x E4M3: within a few percent of the fp32 product.
  std::mt19937 gen(9);
  std::normal_distribution<float> normal;
  const index_t m = 16, n = 16, k = 256;
  std::vector<float> xa(m * k), xb(n * k);
  for (auto& v : xa) v = normal(gen);
  for (auto& v : xb) v = normal(gen);
  const auto a = quantize_fp8_current(matrix_view<const float>::row_major(xa.data(), m, k), fp8_format::e4m3);
  const auto b = quantize_fp8_current(matrix_view<const float>::row_major(xb.data(), n, k), fp8_format::e4m3);
  std::vector<float> out(m * n);
  fp8_gemm(a, b, matrix_view<float>::row_major(out.data(), m, n));
  double e = 0, norm = 0;
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      double s = 0;
      for (index_t kk = 0; kk < k; ++kk) s += double(xa[std::size_t(i * k + kk)]) * xb[std::size_t(j * k + kk)];
      e += (out[std::size_t(i * n + j)] - s) * (out[std::size_t(i * n + j)] - s);
      norm += s * s;
    }
  EXPECT_LT(std::sqrt(e / norm), 0.05);
}

TEST(Fp8Gemm, BadInput) {
  const fp8_tensor a(4, 64, fp8_format::e4m3), b(3, 32, fp8_format::e4m3), c(3, 64, fp8_format::e4m3);
  const fp8_tensor blocks(3, 64, fp8_format::e4m3, 1, 128);
  std::vector<float> out(12);
  const auto o = matrix_view<float>::row_major(out.data(), 4, 3);
  EXPECT_EQ(test::error_code_of([&] { fp8_gemm(a, b, o); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { fp8_gemm(a, c, matrix_view<float>::row_major(out.data(), 3, 4)); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { fp8_gemm(a, c, o, {.promotion_interval = 48}); }), errc::invalid_argument);
  const std::vector<float> bias(2);
  EXPECT_EQ(test::error_code_of([&] { fp8_gemm(a, c, o, {.bias = bias}); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { fp8_gemm(a, blocks, o); }), errc::invalid_argument);  // per-tensor with blocks
  EXPECT_EQ(test::error_code_of([&] { fp8_mma(a, c, {}, matrix_view<float>(nullptr, 4, 3, 3, 1)); }), errc::null_pointer);
  EXPECT_EQ(test::error_code_of([&] { fp8_gemm(a, c, o); }), errc{});
}

}  // namespace gemm_fp8_gemm_test
}  // namespace
}  // namespace nvfp4
