// Tests of the open extension point (recipes/policy.hpp's recipe_policy and policy_list, run by
// nn::basic_linear): a user's recipe written as one header (tests/recipes/float8_pow2_scaling.hpp:
// struct, field table, policy) runs in a layer over the library's list plus its policy, each GEMM
// rebuilt bit for bit from the public quantizers; the library's recipes run in that layer as in
// nn::linear; a type that lacks a member is not a recipe_policy.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nn/linear_test_support.hpp"
#include "nvfp4/nn/linear.hpp"
#include "recipes/float8_pow2_scaling.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace recipes_custom_recipe_test {

using test::cview, test::mview, test::first_difference, test::inputs, test::M, test::K, test::N;
using test::float8_pow2_scaling, test::float8_pow2_scaling_policy;

using my_policies = recipe_policies::with_policy<float8_pow2_scaling_policy>;
using my_linear = nn::basic_linear<my_policies>;

static_assert(recipe_policy<float8_pow2_scaling_policy>);

// A type that is no policy: no GEMM for wgrad.
struct no_wgrad : float8_pow2_scaling_policy {
  using float8_pow2_scaling_policy::float8_pow2_scaling_policy;
  void wgrad() = delete;
};
static_assert(!recipe_policy<no_wgrad>);
static_assert(!recipe_policy<float8_pow2_scaling>);  // a recipe struct is not its policy

TEST(CustomRecipe, RunsInALayerAsItsHeaderSays) {
  const inputs in;
  my_linear layer(K, N, float8_pow2_scaling{}, {.bias = true});
  std::copy(in.w.begin(), in.w.end(), layer.weight().begin());
  std::copy(in.b.begin(), in.b.end(), layer.bias().begin());
  EXPECT_EQ(std::string(my_policies::name_of(layer.current_recipe())), "Float8Pow2Scaling");
  const auto y = layer.forward(cview(in.x, M, K));
  const auto dx = layer.backward(cview(in.dy, M, N));

  // The header's rules, from the public quantizers and GEMMs: per-tensor power-of-two scales,
  // columnwise copies with the rowwise scale, fprop without split accumulation, the bias in bf16.
  const auto pow2 = [](const std::vector<float>& v, index_t r, index_t c, fp8_format f) {
    return quantize_fp8_current(cview(v, r, c), f, {.power_2_scale = true});
  };
  const fp8_tensor x8 = pow2(in.x, M, K, fp8_format::e4m3), w8 = pow2(in.w, N, K, fp8_format::e4m3),
                   g8 = pow2(in.dy, M, N, fp8_format::e5m2);
  const auto col = [](const std::vector<float>& v, index_t r, index_t c, const fp8_tensor& row) {
    return quantize_fp8_with_scale(cview(v, r, c).transposed(), row.format(), row.scale(), quantized_axis::columnwise);
  };
  std::vector<float> bias(in.b.size());
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = bf16::from_float(in.b[i]).to_float();
  std::vector<float> want_y(M * N), want_dx(M * K), want_dw(N * K);
  fp8_gemm(x8, w8, mview(want_y, M, N), {.promotion_interval = 0, .bias = bias});
  fp8_gemm(g8, col(in.w, N, K, w8), mview(want_dx, M, K), {.promotion_interval = 128});
  fp8_gemm(col(in.dy, M, N, g8), col(in.x, M, K, x8), mview(want_dw, N, K), {.promotion_interval = 128});
  EXPECT_EQ(first_difference(y, want_y), -1);
  EXPECT_EQ(first_difference(dx, want_dx), -1);
  EXPECT_EQ(first_difference(layer.weight_grad(), want_dw), -1);

  // Saved forwards, switches and the table work as for the library's recipes.
  std::vector<float> y2(M * N);
  const auto saved = layer.forward({layer.weight_view(), std::span<const float>(layer.bias())}, cview(in.x, M, K), mview(y2, M, N));
  layer.set_recipe(nvfp4_block_scaling{});
  EXPECT_TRUE(std::holds_alternative<float8_pow2_scaling>(saved.recipe()));
  std::vector<float> dx2(M * K), dw2(N * K), db2(N);
  layer.backward(saved, cview(in.dy, M, N), mview(dx2, M, K), {mview(dw2, N, K), db2});
  EXPECT_EQ(first_difference(y2, want_y), -1);
  EXPECT_EQ(first_difference(dx2, want_dx), -1);
  EXPECT_EQ(first_difference(dw2, want_dw), -1);
  EXPECT_EQ(field_count<float8_pow2_scaling>(), 4u);
  EXPECT_EQ(test::error_code_of([&] { layer.set_recipe(float8_pow2_scaling{.fp8_format = recipe_format::e5m2}); }), errc::invalid_argument);
}

TEST(CustomRecipe, TheLibrarysRecipesRunAsInLinear) {
  const inputs in;
  for (const auto& [r, options] : test::every_recipe()) {
    SCOPED_TRACE(recipe_name(r));
    nn::linear library = test::make_layer(r, options, in);
    my_linear mine(K, N, std::visit([](const auto& v) { return my_policies::recipe_variant(v); }, r), options);
    std::copy(in.w.begin(), in.w.end(), mine.weight().begin());
    if (options.bias) std::copy(in.b.begin(), in.b.end(), mine.bias().begin());
    EXPECT_EQ(first_difference(mine.forward(cview(in.x, M, K)), library.forward(cview(in.x, M, K))), -1);
    EXPECT_EQ(first_difference(mine.backward(cview(in.dy, M, N)), library.backward(cview(in.dy, M, N))), -1);
    EXPECT_EQ(first_difference(mine.weight_grad(), library.weight_grad()), -1);
  }
}

}  // namespace recipes_custom_recipe_test
}  // namespace
}  // namespace nvfp4
