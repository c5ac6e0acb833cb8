// A fingerprint of the library's results: FNV-1a hashes of three training steps of the Linear
// layer under every recipe (exact and relaxed GEMMs, an amax rule) and of the 4over6, SR and MX
// quantizers. tests/CMakeLists.txt builds it with the project's flags, with -ffp-contract=off and
// ISO C++20, and for plain x86-64; the build_flags_same_results test requires the same output
// from all of them (compiler contraction and the ISA must not change a bit).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "nvfp4/nn/amax_percentile.hpp"
#include "nvfp4/nvfp4.hpp"
#include "test_support.hpp"

namespace {

std::uint64_t hash = 0xCBF29CE484222325ull;

void mix(std::span<const float> values) {
  for (const float v : values) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    hash = (hash ^ bits) * 0x100000001B3ull;
  }
}

}  // namespace

int main() {
  using namespace nvfp4;
  const index_t m = 64, k = 256, n = 96;
  const auto x = test::random_values(m * k, 1, {.log2_spread = 1.0});
  const auto w = test::random_values(n * k, 2, {.sigma = 0.1});
  const auto dy = test::random_values(m * n, 3, {.sigma = 0.01});
  const std::vector<std::pair<recipe, nn::linear_options>> layers = {
      {no_quantization{}, {.bias = true}},
      {no_quantization{}, {.dtype = high_precision::bf16}},
      {nvfp4_block_scaling{}, {.seed = 1}},
      {nvfp4_block_scaling{}, {.mode = gemm_mode::relaxed, .seed = 1}},
      {nvfp4_block_scaling{.disable_rht = true, .nvfp4_4over6 = four_over_six_scope::all}, {.seed = 1}},
      {nvfp4_block_scaling{}, {.seed = 1, .nvfp4_amax = nn::percentile_amax_rule(0.99)}},
      {float8_current_scaling{}, {.bias = true}},
      {float8_current_scaling{}, {.mode = gemm_mode::relaxed}},
      {float8_current_scaling{}, {.fp8_tensor_core = fp8::mma::tensor_core::blackwell}},
      {delayed_scaling{}, {}},
      {float8_block_scaling{}, {}},
      {mxfp8_block_scaling{}, {}},
      {mxfp8_block_scaling{}, {.mode = gemm_mode::relaxed}}};
  for (const auto& [r, options] : layers) {
    nn::linear layer(k, n, r, options);
    std::copy(w.begin(), w.end(), layer.weight().begin());
    for (int step = 0; step < 3; ++step) {
      mix(layer.forward(matrix_view<const float>::row_major(x.data(), m, k)));
      mix(layer.backward(matrix_view<const float>::row_major(dy.data(), m, n)));
      mix(layer.weight_grad());
    }
    std::printf("%-22s %016llx\n", recipe_name(r), static_cast<unsigned long long>(hash));
  }
  const auto xv = matrix_view<const float>::row_major(x.data(), m, k);
  mix(dequantize(quantize_4over6<nvfp4_1x16>(xv)));
  mix(dequantize(quantize<nvfp4_1x16>(xv, {.rounding = rounding_mode::stochastic, .seed = 4})));
  mix(dequantize(quantize<mxfp4>(xv)));
  std::printf("%-22s %016llx\n", "quantizers", static_cast<unsigned long long>(hash));
  return 0;
}
