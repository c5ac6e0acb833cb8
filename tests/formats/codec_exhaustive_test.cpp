// Exhaustive codec test: every one of the 2^32 float bit patterns encoded to E2M1, E4M3 and E5M2
// (satfinite, and the propagating policy where the format has one) by the vectorized fast path
// (nvfp4/scaling/bulk_codecs.hpp), by the scalar minifloat<T>::from_float, and by an independent oracle
// written here from docs/numerics_spec.md §1. All three must agree on every input.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/scaling/bulk_codecs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "nvfp4/formats/e2m1.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e5m2.hpp"

namespace nvfp4 {
namespace {

/// The oracle's description of a format: nothing from the library but the spec's numbers.
struct oracle_format {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  int max_code;  ///< largest finite magnitude code (docs/numerics_spec.md §1 table)
  bool has_inf;  ///< E5M2: code (all-ones exponent, zero mantissa) is Inf
  int nan_code;  ///< the magnitude code a NaN input becomes (none for E2M1, see below)
};

/// Magnitude of code `code` as a double, from the format's definition (subnormals at exponent 0).
/// Also defined for max_code + 1, the value the format would have next if its range went on.
double oracle_value(const oracle_format& f, int code) {
  const int exponent = code >> f.mantissa_bits;
  const int mantissa = code & ((1 << f.mantissa_bits) - 1);
  if (exponent == 0) return std::ldexp(static_cast<double>(mantissa), 1 - f.bias - f.mantissa_bits);
  return std::ldexp(static_cast<double>((1 << f.mantissa_bits) + mantissa), exponent - f.bias - f.mantissa_bits);
}

/// Expected codes for a run of bit patterns of one sign, in increasing order: walk the sorted code
/// values, taking the nearest by exact comparison (doubles hold every float, code value and
/// midpoint exactly); a tie goes to the even code. A value whose nearest is max_code + 1 overflows:
/// satfinite gives ±max, propagate gives ±Inf (E5M2) or NaN (E4M3). ±Inf: ±max (satfinite) or the
/// overflow code. NaN: the positive all-ones code (satfinite: what an H100's cvt.rn.satfinite
/// wrote, 0x7F for E4M3 and E5M2), the signed NaN code (propagate, ml_dtypes' cast). E2M1 has no
/// NaN: the library documents sign | max, checked here as that.
void oracle_encode(const oracle_format& f, bool saturate, std::uint32_t first_bits, std::size_t count, std::uint8_t* out) {
  std::vector<double> values(static_cast<std::size_t>(f.max_code) + 2);
  for (int c = 0; c <= f.max_code + 1; ++c) values[static_cast<std::size_t>(c)] = oracle_value(f, c);
  std::vector<double> midpoints(values.size() - 1);
  for (std::size_t k = 0; k + 1 < values.size(); ++k) midpoints[k] = (values[k] + values[k + 1]) / 2;

  const int magnitude_bits = f.exponent_bits + f.mantissa_bits;
  const std::uint32_t sign = (first_bits >> 31) << magnitude_bits;
  const int overflow_code = saturate ? f.max_code : (f.has_inf ? f.max_code + 1 : f.nan_code);
  std::size_t k = 0;  // current nearest candidate: x > midpoints[k - 1]
  bool started = false;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t bits = first_bits + static_cast<std::uint32_t>(i);
    const std::uint32_t magnitude_bits_in = bits & 0x7FFFFFFFu;
    int code;
    if (magnitude_bits_in > 0x7F800000u) {
      const std::uint32_t satfinite_nan = (1u << magnitude_bits) - 1u;
      out[i] = static_cast<std::uint8_t>(f.nan_code < 0 ? (sign | static_cast<std::uint32_t>(f.max_code))
                                         : saturate     ? satfinite_nan
                                                        : (sign | static_cast<std::uint32_t>(f.nan_code)));
      continue;
    }
    if (magnitude_bits_in == 0x7F800000u) {
      code = overflow_code;
    } else {
      float xf;
      std::memcpy(&xf, &magnitude_bits_in, 4);
      const double x = xf;
      if (!started) {  // first finite input of the run: binary search, then walk
        k = static_cast<std::size_t>(std::lower_bound(midpoints.begin(), midpoints.end(), x) - midpoints.begin());
        started = true;
      }
      while (k < midpoints.size() && x > midpoints[k]) ++k;
      std::size_t nearest = k;
      if (k < midpoints.size() && x == midpoints[k]) nearest = (k % 2 == 0) ? k : k + 1;
      code = nearest > static_cast<std::size_t>(f.max_code) ? overflow_code : static_cast<int>(nearest);
    }
    out[i] = static_cast<std::uint8_t>(sign | static_cast<std::uint32_t>(code));
  }
}

template <minifloat_traits Traits, overflow_policy Policy>
struct codec_case {
  static constexpr minifloat_traits traits = Traits;
  static constexpr overflow_policy policy = Policy;
};

// docs/numerics_spec.md §1: E2M1 max 6 (code 7); E4M3 max 448 (0x7E), NaN 0x7F; E5M2 max 57344 (0x7B),
// Inf 0x7C, NaN code 0x7E for a sign-keeping cast (ml_dtypes' choice among E5M2's NaNs; an H100's
// satfinite cvt writes 0x7F).
template <class Case>
oracle_format oracle_for() {
  if constexpr (Case::traits.exponent_bits == 2)
    return {2, 1, 1, 0x7, false, -1};
  else if constexpr (Case::traits.exponent_bits == 4)
    return {4, 3, 7, 0x7E, false, 0x7F};
  else
    return {5, 2, 15, 0x7B, true, 0x7E};
}

template <class Case>
class CodecExhaustive : public ::testing::Test {};

using cases = ::testing::Types<codec_case<e2m1_traits, overflow_policy::saturate>, codec_case<e4m3_traits, overflow_policy::saturate>,
                               codec_case<e4m3_traits, overflow_policy::propagate>, codec_case<e5m2_traits, overflow_policy::saturate>,
                               codec_case<e5m2_traits, overflow_policy::propagate>>;
TYPED_TEST_SUITE(CodecExhaustive, cases);

TYPED_TEST(CodecExhaustive, FastEqualsScalarEqualsOracleForEveryFloat) {
  constexpr minifloat_traits traits = TypeParam::traits;
  constexpr overflow_policy policy = TypeParam::policy;
  const oracle_format oracle = oracle_for<TypeParam>();
  constexpr std::size_t chunk = std::size_t{1} << 16;
  constexpr std::int64_t chunks = std::int64_t{1} << 16;

  std::uint64_t fast_vs_oracle = 0, scalar_vs_oracle = 0;
  std::uint32_t first_bad = 0;
  bool any_bad = false;
#if NVFP4_HAS_OPENMP
#pragma omp parallel for schedule(dynamic, 64) reduction(+ : fast_vs_oracle, scalar_vs_oracle)
#endif
  for (std::int64_t c = 0; c < chunks; ++c) {
    std::vector<float> inputs(chunk);
    std::vector<std::uint8_t> fast(chunk), expected(chunk);
    const std::uint32_t first_bits = static_cast<std::uint32_t>(c) << 16;
    for (std::size_t i = 0; i < chunk; ++i) {
      const std::uint32_t bits = first_bits + static_cast<std::uint32_t>(i);
      std::memcpy(&inputs[i], &bits, 4);
    }
    encode_codes<traits, policy>(inputs.data(), static_cast<index_t>(chunk), fast.data());
    oracle_encode(oracle, policy == overflow_policy::saturate, first_bits, chunk, expected.data());
    for (std::size_t i = 0; i < chunk; ++i) {
      const std::uint8_t scalar = minifloat<traits>::from_float(inputs[i], policy).bits();
      const bool fast_bad = fast[i] != expected[i];
      const bool scalar_bad = scalar != expected[i];
      fast_vs_oracle += fast_bad;
      scalar_vs_oracle += scalar_bad;
      if (fast_bad || scalar_bad) {
#if NVFP4_HAS_OPENMP
#pragma omp critical
#endif
        if (!any_bad || first_bits + i < first_bad) {
          any_bad = true;
          first_bad = first_bits + static_cast<std::uint32_t>(i);
        }
      }
    }
  }
  EXPECT_EQ(fast_vs_oracle, 0u) << detail::fast_block_kernels::name << " kernels";
  EXPECT_EQ(scalar_vs_oracle, 0u);
  if (any_bad) {
    float x;
    std::memcpy(&x, &first_bad, 4);
    // A full buffer, so the value goes through the vector body and not the scalar tail.
    std::vector<float> copies(64, x);
    std::vector<std::uint8_t> fast_codes(64);
    encode_codes<traits, policy>(copies.data(), 64, fast_codes.data());
    const std::uint8_t fast_code = fast_codes[0];
    std::uint8_t expected_code;
    oracle_encode(oracle, policy == overflow_policy::saturate, first_bad, 1, &expected_code);
    ADD_FAILURE() << "first mismatch at bits 0x" << std::hex << first_bad << " (" << x << "): fast 0x" << int(fast_code) << ", scalar 0x"
                  << int(minifloat<traits>::from_float(x, policy).bits()) << ", oracle 0x" << int(expected_code);
  }
}

// The oracle itself, on the hand-listed cases of docs/numerics_spec.md §1 (so a wrong oracle cannot pass
// silently together with a wrong codec).
TEST(CodecOracle, SpecExamples) {
  const oracle_format e2m1_spec{2, 1, 1, 0x7, false, -1};
  const oracle_format e4m3_spec{4, 3, 7, 0x7E, false, 0x7F};
  auto encode_one = [](const oracle_format& f, float x, bool saturate) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    std::uint8_t code;
    oracle_encode(f, saturate, bits, 1, &code);
    return int(code);
  };
  // Ties in E2M1: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4; 7 and up -> 6.
  const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 7.0f, 1e30f};
  const int tie_codes[] = {0, 2, 2, 4, 4, 6, 6, 7, 7};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(encode_one(e2m1_spec, ties[i], true), tie_codes[i]) << ties[i];
  EXPECT_EQ(encode_one(e2m1_spec, -0.0f, true), 0x8);
  EXPECT_EQ(encode_one(e2m1_spec, -std::numeric_limits<float>::infinity(), true), 0xF);
  // E4M3: max 448 = 0x7E; 464 ties to 448 (even), above it overflows; |x| <= 2^-10 -> 0;
  // min subnormal 2^-9 = 0x01.
  EXPECT_EQ(encode_one(e4m3_spec, 448.0f, true), 0x7E);
  EXPECT_EQ(encode_one(e4m3_spec, 464.0f, false), 0x7E);
  EXPECT_EQ(encode_one(e4m3_spec, 465.0f, false), 0x7F);
  EXPECT_EQ(encode_one(e4m3_spec, -465.0f, true), 0xFE);
  EXPECT_EQ(encode_one(e4m3_spec, std::ldexp(1.0f, -10), true), 0x00);
  EXPECT_EQ(encode_one(e4m3_spec, std::ldexp(1.0f, -9), true), 0x01);
  EXPECT_EQ(encode_one(e4m3_spec, -std::numeric_limits<float>::quiet_NaN(), true), 0x7F);
  EXPECT_EQ(encode_one(e4m3_spec, -std::numeric_limits<float>::quiet_NaN(), false), 0xFF);
  EXPECT_EQ(encode_one(e4m3_spec, 1.0f, true), 0x38);
  // E5M2 NaN: 0x7F from the satfinite cvt (an H100's cvt.rn.satfinite.e5m2x2.f32, every NaN:
  // tests/formats/data/h100_nan_codes.json), ml_dtypes' signed 0x7E / 0xFE from a sign-keeping cast.
  const oracle_format e5m2_spec{5, 2, 15, 0x7B, true, 0x7E};
  EXPECT_EQ(encode_one(e5m2_spec, std::numeric_limits<float>::quiet_NaN(), true), 0x7F);
  EXPECT_EQ(encode_one(e5m2_spec, -std::numeric_limits<float>::quiet_NaN(), true), 0x7F);
  EXPECT_EQ(encode_one(e5m2_spec, -std::numeric_limits<float>::quiet_NaN(), false), 0xFE);
  EXPECT_EQ(encode_one(e5m2_spec, std::numeric_limits<float>::infinity(), true), 0x7B);
}

}  // namespace
}  // namespace nvfp4
