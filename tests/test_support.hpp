// tests/test_support.hpp: data helpers the unit tests share: seeded random matrices (float or
// bf16), the bytes of a quantized tensor, the OpenMP thread count. Test-only; not installed.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <random>
#include <type_traits>
#include <vector>

#include "nvfp4/config.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

namespace nvfp4::test {

/// What random_values draws: N(0, sigma) times 2^(log2_spread * N(0, 1)) (a spread of
/// magnitudes over several binades when log2_spread > 0), every zero_every-th value set to 0.
struct value_spread {
  double sigma = 1.0;
  double log2_spread = 0.0;
  long zero_every = 0;  ///< 0: no forced zeros
};

/// `count` seeded random values as float, or as bf16 (rounded to nearest even).
template <class T = float>
std::vector<T> random_values(index_t count, unsigned seed, value_spread spread = {}) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16>);
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal;
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(count));
  for (index_t i = 0; i < count; ++i) {
    double v = spread.sigma * normal(gen);
    if (spread.log2_spread != 0.0) v *= std::exp2(spread.log2_spread * normal(gen));
    if (spread.zero_every > 0 && i % spread.zero_every == 0) v = 0.0;
    if constexpr (std::is_same_v<T, float>) out.push_back(static_cast<float>(v));
    else out.push_back(bf16::from_float(static_cast<float>(v)));
  }
  return out;
}

/// The data bytes of q followed by its scale bytes: two quantized tensors are the same bits when
/// these are equal.
template <class Format>
std::vector<std::uint8_t> bytes_of(const quantized_tensor<Format>& q) {
  std::vector<std::uint8_t> out;
  out.reserve(q.data().size() + q.scales().size());
  for (auto unit : q.data()) out.push_back(unit.bits());
  for (auto scale : q.scales()) out.push_back(scale.bits());
  return out;
}

/// Sets the OpenMP thread count of the following parallel regions (no-op without OpenMP).
inline void set_threads(int threads) {
#if NVFP4_HAS_OPENMP
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
}

/// The nvfp4::errc that f() throws, or errc{} when it throws none.
template <class F>
errc error_code_of(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return e.code();
  }
  return errc{};
}

/// The bit patterns of floats, to compare results bit for bit (NaNs included).
inline std::vector<std::uint32_t> float_bits(std::span<const float> values) {
  std::vector<std::uint32_t> out;
  out.reserve(values.size());
  for (float v : values) out.push_back(std::bit_cast<std::uint32_t>(v));
  return out;
}

}  // namespace nvfp4::test
