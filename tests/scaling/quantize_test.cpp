// Tests for nvfp4/scaling/quantize.hpp: the public entry points run the SIMD + OpenMP fast path
// (nvfp4/scaling/detail/fast_quantize.hpp, nvfp4/simd/*); it must equal nvfp4::reference bit for bit
// for every format, input type, shape, layout, distribution and thread count. Bad input too.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/scaling/quantize.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace scaling_quantize_test {

// ---- inputs ---------------------------------------------------------------------------------

enum class distribution { normal, heavy_tailed, tiny, huge, zero_blocks, ties, wide_range };

const char* distribution_name(distribution d) {
  switch (d) {
    case distribution::normal:
      return "normal";
    case distribution::heavy_tailed:
      return "heavy_tailed";
    case distribution::tiny:
      return "tiny";
    case distribution::huge:
      return "huge";
    case distribution::zero_blocks:
      return "zero_blocks";
    case distribution::ties:
      return "ties";
    case distribution::wide_range:
      return "wide_range";
  }
  return "?";
}

/// A rows x cols matrix (row-major, logical order) of the given distribution.
std::vector<float> make_values(distribution d, index_t rows, index_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (index_t r = 0; r < rows; ++r) {
    // Per-row scale exponent changes every 16 columns, so blocks differ in magnitude.
    int block_exponent = 0;
    bool zero_block = false;
    for (index_t c = 0; c < cols; ++c) {
      if (c % 16 == 0) {
        block_exponent = static_cast<int>(rng() % 9) - 4;
        zero_block = rng() % 3 == 0;
      }
      float x = 0.0f;
      switch (d) {
        case distribution::normal:
          x = normal(rng);
          break;
        case distribution::heavy_tailed:
          // Student-t like tails, plus rare outliers four orders of magnitude up.
          x = normal(rng) / std::max(1e-3f, std::sqrt(uniform(rng)));
          if (rng() % 200 == 0) x *= 1e4f;
          break;
        case distribution::tiny:
          x = normal(rng) * (rng() % 2 ? 1e-39f : 1e-37f);
          break;  // subnormal and near it
        case distribution::huge:
          x = normal(rng) * 1e30f;
          break;
        case distribution::zero_blocks:
          x = zero_block ? (rng() % 2 ? -0.0f : 0.0f) : normal(rng);
          if (rng() % 7 == 0) x = -0.0f;
          break;
        case distribution::ties: {
          // m * 2^k / 4: with the tensor scale 1 (amax 2688 below) and power-of-two block scales,
          // scaled elements land exactly on E2M1 midpoints (0.25, 0.75, ..., 5) and E4M3 ties.
          const int m = static_cast<int>(rng() % 49) - 24;
          x = std::ldexp(static_cast<float>(m) / 4.0f, block_exponent);
          break;
        }
        case distribution::wide_range: {
          // Log-uniform over 2^-149 .. 2^127: blocks whose scale is zero (factor FLT_MAX, so
          // x * factor overflows to Inf and saturates), subnormals, near-FLT_MAX values.
          const int e = static_cast<int>(rng() % 277) - 149;
          x = std::ldexp(1.0f + uniform(rng), e);
          if (!std::isfinite(x)) x = FLT_MAX;
          if (rng() % 2) x = -x;
          break;
        }
      }
      v[static_cast<std::size_t>(r * cols + c)] = x;
    }
  }
  if (d == distribution::ties && !v.empty()) v[0] = 2688.0f;
  return v;
}

enum class layout { row_major, padded_row_major, column_major, transposed_padded, strided };

const char* layout_name(layout l) {
  switch (l) {
    case layout::row_major:
      return "row_major";
    case layout::padded_row_major:
      return "padded_row_major";
    case layout::column_major:
      return "column_major";
    case layout::transposed_padded:
      return "transposed_padded";
    case layout::strided:
      return "strided";
  }
  return "?";
}

/// Storage holding `values` (rows x cols, logical row-major) in a layout, and its view.
template <class T>
struct stored_matrix {
  std::vector<T> storage;
  matrix_view<const T> view;
};

template <class T>
T convert(float x) {
  if constexpr (std::is_same_v<T, bf16>) {
    const bf16 b = bf16::from_float(x);
    // Finite values beyond bf16's range would round to Inf: keep them finite (bf16 max).
    if (std::isfinite(x) && !std::isfinite(b.to_float()))
      return bf16::from_bits(static_cast<std::uint16_t>((b.bits() & 0x8000u) | 0x7F7Fu));
    return b;
  } else {
    return x;
  }
}

template <class T>
stored_matrix<T> store(const std::vector<float>& values, index_t rows, index_t cols, layout l) {
  index_t row_stride = cols;
  index_t col_stride = 1;
  index_t size = rows * cols;
  switch (l) {
    case layout::row_major:
      break;
    case layout::padded_row_major:
      row_stride = cols + 5;
      size = rows * row_stride;
      break;
    case layout::column_major:
      row_stride = 1;
      col_stride = rows;
      break;
    case layout::transposed_padded:  // the transpose of a row-major cols x (rows + 3) buffer
      row_stride = 1;
      col_stride = rows + 3;
      size = cols * col_stride;
      break;
    case layout::strided:
      row_stride = 2 * cols;
      col_stride = 2;
      size = 2 * rows * cols;
      break;
  }
  stored_matrix<T> m;
  // Unused padding holds NaN: a kernel that reads outside the view shows up as a mismatch.
  m.storage.assign(static_cast<std::size_t>(size), convert<T>(std::numeric_limits<float>::quiet_NaN()));
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c)
      m.storage[static_cast<std::size_t>(r * row_stride + c * col_stride)] = convert<T>(values[static_cast<std::size_t>(r * cols + c)]);
  m.view = matrix_view<const T>(m.storage.data(), rows, cols, row_stride, col_stride);
  return m;
}

// ---- comparison -----------------------------------------------------------------------------

using test::set_threads;

template <class Format>
void expect_identical(const quantized_tensor<Format>& fast, const quantized_tensor<Format>& ref) {
  ASSERT_EQ(fast.rows(), ref.rows());
  ASSERT_EQ(fast.cols(), ref.cols());
  EXPECT_EQ(fast.axis(), ref.axis());
  EXPECT_EQ(std::bit_cast<std::uint32_t>(fast.amax()), std::bit_cast<std::uint32_t>(ref.amax()));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(fast.encode_scale()), std::bit_cast<std::uint32_t>(ref.encode_scale()));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(fast.decode_scale()), std::bit_cast<std::uint32_t>(ref.decode_scale()));
  ASSERT_EQ(fast.data().size(), ref.data().size());
  ASSERT_EQ(fast.scales().size(), ref.scales().size());
  std::size_t data_mismatches = 0, first_data = 0;
  for (std::size_t i = 0; i < fast.data().size(); ++i)
    if (fast.data()[i].bits() != ref.data()[i].bits() && data_mismatches++ == 0) first_data = i;
  EXPECT_EQ(data_mismatches, 0u) << "first at storage unit " << first_data << ": "
                                 << (data_mismatches ? int(fast.data()[first_data].bits()) : 0) << " vs "
                                 << (data_mismatches ? int(ref.data()[first_data].bits()) : 0);
  std::size_t scale_mismatches = 0, first_scale = 0;
  for (std::size_t i = 0; i < fast.scales().size(); ++i)
    if (fast.scales()[i].bits() != ref.scales()[i].bits() && scale_mismatches++ == 0) first_scale = i;
  EXPECT_EQ(scale_mismatches, 0u) << "first at scale " << first_scale;
}

std::size_t count_bit_mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i]);
  return n;
}

template <class Format>
void expect_same_dequantization(const quantized_tensor<Format>& q) {
  std::vector<float> expected(static_cast<std::size_t>(q.rows() * q.cols()));
  reference::dequantize(q, matrix_view<float>::row_major(expected.data(), q.rows(), q.cols()));
  EXPECT_EQ(count_bit_mismatches(dequantize(q), expected), 0u) << "row-major output";
  // A column-major output goes through the kernel's row buffer and a strided copy.
  std::vector<float> column_major(expected.size());
  dequantize(q, matrix_view<float>::column_major(column_major.data(), q.rows(), q.cols()));
  std::vector<float> as_row_major(expected.size());
  for (index_t r = 0; r < q.rows(); ++r)
    for (index_t c = 0; c < q.cols(); ++c)
      as_row_major[static_cast<std::size_t>(r * q.cols() + c)] = column_major[static_cast<std::size_t>(c * q.rows() + r)];
  EXPECT_EQ(count_bit_mismatches(as_row_major, expected), 0u) << "column-major output";
}

/// The format under test, its MX scale rule, and the input element type.
template <class FormatT, mx_scale_rule Rule, class Input>
struct config {
  using format = FormatT;
  using input = Input;
  static constexpr mx_scale_rule rule = Rule;
};

template <class Config>
class FastQuantize : public ::testing::Test {};

using configs = ::testing::Types<config<nvfp4_1x16, mx_scale_rule::ocp_floor, float>, config<nvfp4_1x16, mx_scale_rule::ocp_floor, bf16>,
                                 config<nvfp4_16x16, mx_scale_rule::ocp_floor, float>, config<nvfp4_16x16, mx_scale_rule::ocp_floor, bf16>,
                                 config<mxfp4, mx_scale_rule::ocp_floor, float>, config<mxfp4, mx_scale_rule::te_ceil, bf16>,
                                 config<mxfp4, mx_scale_rule::te_ceil, float>, config<mxfp4, mx_scale_rule::ocp_floor, bf16>,
                                 config<mxfp8, mx_scale_rule::ocp_floor, float>, config<mxfp8, mx_scale_rule::te_ceil, bf16>,
                                 config<mxfp8, mx_scale_rule::te_ceil, float>, config<mxfp8, mx_scale_rule::ocp_floor, bf16>>;
TYPED_TEST_SUITE(FastQuantize, configs);

struct shape {
  index_t rows;
  index_t cols;
};

template <class Config>
void check_case(const std::vector<float>& values, shape s, layout l) {
  using format = typename Config::format;
  using input = typename Config::input;
  const auto stored = store<input>(values, s.rows, s.cols, l);
  const auto x = stored.view;
  quantize_options options;
  options.mx_rule = Config::rule;

  const float ref_amax = reference::amax(x);
  const auto ref = reference::quantize_with_amax<format>(x, ref_amax, options);
  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    set_threads(threads);
    const float fast_amax = amax(x);
    EXPECT_EQ(std::bit_cast<std::uint32_t>(fast_amax), std::bit_cast<std::uint32_t>(ref_amax));
    EXPECT_TRUE(all_finite(x));
    expect_identical(quantize<format>(x, options), ref);
    // quantize_into over a kept tensor full of other bytes writes every one of them.
    const std::vector<std::uint8_t> junk_data(ref.data().size(), 0xA7), junk_scales(ref.scales().size(), 0x5B);
    auto reused = quantized_tensor<format>::from_bytes(x.rows(), x.cols(), junk_data, junk_scales);
    quantize_into(x, reused, options);
    expect_identical(reused, ref);
    options.axis = quantized_axis::columnwise;  // recorded, not applied: the data is the view's
    expect_identical(quantize_with_amax<format>(x, ref_amax, options), reference::quantize_with_amax<format>(x, ref_amax, options));
    options.axis = quantized_axis::rowwise;
    expect_same_dequantization(ref);
  }
  set_threads(2);
}

TYPED_TEST(FastQuantize, MatchesReferenceBitForBit) {
  // 3 x 16400: rows too long to widen whole (bf16 goes through 512-column pieces; see
  // max_widened_panel_floats), with a partial last block. 1100 x 56: in the layouts with
  // contiguous columns, the NVFP4 1x16 columnwise walk's five chunks of view rows
  // (detail/column_bands.hpp), a band of one block beside one of two, and the rows and
  // the partial block it leaves to the row kernel; 128 x 4096 there: four groups of bands.
  const shape shapes[] = {{0, 0}, {0, 7}, {5, 0}, {1, 1}, {1, 15}, {17, 33}, {33, 47}, {128, 4096}, {300, 300}, {3, 16400}, {1100, 56}};
  const distribution distributions[] = {distribution::normal,      distribution::heavy_tailed, distribution::tiny,      distribution::huge,
                                        distribution::zero_blocks, distribution::ties,         distribution::wide_range};
  const layout layouts[] = {layout::row_major, layout::padded_row_major, layout::column_major, layout::transposed_padded, layout::strided};
  unsigned seed = 1;
  for (const shape s : shapes) {
    const bool large = s.rows * s.cols > 100000;
    for (const distribution d : distributions) {
      // The large shape (the parallel, full-width path) with fewer distributions keeps this quick.
      if (large && d != distribution::normal && d != distribution::ties && d != distribution::wide_range) continue;
      const auto values = make_values(d, s.rows, s.cols, seed++);
      for (const layout l : layouts) {
        if (large && l == layout::strided) continue;
        SCOPED_TRACE(std::to_string(s.rows) + "x" + std::to_string(s.cols) + " " + distribution_name(d) + " " + layout_name(l));
        check_case<TypeParam>(values, s, l);
        if (::testing::Test::HasFailure()) return;  // one failing case says enough
      }
    }
  }
}

TYPED_TEST(FastQuantize, ResultDoesNotDependOnThreadCount) {
  using format = typename TypeParam::format;
  const auto values = make_values(distribution::heavy_tailed, 300, 4100, 77);
  const auto stored = store<typename TypeParam::input>(values, 300, 4100, layout::transposed_padded);
  set_threads(1);
  const auto one = quantize<format>(stored.view);
  for (int threads : {2, 3, 5}) {
    set_threads(threads);
    expect_identical(quantize<format>(stored.view), one);
  }
  set_threads(2);
}

TYPED_TEST(FastQuantize, RowwiseAndColumnwiseCopies) {
  using format = typename TypeParam::format;
  const auto values = make_values(distribution::normal, 70, 90, 5);
  const auto stored = store<typename TypeParam::input>(values, 70, 90, layout::row_major);
  const auto pair = quantize_rowwise_and_columnwise<format>(stored.view);
  const float global_amax = reference::amax(stored.view);
  quantize_options options;
  options.axis = quantized_axis::columnwise;
  expect_identical(pair.rowwise, reference::quantize_with_amax<format>(stored.view, global_amax));
  expect_identical(pair.columnwise, reference::quantize_with_amax<format>(stored.view.transposed(), global_amax, options));
}

// ---- bad input ------------------------------------------------------------------------------

template <class T>
class FastQuantizeBadInput : public ::testing::Test {};
using input_types = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(FastQuantizeBadInput, input_types);

template <class F>
void expect_non_finite_at(F&& call, index_t row, index_t col) {
  try {
    call();
    ADD_FAILURE() << "no exception";
  } catch (const non_finite_error& e) {
    EXPECT_EQ(e.code(), errc::non_finite_input);
    EXPECT_EQ(e.row(), row);
    EXPECT_EQ(e.col(), col);
  }
}

TYPED_TEST(FastQuantizeBadInput, NonFiniteIsReportedWhereItIs) {
  using T = TypeParam;
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::quiet_NaN()};
  for (const shape s : {shape{3, 5}, shape{300, 300}}) {
    for (const float special : specials) {
      for (const layout l : {layout::row_major, layout::transposed_padded, layout::strided}) {
        SCOPED_TRACE(std::string(layout_name(l)) + " " + std::to_string(s.rows));
        auto values = make_values(distribution::normal, s.rows, s.cols, 3);
        const index_t row = s.rows - 2, col = s.cols / 2;
        values[static_cast<std::size_t>(row * s.cols + col)] = special;
        // A second one later in row-major order must not be the one reported.
        values[static_cast<std::size_t>((s.rows - 1) * s.cols + 1)] = std::numeric_limits<float>::quiet_NaN();
        const auto stored = store<T>(values, s.rows, s.cols, l);
        for (int threads : {1, 2}) {
          set_threads(threads);
          expect_non_finite_at([&] { (void)amax(stored.view); }, row, col);
          EXPECT_FALSE(all_finite(stored.view));
          expect_non_finite_at([&] { (void)quantize<nvfp4_1x16>(stored.view); }, row, col);
          expect_non_finite_at([&] { (void)quantize<nvfp4_16x16>(stored.view); }, row, col);
          expect_non_finite_at([&] { (void)quantize<mxfp4>(stored.view); }, row, col);
          expect_non_finite_at([&] { (void)quantize<mxfp8>(stored.view); }, row, col);
          expect_non_finite_at([&] { (void)quantize_rowwise_and_columnwise<nvfp4_1x16>(stored.view); }, row, col);
        }
        set_threads(2);
      }
    }
  }
}

TEST(FastDequantizeBadInput, ShapeMismatchWritesNothing) {
  const auto values = make_values(distribution::normal, 20, 40, 9);
  const auto q = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(values.data(), 20, 40));
  std::vector<float> out(20 * 41, 123.0f);
  try {
    dequantize(q, matrix_view<float>::row_major(out.data(), 20, 41));
    ADD_FAILURE() << "no exception";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::shape_mismatch);
  }
  for (float v : out) ASSERT_EQ(v, 123.0f);
  try {
    dequantize(q, matrix_view<float>(nullptr, 20, 40, 40, 1));
    ADD_FAILURE() << "no exception";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::null_pointer);
  }
}

TEST(QuantizeInto, WrongShapeAxisOrNonFiniteInputLeavesTheOutputAsItWas) {
  auto values = make_values(distribution::normal, 20, 64, 9);
  const auto x = matrix_view<const float>::row_major(values.data(), 20, 64);
  const auto first = quantize<nvfp4_1x16>(x);
  const auto expect_untouched = [&](const quantized_tensor<nvfp4_1x16>& q) {
    EXPECT_EQ(test::bytes_of(q), test::bytes_of(first));
    EXPECT_EQ(q.amax(), first.amax());
  };
  auto out = first;
  auto wide = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(values.data(), 10, 128));
  EXPECT_EQ(test::error_code_of([&] { quantize_into(x, wide, {}); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { quantize_into(x, out, {.axis = quantized_axis::columnwise}); }), errc::shape_mismatch);
  values[100] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(test::error_code_of([&] { quantize_into(x, out, {}); }), errc::non_finite_input);
  expect_untouched(out);
  // dequantize_into is dequantize into the caller's buffer.
  std::vector<float> a(20 * 64), b(20 * 64);
  dequantize_into(first, matrix_view<float>::row_major(a.data(), 20, 64));
  dequantize(first, matrix_view<float>::row_major(b.data(), 20, 64));
  EXPECT_EQ(a, b);
}

TEST(FastQuantizeBadInput, NegativeShapeAndNullData) {
  try {
    (void)amax(matrix_view<const float>(nullptr, 4, 4, 4, 1));
    ADD_FAILURE() << "no exception";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::null_pointer);
  }
  try {
    (void)quantize<nvfp4_1x16>(matrix_view<const float>(nullptr, -1, 4, 4, 1));
    ADD_FAILURE() << "no exception";
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
  }
}

// ---- hand-checked values through the fast path ---------------------------------------------

TEST(FastQuantize, HandWorkedNvfp4BlockAtVectorWidth) {
  // 32 elements, so both blocks go through full vectors. Tensor amax 2688 gives S_enc = 1.
  // Block 0: amax 2688 -> scale 448 (0x7E), factor 1/448: 2688 -> 6, 1344 -> 3, 224 -> 0.5.
  // Block 1: amax 12 -> d = 12 * RN(1/6) -> scale 2 (0x40), factor 0.5: 5 -> 2.5 -> tie -> 2
  // (code 4), 3.5 -> 1.75 -> tie -> 2 (code 4), -1.5 -> -0.75 -> tie -> -1 (code 0xA),
  // 0.5 -> 0.25 -> tie -> 0, 10 -> 5 -> tie -> 4 (code 6).
  std::vector<float> x(32, 0.0f);
  x[0] = 2688.0f;
  x[1] = 1344.0f;
  x[2] = 224.0f;
  x[16] = 12.0f;
  x[17] = 5.0f;
  x[18] = 3.5f;
  x[19] = -1.5f;
  x[20] = 0.5f;
  x[21] = 10.0f;
  const auto q = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), 1, 32));
  EXPECT_EQ(q.scale(0, 0).bits(), 0x7E);
  EXPECT_EQ(q.scale(0, 1).bits(), 0x40);
  EXPECT_EQ(q.data()[0].bits(), 0x57);   // 6 (7) low, 3 (5) high
  EXPECT_EQ(q.data()[1].bits(), 0x01);   // 0.5 (1) low, 0 high
  EXPECT_EQ(q.data()[8].bits(), 0x47);   // 6 (7) low, 2 (4) high
  EXPECT_EQ(q.data()[9].bits(), 0xA4);   // 2 (4) low, -1 (0xA) high
  EXPECT_EQ(q.data()[10].bits(), 0x60);  // 0 low, 4 (6) high
}

// ---- preconditions and empty shapes (docs/errors.md) --------------------------------------

template <class F>
errc code_of(F&& call) {
  try {
    call();
  } catch (const error& e) {
    return e.code();
  }
  return errc{};
}

TEST(QuantizeWithAmax, RejectsNonFiniteInputAndAnAmaxThatIsNotAFiniteNonNegativeNumber) {
  std::vector<float> x(2 * 32, 1.0f);
  const auto view = matrix_view<const float>::row_major(x.data(), 2, 32);
  for (const float bad : {NAN, INFINITY, -INFINITY, -1.0f, -FLT_TRUE_MIN}) {
    EXPECT_EQ(code_of([&] { (void)quantize_with_amax<nvfp4_1x16>(view, bad); }), errc::invalid_argument) << bad;
    EXPECT_EQ(code_of([&] { (void)quantize_with_amax<mxfp4>(view, bad); }), errc::invalid_argument) << bad;
    EXPECT_EQ(code_of([&] { (void)quantize_with_amax<nvfp4_1x16>(view, bad, {.rounding = rounding_mode::stochastic}); }),
              errc::invalid_argument)
        << bad;
  }
  for (const float bad : {NAN, INFINITY}) {
    x[32 + 19] = bad;
    for (const auto rounding : {rounding_mode::nearest_even, rounding_mode::stochastic}) {
      try {
        (void)quantize_with_amax<nvfp4_1x16>(view, 1.0f, {.rounding = rounding});
        ADD_FAILURE() << "no error for " << bad;
      } catch (const non_finite_error& e) {
        EXPECT_EQ(e.row(), 1);
        EXPECT_EQ(e.col(), 19);
      }
    }
    EXPECT_EQ(code_of([&] { (void)quantize_with_amax<mxfp8>(view, 1.0f); }), errc::non_finite_input);
  }
}

TEST(QuantizeWithAmax, AnAmaxBelowTheDataSaturatesAsDelayedScalingDoes) {
  // amax 0.5 for data of 1.0: S_enc = 2688 / 0.5 = 5376; block amax 1 -> 1 * 5376 / 6 = 896 ->
  // UE4M3 saturates at 448 (0x7E); factor 5376 / 448 = 12 -> E2M1 saturates at 6 (code 7); each
  // element dequantizes to 6 * 448 / 5376 = 0.5, i.e. it is clipped to the amax.
  std::vector<float> x(16, 1.0f);
  const auto q = quantize_with_amax<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), 1, 16), 0.5f);
  EXPECT_EQ(q.scale(0, 0).bits(), 0x7E);
  for (auto unit : q.data()) EXPECT_EQ(unit.bits(), 0x77);
  for (float v : dequantize(q)) EXPECT_EQ(v, 0.5f);
}

TEST(QuantizeEmpty, AHugeDimensionBesideAZeroOneReturnsAtOnce) {
  const index_t huge = max_element_count;  // 2^40: a loop over it would take minutes
  for (const auto& [rows, cols] : {std::pair{huge, index_t{0}}, std::pair{index_t{0}, huge}}) {
    const auto view = matrix_view<const float>::row_major(nullptr, rows, cols);
    EXPECT_EQ(amax(view), 0.0f);
    const auto q = quantize<nvfp4_1x16>(view);
    EXPECT_EQ(q.rows(), rows);
    EXPECT_EQ(q.cols(), cols);
    EXPECT_EQ(q.amax(), 0.0f);
    EXPECT_EQ(q.decode_scale(), 1.0f);
    EXPECT_TRUE(q.data().empty() && q.scales().empty());
    EXPECT_TRUE(dequantize(q).empty());
    dequantize(q, matrix_view<float>::row_major(nullptr, rows, cols));
    const auto with_amax = quantize_with_amax<mxfp4>(view, 3.0f, {.rounding = rounding_mode::stochastic});
    EXPECT_EQ(with_amax.rows(), rows);
    EXPECT_EQ(with_amax.amax(), 3.0f);
    const auto pair = quantize_rowwise_and_columnwise<nvfp4_16x16>(matrix_view<const bf16>::row_major(nullptr, rows, cols));
    EXPECT_EQ(pair.columnwise.rows(), cols);
    EXPECT_EQ(code_of([&] { (void)quantize<mxfp8>(view, {.rounding = rounding_mode::stochastic}); }), errc::unsupported);
  }
  // Above the documented limit: a clear error, not an allocation or a loop.
  EXPECT_EQ(code_of([&] { (void)quantize<nvfp4_1x16>(matrix_view<const float>::row_major(nullptr, huge * 2, 0)); }),
            errc::invalid_argument);
  EXPECT_EQ(code_of([&] { quantized_tensor<nvfp4_1x16> q(huge, huge); }), errc::invalid_argument);
  EXPECT_EQ(code_of([&] { quantized_tensor<nvfp4_1x16> q(huge, -1); }), errc::invalid_argument);
}

}  // namespace scaling_quantize_test
}  // namespace
}  // namespace nvfp4
