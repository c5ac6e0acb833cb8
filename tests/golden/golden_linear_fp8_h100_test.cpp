// Golden test, kinds `linear_fp8_h100`, `linear_fp8_delayed_h100` and `linear_fp8_block_h100`:
// whole Linear steps composed on an H100 from its own FP8 casts and cuBLASLt FP8 GEMMs, as TE's
// Float8CurrentScaling, DelayedScaling (steps in a row) and Float8BlockScaling compose them,
// checked through nn::linear (bf16 parameters) bit for bit: Y, dX and dW in fp32 (a dtype fp32
// layer) and in bf16 (a dtype bf16 layer: Y and dX written in bf16, dW the fp32 main grad whose
// bf16 rounding is compared too), plus the per-tensor quantizations and the delayed-scaling
// scales and amaxes the GPU used. The recipe is the case's `recipe`, a constructor call in TE's
// names (golden_support.hpp, recipe_call): every argument is read, one the test does not know is
// refused; the GPU's tensor core and promotion interval follow its `source`.
#include <gtest/gtest.h>

#include <bit>
#include <optional>

#include "golden/golden_support.hpp"
#include "nvfp4/nn/linear.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/quantize.hpp"

namespace nvfp4 {
namespace {
namespace golden_linear_fp8_h100_test {

// ------------------------------------------------------------------------------ recipes

recipe_format recipe_format_of(const golden::recipe_call& r) {
  const std::string name = r.choice("fp8_format", {"E4M3", "HYBRID"});  // TE refuses pure E5M2
  return name == "E4M3" ? recipe_format::e4m3 : recipe_format::hybrid;
}

/// MMParams(use_split_accumulator=...): TE's MMParams default is True.
mm_params mm_params_of(const golden::recipe_call& outer, const std::string& key) {
  golden::recipe_call r = outer.call(key);
  r.expect("MMParams", {"use_split_accumulator"});
  return {.use_split_accumulator = !r.has("use_split_accumulator") || r.boolean("use_split_accumulator")};
}

/// QParams(power_2_scale=..., amax_epsilon=...): TE's QParams defaults are False and 0.0.
fp8_scale_options qparams_of(const golden::recipe_call& outer, const std::string& key) {
  golden::recipe_call r = outer.call(key);
  r.expect("QParams", {"power_2_scale", "amax_epsilon"});
  return {.power_2_scale = r.has("power_2_scale") && r.boolean("power_2_scale"),
          .amax_epsilon = r.has("amax_epsilon") ? r.number("amax_epsilon") : 0.0f};
}

template <class Recipe>
void read_gemm_params(const golden::recipe_call& r, Recipe& out) {
  if (r.has("fp8_gemm_fprop")) out.fp8_gemm_fprop = mm_params_of(r, "fp8_gemm_fprop");
  if (r.has("fp8_gemm_dgrad")) out.fp8_gemm_dgrad = mm_params_of(r, "fp8_gemm_dgrad");
  if (r.has("fp8_gemm_wgrad")) out.fp8_gemm_wgrad = mm_params_of(r, "fp8_gemm_wgrad");
}

/// Float8CurrentScaling(fp8_format, use_power_2_scales, fp8_gemm_fprop / _dgrad / _wgrad).
float8_current_scaling current_recipe_of(golden::case_fields& f) {
  golden::recipe_call r(f.text("recipe"), f.where() + " recipe");
  r.expect("Float8CurrentScaling", {"fp8_format", "use_power_2_scales", "fp8_gemm_fprop", "fp8_gemm_dgrad", "fp8_gemm_wgrad"});
  float8_current_scaling out;
  if (r.has("fp8_format")) out.fp8_format = recipe_format_of(r);
  if (r.has("use_power_2_scales")) out.use_power_2_scales = r.boolean("use_power_2_scales");
  read_gemm_params(r, out);
  return out;
}

/// DelayedScaling(margin, fp8_format, amax_history_len, amax_compute_algo, reduce_amax): TE's
/// constructor arguments that a Linear step depends on (reduce_amax reduces across processes:
/// one process here). A callable amax_compute_algo or scaling_factor_compute_algo is refused.
delayed_scaling delayed_recipe_of(golden::case_fields& f) {
  golden::recipe_call r(f.text("recipe"), f.where() + " recipe");
  r.expect("DelayedScaling", {"margin", "fp8_format", "amax_history_len", "amax_compute_algo", "reduce_amax"});
  delayed_scaling out;
  if (r.has("margin")) out.margin = r.number("margin");
  if (r.has("fp8_format")) out.fp8_format = recipe_format_of(r);
  if (r.has("amax_history_len")) out.amax_history_len = static_cast<int>(r.integer("amax_history_len"));
  if (r.has("amax_compute_algo"))
    out.amax_compute_algo =
        r.choice("amax_compute_algo", {"max", "most_recent"}) == "max" ? amax_compute_algorithm::max : amax_compute_algorithm::most_recent;
  if (r.has("reduce_amax")) out.reduce_amax = r.boolean("reduce_amax");
  return out;
}

/// Float8BlockScaling(fp8_format, fp8_quant_fwd_inp / _fwd_weight / _bwd_grad = QParams(...),
/// x / w / grad_block_scaling_dim, fp8_gemm_*). TE sets the QParams as class attributes from
/// NVTE_FP8_BLOCK_SCALING_FP32_SCALES; a case states them here.
float8_block_scaling block_recipe_of(golden::case_fields& f) {
  golden::recipe_call r(f.text("recipe"), f.where() + " recipe");
  r.expect("Float8BlockScaling", {"fp8_format", "fp8_quant_fwd_inp", "fp8_quant_fwd_weight", "fp8_quant_bwd_grad", "x_block_scaling_dim",
                                  "w_block_scaling_dim", "grad_block_scaling_dim", "fp8_gemm_fprop", "fp8_gemm_dgrad", "fp8_gemm_wgrad"});
  float8_block_scaling out;
  if (r.has("fp8_format")) out.fp8_format = recipe_format_of(r);
  if (r.has("fp8_quant_fwd_inp")) out.fp8_quant_fwd_inp = qparams_of(r, "fp8_quant_fwd_inp");
  if (r.has("fp8_quant_fwd_weight")) out.fp8_quant_fwd_weight = qparams_of(r, "fp8_quant_fwd_weight");
  if (r.has("fp8_quant_bwd_grad")) out.fp8_quant_bwd_grad = qparams_of(r, "fp8_quant_bwd_grad");
  if (r.has("x_block_scaling_dim")) out.x_block_scaling_dim = static_cast<int>(r.integer("x_block_scaling_dim"));
  if (r.has("w_block_scaling_dim")) out.w_block_scaling_dim = static_cast<int>(r.integer("w_block_scaling_dim"));
  if (r.has("grad_block_scaling_dim")) out.grad_block_scaling_dim = static_cast<int>(r.integer("grad_block_scaling_dim"));
  read_gemm_params(r, out);
  return out;
}

// ------------------------------------------------------------------------------ one step

/// M, K, N of a case: x [M, K], w [N, K], dy [M, N].
struct dims {
  index_t m = 0, k = 0, n = 0;
};

dims dims_of(golden::case_fields& f) { return {f.integer("m"), f.integer("k"), f.integer("n")}; }

/// The layers a case's outputs judge: fp32 (y_f32, dx_f32, dw_f32) and bf16 (y_bf16, dx_bf16,
/// dw_bf16, with dw_f32 the main grad); at least one.
std::vector<high_precision> dtypes_of(golden::case_fields& f) {
  std::vector<high_precision> out;
  if (f.has("y_f32")) out.push_back(high_precision::fp32);
  if (f.has("y_bf16")) out.push_back(high_precision::bf16);
  if (out.empty()) throw golden::refusal(f.where() + ": neither y_f32 nor y_bf16: no output to compare");
  return out;
}

/// The fields of a step's inputs and outputs (a whole case for the one-step kinds).
const std::vector<std::string> step_io_fields = {"x_bf16", "w_bf16", "dy_bf16", "y_f32",  "dx_f32",
                                                 "dw_f32", "y_bf16", "dx_bf16", "dw_bf16"};

/// Counts the outputs whose fp32 bits (bf16 false) or bf16 bits (bf16 true) differ from the
/// expected (float32, or uint16 bf16 bits); reports the first three.
int mismatches(std::span<const float> got, golden::case_fields& f, const std::string& field, std::vector<std::int64_t> shape,
               bool bf16_bits, const char* what) {
  std::vector<std::uint32_t> want;
  if (bf16_bits) {
    for (std::uint16_t v : f.load_shaped<std::uint16_t>(field, shape)) want.push_back(v);
  } else {
    for (float v : f.load_shaped<float>(field, shape)) want.push_back(std::bit_cast<std::uint32_t>(v));
  }
  int count = 0;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const std::uint32_t ours = bf16_bits ? bf16::from_float(got[i]).bits() : std::bit_cast<std::uint32_t>(got[i]);
    if (ours != want[i] && count++ < 3)
      ADD_FAILURE() << what << " vs " << field << " [" << i << "]: ours 0x" << std::hex << ours << ", the GPU's 0x" << want[i] << std::dec;
  }
  return got.size() == want.size() ? count : count + 1;
}

/// One training step of `layer` on the step's x, w, dy; compares Y, dX, dW with the expected
/// fields of the layer's dtype.
int run_step(nn::linear& layer, golden::case_fields& s, dims d, high_precision dtype) {
  const auto x = s.load_bf16_as_float("x_bf16", {d.m, d.k});
  const auto w = s.load_bf16_as_float("w_bf16", {d.n, d.k});
  const auto dy = s.load_bf16_as_float("dy_bf16", {d.m, d.n});
  std::copy(w.begin(), w.end(), layer.weight().begin());
  const std::vector<float> y = layer.forward(matrix_view<const float>::row_major(x.data(), d.m, d.k));
  const std::vector<float> dx = layer.backward(matrix_view<const float>::row_major(dy.data(), d.m, d.n));
  const bool b16 = dtype == high_precision::bf16;
  int bad = mismatches(y, s, b16 ? "y_bf16" : "y_f32", {d.m, d.n}, b16, b16 ? "Y (bf16 layer)" : "Y");
  bad += mismatches(dx, s, b16 ? "dx_bf16" : "dx_f32", {d.m, d.k}, b16, b16 ? "dX (bf16 layer)" : "dX");
  bad += mismatches(layer.weight_grad(), s, "dw_f32", {d.n, d.k}, false, b16 ? "dW (bf16 layer)" : "dW");
  if (b16) bad += mismatches(layer.weight_grad(), s, "dw_bf16", {d.n, d.k}, true, "dW rounded to bf16");
  return bad;
}

nn::linear_options layer_options(high_precision dtype, const golden::gpu_gemm& gpu) {
  return {.dtype = dtype, .fp8_tensor_core = gpu.core, .promotion_interval = gpu.promotion_interval};
}

const char* format_name(fp8_format f) { return f == fp8_format::e4m3 ? "e4m3" : "e5m2"; }

/// The GPU's per-tensor quantization of one tensor (`name` x, w or dy in the given format) with
/// `scale`, against quantize_fp8_with_scale on the same bf16 values: its FP8 codes (field
/// name_<format>, optional; the other format's field is refused), scale_inv_<name>, amax_<name>.
int check_quantization(golden::case_fields& f, const std::vector<float>& values, index_t rows, index_t cols, const std::string& name,
                       fp8_format format, float scale) {
  std::vector<bf16> x16;
  for (float v : values) x16.push_back(bf16::from_float(v));
  const fp8_tensor q = quantize_fp8_with_scale(matrix_view<const bf16>::row_major(x16.data(), rows, cols), format, scale);
  const fp8_format other = format == fp8_format::e4m3 ? fp8_format::e5m2 : fp8_format::e4m3;
  if (f.has(name + "_" + format_name(other)))
    throw golden::refusal(f.where() + ": " + name + "_" + format_name(other) + " codes, but the recipe quantizes " + name + " to " +
                          format_name(format));
  int bad = 0;
  const std::string codes_field = name + "_" + format_name(format);
  if (f.has(codes_field)) {
    const auto codes = f.load_shaped<std::uint8_t>(codes_field, {rows, cols});
    const long at = golden::first_difference(std::vector<std::uint8_t>(q.codes().begin(), q.codes().end()), codes);
    EXPECT_EQ(at, -1) << name << ": first differing FP8 code";
    bad += at != -1;
  }
  const float scale_inv = f.number("scale_inv_" + name), amax_value = f.number("amax_" + name);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(q.scale_inv()[0]), std::bit_cast<std::uint32_t>(scale_inv)) << name << " scale_inv";
  EXPECT_EQ(std::bit_cast<std::uint32_t>(q.amax()), std::bit_cast<std::uint32_t>(amax_value)) << name << " amax";
  bad += std::bit_cast<std::uint32_t>(q.scale_inv()[0]) != std::bit_cast<std::uint32_t>(scale_inv) ||
         std::bit_cast<std::uint32_t>(q.amax()) != std::bit_cast<std::uint32_t>(amax_value);
  return bad;
}

/// The fields of a step's per-tensor quantizations (x, w in the forward format, dy in the
/// backward one: codes optional).
std::vector<std::string> quantization_fields() {
  std::vector<std::string> out;
  for (const char* t : {"x", "w", "dy"})
    for (const char* kind : {"_e4m3", "_e5m2"}) out.push_back(std::string(t) + kind);
  for (const char* t : {"x", "w", "dy"}) {
    out.push_back(std::string("scale_inv_") + t);
    out.push_back(std::string("amax_") + t);
  }
  return out;
}

std::vector<std::string> joined(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ------------------------------------------------------------------------------ Float8CurrentScaling

/// The scale TE's current scaling takes from a tensor: fp8_scale_from_amax of its amax
/// (quantize_fp8_current's rule), so the quantization check can use quantize_fp8_with_scale.
float current_scale(const std::vector<float>& values, index_t rows, index_t cols, fp8_format format, bool pow2) {
  std::vector<bf16> x16;
  for (float v : values) x16.push_back(bf16::from_float(v));
  const auto q = quantize_fp8_current(matrix_view<const bf16>::row_major(x16.data(), rows, cols), format, {.power_2_scale = pow2});
  return q.scale();
}

bool check_current_case(const nlohmann::json& c) {
  golden::case_fields f(c, "linear_fp8_h100 case",
                        joined(joined({"m", "k", "n", "recipe", "source"}, step_io_fields), quantization_fields()), {"semantics"});
  const auto gpu = golden::gpu_of(f, "linear_fp8_h100");
  const dims d = dims_of(f);
  const float8_current_scaling recipe = current_recipe_of(f);
  const auto dtypes = dtypes_of(f);
  const fp8_format fwd = forward_format(recipe.fp8_format), bwd = backward_format(recipe.fp8_format);
  const bool pow2 = recipe.use_power_2_scales;
  const auto x = f.load_bf16_as_float("x_bf16", {d.m, d.k}), w = f.load_bf16_as_float("w_bf16", {d.n, d.k});
  const auto dy = f.load_bf16_as_float("dy_bf16", {d.m, d.n});
  int bad = check_quantization(f, x, d.m, d.k, "x", fwd, current_scale(x, d.m, d.k, fwd, pow2));
  bad += check_quantization(f, w, d.n, d.k, "w", fwd, current_scale(w, d.n, d.k, fwd, pow2));
  bad += check_quantization(f, dy, d.m, d.n, "dy", bwd, current_scale(dy, d.m, d.n, bwd, pow2));
  for (high_precision dtype : dtypes) {
    nn::linear layer(d.k, d.n, recipe, layer_options(dtype, gpu));
    bad += run_step(layer, f, d, dtype);
  }
  return f.finish() && bad == 0;
}

const bool current_registered = golden::register_check("linear_fp8_h100", check_current_case);

TEST(GoldenLinearFp8H100, CurrentScalingStepBitForBit) { golden::check_every_case("linear_fp8_h100"); }

// ------------------------------------------------------------------------------ DelayedScaling

/// The fields of one step of a delayed-scaling case.
const std::vector<std::string> delayed_step_fields = joined(
    joined(step_io_fields, quantization_fields()), {"scale_x", "scale_w", "scale_dy", "next_scale_x", "next_scale_w", "next_scale_dy"});

/// Steps in order through one layer per dtype: before each step the states' scales must be the
/// step's scale_* (from the earlier steps' amaxes); the step's quantizations with them give its
/// codes, scale_inv_* and amax_*; after it, each state's history holds the step's amax as TE's
/// kernel leaves it and its scale is next_scale_*.
bool check_delayed_case(const nlohmann::json& c) {
  golden::case_fields f(c, "linear_fp8_delayed_h100 case", {"m", "k", "n", "recipe", "steps", "source"}, {"semantics"});
  const auto gpu = golden::gpu_of(f, "linear_fp8_delayed_h100");
  const dims d = dims_of(f);
  const delayed_scaling recipe = delayed_recipe_of(f);
  const auto& step_list = f.at("steps");
  if (!step_list.is_array() || step_list.empty()) throw golden::refusal("steps must be a non-empty list");
  // Every step's fields are checked before the first step runs.
  std::vector<golden::case_fields> steps;
  for (std::size_t i = 0; i < step_list.size(); ++i) steps.emplace_back(step_list[i], "step " + std::to_string(i), delayed_step_fields);
  const auto dtypes = dtypes_of(steps.front());
  const fp8_format fwd = forward_format(recipe.fp8_format), bwd = backward_format(recipe.fp8_format);
  int bad = 0;
  for (high_precision dtype : dtypes) {
    nn::linear layer(d.k, d.n, recipe, layer_options(dtype, gpu));
    const auto scale_of = [&](tensor_role role) { return layer.scaling_state(role)->scale(); };
    const auto bits = [](float v) { return std::bit_cast<std::uint32_t>(v); };
    for (auto& s : steps) {
      SCOPED_TRACE(s.where() + (dtype == high_precision::bf16 ? " (bf16 layer)" : " (fp32 layer)"));
      if (dtypes_of(s) != dtypes) throw golden::refusal(s.where() + ": another set of outputs than step 0");
      const std::pair<tensor_role, const char*> roles[] = {
          {tensor_role::input, "x"}, {tensor_role::weight, "w"}, {tensor_role::grad_output, "dy"}};
      // The scales this step quantizes with: from the earlier steps' amaxes.
      for (const auto& [role, name] : roles) {
        const float want = s.number(std::string("scale_") + name);
        EXPECT_EQ(bits(scale_of(role)), bits(want)) << "scale_" << name;
        bad += bits(scale_of(role)) != bits(want);
      }
      // The GPU's quantizations of this step with those scales (the library's quantizer, once
      // per step: the same for either layer).
      if (dtype == dtypes.front()) {
        const auto x = s.load_bf16_as_float("x_bf16", {d.m, d.k}), w = s.load_bf16_as_float("w_bf16", {d.n, d.k});
        const auto dy = s.load_bf16_as_float("dy_bf16", {d.m, d.n});
        bad += check_quantization(s, x, d.m, d.k, "x", fwd, scale_of(tensor_role::input));
        bad += check_quantization(s, w, d.n, d.k, "w", fwd, scale_of(tensor_role::weight));
        bad += check_quantization(s, dy, d.m, d.n, "dy", bwd, scale_of(tensor_role::grad_output));
      }
      bad += run_step(layer, s, d, dtype);
      for (const auto& [role, name] : roles) {
        const auto history = layer.scaling_state(role)->amax_history();
        const float amax_value = s.number(std::string("amax_") + name);
        // TE's kernel: a nonzero amax rolls into the last entry and entry 0 restarts at 0 (with
        // one entry, the amax is gone again); an amax of 0 rolls nothing, entry 0 stays 0.
        const bool kept = amax_value != 0.0f && history.size() > 1;
        const float newest = kept ? history.back() : history.front();
        EXPECT_EQ(bits(newest), bits(kept ? amax_value : 0.0f)) << name << " amax in the history";
        const float want = s.number(std::string("next_scale_") + name);
        EXPECT_EQ(bits(scale_of(role)), bits(want)) << "next_scale_" << name;
        bad += bits(newest) != bits(kept ? amax_value : 0.0f) || bits(scale_of(role)) != bits(want);
      }
    }
  }
  bool ok = f.finish() && bad == 0;
  for (const auto& s : steps) ok = s.finish() && ok;
  return ok;
}

const bool delayed_registered = golden::register_check("linear_fp8_delayed_h100", check_delayed_case);

TEST(GoldenLinearFp8H100, DelayedScalingStepsBitForBit) { golden::check_every_case("linear_fp8_delayed_h100"); }

// ------------------------------------------------------------------------------ Float8BlockScaling

bool check_block_case(const nlohmann::json& c) {
  golden::case_fields f(c, "linear_fp8_block_h100 case", joined({"m", "k", "n", "recipe", "source"}, step_io_fields), {"semantics"});
  const auto gpu = golden::gpu_of(f, "linear_fp8_block_h100");
  const dims d = dims_of(f);
  const float8_block_scaling recipe = block_recipe_of(f);
  int bad = 0;
  for (high_precision dtype : dtypes_of(f)) {
    nn::linear layer(d.k, d.n, recipe, layer_options(dtype, gpu));
    bad += run_step(layer, f, d, dtype);
  }
  return f.finish() && bad == 0;
}

const bool block_registered = golden::register_check("linear_fp8_block_h100", check_block_case);

TEST(GoldenLinearFp8H100, BlockScalingStepBitForBit) { golden::check_every_case("linear_fp8_block_h100"); }

// ------------------------------------------------------------------------------ refusals

/// The first case of a label, or none (then the refusal tests skip: another NVFP4_GOLDEN_DIR).
std::optional<nlohmann::json> first_case(const std::string& label) {
  const auto cases = golden::cases_of(label);
  if (cases.empty()) return std::nullopt;
  return cases.front();
}

/// Expects `check` to refuse `c` with a message containing `needle`.
void expect_refused(const nlohmann::json& c, const golden::case_check& check, const std::string& needle) {
  const std::string message = golden::refusal_of(c, check);
  EXPECT_NE(message.find(needle), std::string::npos) << "refusal message: '" << message << "', expected it to name " << needle;
}

nlohmann::json with(nlohmann::json c, const std::string& key, nlohmann::json value) {
  c[key] = std::move(value);
  return c;
}

// A recipe argument, a step field or a value the test does not know refuses the case, naming it,
// instead of being ignored (the case would then be checked against a recipe it was not made with).
TEST(GoldenLinearFp8H100, RefusesWhatItDoesNotKnow) {
  const auto delayed = first_case("linear_fp8_delayed_h100");
  const auto current = first_case("linear_fp8_h100");
  const auto block = first_case("linear_fp8_block_h100");
  if (!delayed || !current || !block) GTEST_SKIP() << "a Linear kind absent from " << golden::directory();
  // An argument TE has that the test does not read.
  expect_refused(with(*delayed, "recipe", "DelayedScaling(amax_history_len=2, scaling_factor_compute_algo=custom)"), check_delayed_case,
                 "'scaling_factor_compute_algo'");
  // A step field of a newer producer.
  auto step_field = *delayed;
  step_field["steps"][1]["amax_x_rowwise"] = 1.0;
  expect_refused(step_field, check_delayed_case, "step 1: field 'amax_x_rowwise'");
  // Values outside what the test knows.
  expect_refused(with(*delayed, "recipe", "DelayedScaling(amax_compute_algo='mean')"), check_delayed_case, "amax_compute_algo='mean'");
  expect_refused(with(*delayed, "recipe", "DelayedScaling(amax_history_len=2.5)"), check_delayed_case, "an integer expected");
  expect_refused(with(*current, "recipe", "Float8CurrentScaling(fp8_format=E5M2)"), check_current_case, "fp8_format=E5M2");
  expect_refused(with(*current, "recipe", "Float8CurrentScaling(fp8_gemm_fprop=MMParams(use_split_accumulator=True, fast=1))"),
                 check_current_case, "'fast'");
  expect_refused(with(*current, "recipe", "Float8CurrentScaling fp8_format=HYBRID"), check_current_case, "is not a call");
  expect_refused(with(*current, "recipe", "DelayedScaling()"), check_current_case, "is not Float8CurrentScaling");
  expect_refused(with(*block, "x_block_scaling", 2), check_block_case, "'x_block_scaling'");
  expect_refused(with(*block, "source", "NVIDIA B200, torch 2.11"), check_block_case, "names no Hopper GPU");
  // The codes of the other format than the recipe's (dy in E4M3 under HYBRID, or the reverse).
  auto other_codes = *current;
  const bool e5m2 = other_codes.contains("dy_e5m2");
  const std::string have = e5m2 ? "dy_e5m2" : "dy_e4m3", other = e5m2 ? "dy_e4m3" : "dy_e5m2";
  ASSERT_TRUE(other_codes.contains(have));
  other_codes[other] = other_codes[have];
  other_codes.erase(have);
  expect_refused(other_codes, check_current_case, other + " codes, but the recipe quantizes dy to " + (e5m2 ? "e5m2" : "e4m3"));
  // An array of another shape than m, k, n say.
  expect_refused(with(*current, "m", current->at("m").get<int>() + 16), check_current_case, "the case's parameters say");
}

// The recipe is read as TE reads its arguments, not matched as text: the first delayed case's
// recipe with double quotes, Format.-prefixed names and TE's default reduce_amax=True written out
// is the same recipe, and the case passes with it.
TEST(GoldenLinearFp8H100, ReadsTheRecipeAsWritten) {
  const auto delayed = first_case("linear_fp8_delayed_h100");
  if (!delayed) GTEST_SKIP() << "linear_fp8_delayed_h100 absent from " << golden::directory();
  std::string recipe = delayed->at("recipe").get<std::string>();
  ASSERT_EQ(recipe.back(), ')');
  ASSERT_EQ(recipe.find("reduce_amax"), std::string::npos);
  std::replace(recipe.begin(), recipe.end(), '\'', '"');
  if (const auto at = recipe.find("fp8_format="); at != std::string::npos && recipe.compare(at + 11, 7, "Format.") != 0)
    recipe.insert(at + 11, "Format.");
  recipe.insert(recipe.size() - 1, recipe[recipe.size() - 2] == '(' ? "reduce_amax=True" : ", reduce_amax=True");
  SCOPED_TRACE(recipe);
  EXPECT_TRUE(check_delayed_case(with(*delayed, "recipe", recipe)));
}

}  // namespace golden_linear_fp8_h100_test
}  // namespace
}  // namespace nvfp4
