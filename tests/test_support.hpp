// tests/test_support.hpp: helpers the unit tests share: seeded random matrices (float or bf16),
// the bytes of a quantized tensor, the OpenMP thread count, a scratch directory per test.
// Test-only; not installed.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <system_error>
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
    if constexpr (std::is_same_v<T, float>)
      out.push_back(static_cast<float>(v));
    else
      out.push_back(bf16::from_float(static_cast<float>(v)));
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

/// A directory of the test's own under the system's temporary directory, empty at the start and
/// removed with everything in it at the end (also when the test fails). Its name holds the test
/// suite, the test and the process id, so tests and parallel ctest runs never share one.
class scoped_temp_dir {
 public:
  scoped_temp_dir() : path_(std::filesystem::temp_directory_path() / unique_name()) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~scoped_temp_dir() {
    std::error_code ignored;  // a destructor must not throw; a leftover directory is harmless
    std::filesystem::remove_all(path_, ignored);
  }
  scoped_temp_dir(const scoped_temp_dir&) = delete;
  scoped_temp_dir& operator=(const scoped_temp_dir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::filesystem::path& name) const { return path_ / name; }

 private:
  static std::string unique_name() {
    std::string name = "nvfp4_test_" + std::to_string(::getpid());
    if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info())
      name += std::string("_") + info->test_suite_name() + "_" + info->name();
    std::replace(name.begin(), name.end(), '/', '_');  // parameterized names hold slashes
    return name;
  }
  std::filesystem::path path_;
};

/// A test fixture with a scoped_temp_dir: dir_ is the test's own empty directory.
class temp_dir_test : public ::testing::Test {
 protected:
  void SetUp() override {
    temp_.emplace();
    dir_ = temp_->path();
  }
  void TearDown() override { temp_.reset(); }
  std::filesystem::path dir_;

 private:
  std::optional<scoped_temp_dir> temp_;
};

}  // namespace nvfp4::test
