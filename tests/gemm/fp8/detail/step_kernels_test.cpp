// Tests of nvfp4/gemm/fp8/detail/step_kernels.hpp: the step kernels written once over Ops,
// instantiated with the scalar Ops (which no build dispatches to, so this is what checks the
// scalar forms of the primitives the kernels take: to_float_scaled, truncate_scaled, widen_to_double, powers_of_two_double,
// narrow_toward_zero, load_signed_bytes) and with the kernel set this build runs, each output of
// a block against the chain of the model's own step (fp8::mma::step / relaxed_step through
// scalar_step), on codes with NaN / Inf, all-zero steps, E8M0 scales over the whole range (NaN
// included) and accumulators with specials, a ragged K and a partial last tile.
// NVFP4_TEST_ALL_ISAS
#include "nvfp4/gemm/fp8/detail/step_kernels.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "nvfp4/gemm/fp8/detail/fast_gemm.hpp"
#include "nvfp4/simd/scalar/ops.hpp"

namespace nvfp4::fp8_gemm_detail {
namespace {
namespace gemm_fp8_detail_step_kernels_test {

using scalar_kernels =
    lane_step_kernels<simd::scalar::ops,
                      step_shapes{
                          .exact_rows = 3, .exact_tiles_outer = true, .relaxed_tiles = 4, .relaxed_rows_wide = 5, .relaxed_rows = 2}>;
using build_kernels = fp8_step_kernels<simd::fp8_gemm_isa>;

struct block_case {
  std::vector<std::uint8_t> a_codes, b_codes;
  std::vector<std::uint8_t> a_scales, b_scales;  // [rows][steps]
  operand_rows a, b;
};

constexpr index_t k = 100, a_rows = 8, b_rows = 4 * lanes - 5;  // 4 steps, the last partial; a partial tile

std::uint8_t random_code(std::mt19937& gen) {
  auto c = static_cast<std::uint8_t>(gen());
  if (gen() % 24 != 0 && (c & 0x7F) >= 0x7C) c &= 0xBB;  // NaN / Inf codes now and then
  return c;
}

std::uint8_t random_scale(std::mt19937& gen, bool scaled) {
  if (!scaled) return 127;
  const unsigned draw = gen() % 16;
  return static_cast<std::uint8_t>(draw == 0 ? 0xFFu : draw < 6 ? gen() % 255 : 127u - 20u + gen() % 41);
}

block_case make_case(std::mt19937& gen, fp8_format fa, fp8_format fb, bool scaled) {
  static const code_tables e4m3(fp8_format::e4m3), e5m2(fp8_format::e5m2);
  const auto& tables = [](fp8_format f) -> const code_tables& { return f == fp8_format::e4m3 ? e4m3 : e5m2; };
  const index_t steps = (k + fp8::mma::step_k - 1) / fp8::mma::step_k;
  block_case c;
  c.a_codes.resize(static_cast<std::size_t>(a_rows * k));
  c.b_codes.resize(static_cast<std::size_t>(b_rows * k));
  for (auto* codes : {&c.a_codes, &c.b_codes}) {
    for (auto& v : *codes) v = random_code(gen);
    for (index_t s = 0; s * 32 < static_cast<index_t>(codes->size()); s += 7)  // some all-zero steps
      std::fill(codes->begin() + s * 32, codes->begin() + std::min<index_t>(s * 32 + 32, codes->size()), std::uint8_t{0});
  }
  c.a_scales.resize(static_cast<std::size_t>(a_rows * steps));
  c.b_scales.resize(static_cast<std::size_t>(b_rows * steps));
  for (auto& v : c.a_scales) v = random_scale(gen, scaled);
  for (auto& v : c.b_scales) v = random_scale(gen, scaled);
  c.a = make_operand(c.a_codes.data(), k, a_rows, k, fa, tables(fa), [&](index_t r, index_t s) { return c.a_scales[r * steps + s]; });
  c.b = make_operand(c.b_codes.data(), k, b_rows, k, fb, tables(fb), [&](index_t r, index_t s) { return c.b_scales[r * steps + s]; });
  return c;
}

/// A block of all a_rows rows against `tiles` tiles (1 to 4) of B.
template <class Kernels>
void check_block(const block_case& c, int tiles, fp8::mma::tensor_core core, gemm_mode mode, std::mt19937& gen, const char* what) {
  const index_t steps = c.a.steps, stride = tiles * lanes;
  row_staging staged;
  stage_rows(c.a, 0, a_rows, 0, steps, Kernels::staging(mode), staged);
  std::vector<column_tile> packed(tiles);
  step_block blk{&c.a, &staged, 0, a_rows, &c.b, {}, {}, tiles, core, mode};
  for (int t = 0; t < tiles; ++t) {
    pack_tile(c.b, t * lanes, packed[static_cast<std::size_t>(t)]);
    blk.tiles[t] = &packed[static_cast<std::size_t>(t)];
    blk.j0[t] = t * lanes;
  }
  const float specials[] = {
      0.0f,      -0.0f,       std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), 0x1.8p126f, -0x1.fffffep127f,
      0x1p-140f, -0x1.4p-127f};
  std::vector<float> start(static_cast<std::size_t>(a_rows * stride));
  for (auto& v : start)
    v = gen() % 5 == 0 ? specials[gen() % std::size(specials)]
                       : std::ldexp(static_cast<float>(gen() % 2001) - 1000.0f, static_cast<int>(gen() % 40) - 30);
  std::vector<float> got = start;
  Kernels::run_steps(blk, 0, steps, got.data(), stride);
  for (int r = 0; r < a_rows; ++r)
    for (int t = 0; t < tiles; ++t)
      for (int lane = 0; lane < blk.tiles[t]->columns; ++lane) {
        const auto at = static_cast<std::size_t>(r * stride + t * lanes + lane);
        float want = start[at];
        for (index_t s = 0; s < steps; ++s) want = scalar_step(blk, r, t, lane, s, want);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[at]), std::bit_cast<std::uint32_t>(want))
            << what << " row " << r << " column " << t * lanes + lane << ": " << got[at] << " vs " << want;
      }
}

template <class Kernels>
void check_all(const char* what) {
  std::mt19937 gen(29);
  for (fp8_format fa : {fp8_format::e4m3, fp8_format::e5m2})
    for (fp8_format fb : {fp8_format::e4m3, fp8_format::e5m2})
      for (bool scaled : {false, true}) {
        const block_case c = make_case(gen, fa, fb, scaled);
        for (int tiles : {4, 3, 2, 1}) {
          for (auto core : {fp8::mma::tensor_core::hopper, fp8::mma::tensor_core::blackwell})
            check_block<Kernels>(c, tiles, core, gemm_mode::exact, gen, what);
          check_block<Kernels>(c, tiles, fp8::mma::tensor_core::blackwell, gemm_mode::relaxed, gen, what);
        }
      }
  // Specials-free blocks take the relaxed kernels' plain (unscaled) and finite (scaled) loops.
  for (bool scaled : {false, true}) {
    block_case c = make_case(gen, fp8_format::e4m3, fp8_format::e5m2, false);
    for (auto* codes : {&c.a_codes, &c.b_codes})
      for (auto& v : *codes)
        if ((v & 0x7F) >= 0x7C) v &= 0xBB;
    const index_t steps = c.a.steps;
    for (auto& v : c.a_scales) v = scaled ? static_cast<std::uint8_t>(120 + gen() % 15) : 127;
    for (auto& v : c.b_scales) v = scaled ? static_cast<std::uint8_t>(120 + gen() % 15) : 127;
    static const code_tables e4m3(fp8_format::e4m3), e5m2(fp8_format::e5m2);
    c.a = make_operand(c.a_codes.data(), k, a_rows, k, fp8_format::e4m3, e4m3,
                       [&](index_t r, index_t s) { return c.a_scales[r * steps + s]; });
    c.b = make_operand(c.b_codes.data(), k, b_rows, k, fp8_format::e5m2, e5m2,
                       [&](index_t r, index_t s) { return c.b_scales[r * steps + s]; });
    ASSERT_TRUE(c.b.finite[0]);
    for (int tiles : {4, 2, 1}) check_block<Kernels>(c, tiles, fp8::mma::tensor_core::hopper, gemm_mode::relaxed, gen, what);
  }
}

TEST(Fp8StepKernels, ScalarOpsEqualTheModelStep) { check_all<scalar_kernels>("scalar ops"); }

TEST(Fp8StepKernels, BuildKernelsEqualTheModelStep) { check_all<build_kernels>(simd::ops::name); }

}  // namespace gemm_fp8_detail_step_kernels_test
}  // namespace
}  // namespace nvfp4::fp8_gemm_detail
