// Tests of nvfp4/transforms/hadamard.hpp: orthogonality of T (exact integers), the transform of
// unit vectors, the fast FWHT path against the exact reference and against an independent dense
// long-double product with a decode-and-search bf16 rounding, for every size; inverse; outlier
// spreading; bad input.
// NVFP4_TEST_ALL_ISAS
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "nvfp4/metrics/error_metrics.hpp"
#include "nvfp4/transforms/hadamard.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace transforms_hadamard_test {

const int sizes[] = {16, 32, 64, 128, 256};

TEST(Hadamard, SignedHadamardRowsAreOrthogonalExactly) {
  for (int n : sizes) {
    const auto t = hadamard_transform::random(n, 3);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        long dot = 0;
        for (int k = 0; k < n; ++k) dot += t.unscaled_entry(a, k) * t.unscaled_entry(b, k);
        ASSERT_EQ(dot, a == b ? n : 0) << n << ": rows " << a << ", " << b;
      }
  }
}

TEST(Hadamard, TeTransformOfUnitVectorsIsItsRows) {
  // T = diag(s) H / 4 with H[i][j] = (-1)^popcount(i & j): row i is s_i * H[i][.] / 4 (exact in bf16).
  const auto t = hadamard_transform::te_default();
  for (int i = 0; i < 16; ++i) {
    std::vector<float> e(16, 0.0f);
    e[static_cast<std::size_t>(i)] = 1.0f;
    std::vector<bf16> y(16);
    hadamard_rows(matrix_view<const float>::row_major(e.data(), 1, 16), t, matrix_view<bf16>::row_major(y.data(), 1, 16));
    for (int j = 0; j < 16; ++j) {
      const int h = (__builtin_popcount(static_cast<unsigned>(i & j)) & 1) ? -1 : 1;
      EXPECT_EQ(y[static_cast<std::size_t>(j)].to_float(), te_rht_signs[static_cast<std::size_t>(i)] * h * 0.25f) << i << "," << j;
    }
  }
}

/// The bf16 value nearest to v (ties to even code), by search over the candidates around it.
float nearest_bf16(long double v) {
  const float f = static_cast<float>(v);
  const std::uint16_t base = bf16::from_float(f).bits();
  float best = 0;
  long double best_distance = INFINITY;
  for (int d = -2; d <= 2; ++d) {
    const bf16 candidate = bf16::from_bits(static_cast<std::uint16_t>(base + d));
    const long double distance = std::fabs(static_cast<long double>(candidate.to_float()) - v);
    if (distance < best_distance || (distance == best_distance && (candidate.bits() & 1) == 0)) {
      best = candidate.to_float();
      best_distance = distance;
    }
  }
  return best;
}

template <class T>
std::vector<T> make_input(index_t rows, index_t cols, unsigned seed, double log_spread) {
  return test::random_values<T>(rows * cols, seed, {.log2_spread = log_spread, .zero_every = 37});
}

template <class T>
class HadamardTyped : public ::testing::Test {};
using input_types = ::testing::Types<float, bf16>;
TYPED_TEST_SUITE(HadamardTyped, input_types);

// Moderate exponent spread: the long-double dense product is exact for n <= 256 (64-bit
// significand), so rounding it by search is an independent oracle (sizes 16, 64, 256).
TYPED_TEST(HadamardTyped, EqualsDenseLongDoubleProduct) {
  using T = TypeParam;
  for (int n : {16, 64, 256}) {
    const auto t = hadamard_transform::random(n, 17);
    const index_t rows = 9, cols = 2 * n;
    const auto values = make_input<T>(rows, cols, static_cast<unsigned>(n), 1.0);
    const auto x = matrix_view<const T>::row_major(values.data(), rows, cols);
    std::vector<bf16> y(static_cast<std::size_t>(rows * cols));
    hadamard_rows(x, t, matrix_view<bf16>::row_major(y.data(), rows, cols));
    const long double scale = 1.0L / std::sqrt(static_cast<long double>(n));
    for (index_t r = 0; r < rows; ++r)
      for (index_t c0 = 0; c0 < cols; c0 += n)
        for (int j = 0; j < n; ++j) {
          long double sum = 0;
          for (int i = 0; i < n; ++i) sum += static_cast<long double>(t.unscaled_entry(i, j)) * to_float32(x(r, c0 + i));
          ASSERT_EQ(y[static_cast<std::size_t>(r * cols + c0 + j)].to_float(), nearest_bf16(sum * scale)) << n << " " << r << " " << c0 + j;
        }
  }
}

// The FWHT fast path (with its exactness guard and exact fallback) equals the scalar reference for
// every size, direction, layout, exponent spread (including spreads that force the fallback) and
// thread count.
TYPED_TEST(HadamardTyped, FastPathEqualsReference) {
  using T = TypeParam;
  for (int n : sizes)
    for (double spread : {0.0, 4.0, 20.0})
      for (auto direction : {hadamard_direction::forward, hadamard_direction::inverse}) {
        const auto t = hadamard_transform::random(n, static_cast<std::uint64_t>(n));
        const index_t rows = 2 * n, cols = 19;  // the transposed view has 19 rows (not a multiple of 8)
        const auto values = make_input<T>(rows, cols, static_cast<unsigned>(n + spread), spread);
        const auto source = matrix_view<const T>::row_major(values.data(), rows, cols);
        for (const auto x : {source.transposed(), matrix_view<const T>::row_major(values.data(), cols, rows)}) {
          std::vector<bf16> expected(static_cast<std::size_t>(x.size())), got(expected.size());
          reference::hadamard_rows(x, t, matrix_view<bf16>::row_major(expected.data(), x.rows(), x.cols()), direction);
          for (int threads : {1, 2}) {
            test::set_threads(threads);
            hadamard_rows(x, t, matrix_view<bf16>::row_major(got.data(), x.rows(), x.cols()), direction);
            ASSERT_EQ(got, expected) << "n " << n << " spread " << spread << " threads " << threads;
          }
        }
      }
}

/// A bf16-representable value with the given sign, binary exponent and random 8-bit significand.
float random_bf16_value(std::mt19937& gen, int exponent) {
  const float significand = 1.0f + static_cast<float>(gen() % 128) / 128.0f;
  const float v = std::ldexp(significand, exponent) * ((gen() & 1) ? -1.0f : 1.0f);
  return bf16::from_float(v).to_float();
}

/// The 16 elements of a block of pattern `pattern` (see GuardEdges).
std::vector<float> edge_block(int pattern, std::mt19937& gen) {
  std::vector<float> block(16, 0.0f);
  const int position = static_cast<int>(gen() % 16);
  auto span_block = [&](int top, int span) {  // one element at 2^top, one at 2^(top - span), the rest between
    for (int i = 0; i < 16; ++i) block[i] = random_bf16_value(gen, top - static_cast<int>(gen() % static_cast<unsigned>(span + 1)));
    block[position] = random_bf16_value(gen, top);
    block[(position + 5) % 16] = random_bf16_value(gen, top - span);
  };
  switch (pattern) {
    case 0:
      break;  // all +0
    case 1:
      std::fill(block.begin(), block.end(), -0.0f);
      break;  // all -0
    case 2:   // signed zeros and one value
      for (int i = 0; i < 16; ++i) block[i] = (gen() & 1) ? -0.0f : 0.0f;
      block[position] = random_bf16_value(gen, 3);
      break;
    case 3:
      span_block(2, 11);
      break;  // the float32 kernel's guard: spans 11 to 14 binades
    case 4:
      span_block(5, 12);
      break;
    case 5:
      span_block(-7, 13);
      break;
    case 6:
      span_block(0, 14);
      break;
    case 7:
      span_block(20, 40);
      break;  // the float64 fallback's guard: spans 40 to 43
    case 8:
      span_block(20, 41);
      break;
    case 9:
      span_block(20, 42);
      break;
    case 10:
      span_block(20, 43);
      break;
    case 11:  // bf16 subnormals (multiples of 2^-133) and tiny normals: outputs round to 0 or -0
      for (int i = 0; i < 16; ++i) block[i] = std::ldexp(static_cast<float>(gen() % 128), -133) * ((gen() & 1) ? -1.0f : 1.0f);
      block[position] = random_bf16_value(gen, -126);
      break;
    case 12:
      span_block(123, 2);
      break;  // partial sums up to 2^128: the float32 overflow guard's edge
    case 13:
      span_block(124, 1);
      break;
    case 14:  // bf16's largest finite values: outputs overflow to Inf
      for (int i = 0; i < 16; ++i) block[i] = bf16::from_bits(0x7F7F).to_float();
      block[position] = -block[position];
      break;
    default:
      for (int i = 0; i < 16; ++i) block[i] = random_bf16_value(gen, static_cast<int>(gen() % 5) - 3);
  }
  return block;
}

// Blocks built on each side of the fast paths' limits (see edge_block), in the columnwise layout
// the float32 kernel takes (16 rows of the view per register, 32 columns per step; odd tile
// counts, rows past the last panel of 16), both directions, two sign vectors, 1 and 2 threads.
TYPED_TEST(HadamardTyped, FastPathEqualsReferenceOnGuardEdges) {
  using T = TypeParam;
  constexpr int patterns = 16;
  for (const auto& [m, n] : {std::pair<index_t, index_t>{64, 40}, {48, 16}, {80, 35}, {16, 5}}) {
    std::mt19937 gen(static_cast<unsigned>(m * 100 + n));
    std::vector<T> values(static_cast<std::size_t>(m * n));
    for (index_t c = 0; c < n; ++c)
      for (index_t b = 0; b < m / 16; ++b) {
        const auto block = edge_block(static_cast<int>((c + 7 * b) % patterns), gen);
        for (int i = 0; i < 16; ++i) {
          const float v = block[static_cast<std::size_t>(i)];
          if constexpr (std::is_same_v<T, float>)
            values[static_cast<std::size_t>((16 * b + i) * n + c)] = v;
          else
            values[static_cast<std::size_t>((16 * b + i) * n + c)] = bf16::from_float(v);
        }
      }
    const auto source = matrix_view<const T>::row_major(values.data(), m, n);
    const auto x = source.transposed();  // the columnwise copy: blocks along the source's rows
    for (const auto& t : {hadamard_transform::te_default(), hadamard_transform::random(16, 99)})
      for (auto direction : {hadamard_direction::forward, hadamard_direction::inverse}) {
        std::vector<bf16> expected(static_cast<std::size_t>(x.size())), got(expected.size());
        reference::hadamard_rows(x, t, matrix_view<bf16>::row_major(expected.data(), x.rows(), x.cols()), direction);
        bool overflows = false;
        for (bf16 v : expected) overflows = overflows || (v.bits() & 0x7FFF) >= 0x7F80;
        for (int threads : {1, 2}) {
          test::set_threads(threads);
          std::fill(got.begin(), got.end(), bf16::from_bits(0x1234));
          if (overflows) {
            // Where the reference overflows to Inf, the public transform reports errc::overflow
            // and leaves its output as it was (docs/errors.md).
            try {
              hadamard_rows(x, t, matrix_view<bf16>::row_major(got.data(), x.rows(), x.cols()), direction);
              ADD_FAILURE() << "no overflow error";
            } catch (const error& e) {
              EXPECT_EQ(e.code(), errc::overflow) << e.what();
            }
            for (const bf16 v : got) ASSERT_EQ(v.bits(), 0x1234);
          } else {
            hadamard_rows(x, t, matrix_view<bf16>::row_major(got.data(), x.rows(), x.cols()), direction);
            for (std::size_t k = 0; k < got.size(); ++k)
              ASSERT_EQ(got[k].bits(), expected[k].bits()) << m << "x" << n << " element " << k / static_cast<std::size_t>(m) << ","
                                                           << k % static_cast<std::size_t>(m) << " threads " << threads;
          }
          if (direction == hadamard_direction::inverse) continue;
          // The quantized columnwise copy (for bf16, the fused path): as the reference quantizer
          // makes it from the reference transform, or the same overflow error.
          if (overflows) {
            try {
              (void)quantize_columnwise_rht(source, t);
              ADD_FAILURE() << "no overflow error";
            } catch (const error& e) {
              EXPECT_EQ(e.code(), errc::overflow) << e.what();
            }
            continue;
          }
          const auto expected_view = matrix_view<const bf16>::row_major(expected.data(), x.rows(), x.cols());
          const auto expected_q = reference::quantize_with_amax<nvfp4_1x16>(expected_view, reference::amax(expected_view));
          const auto got_q = quantize_columnwise_rht(source, t);
          ASSERT_EQ(got_q.amax(), expected_q.amax());
          for (std::size_t k = 0; k < got_q.data().size(); ++k) ASSERT_EQ(got_q.data()[k].bits(), expected_q.data()[k].bits()) << k;
          for (std::size_t k = 0; k < got_q.scales().size(); ++k) ASSERT_EQ(got_q.scales()[k].bits(), expected_q.scales()[k].bits()) << k;
        }
      }
  }
}

// Blocks made so that the float32 FWHT would go wrong, had its guard let them through (output 0 =
// (Σ s_i x_i) / 4 worked by hand). Column 0: span 13 binades; s_i x_i = 2^-13 (1 + 2^-7), -2^-13,
// thirteen times 1.4375 and 1.375; the exact sum 20.0625 + 2^-20 is just above the bf16 tie
// 20.0625, so y_0 rounds up to 5.03125; in float32 the 2^-20 is lost (a tie to even at the last
// stage) and y_0 would round to even, 5.0. Column 1: 16 terms of (255/128) 2^124 (exponent field
// 251): y_0 = (255/128) 2^126 is finite, but the float32 partial sums overflow. Column 2: the same
// at 2^123 (field 250, the largest the float32 kernel takes): y_0 = (255/128) 2^125. Other columns 0.
TEST(Hadamard, Float32KernelHandsOffWhatItCannotDoExactly) {
  const auto t = hadamard_transform::te_default();
  const index_t m = 16, n = 16;  // 16 columns: one register of the float32 kernel
  std::vector<bf16> values(static_cast<std::size_t>(m * n), bf16::from_float(0.0f));
  auto set = [&](index_t i, index_t c, float a) {  // x_i = s_i a_i
    values[static_cast<std::size_t>(i * n + c)] = bf16::from_float(static_cast<float>(t.sign(static_cast<int>(i))) * a);
  };
  set(0, 0, std::ldexp(1.0f + 1.0f / 128, -13));
  set(1, 0, -std::ldexp(1.0f, -13));
  for (index_t i = 2; i < 15; ++i) set(i, 0, 1.4375f);
  set(15, 0, 1.375f);
  for (index_t i = 0; i < 16; ++i) {
    set(i, 1, std::ldexp(255.0f / 128, 124));
    set(i, 2, std::ldexp(255.0f / 128, 123));
  }
  const auto x = matrix_view<const bf16>::row_major(values.data(), m, n);
  for (int threads : {1, 2}) {
    test::set_threads(threads);
    const auto transformed = rht_columnwise(x);
    EXPECT_EQ(transformed.values[0 * m].to_float(), 5.03125f);
    EXPECT_EQ(transformed.values[1 * m].to_float(), std::ldexp(255.0f / 128, 126));
    EXPECT_EQ(transformed.values[2 * m].to_float(), std::ldexp(255.0f / 128, 125));
    std::vector<bf16> expected(values.size());
    reference::hadamard_rows(x.transposed(), t, matrix_view<bf16>::row_major(expected.data(), n, m));
    EXPECT_EQ(transformed.values, expected);
  }
}

// The whole columnwise pipeline against the reference pipeline (reference transform, its amax,
// reference quantizer): values, scales and amax bit for bit, 1 and 2 threads. 48 x 1100: the
// columnwise walk's five chunks of source columns (detail/column_bands.hpp), a band of
// one block beside one of two, and the columns past the last vector; 1104 x 40: two groups of
// bands, the second holding three, one of them a single block.
TYPED_TEST(HadamardTyped, QuantizeColumnwiseRhtEqualsReferencePipeline) {
  using T = TypeParam;
  nvfp4_tensor kept;  // the into form's copy and transform, kept across shapes as a layer keeps them
  columnwise_rht scratch;
  for (const auto& [m, n] : {std::pair<index_t, index_t>{96, 80}, {32, 33}, {144, 17}, {48, 1100}, {1104, 40}}) {
    const auto values = make_input<T>(m, n, static_cast<unsigned>(m + n), 3.0);
    const auto x = matrix_view<const T>::row_major(values.data(), m, n);
    std::vector<bf16> transformed(static_cast<std::size_t>(m * n));
    const auto transformed_view = matrix_view<bf16>::row_major(transformed.data(), n, m);
    reference::hadamard_rows(x.transposed(), hadamard_transform::te_default(), transformed_view);
    const float expected_amax = reference::amax(matrix_view<const bf16>(transformed_view));
    quantize_options options;
    options.axis = quantized_axis::columnwise;
    const auto expected = reference::quantize_with_amax<nvfp4_1x16>(matrix_view<const bf16>(transformed_view), expected_amax, options);
    for (int threads : {1, 2}) {
      test::set_threads(threads);
      const auto got_transform = rht_columnwise(x);
      EXPECT_EQ(got_transform.values, transformed);
      EXPECT_EQ(got_transform.amax, expected_amax);
      const auto got = quantize_columnwise_rht(x);
      ASSERT_EQ(got.amax(), expected.amax());
      ASSERT_EQ(got.data().size(), expected.data().size());
      for (std::size_t k = 0; k < got.data().size(); ++k) ASSERT_EQ(got.data()[k].bits(), expected.data()[k].bits()) << k;
      for (std::size_t k = 0; k < got.scales().size(); ++k) ASSERT_EQ(got.scales()[k].bits(), expected.scales()[k].bits()) << k;
      quantize_columnwise_rht_into(x, hadamard_transform::te_default(), {}, kept, scratch);  // through the kept transform
      ASSERT_EQ(kept.amax(), expected.amax());
      ASSERT_EQ(test::bytes_of(kept), test::bytes_of(expected));
    }
  }
}

TYPED_TEST(HadamardTyped, InverseRecoversInputToBf16Rounding) {
  using T = TypeParam;
  for (int n : sizes) {
    const auto t = hadamard_transform::random(n, 5);
    const index_t rows = 8, cols = 4 * n;
    const auto values = make_input<T>(rows, cols, 1, 1.0);
    const auto x = matrix_view<const T>::row_major(values.data(), rows, cols);
    std::vector<bf16> y(static_cast<std::size_t>(rows * cols)), back(y.size());
    hadamard_rows(x, t, matrix_view<bf16>::row_major(y.data(), rows, cols));
    hadamard_rows(matrix_view<const bf16>::row_major(y.data(), rows, cols), t, matrix_view<bf16>::row_major(back.data(), rows, cols),
                  hadamard_direction::inverse);
    // Each bf16 rounding moves a vector by at most 2^-9 of its norm, T is orthogonal, so per block
    // |back - x| <= (2^-9 + 2^-9 (1 + 2^-9)) |x| (+ the fp32 input's own bf16 rounding, 2^-9 |x|).
    for (index_t r = 0; r < rows; ++r)
      for (index_t c0 = 0; c0 < cols; c0 += n) {
        double error = 0, norm = 0;
        for (int i = 0; i < n; ++i) {
          const double v = to_float32(x(r, c0 + i)), w = back[static_cast<std::size_t>(r * cols + c0 + i)].to_float();
          error += (w - v) * (w - v);
          norm += v * v;
        }
        EXPECT_LE(std::sqrt(error), 3.01 * std::ldexp(1.0, -9) * std::sqrt(norm)) << n;
      }
  }
}

// The fused quantizer's amax pass redoes a lane its float32 guard rejects only when the lane's
// bound sum |x| / 4 could reach the running max. Blocks of ±1 (outputs at most 4) around: a
// rejected block holding the tensor's max (2^10 with 2^-10 beside it: must be redone), rejected
// blocks far below the max (may be skipped), moved through every 7th block position so that
// either thread may meet them first or last; and NaN or Inf in an otherwise tiny rejected block,
// which no bound may skip.
TEST(Hadamard, FusedAmaxPassRedoesTheLanesThatCanHoldTheMax) {
  const index_t m = 64, n = 48;  // the columnwise copy is [48, 64]: 3 panels of 16 lanes, 4 blocks per lane
  std::mt19937 gen(5);
  std::vector<bf16> background(static_cast<std::size_t>(m * n));
  for (auto& v : background) v = bf16::from_float((gen() & 1) ? 1.0f : -1.0f);
  auto set_block = [&](std::vector<bf16>& values, index_t block_row, index_t column, float large, float tiny) {
    for (index_t i = 0; i < 16; ++i) values[static_cast<std::size_t>((16 * block_row + i) * n + column)] = bf16::from_float(0.5f);
    values[static_cast<std::size_t>((16 * block_row + 3) * n + column)] = bf16::from_float(large);
    values[static_cast<std::size_t>((16 * block_row + 11) * n + column)] = bf16::from_float(tiny);
  };
  for (index_t position = 0; position < (m / 16) * n; position += 7) {
    const index_t block_row = position % (m / 16), column = position / (m / 16);
    std::vector<bf16> values = background;
    set_block(values, block_row, column, std::ldexp(1.0f, 10), std::ldexp(1.0f, -10));              // the max
    set_block(values, (block_row + 1) % (m / 16), (column + 5) % n, 0.75f, std::ldexp(1.0f, -20));  // far below it
    set_block(values, (block_row + 2) % (m / 16), (column + 17) % n, 3.0f, std::ldexp(1.0f, -14));
    const auto x = matrix_view<const bf16>::row_major(values.data(), m, n);
    std::vector<bf16> transformed(values.size());
    const auto transformed_view = matrix_view<bf16>::row_major(transformed.data(), n, m);
    reference::hadamard_rows(x.transposed(), hadamard_transform::te_default(), transformed_view);
    const auto expected = reference::quantize_with_amax<nvfp4_1x16>(matrix_view<const bf16>(transformed_view),
                                                                    reference::amax(matrix_view<const bf16>(transformed_view)));
    ASSERT_GE(expected.amax(), 250.0f);  // the big block's outputs are the max
    for (int threads : {1, 2}) {
      test::set_threads(threads);
      const auto got = quantize_columnwise_rht(x);
      ASSERT_EQ(got.amax(), expected.amax()) << position << " threads " << threads;
      for (std::size_t k = 0; k < got.data().size(); ++k) ASSERT_EQ(got.data()[k].bits(), expected.data()[k].bits()) << k;
      for (std::size_t k = 0; k < got.scales().size(); ++k) ASSERT_EQ(got.scales()[k].bits(), expected.scales()[k].bits()) << k;
      for (float bad : {NAN, INFINITY}) {
        std::vector<bf16> with_bad = values;
        set_block(with_bad, (block_row + 3) % (m / 16), (column + 29) % n, bad, std::ldexp(1.0f, -30));
        try {
          (void)quantize_columnwise_rht(matrix_view<const bf16>::row_major(with_bad.data(), m, n));
          ADD_FAILURE() << "no error for " << bad << " at " << position;
        } catch (const error& e) {
          EXPECT_EQ(e.code(), errc::non_finite_input);
        }
      }
    }
  }
}

/// SQNR (dB) of q's dequantized values against `values`.
template <class Quantized>
double quantized_sqnr_db(matrix_view<const float> values, const Quantized& q) {
  const auto d = dequantize(q);
  double signal = 0, noise = 0;
  for (index_t r = 0; r < values.rows(); ++r)
    for (index_t c = 0; c < values.cols(); ++c) {
      const double v = values(r, c), e = d[static_cast<std::size_t>(r * values.cols() + c)] - v;
      signal += v * v;
      noise += e * e;
    }
  return 10 * std::log10(signal / noise);
}

/// Heavy-tailed activations or gradients [M, N] in bf16 (as float), the kinds the recipe's RHT is for.
std::vector<float> heavy_tailed(int kind, index_t rows, index_t cols, unsigned seed) {
  std::mt19937 gen(seed);
  std::student_t_distribution<double> student(3.0);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform;
  std::vector<float> values;
  for (index_t i = 0; i < rows * cols; ++i) {
    double v = 0;
    switch (kind) {
      case 0:
        v = student(gen);
        break;
      case 1:
        v = normal(gen) * (uniform(gen) < 0.01 ? 20.0 : 1.0);
        break;  // 1% outliers x20
      case 2:
        v = normal(gen) * ((i / cols) % 16 == 5 ? 100.0 : 1.0);
        break;  // every 16th token x100
      default:
        v = normal(gen) * std::exp(1.5 * normal(gen));
        break;  // log-normal magnitudes
    }
    values.push_back(bf16::from_float(static_cast<float>(v)).to_float());
  }
  return values;
}

const char* const heavy_tailed_names[] = {"student-t(3)", "gaussian, 1% outliers x20", "outlier tokens x100",
                                          "log-normal magnitudes (sigma 1.5)"};

// The RHT spreads each block's outliers over its elements, which is what the recipe wants from it.
// Measured on the columnwise copy (blocks along M), three seeds, TE's transform and random 64- and
// 256-point ones:
//  - the columnwise amax drops;
//  - MXFP4's SQNR rises: its power-of-two scale per 32 leaves up to a binade of E2M1's range
//    unused and flushes a heavy-tailed block's small values, while a transformed block is near
//    Gaussian;
//  - NVFP4 1x16's SQNR falls on the same inputs. Its UE4M3 scale per 16 already fits each block
//    closely, so an outlier costs little; spread over the block it becomes 16 values the E2M1 grid
//    rounds coarsely. Asserted so that docs/transforms.md's account stays true.
TEST(Hadamard, SpreadsOutliers) {
  const index_t rows = 1024, cols = 64;
  for (int kind = 0; kind < 4; ++kind)
    for (unsigned seed : {1u, 2u, 3u})
      for (int size : {16, 64, 256}) {
        const auto t = size == 16 ? hadamard_transform::te_default() : hadamard_transform::random(size, seed);
        const std::vector<float> values = heavy_tailed(kind, rows, cols, seed);
        const auto x = matrix_view<const float>::row_major(values.data(), rows, cols);
        const auto transformed = rht_columnwise(x, t);
        std::vector<float> transformed_float;
        for (bf16 v : transformed.values) transformed_float.push_back(v.to_float());
        const auto t_view = matrix_view<const float>::row_major(transformed_float.data(), cols, rows);
        const std::string where =
            std::string(heavy_tailed_names[kind]) + ", seed " + std::to_string(seed) + ", size " + std::to_string(size);

        EXPECT_LT(transformed.amax, amax(x)) << where;
        const double nvfp4_plain = quantized_sqnr_db(x.transposed(), quantize<nvfp4_1x16>(x.transposed()));
        const double nvfp4_rht = quantized_sqnr_db(t_view, quantize_with_amax<nvfp4_1x16>(transformed.view(), transformed.amax));
        const double mxfp4_plain = quantized_sqnr_db(x.transposed(), quantize<mxfp4>(x.transposed()));
        const double mxfp4_rht = quantized_sqnr_db(t_view, quantize<mxfp4>(transformed.view()));
        EXPECT_GT(mxfp4_rht, mxfp4_plain) << where;
        EXPECT_LT(nvfp4_rht, nvfp4_plain) << where;
        if (seed == 1)
          std::printf("%-34s n=%3d: amax %8.2f -> %7.2f, SQNR NVFP4 %.2f -> %.2f dB, MXFP4 %.2f -> %.2f dB\n", heavy_tailed_names[kind],
                      size, amax(x), transformed.amax, nvfp4_plain, nvfp4_rht, mxfp4_plain, mxfp4_rht);
      }
}

TEST(HadamardBadInput, SizesShapesAndNonFinite) {
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const error& e) {
      return e.code();
    }
    return errc{};
  };
  for (int n : {0, 8, 24, 48, 512, -16}) EXPECT_EQ(code_of([&] { (void)hadamard_transform::random(n, 0); }), errc::invalid_argument) << n;
  EXPECT_EQ(code_of([] { (void)hadamard_transform::with_signs(std::vector<int>(16, 2)); }), errc::invalid_argument);
  std::vector<float> values(24 * 16, 1.0f);
  std::vector<bf16> out(values.size(), bf16::from_bits(0x1234));
  const auto x = matrix_view<const float>::row_major(values.data(), 24, 16);  // M = 24: not a multiple of 16
  EXPECT_EQ(code_of([&] { (void)rht_columnwise(x); }), errc::shape_mismatch);
  EXPECT_EQ(
      code_of([&] { hadamard_rows(x.transposed(), hadamard_transform::te_default(), matrix_view<bf16>::row_major(out.data(), 16, 24)); }),
      errc::shape_mismatch);
  EXPECT_EQ(code_of([&] { hadamard_rows(x, hadamard_transform::te_default(), matrix_view<bf16>::row_major(out.data(), 16, 24)); }),
            errc::shape_mismatch);
  values[5 * 16 + 3] = INFINITY;
  const auto ok_shape = matrix_view<const float>::row_major(values.data(), 16, 16);
  EXPECT_EQ(code_of([&] { (void)rht_columnwise(ok_shape); }), errc::non_finite_input);
  EXPECT_EQ(code_of([&] { hadamard_rows(ok_shape, hadamard_transform::te_default(), matrix_view<bf16>::row_major(out.data(), 16, 16)); }),
            errc::non_finite_input);
  EXPECT_EQ(out[0].bits(), 0x1234) << "output written before the checks passed";
  values[5 * 16 + 3] = NAN;
  EXPECT_EQ(code_of([&] { (void)quantize_columnwise_rht(ok_shape); }), errc::non_finite_input);
}

template <class F>
errc error_code_of(F&& call) {
  try {
    call();
  } catch (const error& e) {
    return e.code();
  }
  return errc{};
}

template <class F>
std::string error_text_of(F&& call) {
  try {
    call();
  } catch (const error& e) {
    return e.what();
  }
  return "";
}

TEST(HadamardBadInput, OverflowOfFiniteInputIsReportedWithItsPlaceAndWritesNothing) {
  const auto t = hadamard_transform::te_default();
  // Row 1 holds x_i = s_i * v: output 0 of the block is the sum of 16 v / 4 = 4 v. For v = 2^126
  // that is 2^128, beyond bf16; for v = bf16's max / 4 it is exactly the max (no error).
  for (const bool overflow : {true, false}) {
    const float v = overflow ? std::ldexp(1.0f, 126) : bf16::from_bits(0x7F7F).to_float() / 4;
    std::vector<float> values(2 * 32, 0.25f);
    for (int i = 0; i < 16; ++i) values[static_cast<std::size_t>(32 + 16 + i)] = static_cast<float>(t.sign(i)) * v;
    const auto x = matrix_view<const float>::row_major(values.data(), 2, 32);
    std::vector<bf16> out(values.size(), bf16::from_bits(0x1234));
    const auto out_view = matrix_view<bf16>::row_major(out.data(), 2, 32);
    if (overflow) {
      const std::string what = error_text_of([&] { hadamard_rows(x, t, out_view); });
      EXPECT_NE(what.find("overflows bf16 at row 1, columns 16..31"), std::string::npos) << what;
      EXPECT_EQ(error_code_of([&] { hadamard_rows(x, t, out_view); }), errc::overflow);
      for (auto b : out) ASSERT_EQ(b.bits(), 0x1234) << "output written before the overflow was found";
      // bf16 input and the inverse direction take the same guard.
      std::vector<bf16> as_bf16(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) as_bf16[i] = bf16::from_float(values[i]);
      EXPECT_EQ(error_code_of([&] { hadamard_rows(matrix_view<const bf16>::row_major(as_bf16.data(), 2, 32), t, out_view); }),
                errc::overflow);
      std::vector<float> inverse_input(values.size(), 0.0f);
      for (int i = 0; i < 16; ++i) inverse_input[static_cast<std::size_t>(i)] = v;  // inverse output 0 = 16 v / 4
      EXPECT_EQ(error_code_of([&] {
                  hadamard_rows(matrix_view<const float>::row_major(inverse_input.data(), 2, 32), t, out_view, hadamard_direction::inverse);
                }),
                errc::overflow);
    } else {
      // Values this large go through the checked path; the result is still the reference's.
      hadamard_rows(x, t, out_view);
      std::vector<bf16> expected(values.size());
      reference::hadamard_rows(x, t, matrix_view<bf16>::row_major(expected.data(), 2, 32));
      for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i].bits(), expected[i].bits()) << i;
      EXPECT_EQ(out[32 + 16].bits(), 0x7F7F);
    }
  }
  // The columnwise copy: column 3 of a 16 x 16 source, plain and fused (bf16) paths.
  std::vector<bf16> source(16 * 16, bf16::from_float(1.0f));
  for (int i = 0; i < 16; ++i)
    source[static_cast<std::size_t>(i * 16 + 3)] = bf16::from_float(static_cast<float>(t.sign(i)) * std::ldexp(1.0f, 126));
  const auto x = matrix_view<const bf16>::row_major(source.data(), 16, 16);
  for (const auto& what : {error_text_of([&] { (void)rht_columnwise(x, t); }), error_text_of([&] { (void)quantize_columnwise_rht(x, t); }),
                           error_text_of([&] { (void)quantize_columnwise_rht<mxfp4>(x, t); })})
    EXPECT_NE(what.find("overflows bf16 at source column 3, rows 0..15"), std::string::npos) << what;
  EXPECT_EQ(error_code_of([&] { (void)quantize_columnwise_rht(x, t); }), errc::overflow);
}

TEST(HadamardEmpty, AHugeDimensionBesideAZeroOneReturnsAtOnce) {
  const index_t huge = max_element_count;  // a loop over 2^40 rows would take minutes
  const auto t = hadamard_transform::te_default();
  hadamard_rows(matrix_view<const float>::row_major(nullptr, huge, 0), t, matrix_view<bf16>::row_major(nullptr, huge, 0));
  hadamard_rows(matrix_view<const bf16>::row_major(nullptr, 0, huge), t, matrix_view<bf16>::row_major(nullptr, 0, huge),
                hadamard_direction::inverse);
  for (const auto& [rows, cols] : {std::pair{huge, index_t{0}}, std::pair{index_t{0}, huge}}) {
    const auto x = matrix_view<const bf16>::row_major(nullptr, rows, cols);
    const columnwise_rht r = rht_columnwise(x, t);
    EXPECT_EQ(r.rows, cols);
    EXPECT_EQ(r.cols, rows);
    EXPECT_EQ(r.amax, 0.0f);
    EXPECT_TRUE(r.values.empty());
    const auto q = quantize_columnwise_rht(x, t);
    EXPECT_EQ(q.rows(), cols);
    EXPECT_EQ(q.cols(), rows);
    EXPECT_EQ(q.axis(), quantized_axis::columnwise);
    EXPECT_TRUE(q.data().empty());
  }
}

}  // namespace transforms_hadamard_test
}  // namespace
}  // namespace nvfp4
