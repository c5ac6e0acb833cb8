// Tests of nvfp4/scaling/fp8_quantize.hpp: TE's scale rule on hand-worked amaxes (zero, tiny,
// epsilon, power-of-two masking, the input type's max for block scaling), per-tensor and block
// quantization against hand-computed codes, the transposed copies, fast == reference on every ISA
// build, bad input, and NaN / Inf as TE's delayed-scaling cast runs them (fp8_non_finite).
// NVFP4_TEST_ALL_ISAS
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "nvfp4/scaling/fp8_quantize.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace scaling_fp8_quantize_test {

bool same(const fp8_tensor& a, const fp8_tensor& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && a.format() == b.format() && a.block_rows() == b.block_rows() &&
         a.block_cols() == b.block_cols() && a.axis() == b.axis() && a.codes().size() == b.codes().size() &&
         a.scale_inv().size() == b.scale_inv().size() && std::equal(a.codes().begin(), a.codes().end(), b.codes().begin()) &&
         std::equal(a.scale_inv().begin(), a.scale_inv().end(), b.scale_inv().begin()) && a.amax() == b.amax() && a.scale() == b.scale();
}

TEST(Fp8Quantize, ScaleRule) {
  EXPECT_EQ(fp8_scale_from_amax(0.0f, 448.0f, false, 0.0f, FLT_MAX), 1.0f);
  EXPECT_EQ(fp8_scale_from_amax(INFINITY, 448.0f, false, 0.0f, FLT_MAX), 1.0f);
  EXPECT_EQ(fp8_scale_from_amax(std::nanf(""), 448.0f, false, 0.0f, FLT_MAX), 1.0f);
  EXPECT_EQ(fp8_scale_from_amax(2.0f, 448.0f, false, 0.0f, FLT_MAX), 224.0f);
  EXPECT_EQ(fp8_scale_from_amax(3.0f, 448.0f, false, 0.0f, FLT_MAX), 448.0f / 3.0f);
  // Power of two: 149.33 -> 128 (sign and exponent bits only).
  EXPECT_EQ(fp8_scale_from_amax(3.0f, 448.0f, true, 0.0f, FLT_MAX), 128.0f);
  // Epsilon floors the amax: 448 / 4.
  EXPECT_EQ(fp8_scale_from_amax(1.0f, 448.0f, false, 4.0f, FLT_MAX), 112.0f);
  EXPECT_EQ(fp8_scale_from_amax(0.0f, 448.0f, false, 4.0f, FLT_MAX), 112.0f);  // 0 < epsilon: raised first
  // Too small an amax: the quotient is Inf -> value_for_inf (then masked to 2^127 when pow-2).
  EXPECT_EQ(fp8_scale_from_amax(1e-38f, 448.0f, false, 0.0f, FLT_MAX), FLT_MAX);
  EXPECT_EQ(fp8_scale_from_amax(1e-38f, 448.0f, false, 0.0f, 3.3895314e38f), 3.3895314e38f);
  EXPECT_EQ(fp8_scale_from_amax(1e-38f, 448.0f, true, 0.0f, FLT_MAX), std::ldexp(1.0f, 127));
  EXPECT_EQ(input_max_finite<bf16>(), 3.3895313892515355e38f);
}

TEST(Fp8Quantize, PerTensorByHand) {
  // x = [1, -3, 0.1, 500], amax 500: scale 448 / 500 = 0.896 (fp32), codes of x * scale.
  const std::vector<float> x = {1.0f, -3.0f, 0.1f, 500.0f};
  const auto v = matrix_view<const float>::row_major(x.data(), 2, 2);
  const auto q = quantize_fp8_current(v, fp8_format::e4m3);
  const float scale = 448.0f / 500.0f;
  EXPECT_EQ(q.scale(), scale);
  EXPECT_EQ(q.amax(), 500.0f);
  EXPECT_EQ(q.scale_inv()[0], 1.0f / scale);
  EXPECT_TRUE(q.per_tensor());
  EXPECT_EQ(q.code(0, 0), e4m3::from_float(0.896f).bits());  // 0.896 -> 0.875 (0x36)
  EXPECT_EQ(q.code(0, 0), 0x36);
  EXPECT_EQ(q.code(0, 1), e4m3::from_float(-3.0f * scale).bits());
  EXPECT_EQ(q.code(1, 1), 0x7E);  // 500 * 0.896 = 448
  // E5M2 with a given scale; 1e6 saturates to 57344 (satfinite).
  const std::vector<float> y = {1.0f, 1e6f};
  const auto q5 = quantize_fp8_with_scale(matrix_view<const float>::row_major(y.data(), 1, 2), fp8_format::e5m2, 1.0f);
  EXPECT_EQ(q5.code(0, 0), 0x3C);
  EXPECT_EQ(q5.code(0, 1), 0x7B);
  EXPECT_EQ(q5.amax(), 1e6f);
}

TEST(Fp8Quantize, BlocksByHand) {
  // 2 x 130: blocks of 128 columns, the second block 2 wide. Row 0 block 0 amax 4, block 1 amax 1;
  // row 1 block 0 amax 0 (scale 1).
  std::vector<float> x(2 * 130, 0.0f);
  x[5] = 4.0f;
  x[129] = -1.0f;
  const auto v = matrix_view<const float>::row_major(x.data(), 2, 130);
  const auto q = quantize_fp8_blockwise(v, fp8_format::e4m3, fp8_block_shape::block_1x128);
  ASSERT_EQ(q.scale_rows(), 2);
  ASSERT_EQ(q.scale_cols(), 2);
  EXPECT_EQ(q.block_scale_inv(0, 0), 1.0f / 64.0f);   // 448 / 4 = 112 -> pow2 64
  EXPECT_EQ(q.block_scale_inv(0, 1), 1.0f / 256.0f);  // 448 -> 256
  EXPECT_EQ(q.block_scale_inv(1, 0), 1.0f);
  EXPECT_EQ(q.code(0, 5), e4m3::from_float(256.0f).bits());
  EXPECT_EQ(q.code(0, 129), e4m3::from_float(-256.0f).bits());
  // 128x128: one scale for the 2 x 128 tile; fp32 scales when not power of two.
  const auto t = quantize_fp8_blockwise(v, fp8_format::e4m3, fp8_block_shape::block_128x128, {.power_2_scale = false});
  ASSERT_EQ(t.scale_rows(), 1);
  EXPECT_EQ(t.block_scale_inv(0, 0), 1.0f / 112.0f);
  EXPECT_EQ(t.scale_inv_at(1, 3), 1.0f / 112.0f);
}

TEST(Fp8Quantize, TransposedCopies) {
  const auto x = test::random_values(96 * 200, 1);
  const auto v = matrix_view<const float>::row_major(x.data(), 96, 200);
  // Per tensor: the columnwise copy is the transpose with the same scale.
  const auto q = quantize_fp8_current(v, fp8_format::e4m3);
  const auto t = quantize_fp8_with_scale(v.transposed(), fp8_format::e4m3, q.scale(), quantized_axis::columnwise);
  for (index_t r = 0; r < 96; ++r)
    for (index_t c = 0; c < 200; ++c) ASSERT_EQ(q.code(r, c), t.code(c, r));
  // 128x128 blocks: also the transpose; 1x128 blocks: not (blocks run the other way).
  const auto b = quantize_fp8_blockwise(v, fp8_format::e4m3, fp8_block_shape::block_128x128);
  const auto bt = quantize_fp8_blockwise(v.transposed(), fp8_format::e4m3, fp8_block_shape::block_128x128);
  for (index_t r = 0; r < 96; ++r)
    for (index_t c = 0; c < 200; ++c) {
      ASSERT_EQ(b.code(r, c), bt.code(c, r));
      ASSERT_EQ(b.scale_inv_at(r, c), bt.scale_inv_at(c, r));
    }
}

TEST(Fp8Quantize, FastEqualsReference) {
  // Sizes across the parallel threshold, odd widths, bf16 and strided (transposed) inputs.
  for (auto [rows, cols] : {std::pair<index_t, index_t>{3, 7}, {130, 257}, {300, 260}}) {
    const auto x = test::random_values(rows * cols, unsigned(rows + cols), {.sigma = 3.0});
    const auto v = matrix_view<const float>::row_major(x.data(), rows, cols);
    std::vector<bf16> xb;
    for (float f : x) xb.push_back(bf16::from_float(f));
    const auto vb = matrix_view<const bf16>::row_major(xb.data(), rows, cols);
    for (fp8_format f : {fp8_format::e4m3, fp8_format::e5m2}) {
      EXPECT_TRUE(same(quantize_fp8_current(v, f), reference::quantize_fp8_current(v, f)));
      EXPECT_TRUE(
          same(quantize_fp8_current(vb, f, {.power_2_scale = true}), reference::quantize_fp8_current(vb, f, {.power_2_scale = true})));
      EXPECT_TRUE(same(quantize_fp8_with_scale(v.transposed(), f, 3.5f), reference::quantize_fp8_with_scale(v.transposed(), f, 3.5f)));
      for (auto shape : {fp8_block_shape::block_1x128, fp8_block_shape::block_128x128}) {
        EXPECT_TRUE(same(quantize_fp8_blockwise(v, f, shape), reference::quantize_fp8_blockwise(v, f, shape)));
        EXPECT_TRUE(same(quantize_fp8_blockwise(vb.transposed(), f, shape, {.amax_epsilon = 1e-3f}),
                         reference::quantize_fp8_blockwise(vb.transposed(), f, shape, {.amax_epsilon = 1e-3f})));
      }
    }
  }
}

/// Values for the block paths: magnitudes over a wide range, with blocks of zeros (scale 1),
/// blocks of tiny values (max_fp8 / amax overflows: the input type's largest finite scale),
/// values near the input type's largest finite and subnormals sprinkled in.
template <class T>
std::vector<T> block_test_values(index_t rows, index_t cols, unsigned seed) {
  std::mt19937 gen{seed};
  std::lognormal_distribution<float> wide(0.0f, 6.0f);
  const float largest = std::is_same_v<T, bf16> ? bf16::from_bits(0x7F7F).to_float() : FLT_MAX;
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  for (auto& v : x) v = (gen() & 1 ? -1.0f : 1.0f) * std::min(wide(gen), 1e30f);
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c) {
      float& v = x[static_cast<std::size_t>(r * cols + c)];
      if (c >= 128 && c < 256 && r % 3 == 0) v = 0.0f;                                                  // zero blocks
      if (c < 128 && r % 5 == 1) v = std::ldexp(v > 0 ? 1.0f : -1.0f, -130 - static_cast<int>(c % 8));  // tiny blocks
      if ((r * cols + c) % 211 == 7) v = (c % 2 ? -1.0f : 1.0f) * largest;
      if ((r * cols + c) % 173 == 5) v = std::numeric_limits<float>::denorm_min();
    }
  std::vector<T> out;
  for (float v : x) {
    if constexpr (std::is_same_v<T, bf16>)
      out.push_back(bf16::from_float(v));
    else
      out.push_back(v);
  }
  return out;
}

/// Views of the same values: row-major, a window of a wider buffer (contiguous rows 3 elements
/// longer than the view's, starting 2 in), one with both strides above 1 (every other column of a
/// row-major buffer twice as wide); and their transposes (contiguous columns).
template <class T>
struct block_views {
  std::vector<T> values, padded, wide;
  matrix_view<const T> row_major, window, strided;
  block_views(index_t rows, index_t cols, unsigned seed)
      : values(block_test_values<T>(rows, cols, seed)), padded(static_cast<std::size_t>(rows * (cols + 3) + 2)), wide(values.size() * 2) {
    for (std::size_t i = 0; i < values.size(); ++i) wide[2 * i] = values[i];
    for (index_t r = 0; r < rows; ++r) std::copy_n(values.begin() + r * cols, cols, padded.begin() + 2 + r * (cols + 3));
    row_major = matrix_view<const T>::row_major(values.data(), rows, cols);
    window = matrix_view<const T>(padded.data() + 2, rows, cols, cols + 3, 1);
    strided = matrix_view<const T>(wide.data(), rows, cols, 2 * cols, 2);
  }
};

template <class T>
void expect_block_paths_equal_reference(index_t rows, index_t cols) {
  const block_views<T> v(rows, cols, static_cast<unsigned>(rows * 31 + cols));
  const std::pair<fp8_format, fp8_scale_options> rules[] = {{fp8_format::e4m3, {.power_2_scale = true}},
                                                            {fp8_format::e5m2, {.power_2_scale = false, .amax_epsilon = 1e-3f}}};
  for (const auto& [f, o] : rules)
    for (auto shape : {fp8_block_shape::block_1x128, fp8_block_shape::block_128x128})
      for (matrix_view<const T> x :
           {v.row_major, v.row_major.transposed(), v.window, v.window.transposed(), v.strided, v.strided.transposed()}) {
        SCOPED_TRACE(std::string(fp8_format_name(f)) + (shape == fp8_block_shape::block_1x128 ? " 1x128 " : " 128x128 ") +
                     std::to_string(x.rows()) + "x" + std::to_string(x.cols()) + " strides " + std::to_string(x.row_stride()) + "," +
                     std::to_string(x.col_stride()) + (o.power_2_scale ? " pow2" : " fp32 scales"));
        const fp8_tensor want = reference::quantize_fp8_blockwise(x, f, shape, o);
        EXPECT_TRUE(same(quantize_fp8_blockwise(x, f, shape, o), want));
        // Both copies in one pass: x's and xᵀ's.
        fp8_tensor row, col;
        quantize_fp8_blockwise_both_into(x, f, shape, o, row, col);
        EXPECT_TRUE(same(row, want));
        EXPECT_TRUE(same(col, reference::quantize_fp8_blockwise(x.transposed(), f, shape, o, quantized_axis::columnwise)));
        EXPECT_EQ(row.axis(), quantized_axis::rowwise);
        EXPECT_EQ(col.axis(), quantized_axis::columnwise);
      }
}

TEST(Fp8Quantize, BlockTilesEqualTheReferenceAtEveryEdge) {
  // Around the 128 x 128 tiles and their blocks: single elements, a row one past a block, whole
  // tiles, ragged tiles both ways, several tiles; extremes in every block (block_test_values).
  for (auto [rows, cols] : {std::pair<index_t, index_t>{1, 1}, {1, 129}, {127, 128}, {128, 128}, {129, 257}, {300, 131}, {130, 600}}) {
    // One thread, and two and three where there are tiles to share.
    for (int threads : {1, 2, 3}) {
      if (threads > 1 && rows * cols < 128 * 256) continue;
      test::set_threads(threads);
      SCOPED_TRACE("threads " + std::to_string(threads));
      expect_block_paths_equal_reference<float>(rows, cols);
      expect_block_paths_equal_reference<bf16>(rows, cols);
    }
  }
  test::set_threads(2);
}

TEST(Fp8Quantize, BlockPathsOfAnAllZeroTensor) {
  // amax 0 everywhere (zeros of both signs): scale 1 (or 1 / epsilon's quotient), codes of +-0.
  std::vector<float> x(static_cast<std::size_t>(130 * 200), 0.0f);
  for (std::size_t i = 0; i < x.size(); i += 3) x[i] = -0.0f;
  const auto v = matrix_view<const float>::row_major(x.data(), 130, 200);
  for (const fp8_scale_options o :
       {fp8_scale_options{.power_2_scale = true}, fp8_scale_options{.power_2_scale = false, .amax_epsilon = 0.5f}})
    for (auto shape : {fp8_block_shape::block_1x128, fp8_block_shape::block_128x128})
      for (matrix_view<const float> view : {v, v.transposed()}) {
        const fp8_tensor want = reference::quantize_fp8_blockwise(view, fp8_format::e4m3, shape, o);
        EXPECT_EQ(want.code(0, 0), 0x80);  // -0 keeps its sign
        EXPECT_EQ(want.scale_inv()[0], o.amax_epsilon > 0 ? 0.5f / 448.0f : 1.0f);
        EXPECT_TRUE(same(quantize_fp8_blockwise(view, fp8_format::e4m3, shape, o), want));
        fp8_tensor row, col;
        quantize_fp8_blockwise_both_into(view, fp8_format::e4m3, shape, o, row, col);
        EXPECT_TRUE(same(row, want));
        EXPECT_TRUE(
            same(col, reference::quantize_fp8_blockwise(view.transposed(), fp8_format::e4m3, shape, o, quantized_axis::columnwise)));
      }
}

TEST(Fp8Quantize, BlockIntoReusesAKeptTensorAndWritesEveryByte) {
  // Larger, smaller, larger again, and another shape / format / axis: each result equals a fresh
  // reference, whatever the kept tensor held (stale codes and scales written over).
  fp8_tensor q, row, col;
  for (auto [rows, cols] : {std::pair<index_t, index_t>{300, 260}, {130, 140}, {300, 260}, {260, 300}}) {
    const block_views<float> v(rows, cols, 5);
    for (auto shape : {fp8_block_shape::block_1x128, fp8_block_shape::block_128x128}) {
      std::fill(q.codes().begin(), q.codes().end(), std::uint8_t{0xAA});
      std::fill(q.scale_inv().begin(), q.scale_inv().end(), std::numeric_limits<float>::quiet_NaN());
      const std::uint8_t* storage = q.codes().data();
      const bool same_shape = q.rows() == rows && q.cols() == cols && q.block_rows() == fp8_block_rows(shape);
      quantize_fp8_blockwise_into(v.row_major, fp8_format::e4m3, shape, {.power_2_scale = true}, q);
      EXPECT_TRUE(same(q, reference::quantize_fp8_blockwise(v.row_major, fp8_format::e4m3, shape)));
      if (same_shape) {
        EXPECT_EQ(q.codes().data(), storage) << "a kept tensor of the same shape is reused";
      }
      quantize_fp8_blockwise_into(v.row_major.transposed(), fp8_format::e5m2, shape, {}, q, quantized_axis::columnwise);
      EXPECT_TRUE(
          same(q, reference::quantize_fp8_blockwise(v.row_major.transposed(), fp8_format::e5m2, shape, {}, quantized_axis::columnwise)));
      EXPECT_EQ(q.axis(), quantized_axis::columnwise);
      std::fill(col.codes().begin(), col.codes().end(), std::uint8_t{0x55});
      quantize_fp8_blockwise_both_into(v.row_major, fp8_format::e4m3, shape, {.power_2_scale = true}, row, col);
      EXPECT_TRUE(same(row, reference::quantize_fp8_blockwise(v.row_major, fp8_format::e4m3, shape)));
      EXPECT_TRUE(same(col, reference::quantize_fp8_blockwise(v.row_major.transposed(), fp8_format::e4m3, shape, {.power_2_scale = true},
                                                              quantized_axis::columnwise)));
    }
  }
}

TEST(Fp8Quantize, BlockNonFiniteInputLeavesKeptTensorsUntouched) {
  const block_views<float> v(130, 140, 9);
  fp8_tensor row, col;
  quantize_fp8_blockwise_both_into(v.row_major, fp8_format::e4m3, fp8_block_shape::block_1x128, {.power_2_scale = true}, row, col);
  const fp8_tensor row_before = row, col_before = col;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    std::vector<float> x = v.values;
    x[140 * 129 + 139] = bad;  // the last element: found only after every tile is done, if it were found in the pass
    const auto xv = matrix_view<const float>::row_major(x.data(), 130, 140);
    EXPECT_THROW(quantize_fp8_blockwise_both_into(xv, fp8_format::e4m3, fp8_block_shape::block_1x128, {.power_2_scale = true}, row, col),
                 non_finite_error);
    EXPECT_THROW(quantize_fp8_blockwise_into(xv.transposed(), fp8_format::e4m3, fp8_block_shape::block_128x128, {}, col), non_finite_error);
    EXPECT_TRUE(same(row, row_before));
    EXPECT_TRUE(same(col, col_before));
  }
}

TEST(Fp8Quantize, DequantizeAndBadInput) {
  const std::vector<float> x = {2.0f, -0.5f, 96.0f, 0.0f};
  const auto v = matrix_view<const float>::row_major(x.data(), 2, 2);
  const auto q = quantize_fp8_blockwise(v, fp8_format::e4m3, fp8_block_shape::block_1x128);
  std::vector<float> out(4);
  dequantize(q, matrix_view<float>::row_major(out.data(), 2, 2));
  EXPECT_EQ(out, x);  // each value exact in its block's E4M3 grid
  std::vector<float> bad = x;
  bad[1] = std::nanf("");
  const auto bv = matrix_view<const float>::row_major(bad.data(), 2, 2);
  EXPECT_THROW(quantize_fp8_current(bv, fp8_format::e4m3), non_finite_error);
  EXPECT_THROW(quantize_fp8_blockwise(bv, fp8_format::e4m3, fp8_block_shape::block_1x128), non_finite_error);
  try {
    quantize_fp8_with_scale(v, fp8_format::e4m3, 0.0f);
    ADD_FAILURE();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
  EXPECT_THROW(dequantize(q, matrix_view<float>::row_major(out.data(), 1, 4)), error);
}

// fp8_non_finite::te_satfinite, TE's delayed-scaling cast (vectorized_pointwise.h unary_kernel:
// amax = fmaxf(|x|, amax), static_cast to __nv_fp8_e4m3 / e5m2 with __NV_SATFINITE). The codes
// of Inf, -Inf and NaN are what an H100's cvt.rn.satfinite.{e4m3,e5m2}x2.f32 wrote (torch 2.11,
// tests/golden/producers/run_te_compiled_update.py, log line "PTX cvt.rn.satfinite"): E4M3 0x7E,
// 0xFE, 0x7F; E5M2 0x7B, 0xFB, 0x7F.
TEST(Fp8Quantize, NonFiniteInputAsTesDelayedScalingCast) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {2.0f, inf, -inf, nan, -1.5f, 0.25f};
  const auto v = matrix_view<const float>::row_major(x.data(), 2, 3);
  struct expected_codes {
    fp8_format format;
    std::uint8_t inf, minus_inf, nan;
  };
  for (const expected_codes e : {expected_codes{fp8_format::e4m3, 0x7E, 0xFE, 0x7F}, expected_codes{fp8_format::e5m2, 0x7B, 0xFB, 0x7F}}) {
    for (const fp8_tensor& q :
         {quantize_fp8_with_scale(v, e.format, 2.0f, quantized_axis::rowwise, fp8_non_finite::te_satfinite),
          reference::quantize_fp8_with_scale(v, e.format, 2.0f, quantized_axis::rowwise, fp8_non_finite::te_satfinite)}) {
      EXPECT_EQ(q.code(0, 1), e.inf);
      EXPECT_EQ(q.code(0, 2), e.minus_inf);
      EXPECT_EQ(q.code(1, 0), e.nan);
      // Finite elements as the finite rule gives them: fp8(x * scale).
      EXPECT_EQ(q.code(0, 0), fp8_encode(4.0f, e.format));
      EXPECT_EQ(q.code(1, 1), fp8_encode(-3.0f, e.format));
      EXPECT_EQ(q.code(1, 2), fp8_encode(0.5f, e.format));
      EXPECT_EQ(q.amax(), inf);  // fmaxf keeps the Inf and ignores the NaN
      EXPECT_EQ(q.scale_inv()[0], 0.5f);
    }
    // The default still refuses, naming the first non-finite element.
    EXPECT_THROW(quantize_fp8_with_scale(v, e.format, 2.0f), non_finite_error);
    EXPECT_THROW(reference::quantize_fp8_with_scale(v, e.format, 2.0f), non_finite_error);
  }
  // NaN without Inf: the amax is the largest finite |x|; all NaN gives 0.
  const std::vector<float> y = {nan, -5.0f, 3.0f, nan};
  const auto w = matrix_view<const float>::row_major(y.data(), 2, 2);
  EXPECT_EQ(quantize_fp8_with_scale(w, fp8_format::e4m3, 1.0f, quantized_axis::rowwise, fp8_non_finite::te_satfinite).amax(), 5.0f);
  const std::vector<float> all_nan(4, nan);
  const auto n = matrix_view<const float>::row_major(all_nan.data(), 2, 2);
  const fp8_tensor qn = quantize_fp8_with_scale(n, fp8_format::e5m2, 1.0f, quantized_axis::rowwise, fp8_non_finite::te_satfinite);
  EXPECT_EQ(qn.amax(), 0.0f);
  for (std::uint8_t code : qn.codes()) EXPECT_EQ(code, 0x7F);
}

TEST(Fp8Quantize, NonFiniteFastEqualsReference) {
  // Across the parallel threshold, bf16 and transposed views, NaN and +-Inf sprinkled in; a
  // finite-only tensor gives the same tensor under either policy.
  for (auto [rows, cols] : {std::pair<index_t, index_t>{3, 7}, {300, 260}}) {
    auto x = test::random_values(rows * cols, unsigned(rows * cols), {.sigma = 3.0});
    const auto clean = matrix_view<const float>::row_major(x.data(), rows, cols);
    for (fp8_format f : {fp8_format::e4m3, fp8_format::e5m2})
      EXPECT_TRUE(same(quantize_fp8_with_scale(clean, f, 5.0f, quantized_axis::rowwise, fp8_non_finite::te_satfinite),
                       quantize_fp8_with_scale(clean, f, 5.0f)));
    for (std::size_t i = 0; i < x.size(); i += 97)
      x[i] = i % 3 == 0 ? std::numeric_limits<float>::quiet_NaN() : (i % 3 == 1 ? 1.0f : -1.0f) * std::numeric_limits<float>::infinity();
    const auto v = matrix_view<const float>::row_major(x.data(), rows, cols);
    std::vector<bf16> xb;
    for (float value : x) xb.push_back(bf16::from_float(value));
    const auto vb = matrix_view<const bf16>::row_major(xb.data(), rows, cols);
    for (fp8_format f : {fp8_format::e4m3, fp8_format::e5m2}) {
      const auto te = fp8_non_finite::te_satfinite;
      EXPECT_TRUE(same(quantize_fp8_with_scale(v, f, 5.0f, quantized_axis::rowwise, te),
                       reference::quantize_fp8_with_scale(v, f, 5.0f, quantized_axis::rowwise, te)));
      EXPECT_TRUE(same(quantize_fp8_with_scale(vb.transposed(), f, 0.5f, quantized_axis::columnwise, te),
                       reference::quantize_fp8_with_scale(vb.transposed(), f, 0.5f, quantized_axis::columnwise, te)));
    }
  }
}

}  // namespace scaling_fp8_quantize_test
}  // namespace
}  // namespace nvfp4
