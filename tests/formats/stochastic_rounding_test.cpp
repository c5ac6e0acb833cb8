// Tests of nvfp4/formats/stochastic_rounding.hpp: the §5 rule exhaustively over the 256 random
// bytes (exact up-counts from the spec), saturation, symmetry, and its statistics with Philox bytes.
// (The vector kernels of the rule are tested in tests/scaling/detail/stochastic_quantize_test.cpp.)
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "nvfp4/formats/stochastic_rounding.hpp"
#include "nvfp4/random/philox.hpp"

namespace nvfp4 {
namespace {
namespace formats_stochastic_rounding_test {

constexpr float grid[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

TEST(StochasticRounding, GridPointsNeverMove) {
  for (float g : grid)
    for (int r = 0; r < 256; ++r) {
      EXPECT_EQ(e2m1_from_float_stochastic(g, static_cast<std::uint8_t>(r)).to_float(), g);
      EXPECT_EQ(e2m1_from_float_stochastic(-g, static_cast<std::uint8_t>(r)).to_float(), -g);
    }
}

// Between neighbours lo < hi, x = lo + k/256 (hi - lo) rounds up for exactly k of the 256 byte
// values (the rule: up iff r/256 * step >= hi - x), and otherwise to lo.
TEST(StochasticRounding, UpCountIsExactFraction) {
  for (int g = 0; g + 1 < 8; ++g) {
    const float lo = grid[g], hi = grid[g + 1];
    for (int k = 0; k < 256; ++k) {
      const float x = lo + (hi - lo) * static_cast<float>(k) / 256.0f;  // exact: 8-bit fraction of a power-of-two step
      int up = 0;
      for (int r = 0; r < 256; ++r) {
        const float q = e2m1_from_float_stochastic(x, static_cast<std::uint8_t>(r)).to_float();
        ASSERT_TRUE(q == lo || q == hi) << x << " -> " << q;
        up += q == hi;
        EXPECT_EQ(e2m1_from_float_stochastic(-x, static_cast<std::uint8_t>(r)).to_float(), -q);
      }
      EXPECT_EQ(up, k) << "x = " << x;
    }
  }
}

TEST(StochasticRounding, SaturatesAtSix) {
  for (float x : {6.0f, 6.5f, 7.99f, 100.0f, 3.0e38f, INFINITY})
    for (int r = 0; r < 256; ++r) EXPECT_EQ(e2m1_from_float_stochastic(x, static_cast<std::uint8_t>(r)).to_float(), 6.0f) << x;
  // Just below 6 it is still random between 4 and 6: 5 goes up for half the bytes.
  int up = 0;
  for (int r = 0; r < 256; ++r) up += e2m1_from_float_stochastic(5.0f, static_cast<std::uint8_t>(r)).to_float() == 6.0f;
  EXPECT_EQ(up, 128);
}

TEST(StochasticRounding, KeepsTheSignOfNegativeValuesThatRoundToZero) {
  EXPECT_EQ(e2m1_from_float_stochastic(-0.1f, 0).bits(), 0x8);
  EXPECT_EQ(e2m1_from_float_stochastic(-0.0f, 255).bits(), 0x8);
}

// With Philox bytes: per grid interval, the mean of many draws is within 5 standard errors of x
// (x on the 1/256 grid, where the rule is exactly unbiased), and the up/down frequencies pass a
// chi-square test against the ideal probabilities (k/256).
TEST(StochasticRounding, UnbiasedWithPhiloxBytes) {
  constexpr int draws = 20000;
  std::uint64_t index = 0;
  double chi2 = 0;
  int degrees = 0;
  for (int g = 0; g + 1 < 8; ++g) {
    const double lo = grid[g], hi = grid[g + 1], step = hi - lo;
    for (int k : {1, 37, 64, 128, 200, 255}) {
      const float x = static_cast<float>(lo + step * k / 256.0);
      double sum = 0;
      int up = 0;
      for (int d = 0; d < draws; ++d) {
        const double q = e2m1_from_float_stochastic(x, random_byte(7, index++)).to_float();
        sum += q;
        up += q == hi;
      }
      const double p = k / 256.0;
      const double standard_error = step * std::sqrt(p * (1 - p) / draws);
      EXPECT_NEAR(sum / draws, x, 5 * standard_error) << "x = " << x;
      const double expected_up = p * draws, expected_down = (1 - p) * draws;
      chi2 += (up - expected_up) * (up - expected_up) / expected_up +
              ((draws - up) - expected_down) * ((draws - up) - expected_down) / expected_down;
      ++degrees;
    }
  }
  EXPECT_LT(chi2, degrees + 5 * std::sqrt(2.0 * degrees)) << degrees << " degrees of freedom";
}

}  // namespace formats_stochastic_rounding_test
}  // namespace
}  // namespace nvfp4
