// Golden test of the training-recipe quantizers against TransformerEngine's own pure-PyTorch
// reference quantizers (tests/golden/producers/run_te_recipe_refs.py, TE d0067d0), bit for bit:
// kinds fp8_scale (the scale-from-amax rule), fp8_current (per-tensor current scaling),
// fp8_block 1x128 / 128x128 (Float8BlockScaling), mxfp8_te (MXFP8, TE's round-up E8M0),
// nvfp4_4over6 1x16 / 16x16, nvfp4_row_scaled plain / 4over6 and fp8_delayed (the delayed-scaling
// state stepped over amax sequences). Each kind is checked through the public quantizer and, where
// one exists, its scalar reference, with every parameter (format, scale rule, shape, block shape,
// history length, margin, ...) taken from the case. A kind missing from a directory given by
// NVFP4_GOLDEN_DIR is reported as absent, not failed.
//
// One documented difference is checked as such, not hidden: for an amax of Inf or NaN the Python
// reference's scale rule gives 0 / NaN (0.5 with power-of-2 scales), TE's CUDA rule
// (compute_scale_from_amax) and the library give 1 (docs/numerics.md, "Where TE's Python
// references differ from its kernels").
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <span>
#include <tuple>

#include "golden/golden_support.hpp"
#include "nvfp4/recipes/delayed_scaling.hpp"
#include "nvfp4/scaling/four_over_six.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/mxfp8_quantize.hpp"
#include "nvfp4/scaling/row_scaled_nvfp4.hpp"

namespace nvfp4 {
namespace {
namespace golden_recipe_quantize_test {

fp8_format format_of(golden::case_fields& f) {
  return f.choice("format", {"e4m3", "e5m2"}) == "e4m3" ? fp8_format::e4m3 : fp8_format::e5m2;
}

std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

/// A case's input [shape] as floats (exact), and as bf16 when `dtype` says the peer quantized a
/// bf16 tensor (the values must then be bf16 values).
struct input {
  std::vector<float> values;
  std::vector<bf16> values_bf16;
  index_t rows = 0, cols = 0;
  bool is_bf16 = false;
  explicit input(golden::case_fields& f) {
    std::tie(rows, cols) = f.shape("shape");
    values = f.load_shaped<float>("input", {rows, cols});
    is_bf16 = f.choice("dtype", {"bf16", "fp32"}) == "bf16";
    if (is_bf16) values_bf16 = golden::bf16_values(values, "input");
  }
  matrix_view<const float> f32() const { return matrix_view<const float>::row_major(values.data(), rows, cols); }
  matrix_view<const bf16> b16() const { return matrix_view<const bf16>::row_major(values_bf16.data(), rows, cols); }
  /// Calls fn with the view of the peer's input type.
  template <class F>
  auto visit(F&& fn) const {
    return is_bf16 ? fn(b16()) : fn(f32());
  }
};

index_t ceil_div(index_t a, index_t b) { return (a + b - 1) / b; }

/// Index of the first float whose bits differ, or -1.
long first_float_difference(std::span<const float> got, const std::vector<float>& expected) {
  if (got.size() != expected.size()) return 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (bits(got[i]) != bits(expected[i])) return static_cast<long>(i);
  return -1;
}

/// FP8 codes and decode scales, read once from the case.
struct fp8_expected {
  std::vector<std::uint8_t> data;
  std::vector<float> scale_inv;
};

bool same_fp8(const fp8_tensor& q, const fp8_expected& want, const char* what) {
  const std::vector<std::uint8_t> codes(q.codes().begin(), q.codes().end());
  const long d = golden::first_difference(codes, want.data), s = first_float_difference(q.scale_inv(), want.scale_inv);
  EXPECT_EQ(d, -1) << what << ": first differing code";
  EXPECT_EQ(s, -1) << what << ": first differing scale_inv";
  return d == -1 && s == -1;
}

// ------------------------------------------------------------------------------ fp8_scale

int documented_scale_differences = 0;

bool check_scale_case(const nlohmann::json& c) {
  golden::case_fields f(c, "fp8_scale case", {"format", "pow2", "eps", "input_dtype", "amax", "scale", "scale_inv"});
  const auto amaxes = f.load_as<float>("amax");
  const auto scale = f.load_shaped<float>("scale", {static_cast<std::int64_t>(amaxes.size())});
  const auto scale_inv = f.load_shaped<float>("scale_inv", {static_cast<std::int64_t>(amaxes.size())});
  const bool pow2 = f.boolean("pow2");
  const float eps = f.number("eps");
  const float value_for_inf = f.choice("input_dtype", {"bf16", "fp32"}) == "bf16" ? input_max_finite<bf16>() : FLT_MAX;
  const fp8_format format = format_of(f);
  bool ok = true;
  for (std::size_t i = 0; i < amaxes.size(); ++i) {
    const float a = amaxes[i];
    const float ours = fp8_scale_from_amax(a, fp8_max(format), pow2, eps, value_for_inf);
    if (std::isfinite(a)) {
      const bool same = bits(ours) == bits(scale[i]) && bits(1.0f / ours) == bits(scale_inv[i]);
      EXPECT_TRUE(same) << "amax " << a << ": scale " << ours << " vs TE " << scale[i] << ", scale_inv " << 1.0f / ours << " vs "
                        << scale_inv[i];
      ok = ok && same;
    } else {
      // The documented difference: the kernel (and we) give 1, the Python reference 0 for Inf,
      // NaN for NaN (0.5 with power-of-2 scales: frexp of NaN gives exponent 0).
      const float peer = std::isinf(a) ? 0.0f : (pow2 ? 0.5f : NAN);
      const bool as_documented = ours == 1.0f && (std::isnan(peer) ? std::isnan(scale[i]) : bits(scale[i]) == bits(peer));
      EXPECT_TRUE(as_documented) << "amax " << a << ": ours " << ours << ", TE's Python reference " << scale[i];
      ok = ok && as_documented;
      ++documented_scale_differences;
    }
  }
  return f.finish() && ok;
}

const bool scale_registered = golden::register_check("fp8_scale", check_scale_case);

TEST(GoldenRecipeQuantize, Fp8ScaleFromAmax) {
  golden::check_every_case("fp8_scale");
  if (!golden::cases_of("fp8_scale").empty() && golden::shipped()) {
    EXPECT_GT(documented_scale_differences, 0);
  }
}

// ------------------------------------------------------------------------------ fp8_delayed

/// The recipe and format of an fp8_delayed case.
struct delayed_case {
  delayed_scaling recipe;
  fp8_format format = fp8_format::e4m3;
  float initial_scale = 1.0f;  ///< the history starts all zero
  std::vector<float> amaxes, scales, histories;
};

/// Steps a delayed-scaling state over the case's amaxes (each recorded into entry 0, then the
/// end-of-step update) and compares the whole history after every step and, when `with_scale`,
/// the scale.
bool same_delayed_steps(const delayed_case& d, bool unfused, bool with_scale) {
  delayed_scaling recipe = d.recipe;
  recipe.unfused_update = unfused;
  const auto length = static_cast<std::size_t>(recipe.amax_history_len);
  delayed_scaling_state state(recipe, d.format);
  state.restore(std::vector<float>(length, 0.0f), d.initial_scale);
  for (std::size_t t = 0; t < d.amaxes.size(); ++t) {
    state.record(d.amaxes[t]);
    state.update();
    const std::vector<float> want(d.histories.begin() + static_cast<std::ptrdiff_t>(t * length),
                                  d.histories.begin() + static_cast<std::ptrdiff_t>((t + 1) * length));
    const long h = first_float_difference(state.amax_history(), want);
    if ((with_scale && bits(state.scale()) != bits(d.scales[t])) || h != -1) {
      ADD_FAILURE() << (unfused ? "unfused" : "fused") << " update, step " << t << " (amax " << d.amaxes[t] << "): scale " << state.scale()
                    << " vs TE " << d.scales[t] << ", first differing history entry " << h;
      return false;
    }
  }
  return true;
}

int fused_delayed_checked = 0;

bool check_delayed_case(const nlohmann::json& c) {
  golden::case_fields f(
      c, "fp8_delayed case",
      {"format", "fp8_max", "amax_history_len", "amax_compute_algo", "margin", "amax", "initial_scale", "scale", "history"}, {"sequence"});
  delayed_case d;
  d.format = format_of(f);
  d.recipe.margin = f.number("margin");
  d.recipe.amax_history_len = static_cast<int>(f.integer("amax_history_len"));
  d.recipe.amax_compute_algo =
      f.choice("amax_compute_algo", {"max", "most_recent"}) == "max" ? amax_compute_algorithm::max : amax_compute_algorithm::most_recent;
  if (f.number("fp8_max") != fp8_max(d.format)) throw golden::refusal("fp8_max is not the format's largest value, which TE's update uses");
  d.initial_scale = f.number("initial_scale");
  d.amaxes = f.load_as<float>("amax");
  const auto steps = static_cast<std::int64_t>(d.amaxes.size());
  d.scales = f.load_shaped<float>("scale", {steps});
  d.histories = f.load_shaped<float>("history", {steps, d.recipe.amax_history_len});
  // The peer is TE's unfused (Python) update: history and scale, every step of every case.
  bool ok = same_delayed_steps(d, true, true);
  // TE's fused kernel (the default here) rolls the history the same way except after a step
  // whose amax is 0, and drops a NaN (fmaxf); its scale is one division (an ulp from the peer's
  // at times), pinned by the hand-worked cases of tests/recipes/delayed_scaling_test.cpp instead.
  // So the fused history is held to the peer's where every amax is finite and nonzero.
  const bool fused_comparable = std::all_of(d.amaxes.begin(), d.amaxes.end(), [](float a) { return std::isfinite(a) && a != 0.0f; });
  if (fused_comparable) ok = same_delayed_steps(d, false, false) && ok;
  fused_delayed_checked += fused_comparable;
  return f.finish() && ok;
}

const bool delayed_registered = golden::register_check("fp8_delayed", check_delayed_case);

TEST(GoldenRecipeQuantize, Fp8DelayedScaling) {
  golden::check_every_case("fp8_delayed");
  if (golden::shipped()) {
    EXPECT_GT(fused_delayed_checked, 0);
  }
}

// ------------------------------------------------------------------------------ fp8_current

bool check_current_case(const nlohmann::json& c) {
  golden::case_fields f(c, "fp8_current case",
                        {"format", "pow2", "eps", "input", "dtype", "shape", "data", "scale_inv", "custom_recipe_ref_scale_inv"}, {"dist"});
  const input in(f);
  const fp8_format format = format_of(f);
  const fp8_scale_options options{.power_2_scale = f.boolean("pow2"), .amax_epsilon = f.number("eps")};
  const fp8_expected want{f.load_shaped<std::uint8_t>("data", {in.rows, in.cols}), f.load_shaped<float>("scale_inv", {1})};
  bool ok = in.visit([&](auto view) {
    const bool fast = same_fp8(quantize_fp8_current(view, format, options), want, "public");
    const bool ref = same_fp8(reference::quantize_fp8_current(view, format, options), want, "reference");
    return fast && ref;
  });
  if (f.has("custom_recipe_ref_scale_inv")) {
    // TE's other Python reference (CurrentScalingQuantizerRef) takes the infinite-scale value
    // from the input type (bf16 max) where the kernel and ref_per_tensor_cs use FLT_MAX.
    const bool as_documented = in.is_bf16 && f.number("custom_recipe_ref_scale_inv") == 1.0f / input_max_finite<bf16>();
    EXPECT_TRUE(as_documented) << "CurrentScalingQuantizerRef differs for another reason";
    ok = ok && as_documented;
  }
  return f.finish() && ok;
}

const bool current_registered = golden::register_check("fp8_current", check_current_case);

TEST(GoldenRecipeQuantize, Fp8CurrentScaling) { golden::check_every_case("fp8_current"); }

// ------------------------------------------------------------------------------ fp8_block

/// Mode 1x128 or 128x128 (the label chose the check); the 1x128 columnwise copy when the case
/// holds it, and for 128x128 the columnwise copy must be the rowwise one transposed.
template <fp8_block_shape Shape>
bool check_block_case(const nlohmann::json& c) {
  golden::case_fields f(c, "fp8_block case",
                        {"format", "pow2", "eps", "input", "dtype", "shape", "data", "scale_inv", "data_t", "scale_inv_t"}, {"dist"});
  const input in(f);
  const fp8_format format = format_of(f);
  const fp8_scale_options options{.power_2_scale = f.boolean("pow2"), .amax_epsilon = f.number("eps")};
  const index_t block_rows = fp8_block_rows(Shape);
  const fp8_expected want{f.load_shaped<std::uint8_t>("data", {in.rows, in.cols}),
                          f.load_shaped<float>("scale_inv", {ceil_div(in.rows, block_rows), ceil_div(in.cols, fp8_block_size)})};
  const bool has_t = f.has("data_t");
  if (has_t != f.has("scale_inv_t")) throw golden::refusal("data_t and scale_inv_t come together");
  if (has_t && Shape == fp8_block_shape::block_128x128)
    throw golden::refusal("a 128x128 case's columnwise copy is its transpose; data_t is not read");
  fp8_expected want_t;
  if (has_t)
    want_t = {f.load_shaped<std::uint8_t>("data_t", {in.cols, in.rows}),
              f.load_shaped<float>("scale_inv_t", {in.cols, ceil_div(in.rows, fp8_block_size)})};
  const bool ok = in.visit([&](auto view) {
    bool good = same_fp8(quantize_fp8_blockwise(view, format, Shape, options), want, "public");
    good = same_fp8(reference::quantize_fp8_blockwise(view, format, Shape, options), want, "reference") && good;
    const auto columnwise = quantize_fp8_blockwise(view.transposed(), format, Shape, options, quantized_axis::columnwise);
    if (has_t) {
      good = same_fp8(columnwise, want_t, "columnwise") && good;
    } else if (Shape == fp8_block_shape::block_128x128) {
      // TE's 128x128 columnwise copy is the rowwise one transposed (square tiles).
      bool transposed = true;
      for (index_t r = 0; r < view.rows(); ++r)
        for (index_t k = 0; k < view.cols(); ++k)
          transposed = transposed && columnwise.code(k, r) == want.data[static_cast<std::size_t>(r * view.cols() + k)];
      for (index_t br = 0; br < columnwise.scale_rows(); ++br)
        for (index_t bc = 0; bc < columnwise.scale_cols(); ++bc)
          transposed = transposed && bits(columnwise.block_scale_inv(br, bc)) ==
                                         bits(want.scale_inv[static_cast<std::size_t>(bc * columnwise.scale_rows() + br)]);
      EXPECT_TRUE(transposed) << "128x128 columnwise copy is not the transpose";
      good = good && transposed;
    }
    return good;
  });
  return f.finish() && ok;
}

const bool block_registered = golden::register_check("fp8_block 1x128", check_block_case<fp8_block_shape::block_1x128>) &&
                              golden::register_check("fp8_block 128x128", check_block_case<fp8_block_shape::block_128x128>);

TEST(GoldenRecipeQuantize, Fp8BlockScaling1x128) { golden::check_every_case("fp8_block 1x128"); }
TEST(GoldenRecipeQuantize, Fp8BlockScaling128x128) { golden::check_every_case("fp8_block 128x128"); }

// ------------------------------------------------------------------------------ mxfp8_te

template <class Format>
bool same_mx(const quantized_tensor<Format>& q, const std::vector<std::uint8_t>& data, const std::vector<std::uint8_t>& scales,
             const char* what) {
  const long d = golden::first_difference(golden::data_bytes(q), data);
  const long s = golden::first_difference(golden::scale_bytes(q), scales);
  EXPECT_EQ(d, -1) << what << ": first differing code";
  EXPECT_EQ(s, -1) << what << ": first differing E8M0 scale";
  return d == -1 && s == -1;
}

template <class Format>
bool check_mxfp8(golden::case_fields& f, const input& in) {
  const auto data = f.load_shaped<std::uint8_t>("data", {in.rows, in.cols});
  const auto scale = f.load_shaped<std::uint8_t>("scale", {in.rows, ceil_div(in.cols, 32)});
  const auto data_t = f.load_shaped<std::uint8_t>("data_t", {in.cols, in.rows});
  const auto scale_t = f.load_shaped<std::uint8_t>("scale_t", {in.cols, ceil_div(in.rows, 32)});
  return in.visit([&](auto view) {
    bool ok = same_mx(quantize_mxfp8_te<Format>(view), data, scale, "public");
    ok = same_mx(reference::quantize_mxfp8_te<Format>(view), data, scale, "reference") && ok;
    return same_mx(quantize_mxfp8_te<Format>(view.transposed(), quantized_axis::columnwise), data_t, scale_t, "columnwise") && ok;
  });
}

bool check_mxfp8_case(const nlohmann::json& c) {
  golden::case_fields f(c, "mxfp8_te case", {"format", "input", "dtype", "shape", "data", "scale", "data_t", "scale_t"}, {"dist"});
  const input in(f);
  const bool ok = format_of(f) == fp8_format::e4m3 ? check_mxfp8<mxfp8>(f, in) : check_mxfp8<mxfp8_e5m2>(f, in);
  return f.finish() && ok;
}

const bool mxfp8_registered = golden::register_check("mxfp8_te", check_mxfp8_case);

TEST(GoldenRecipeQuantize, Mxfp8) { golden::check_every_case("mxfp8_te"); }

// ------------------------------------------------------------------------------ NVFP4 4over6 / row-scaled

/// Packed E2M1 codes (TE's quirk for an input of exactly -0.0 tolerated, golden_support.hpp),
/// E4M3 scale bytes.
template <class Format>
bool same_nvfp4(const quantized_tensor<Format>& q, const std::vector<std::uint8_t>& data, const std::vector<std::uint8_t>& scales,
                matrix_view<const float> source, const char* what) {
  const long d = golden::first_code_difference(q, data, source);
  const long s = golden::first_difference(golden::scale_bytes(q), scales);
  EXPECT_EQ(d, -1) << what << ": first differing byte";
  EXPECT_EQ(s, -1) << what << ": first differing scale byte";
  return d == -1 && s == -1;
}

/// An NVFP4 case's four arrays: packed codes and E4M3 scales [rows, cols / 16] of x and of xᵀ.
struct nvfp4_expected {
  std::vector<std::uint8_t> data, scale, data_t, scale_t;
  nvfp4_expected(golden::case_fields& f, const input& in)
      : data(f.load_shaped<std::uint8_t>("data", {in.rows, ceil_div(in.cols, 2)})),
        scale(f.load_shaped<std::uint8_t>("scale", {in.rows, ceil_div(in.cols, 16)})),
        data_t(f.load_shaped<std::uint8_t>("data_t", {in.cols, ceil_div(in.rows, 2)})),
        scale_t(f.load_shaped<std::uint8_t>("scale_t", {in.cols, ceil_div(in.rows, 16)})) {}
};

four_over_six_options options_of(golden::case_fields& f) {
  const std::int64_t bound = f.integer("e4m3_max");
  if (bound != 256 && bound != 448) throw golden::refusal("e4m3_max " + std::to_string(bound) + ": TE's 4over6 bound is 256 or 448");
  return {.error = f.choice("error", {"mae", "mse"}) == "mse" ? four_over_six_error::mse : four_over_six_error::mae,
          .e4m3_max = static_cast<int>(bound)};
}

template <class Format>
bool check_4over6_case(const nlohmann::json& c) {
  golden::case_fields f(c, "nvfp4_4over6 case",
                        {"error", "e4m3_max", "input", "dtype", "shape", "data", "scale", "data_t", "scale_t", "amax_row", "amax_col"},
                        {"dist"});
  const input in(f);
  const auto options = options_of(f);
  const nvfp4_expected want(f, in);
  const float amax_row = f.load_shaped<float>("amax_row", {1}).at(0), amax_col = f.load_shaped<float>("amax_col", {1}).at(0);
  const bool ok = in.visit([&](auto view) {
    const auto rowwise = quantize_4over6<Format>(view, options);
    bool good = same_nvfp4(rowwise, want.data, want.scale, in.f32(), "public");
    good =
        same_nvfp4(reference::quantize_4over6_with_amax<Format>(view, amax_row, options), want.data, want.scale, in.f32(), "reference") &&
        good;
    EXPECT_EQ(bits(rowwise.amax()), bits(amax_row));
    const auto columnwise = quantize_4over6_with_amax<Format>(view.transposed(), amax_col, options, quantized_axis::columnwise);
    good = same_nvfp4(columnwise, want.data_t, want.scale_t, in.f32().transposed(), "columnwise") && good;
    return good && bits(rowwise.amax()) == bits(amax_row);
  });
  return f.finish() && ok;
}

const bool four_over_six_registered = golden::register_check("nvfp4_4over6 1x16", check_4over6_case<nvfp4_1x16>) &&
                                      golden::register_check("nvfp4_4over6 16x16", check_4over6_case<nvfp4_16x16>);

TEST(GoldenRecipeQuantize, Nvfp4FourOverSix1x16) { golden::check_every_case("nvfp4_4over6 1x16"); }
TEST(GoldenRecipeQuantize, Nvfp4FourOverSix16x16) { golden::check_every_case("nvfp4_4over6 16x16"); }

/// Row-scaled 4over6, composed from the public API: each row through quantize_4over6_with_amax
/// with that row's amax (TE's reference does exactly this per row, its error using the row amax).
template <quantizer_input T>
nvfp4_tensor row_scaled_4over6(matrix_view<const T> x, const four_over_six_options& options, std::vector<float>& row_amax) {
  nvfp4_tensor out(x.rows(), x.cols());
  row_amax.clear();
  for (index_t r = 0; r < x.rows(); ++r) {
    const matrix_view<const T> row(&x(r, 0), 1, x.cols(), x.row_stride(), x.col_stride());
    row_amax.push_back(amax(row));
    const auto q = quantize_4over6_with_amax<nvfp4_1x16>(row, row_amax.back(), options);
    std::copy(q.data().begin(), q.data().end(), out.data().begin() + r * out.data_row_stride());
    std::copy(q.scales().begin(), q.scales().end(), out.scales().begin() + r * out.scale_cols());
  }
  return out;
}

bool same_amaxes(const std::vector<float>& ours, const std::vector<float>& theirs, const char* field) {
  const long d = first_float_difference(ours, theirs);
  EXPECT_EQ(d, -1) << field << ": first differing amax";
  return d == -1;
}

/// Mode plain (row_scaled NVFP4) or 4over6 (with `error` and `e4m3_max`); one amax per row of x
/// and per row of xᵀ.
template <bool FourOverSix>
bool check_row_scaled_case(const nlohmann::json& c) {
  std::vector<std::string> understood = {"input", "dtype", "shape", "data", "scale", "data_t", "scale_t", "amax_row", "amax_col"};
  if (FourOverSix) understood.insert(understood.end(), {"error", "e4m3_max"});
  golden::case_fields f(c, "nvfp4_row_scaled case", understood, {"dist"});
  const input in(f);
  const nvfp4_expected want(f, in);
  const auto amax_row = f.load_shaped<float>("amax_row", {in.rows}), amax_col = f.load_shaped<float>("amax_col", {in.cols});
  four_over_six_options options;
  if constexpr (FourOverSix) options = options_of(f);
  const bool ok = in.visit([&](auto view) {
    bool good = true;
    if constexpr (!FourOverSix) {
      const auto rowwise = quantize_row_scaled(view);
      const auto reference_rows = reference::quantize_row_scaled(view);
      const auto columnwise = quantize_row_scaled(view.transposed(), quantized_axis::columnwise);
      good = same_nvfp4(rowwise.values, want.data, want.scale, in.f32(), "public") && good;
      good = same_nvfp4(reference_rows.values, want.data, want.scale, in.f32(), "reference") && good;
      good = same_nvfp4(columnwise.values, want.data_t, want.scale_t, in.f32().transposed(), "columnwise") && good;
      good = same_amaxes(rowwise.row_amax, amax_row, "amax_row") && same_amaxes(columnwise.row_amax, amax_col, "amax_col") && good;
    } else {
      std::vector<float> row_amax, col_amax;
      good = same_nvfp4(row_scaled_4over6(view, options, row_amax), want.data, want.scale, in.f32(), "rowwise") && good;
      good = same_nvfp4(row_scaled_4over6(view.transposed(), options, col_amax), want.data_t, want.scale_t, in.f32().transposed(),
                        "columnwise") &&
             good;
      good = same_amaxes(row_amax, amax_row, "amax_row") && same_amaxes(col_amax, amax_col, "amax_col") && good;
    }
    return good;
  });
  return f.finish() && ok;
}

const bool row_scaled_registered = golden::register_check("nvfp4_row_scaled plain", check_row_scaled_case<false>) &&
                                   golden::register_check("nvfp4_row_scaled 4over6", check_row_scaled_case<true>);

TEST(GoldenRecipeQuantize, Nvfp4RowScaledPlain) { golden::check_every_case("nvfp4_row_scaled plain"); }
TEST(GoldenRecipeQuantize, Nvfp4RowScaled4over6) { golden::check_every_case("nvfp4_row_scaled 4over6"); }

}  // namespace golden_recipe_quantize_test
}  // namespace
}  // namespace nvfp4
