// Tests of nvfp4/recipes/policy.hpp and the policy list of nvfp4/recipes/recipe.hpp: every recipe
// type has exactly one policy, named as TE names the recipe class, and satisfies recipe_policy; a
// policy used on its own (its role quantizers, then its GEMMs) computes what its header says from
// the public quantizers and GEMMs (the expected values come from those functions, which the golden
// tests check against TE); a kept W's packed fprop operand gives the bits of the plain one;
// delayed scaling's state hooks; the block-scaled recipes' role copies (made two at a time) are
// the public quantizers' copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "nvfp4/recipes/recipe.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace recipes_policy_test {

using test::random_values;

// TE's recipe class names (transformer_engine/common/recipe/__init__.py), and the library's.
TEST(RecipePolicy, NamesAreTheRecipeClasses) {
  const std::vector<std::string> te = {"NoQuantization", "NVFP4BlockScaling",  "Float8CurrentScaling",
                                       "DelayedScaling", "Float8BlockScaling", "MXFP8BlockScaling"};
  const std::vector<recipe> recipes = {no_quantization{}, nvfp4_block_scaling{},  float8_current_scaling{},
                                       delayed_scaling{}, float8_block_scaling{}, mxfp8_block_scaling{}};
  ASSERT_EQ(std::variant_size_v<recipe>, te.size());
  for (std::size_t i = 0; i < recipes.size(); ++i) EXPECT_EQ(recipe_name(recipes[i]), te[i]);
  std::set<std::string> names, short_names;
  std::size_t count = 0;
  recipe_policies::for_each([&]<class P>(std::type_identity<P>) {
    static_assert(std::is_same_v<recipe_policy_t<typename P::recipe_type>, P>, "each recipe type has its one policy");
    static_assert(recipe_policy<P>);
    names.insert(P::name);
    short_names.insert(P::short_name);
    ++count;
  });
  EXPECT_EQ(count, te.size());
  EXPECT_EQ(names, std::set<std::string>(te.begin(), te.end()));
  EXPECT_EQ(short_names.size(), count);  // report names are distinct
  static_assert(std::is_same_v<std::variant_alternative_t<0, recipe>, no_quantization>, "a default layer is unquantized");
}

struct shapes {
  index_t m = 48, n = 40, k = 64;
};

matrix_view<const float> view(const std::vector<float>& v, index_t rows, index_t cols) {
  return matrix_view<const float>::row_major(v.data(), rows, cols);
}

std::vector<std::uint32_t> bits(const std::vector<float>& v) { return test::float_bits(v); }

// NVFP4: fprop nvfp4_gemm(X rowwise, W rowwise), plain or packed W; dgrad and wgrad as documented.
TEST(RecipePolicy, Nvfp4ComposesThePublicQuantizers) {
  const shapes s;
  const auto x = random_values(s.m * s.k, 1), w = random_values(s.n * s.k, 2), dy = random_values(s.m * s.n, 3);
  const nvfp4_block_scaling r;
  nvfp4_block_scaling_policy policy(r);
  const linear_context c{.in_features = s.k, .out_features = s.n, .gradient_seed = 99};

  nvfp4_block_scaling_policy::weight_operands ops;
  policy.quantize_weight(c, view(w, s.n, s.k), /*columnwise=*/true, true, ops);
  nvfp4_block_scaling_policy::saved_input saved;
  std::vector<float> y(s.m * s.n), want_y(s.m * s.n);
  policy.fprop(c, policy.quantize_input(c, view(x, s.m, s.k), &saved, true), ops, matrix_view<float>::row_major(y.data(), s.m, s.n));
  const operand_pair xs = quantize_activation(view(x, s.m, s.k), r), ws = quantize_weight(view(w, s.n, s.k), r);
  nvfp4_gemm(xs.rowwise, ws.rowwise, matrix_view<float>::row_major(want_y.data(), s.m, s.n));
  EXPECT_EQ(bits(y), bits(want_y));

  std::vector<float> dx(s.m * s.k), dw(s.n * s.k), want_dx(s.m * s.k), want_dw(s.n * s.k);
  const auto& grads = policy.quantize_gradient(c, view(dy, s.m, s.n));
  policy.dgrad(c, grads, ops, matrix_view<float>::row_major(dx.data(), s.m, s.k));
  policy.wgrad(c, grads, saved, matrix_view<float>::row_major(dw.data(), s.n, s.k));
  nvfp4_block_scaling step = r;
  step.seed = 99;
  const operand_pair gs = quantize_gradient(view(dy, s.m, s.n), step);
  nvfp4_gemm(gs.rowwise, ws.columnwise, matrix_view<float>::row_major(want_dx.data(), s.m, s.k));
  nvfp4_gemm(gs.columnwise, xs.columnwise, matrix_view<float>::row_major(want_dw.data(), s.n, s.k));
  EXPECT_EQ(bits(dx), bits(want_dx));
  EXPECT_EQ(bits(dw), bits(want_dw));

  // A kept W (packed once) gives the plain operand's bits; inference saves nothing.
  policy.pack_fprop_operand(c, ops);
  std::vector<float> y_packed(s.m * s.n);
  policy.fprop(c, policy.quantize_input(c, view(x, s.m, s.k), nullptr, false), ops,
               matrix_view<float>::row_major(y_packed.data(), s.m, s.n));
  EXPECT_EQ(bits(y_packed), bits(want_y));
}

// Per-tensor FP8 (current scaling): fprop fp8_gemm of the current-scaled copies with the recipe's
// fprop flag (no split accumulator by TE's default); the bias in the epilogue.
TEST(RecipePolicy, CurrentScalingComposesThePublicQuantizers) {
  const shapes s;
  const auto x = random_values(s.m * s.k, 4), w = random_values(s.n * s.k, 5), b = random_values(s.n, 6);
  const float8_current_scaling r;
  float8_current_scaling_policy policy(r);
  const linear_context c{.in_features = s.k, .out_features = s.n, .bias = b};
  float8_current_scaling_policy::weight_operands ops;
  policy.quantize_weight(c, view(w, s.n, s.k), false, false, ops);
  std::vector<float> y(s.m * s.n), want(s.m * s.n);
  policy.fprop(c, policy.quantize_input(c, view(x, s.m, s.k), nullptr, false), ops, matrix_view<float>::row_major(y.data(), s.m, s.n));
  const fp8_tensor x8 = quantize_fp8_current(view(x, s.m, s.k), fp8_format::e4m3);
  const fp8_tensor w8 = quantize_fp8_current(view(w, s.n, s.k), fp8_format::e4m3);
  fp8_gemm(x8, w8, matrix_view<float>::row_major(want.data(), s.m, s.n), {.promotion_interval = 0, .bias = b});
  EXPECT_EQ(bits(y), bits(want));
  policy.pack_fprop_operand(c, ops);
  std::vector<float> y_packed(s.m * s.n);
  policy.fprop(c, policy.quantize_input(c, view(x, s.m, s.k), nullptr, false), ops,
               matrix_view<float>::row_major(y_packed.data(), s.m, s.n));
  EXPECT_EQ(bits(y_packed), bits(want));
}

bool same_fp8(const fp8_tensor& a, const fp8_tensor& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && a.format() == b.format() && a.axis() == b.axis() &&
         a.block_rows() == b.block_rows() && a.amax() == b.amax() && a.scale() == b.scale() && std::ranges::equal(a.codes(), b.codes()) &&
         std::ranges::equal(a.scale_inv(), b.scale_inv());
}
template <class Format>
bool same_mx(const quantized_tensor<Format>& a, const quantized_tensor<Format>& b) {
  const auto bytes = [](const auto& q) { return std::span(reinterpret_cast<const std::uint8_t*>(q.data().data()), q.data().size()); };
  const auto scales = [](const auto& q) { return std::span(reinterpret_cast<const std::uint8_t*>(q.scales().data()), q.scales().size()); };
  return a.rows() == b.rows() && a.cols() == b.cols() && a.axis() == b.axis() && a.amax() == b.amax() &&
         std::ranges::equal(bytes(a), bytes(b)) && std::ranges::equal(scales(a), scales(b));
}

// Float8BlockScaling's role copies (the rowwise copy, and the columnwise one of the transpose from
// the same read) are quantize_fp8_blockwise's with the role's block shape, options and format, on
// shapes of several 128 x 128 tiles with ragged edges; a second step with other values into the
// policy's kept tensors gives that step's copies.
TEST(RecipePolicy, Float8BlockScalingCopiesAreTheQuantizers) {
  const index_t m = 130, n = 136, k = 260;
  float8_block_scaling r;
  r.fp8_format = recipe_format::hybrid;  // E5M2 dY copies
  float8_block_scaling_policy policy(r);
  const linear_context c{.in_features = k, .out_features = n};
  const auto quantized = [&](tensor_role role, matrix_view<const float> v, bool columnwise) {
    const fp8_format f = role == tensor_role::grad_output ? fp8_format::e5m2 : fp8_format::e4m3;
    return columnwise ? quantize_fp8_blockwise(v.transposed(), f, r.block_shape(role), r.scale_options(role), quantized_axis::columnwise)
                      : quantize_fp8_blockwise(v, f, r.block_shape(role), r.scale_options(role));
  };
  float8_block_scaling_policy::weight_operands ops;
  float8_block_scaling_policy::saved_input saved;
  for (unsigned step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const auto x = random_values(m * k, 20 + step, {.sigma = 1.0 + step}), w = random_values(n * k, 30 + step),
               dy = random_values(m * n, 40 + step, {.log2_spread = 4.0});
    policy.quantize_weight(c, view(w, n, k), /*columnwise=*/true, true, ops);
    EXPECT_TRUE(same_fp8(ops.row.plain, quantized(tensor_role::weight, view(w, n, k), false)));
    EXPECT_TRUE(same_fp8(ops.col, quantized(tensor_role::weight, view(w, n, k), true)));
    EXPECT_TRUE(same_fp8(policy.quantize_input(c, view(x, m, k), &saved, true), quantized(tensor_role::input, view(x, m, k), false)));
    EXPECT_TRUE(same_fp8(saved.x_col, quantized(tensor_role::input, view(x, m, k), true)));
    EXPECT_TRUE(same_fp8(policy.quantize_input(c, view(x, m, k), nullptr, false), quantized(tensor_role::input, view(x, m, k), false)));
    const auto& g = policy.quantize_gradient(c, view(dy, m, n));
    EXPECT_TRUE(same_fp8(g.row, quantized(tensor_role::grad_output, view(dy, m, n), false)));
    EXPECT_TRUE(same_fp8(g.col, quantized(tensor_role::grad_output, view(dy, m, n), true)));
  }
  // A weight for inference only: the rowwise copy alone.
  float8_block_scaling_policy::weight_operands inference;
  const auto w = random_values(n * k, 50);
  policy.quantize_weight(c, view(w, n, k), /*columnwise=*/false, false, inference);
  EXPECT_TRUE(same_fp8(inference.row.plain, quantized(tensor_role::weight, view(w, n, k), false)));
  EXPECT_TRUE(inference.col.codes().empty());
}

// MXFP8BlockScaling's role copies are quantize_mxfp8_te's of the tensor and of its transpose (dY
// in E5M2 under HYBRID), over two steps into the kept tensors.
TEST(RecipePolicy, Mxfp8CopiesAreTheQuantizers) {
  const index_t m = 70, n = 72, k = 300;
  mxfp8_block_scaling hybrid;
  hybrid.fp8_format = recipe_format::hybrid;
  mxfp8_block_scaling_policy policy(hybrid);
  const linear_context c{.in_features = k, .out_features = n};
  mxfp8_block_scaling_policy::weight_operands ops;
  mxfp8_block_scaling_policy::saved_input saved;
  for (unsigned step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const auto x = random_values(m * k, 60 + step, {.sigma = 1.0 + step}), w = random_values(n * k, 70 + step),
               dy = random_values(m * n, 80 + step, {.log2_spread = 4.0});
    policy.quantize_weight(c, view(w, n, k), /*columnwise=*/true, true, ops);
    EXPECT_TRUE(same_mx(ops.row.plain, quantize_mxfp8_te<mxfp8>(view(w, n, k))));
    EXPECT_TRUE(same_mx(ops.col, quantize_mxfp8_te<mxfp8>(view(w, n, k).transposed(), quantized_axis::columnwise)));
    EXPECT_TRUE(same_mx(policy.quantize_input(c, view(x, m, k), &saved, true), quantize_mxfp8_te<mxfp8>(view(x, m, k))));
    EXPECT_TRUE(same_mx(saved.x_col, quantize_mxfp8_te<mxfp8>(view(x, m, k).transposed(), quantized_axis::columnwise)));
    const auto& g = std::get<mxfp8_block_scaling_policy::gradient_pair<mxfp8_e5m2>>(policy.quantize_gradient(c, view(dy, m, n)));
    EXPECT_TRUE(same_mx(g.row, quantize_mxfp8_te<mxfp8_e5m2>(view(dy, m, n))));
    EXPECT_TRUE(same_mx(g.col, quantize_mxfp8_te<mxfp8_e5m2>(view(dy, m, n).transposed(), quantized_axis::columnwise)));
  }
}

// Delayed scaling: quantization with the state's scale, the amax recorded only when asked; the
// update hooks step the roles they name; switched_to keeps the states.
TEST(RecipePolicy, DelayedScalingStateHooks) {
  const shapes s;
  const auto x = random_values(s.m * s.k, 7, {.sigma = 3.0}), w = random_values(s.n * s.k, 8);
  delayed_scaling_policy policy(delayed_scaling{.amax_history_len = 4});
  const linear_context c{.in_features = s.k, .out_features = s.n};
  delayed_scaling_policy::weight_operands ops;
  policy.quantize_weight(c, view(w, s.n, s.k), false, /*record=*/false, ops);
  EXPECT_EQ(policy.scaling_state(tensor_role::weight)->amax_history()[0], 0.0f);
  policy.quantize_weight(c, view(w, s.n, s.k), false, /*record=*/true, ops);
  const float w_amax = quantize_fp8_with_scale(view(w, s.n, s.k), fp8_format::e4m3, 1.0f).amax();
  EXPECT_EQ(policy.scaling_state(tensor_role::weight)->amax_history()[0], w_amax);
  std::vector<float> y(s.m * s.n);
  policy.fprop(c, policy.quantize_input(c, view(x, s.m, s.k), nullptr, true), ops, matrix_view<float>::row_major(y.data(), s.m, s.n));
  policy.update_backward_role();  // grad_output recorded nothing: its scale stays 1
  EXPECT_EQ(policy.scaling_state(tensor_role::grad_output)->scale(), 1.0f);
  EXPECT_EQ(policy.scaling_state(tensor_role::input)->scale(), 1.0f);
  policy.update_forward_roles();
  const float input_scale = policy.scaling_state(tensor_role::input)->scale();
  EXPECT_NE(input_scale, 1.0f);
  EXPECT_NE(policy.scaling_state(tensor_role::weight)->scale(), 1.0f);
  delayed_scaling_policy next =
      policy.switched_to(delayed_scaling{.amax_history_len = 2, .fp8_gemm_dgrad = {.use_split_accumulator = false}});
  EXPECT_EQ(next.scaling_state(tensor_role::input)->scale(), input_scale);
  EXPECT_EQ(next.scaling_state(tensor_role::input)->amax_history().size(), 2u);
  EXPECT_EQ(next.recipe().amax_history_len, 2);
  // The states are shared, the recipes are each policy's own (a forward saved under the first
  // runs its backward's GEMMs with the first's flags, on the live states).
  EXPECT_EQ(policy.scaling_state(tensor_role::input), next.scaling_state(tensor_role::input));
  EXPECT_EQ(policy.recipe().amax_history_len, 4);
  EXPECT_TRUE(policy.recipe().fp8_gemm_dgrad.use_split_accumulator);

  // Stateless policies have no state to give.
  const float8_block_scaling_policy block{float8_block_scaling{}};
  EXPECT_EQ(block.scaling_state(tensor_role::input), nullptr);
}

}  // namespace recipes_policy_test
}  // namespace
}  // namespace nvfp4
