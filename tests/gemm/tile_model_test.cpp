// Tests of nvfp4/gemm/tile_model.hpp: one TDPBF16PS output as Intel's SDM states it, on hand-worked
// cases that tell its order apart from the others a reader might assume (one chain over all 32
// products, products added pairwise), its flush-to-zero of denormal inputs and results, and the
// chain of instructions over K with zero padding.
#include "nvfp4/gemm/tile_model.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace nvfp4 {
namespace {
namespace gemm_tile_model_test {

constexpr float two_m24 = 0x1p-24f;  // half an ulp of 1: 1 + 2^-24 is a tie that rounds to 1

TEST(TileModel, EvenAndOddSumsAreSeparateChains) {
  // a = 1; b: element 0 = 1, elements 1 and 3 = 2^-24, element 2 = 0. The SDM's order: even sum
  // 1 + 0 = 1, odd sum 2^-24 + 2^-24 = 2^-23, total 1 + 2^-23 (exact). One chain in element order
  // gives 1 (each 2^-24 added to 1 is a tie that rounds back to 1); pairs added first (1 + 2^-24
  // -> 1, then 0 + 2^-24, chained: 1 + 2^-24 -> 1) gives 1 too.
  std::vector<float> a(32, 0.0f), b(32, 0.0f);
  for (int k = 0; k < 4; ++k) a[k] = 1.0f;
  b[0] = 1.0f;
  b[1] = b[3] = two_m24;
  EXPECT_EQ(tile_model::instruction(a.data(), b.data(), 0.0f), 1.0f + 0x1p-23f);
}

TEST(TileModel, TheSumOfTheChainsIsAddedToTheAccumulatorLast) {
  // c = 1, even = 2^-24, odd = 2^-24: even + odd = 2^-23 first, then 1 + 2^-23 exact. Adding each
  // chain to c on its own would lose both halves (1 + 2^-24 -> 1, twice).
  std::vector<float> a(32, 0.0f), b(32, 0.0f);
  a[0] = a[1] = 1.0f;
  b[0] = b[1] = two_m24;
  EXPECT_EQ(tile_model::instruction(a.data(), b.data(), 1.0f), 1.0f + 0x1p-23f);
}

TEST(TileModel, DenormalsAreFlushed) {
  std::vector<float> a(32, 0.0f), b(32, 0.0f);
  // A denormal input reads as zero: 2^-130 (a denormal fp32 value; as a bf16, 0x0002) times 2^10.
  a[0] = 0x1p-130f;
  b[0] = 0x1p+10f;
  EXPECT_EQ(tile_model::instruction(a.data(), b.data(), 0.0f), 0.0f);
  // A denormal result flushes to zero: 2^-70 · 2^-70 = 2^-140, normal inputs, denormal product.
  a[0] = 0x1p-70f;
  b[0] = 0x1p-70f;
  EXPECT_EQ(tile_model::instruction(a.data(), b.data(), 0.0f), 0.0f);
  // A denormal accumulator reads as zero too.
  a[0] = b[0] = 0.0f;
  EXPECT_EQ(tile_model::instruction(a.data(), b.data(), 0x1p-140f), 0.0f);
}

TEST(TileModel, ChainStepsThroughKWithZeroPadding) {
  // K = 40: step 0 holds elements 0..31, step 1 elements 32..39 and 24 zeros. The accumulator is
  // carried: c = 1 + (2^-24 + 2^-24) per step, so each step's sum survives (2^-23 is one ulp).
  const index_t k = 40;
  const auto a = [](index_t) { return 1.0f; };
  const auto b = [](index_t i) { return (i == 0 || i == 1 || i == 32 || i == 33) ? two_m24 : 0.0f; };
  EXPECT_EQ(tile_model::chain(k, 1.0f, a, b), 1.0f + 0x1p-22f);
  // Element by element from c, every 2^-24 would round away.
  float serial = 1.0f;
  for (index_t i = 0; i < k; ++i) serial += a(i) * b(i);
  EXPECT_EQ(serial, 1.0f);
  // No K: c itself.
  EXPECT_EQ(tile_model::chain(0, 3.5f, a, b), 3.5f);
}

}  // namespace gemm_tile_model_test
}  // namespace
}  // namespace nvfp4
