// Tests of nvfp4/recipes/recipe.hpp and the recipe types: TE's defaults, the roles' formats, the
// NVFP4 4over6 scopes and bounds, and every rejection TE makes (with its error code).
#include <gtest/gtest.h>

#include <string>

#include "nvfp4/recipes/recipe.hpp"

namespace nvfp4 {
namespace {
namespace recipes_recipe_test {

errc code_of(const recipe& r) {
  try {
    validate(r);
  } catch (const error& e) {
    return e.code();
  }
  return errc{};
}

TEST(Recipe, TeDefaults) {
  const float8_current_scaling current;
  EXPECT_EQ(current.fp8_format, recipe_format::hybrid);
  EXPECT_FALSE(current.use_power_2_scales);
  EXPECT_FALSE(current.fp8_gemm_fprop.use_split_accumulator);
  EXPECT_TRUE(current.fp8_gemm_wgrad.use_split_accumulator);
  const float8_block_scaling block;
  EXPECT_EQ(block.fp8_format, recipe_format::e4m3);
  EXPECT_TRUE(block.fp8_quant_fwd_inp.power_2_scale);
  EXPECT_EQ(block.block_shape(tensor_role::input), fp8_block_shape::block_1x128);
  EXPECT_EQ(block.block_shape(tensor_role::weight), fp8_block_shape::block_128x128);
  EXPECT_EQ(block.block_shape(tensor_role::grad_output), fp8_block_shape::block_1x128);
  const mxfp8_block_scaling mx;
  EXPECT_EQ(mx.fp8_format, recipe_format::e4m3);
  const nvfp4_block_scaling nv;
  EXPECT_FALSE(nv.disable_rht || nv.disable_stochastic_rounding || nv.disable_2d_quantization || nv.row_scaled_activation);
  EXPECT_EQ(nv.nvfp4_4over6, four_over_six_scope::none);
  EXPECT_EQ(nv.nvfp4_4over6_e4m3_use_256, four_over_six_scope::all);
  EXPECT_EQ(nv.nvfp4_4over6_err_mode, four_over_six_error::mae);
  for (const recipe& r : {recipe{no_quantization{}}, recipe{nv}, recipe{current}, recipe{delayed_scaling{}}, recipe{block}, recipe{mx}})
    EXPECT_EQ(code_of(r), errc{}) << recipe_name(r);
  EXPECT_EQ(std::string(recipe_name(recipe{delayed_scaling{}})), "DelayedScaling");
}

TEST(Recipe, Formats) {
  EXPECT_EQ(role_format(recipe_format::hybrid, tensor_role::input), fp8_format::e4m3);
  EXPECT_EQ(role_format(recipe_format::hybrid, tensor_role::weight), fp8_format::e4m3);
  EXPECT_EQ(role_format(recipe_format::hybrid, tensor_role::grad_output), fp8_format::e5m2);
  EXPECT_EQ(role_format(recipe_format::e4m3, tensor_role::grad_output), fp8_format::e4m3);
}

TEST(Recipe, FourOverSixScopes) {
  const nvfp4_block_scaling weights{.nvfp4_4over6 = four_over_six_scope::weights};
  EXPECT_TRUE(weights.uses_4over6(tensor_role::weight));
  EXPECT_FALSE(weights.uses_4over6(tensor_role::input));
  EXPECT_FALSE(weights.uses_4over6(tensor_role::grad_output));
  EXPECT_EQ(weights.e4m3_max(tensor_role::weight), 256);
  EXPECT_EQ(weights.e4m3_max(tensor_role::input), 448);  // not a 4over6 tensor
  const nvfp4_block_scaling all{
      .disable_rht = true, .nvfp4_4over6 = four_over_six_scope::all, .nvfp4_4over6_e4m3_use_256 = four_over_six_scope::activations};
  EXPECT_TRUE(all.uses_4over6(tensor_role::input));
  EXPECT_FALSE(all.uses_4over6(tensor_role::grad_output));  // never on gradients
  EXPECT_EQ(all.e4m3_max(tensor_role::input), 256);
  EXPECT_EQ(all.e4m3_max(tensor_role::weight), 448);
  const nvfp4_block_scaling none_256{.nvfp4_4over6 = four_over_six_scope::weights, .nvfp4_4over6_e4m3_use_256 = four_over_six_scope::none};
  EXPECT_EQ(none_256.e4m3_max(tensor_role::weight), 448);
}

TEST(Recipe, TeRejections) {
  const auto bad = errc::invalid_argument;
  EXPECT_EQ(code_of(float8_current_scaling{.fp8_format = recipe_format::e5m2}), bad);
  EXPECT_EQ(code_of(delayed_scaling{.fp8_format = recipe_format::e5m2}), bad);
  EXPECT_EQ(code_of(mxfp8_block_scaling{.fp8_format = recipe_format::e5m2}), bad);
  EXPECT_EQ(code_of(float8_block_scaling{.fp8_format = recipe_format::e5m2}), bad);
  EXPECT_EQ(code_of(float8_block_scaling{.x_block_scaling_dim = 3}), bad);
  EXPECT_EQ(code_of(float8_block_scaling{.w_block_scaling_dim = 0}), bad);
  EXPECT_EQ(code_of(float8_block_scaling{.grad_block_scaling_dim = 3}), bad);
  EXPECT_EQ(code_of(float8_block_scaling{.x_block_scaling_dim = 2}), bad);  // 2D x with the default 2D w
  EXPECT_EQ(code_of(float8_block_scaling{.w_block_scaling_dim = 2, .grad_block_scaling_dim = 2}), bad);
  EXPECT_EQ(code_of(float8_block_scaling{.x_block_scaling_dim = 2, .w_block_scaling_dim = 1, .grad_block_scaling_dim = 2}), bad);
  EXPECT_EQ(code_of(float8_block_scaling{.x_block_scaling_dim = 2, .w_block_scaling_dim = 1}), errc{});  // 2D x with 1D w, grad
  EXPECT_EQ(code_of(float8_block_scaling{.fp8_gemm_fprop = {.use_split_accumulator = false}}), bad);
  EXPECT_EQ(code_of(float8_block_scaling{.fp8_gemm_dgrad = {.use_split_accumulator = false}}), bad);
  EXPECT_EQ(code_of(float8_block_scaling{.fp8_gemm_wgrad = {.use_split_accumulator = false}}), bad);
  EXPECT_EQ(code_of(nvfp4_block_scaling{.nvfp4_4over6 = four_over_six_scope::all}), bad);  // activations with RHT
  EXPECT_EQ(code_of(nvfp4_block_scaling{.nvfp4_4over6 = four_over_six_scope::activations}), bad);
  EXPECT_EQ(code_of(nvfp4_block_scaling{.nvfp4_4over6 = four_over_six_scope::weights}), errc{});  // weights have no RHT
  EXPECT_EQ(code_of(nvfp4_block_scaling{.disable_rht = true, .nvfp4_4over6 = four_over_six_scope::all}), errc{});
  EXPECT_EQ(code_of(nvfp4_block_scaling{.row_scaled_activation = true}), bad);
  EXPECT_EQ(code_of(nvfp4_block_scaling{.disable_rht = true, .row_scaled_activation = true}), errc{});
  EXPECT_EQ(
      code_of(nvfp4_block_scaling{.disable_rht = true, .row_scaled_activation = true, .nvfp4_4over6 = four_over_six_scope::activations}),
      bad);
  EXPECT_EQ(code_of(mxfp8_block_scaling{.enable_2d_quantization = true}), errc::unsupported);
}

}  // namespace recipes_recipe_test
}  // namespace
}  // namespace nvfp4
