// Golden test, kinds `linear_fp8_h100`, `linear_fp8_delayed_h100` and `linear_fp8_block_h100`:
// whole Linear steps composed on an H100 from its own FP8 casts and cuBLASLt FP8 GEMMs, as TE's
// Float8CurrentScaling (HYBRID), DelayedScaling (HYBRID, steps in a row) and Float8BlockScaling
// compose them, checked through nn::linear (Hopper core, bf16 parameters) bit for bit: Y, dX and
// dW in fp32 (dtype fp32) and in bf16 (dtype bf16: Y and dX written in bf16, dW the fp32 main
// grad whose bf16 rounding is compared too), plus the per-tensor quantizations and the
// delayed-scaling scales the H100 used.
#include <gtest/gtest.h>

#include <bit>

#include "golden/golden_support.hpp"
#include "nvfp4/nn/linear.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"

namespace nvfp4 {
namespace {

struct matrix {
  std::vector<float> values;
  index_t rows = 0, cols = 0;
  matrix_view<const float> view() const { return matrix_view<const float>::row_major(values.data(), rows, cols); }
};

/// A bf16 input of a case (or of a step of one), widened to float, with its shape.
matrix bf16_input(const nlohmann::json& c, const std::string& field) {
  const auto array = golden::load(c, field);
  return {golden::load_bf16_as_float(c, field), array.shape.at(0), array.shape.at(1)};
}

/// Counts the outputs whose fp32 bits (bf16 false) or bf16 bits (bf16 true) differ from the
/// expected file's (float32, or uint16 bf16 bits); reports the first three.
int mismatches(std::span<const float> got, const nlohmann::json& c, const std::string& field, bool bf16_bits, const char* what) {
  std::vector<std::uint32_t> want;
  if (bf16_bits) {
    for (std::uint16_t v : golden::load_as<std::uint16_t>(c, field)) want.push_back(v);
  } else {
    for (float v : golden::load_as<float>(c, field)) want.push_back(std::bit_cast<std::uint32_t>(v));
  }
  if (want.size() != got.size()) {
    ADD_FAILURE() << what << ": " << got.size() << " outputs, " << field << " has " << want.size();
    return 1;
  }
  int count = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const std::uint32_t ours = bf16_bits ? bf16::from_float(got[i]).bits() : std::bit_cast<std::uint32_t>(got[i]);
    if (ours != want[i] && count++ < 3)
      ADD_FAILURE() << what << " vs " << field << " [" << i << "]: ours 0x" << std::hex << ours << ", the H100's 0x" << want[i] << std::dec;
  }
  return count;
}

/// The H100's per-tensor quantization of one tensor (codes, scale_inv, amax) against
/// quantize_fp8_current on the same bf16 values.
int check_current_quantization(const nlohmann::json& c, const std::string& input, const std::string& codes_field,
                               const std::string& name, fp8_format format) {
  const matrix x = bf16_input(c, input);
  std::vector<bf16> x16;
  for (float v : x.values) x16.push_back(bf16::from_float(v));
  const fp8_tensor q = quantize_fp8_current(matrix_view<const bf16>::row_major(x16.data(), x.rows, x.cols), format);
  int bad = 0;
  const auto codes = golden::load_as<std::uint8_t>(c, codes_field);
  const long at = golden::first_difference(std::vector<std::uint8_t>(q.codes().begin(), q.codes().end()), codes);
  EXPECT_EQ(at, -1) << name << ": first differing FP8 code";
  bad += at != -1;
  EXPECT_EQ(std::bit_cast<std::uint32_t>(q.scale_inv()[0]), std::bit_cast<std::uint32_t>(c.at("scale_inv_" + name).get<float>())) << name;
  EXPECT_EQ(q.amax(), c.at("amax_" + name).get<float>()) << name;
  bad += q.scale_inv()[0] != c.at("scale_inv_" + name).get<float>() || q.amax() != c.at("amax_" + name).get<float>();
  return bad;
}

/// One training step of `layer` on the case's (or step's) x, w, dy; compares Y, dX, dW with the
/// expected fields (fp32 bits for dtype fp32; bf16 bits of Y and dX, fp32 and bf16 bits of dW for
/// dtype bf16).
int run_step(nn::linear& layer, const nlohmann::json& s, high_precision dtype) {
  const matrix x = bf16_input(s, "x_bf16"), w = bf16_input(s, "w_bf16"), dy = bf16_input(s, "dy_bf16");
  std::copy(w.values.begin(), w.values.end(), layer.weight().begin());
  const std::vector<float> y = layer.forward(x.view());
  const std::vector<float> dx = layer.backward(dy.view());
  const bool b16 = dtype == high_precision::bf16;
  int bad = mismatches(y, s, b16 ? "y_bf16" : "y_f32", b16, b16 ? "Y (bf16 layer)" : "Y");
  bad += mismatches(dx, s, b16 ? "dx_bf16" : "dx_f32", b16, b16 ? "dX (bf16 layer)" : "dX");
  bad += mismatches(layer.weight_grad(), s, "dw_f32", false, "dW");
  if (b16) bad += mismatches(layer.weight_grad(), s, "dw_bf16", true, "dW rounded to bf16");
  return bad;
}

nn::linear_options layer_options(high_precision dtype) {
  return {.dtype = dtype, .fp8_tensor_core = fp8::mma::tensor_core::hopper, .promotion_interval = 128};
}

bool check_current_case(const nlohmann::json& c) {
  const index_t k = c.at("k"), n = c.at("n");
  int bad = check_current_quantization(c, "x_bf16", "x_e4m3", "x", fp8_format::e4m3);
  bad += check_current_quantization(c, "w_bf16", "w_e4m3", "w", fp8_format::e4m3);
  bad += check_current_quantization(c, "dy_bf16", "dy_e5m2", "dy", fp8_format::e5m2);
  for (high_precision dtype : {high_precision::fp32, high_precision::bf16}) {
    nn::linear layer(k, n, float8_current_scaling{}, layer_options(dtype));
    bad += run_step(layer, c, dtype);
  }
  return bad == 0;
}

TEST(GoldenLinearFp8H100, CurrentScalingStepBitForBit) {
  const auto cases = golden::cases_of("linear_fp8_h100");
  ASSERT_FALSE(cases.empty()) << "no linear_fp8_h100 cases in " << golden::directory();
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c));
    golden::tally::instance().record("linear_fp8_h100", check_current_case(c));
  }
}

bool check_delayed_case(const nlohmann::json& c) {
  const index_t k = c.at("k"), n = c.at("n");
  const std::string recipe = c.at("recipe");
  EXPECT_NE(recipe.find("amax_history_len=2"), std::string::npos) << recipe;  // the layer below is built so
  EXPECT_NE(recipe.find("'max'"), std::string::npos) << recipe;
  int bad = 0;
  for (high_precision dtype : {high_precision::fp32, high_precision::bf16}) {
    nn::linear layer(k, n, delayed_scaling{.amax_history_len = 2}, layer_options(dtype));
    const auto scale_of = [&](tensor_role role) { return std::bit_cast<std::uint32_t>(layer.scaling_state(role)->scale()); };
    const auto bits = [](const nlohmann::json& s, const char* key) { return std::bit_cast<std::uint32_t>(s.at(key).get<float>()); };
    int step = 0;
    for (const auto& s : c.at("steps")) {
      SCOPED_TRACE("step " + std::to_string(step++) + (dtype == high_precision::bf16 ? " (bf16 layer)" : " (fp32 layer)"));
      // The scales this step quantizes with: from the earlier steps' amaxes.
      EXPECT_EQ(scale_of(tensor_role::input), bits(s, "scale_x"));
      EXPECT_EQ(scale_of(tensor_role::weight), bits(s, "scale_w"));
      EXPECT_EQ(scale_of(tensor_role::grad_output), bits(s, "scale_dy"));
      bad += scale_of(tensor_role::input) != bits(s, "scale_x") || scale_of(tensor_role::weight) != bits(s, "scale_w") ||
             scale_of(tensor_role::grad_output) != bits(s, "scale_dy");
      bad += run_step(layer, s, dtype);
      EXPECT_EQ(scale_of(tensor_role::input), bits(s, "next_scale_x"));
      EXPECT_EQ(scale_of(tensor_role::weight), bits(s, "next_scale_w"));
      EXPECT_EQ(scale_of(tensor_role::grad_output), bits(s, "next_scale_dy"));
      bad += scale_of(tensor_role::input) != bits(s, "next_scale_x") || scale_of(tensor_role::weight) != bits(s, "next_scale_w") ||
             scale_of(tensor_role::grad_output) != bits(s, "next_scale_dy");
    }
  }
  return bad == 0;
}

TEST(GoldenLinearFp8H100, DelayedScalingStepsBitForBit) {
  const auto cases = golden::cases_or_absent("linear_fp8_delayed_h100");
  if (golden::shipped()) {
    ASSERT_FALSE(cases.empty());
  }
  if (cases.empty()) GTEST_SKIP() << "linear_fp8_delayed_h100 absent from " << golden::directory();
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c));
    golden::tally::instance().record("linear_fp8_delayed_h100", check_delayed_case(c));
  }
}

bool check_block_case(const nlohmann::json& c) {
  const index_t k = c.at("k"), n = c.at("n");
  const bool pow2 = c.at("power_2_scales");
  float8_block_scaling recipe;
  recipe.fp8_quant_fwd_inp.power_2_scale = recipe.fp8_quant_fwd_weight.power_2_scale = recipe.fp8_quant_bwd_grad.power_2_scale = pow2;
  int bad = 0;
  for (high_precision dtype : {high_precision::fp32, high_precision::bf16}) {
    nn::linear layer(k, n, recipe, layer_options(dtype));
    bad += run_step(layer, c, dtype);
  }
  return bad == 0;
}

TEST(GoldenLinearFp8H100, BlockScalingStepBitForBit) {
  const auto cases = golden::cases_or_absent("linear_fp8_block_h100");
  if (golden::shipped()) {
    ASSERT_FALSE(cases.empty());
  }
  if (cases.empty()) GTEST_SKIP() << "linear_fp8_block_h100 absent from " << golden::directory();
  for (const auto& c : cases) {
    SCOPED_TRACE(golden::describe(c) + (c.at("power_2_scales").get<bool>() ? " pow2" : " fp32 scales"));
    golden::tally::instance().record("linear_fp8_block_h100", check_block_case(c));
  }
}

}  // namespace
}  // namespace nvfp4
