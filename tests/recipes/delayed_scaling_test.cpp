// Tests of nvfp4/recipes/delayed_scaling.hpp: the state over many steps against a hand-run of TE's
// fused update (history roll, max / most_recent, margin, a zero amax that does not roll, Inf amax
// freezing the scale until it leaves the window, NaN ignored by max), TE's unfused Python update
// where it differs (a zero amax rolls, NaN poisons the max, the scale's reciprocal rounding), plus
// restore and validation; the unfused update's scale against torch's eager and torch.compile'd
// evaluations of TE's formula on an H100 (tests/recipes/data/te_unfused_update, producer
// tests/golden/producers/run_te_compiled_update.py); a step with Inf / NaN data as TE runs it.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "nvfp4/io/npy.hpp"
#include "nvfp4/recipes/delayed_scaling.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "test_support.hpp"

namespace nvfp4 {
namespace {
namespace recipes_delayed_scaling_test {

std::vector<float> history_of(const delayed_scaling_state& s) { return {s.amax_history().begin(), s.amax_history().end()}; }

TEST(DelayedScaling, DefaultsAreTes) {
  const delayed_scaling r;
  EXPECT_EQ(r.margin, 0);
  EXPECT_EQ(r.fp8_format, recipe_format::hybrid);
  EXPECT_EQ(r.amax_history_len, 1024);
  EXPECT_EQ(r.amax_compute_algo, amax_compute_algorithm::max);
  EXPECT_FALSE(r.fp8_gemm_fprop.use_split_accumulator);
  EXPECT_TRUE(r.fp8_gemm_dgrad.use_split_accumulator);
  const delayed_scaling_state s(r, fp8_format::e4m3);
  EXPECT_EQ(s.scale(), 1.0f);
  EXPECT_EQ(s.amax_history().size(), 1024u);
}

// issue 39 item 9: a history length is bounded (delayed_scaling::max_amax_history_len) and refused
// with a clear error before anything allocates (10^9 entries were 12 GB of states).
TEST(DelayedScaling, HistoryLengthIsBoundedBeforeAllocating) {
  const int bound = delayed_scaling::max_amax_history_len;
  EXPECT_EQ(bound, 1 << 20);
  for (const int len : {0, -1, bound + 1, 1000000000}) {
    const delayed_scaling r{.amax_history_len = len};
    EXPECT_EQ(test::error_code_of([&] { r.validate(); }), errc::invalid_argument) << len;
    EXPECT_EQ(test::error_code_of([&] { delayed_scaling_state(r, fp8_format::e4m3); }), errc::invalid_argument) << len;
    delayed_scaling_state kept({.amax_history_len = 2}, fp8_format::e4m3);
    EXPECT_EQ(test::error_code_of([&] { kept.switch_to(r); }), errc::invalid_argument) << len;
    EXPECT_EQ(kept.amax_history().size(), 2u);  // unchanged
  }
  try {
    delayed_scaling{.amax_history_len = 1000000000}.validate();
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 1048576"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(delayed_scaling{.amax_history_len = bound}.validate());
  EXPECT_EQ(delayed_scaling_state({.amax_history_len = bound}, fp8_format::e4m3).amax_history().size(), static_cast<std::size_t>(bound));
}

TEST(DelayedScaling, HistoryRollsAndMaxTakesTheWindow) {
  delayed_scaling_state s({.amax_history_len = 3}, fp8_format::e4m3);
  // Step amaxes 2, 8, 4, 1, 1: the window holds the last three, the scale is 448 / max of it.
  s.record(2.0f);
  s.update();
  EXPECT_EQ(history_of(s), (std::vector<float>{0.0f, 0.0f, 2.0f}));
  EXPECT_EQ(s.scale(), 224.0f);
  s.record(8.0f);
  s.record(3.0f);  // a smaller amax in the same step does not lower entry 0
  s.update();
  EXPECT_EQ(history_of(s), (std::vector<float>{0.0f, 2.0f, 8.0f}));
  EXPECT_EQ(s.scale(), 56.0f);
  s.record(4.0f);
  s.update();
  EXPECT_EQ(history_of(s), (std::vector<float>{0.0f, 8.0f, 4.0f}));  // the 2 rolled out of entry 1
  EXPECT_EQ(s.scale(), 56.0f);
  s.record(1.0f);
  s.update();
  EXPECT_EQ(s.scale(), 56.0f);  // 8 still in the window: [8, 4, 1] before the roll
  s.record(1.0f);
  s.update();
  EXPECT_EQ(history_of(s), (std::vector<float>{0.0f, 1.0f, 1.0f}));
  EXPECT_EQ(s.scale(), 112.0f);  // window was [4, 1, 1]
}

TEST(DelayedScaling, MostRecentAndMargin) {
  delayed_scaling_state s({.margin = 2, .amax_history_len = 4, .amax_compute_algo = amax_compute_algorithm::most_recent}, fp8_format::e5m2);
  EXPECT_EQ(s.scaled_max(), 57344.0f / 4);
  for (float a : {16.0f, 2.0f, 8.0f}) {
    s.record(a);
    s.update();
    EXPECT_EQ(s.scale(), 14336.0f / a);
  }
}

TEST(DelayedScaling, ZeroAmaxNeitherRollsNorChangesTheScale) {
  delayed_scaling_state s({.amax_history_len = 2}, fp8_format::e4m3);
  s.record(7.0f);
  s.update();
  const auto before = history_of(s);
  s.update();  // nothing recorded: entry 0 is 0
  EXPECT_EQ(history_of(s), before);
  EXPECT_EQ(s.scale(), 64.0f);
}

TEST(DelayedScaling, InfiniteAmaxFreezesTheScaleUntilItLeavesTheWindow) {
  const float inf = std::numeric_limits<float>::infinity();
  delayed_scaling_state s({.amax_history_len = 3}, fp8_format::e4m3);
  s.record(4.0f);
  s.update();
  EXPECT_EQ(s.scale(), 112.0f);
  s.record(inf);
  s.update();
  EXPECT_EQ(s.scale(), 112.0f);  // the max is Inf: not finite, the old scale stays
  for (int step = 0; step < 2; ++step) {
    s.record(2.0f);
    s.update();
    EXPECT_EQ(s.scale(), 112.0f) << step;  // Inf still in the window
  }
  s.record(2.0f);
  s.update();
  EXPECT_EQ(s.scale(), 224.0f);  // window [2, 2, 2]
}

TEST(DelayedScaling, NanIsIgnoredByMaxButNotByMostRecent) {
  delayed_scaling_state by_max({.amax_history_len = 2}, fp8_format::e4m3);
  by_max.record(8.0f);
  by_max.update();
  by_max.record(std::nanf(""));
  by_max.update();
  EXPECT_EQ(by_max.scale(), 56.0f);  // fmax over {8, NaN} is 8
  EXPECT_TRUE(std::isnan(by_max.amax_history()[1]));
  // most_recent: amaxes 8 then 2 give scale 224 with 8 still in the window, so a NaN step that
  // fell back to the window's max (8 -> 56) differs from keeping the old scale (224).
  delayed_scaling_state recent({.amax_history_len = 3, .amax_compute_algo = amax_compute_algorithm::most_recent}, fp8_format::e4m3);
  recent.record(8.0f);
  recent.update();
  recent.record(2.0f);
  recent.update();
  EXPECT_EQ(recent.scale(), 224.0f);
  recent.record(std::nanf(""));
  recent.update();
  EXPECT_EQ(recent.scale(), 224.0f);  // NaN is not finite: the old scale stays
}

TEST(DelayedScaling, TinyAmaxGivesFltMax) {
  delayed_scaling_state s({.amax_history_len = 1}, fp8_format::e4m3);
  s.record(std::ldexp(1.0f, -140));
  s.update();
  EXPECT_EQ(s.scale(), FLT_MAX);         // 448 / 2^-140 overflows
  EXPECT_EQ(s.amax_history()[0], 0.0f);  // a one-entry history is cleared for the next step
}

// TE's unfused update (pytorch/quantization.py _amax_and_scale_update) where it parts from the kernel.
TEST(DelayedScalingUnfused, ZeroAmaxRollsAndTheMaxStillSeesTheWindow) {
  delayed_scaling_state s({.amax_history_len = 3, .unfused_update = true}, fp8_format::e4m3);
  s.record(7.0f);
  s.update();
  EXPECT_EQ(history_of(s), (std::vector<float>{0.0f, 0.0f, 7.0f}));
  EXPECT_EQ(s.scale(), 64.0f);
  s.update();  // amax 0: the history still rolls; the window [0, 0, 7] still gives 7
  EXPECT_EQ(history_of(s), (std::vector<float>{0.0f, 7.0f, 0.0f}));
  EXPECT_EQ(s.scale(), 64.0f);
  s.record(1.0f);
  s.update();
  EXPECT_EQ(history_of(s), (std::vector<float>{0.0f, 0.0f, 1.0f}));  // the 7 left the window
  EXPECT_EQ(s.scale(), 64.0f);                                       // ...but the max was taken before the roll: [1, 7, 0]
  s.update();
  EXPECT_EQ(s.scale(), 448.0f);  // window [0, 0, 1]
}

TEST(DelayedScalingUnfused, NanInTheWindowKeepsTheScaleUntilItLeaves) {
  delayed_scaling_state s({.amax_history_len = 2, .unfused_update = true}, fp8_format::e4m3);
  s.record(8.0f);
  s.update();
  s.record(std::nanf(""));
  s.update();
  EXPECT_EQ(s.scale(), 56.0f);  // torch.max over [NaN, 8] is NaN: the old scale stays
  s.record(2.0f);
  s.update();
  EXPECT_EQ(s.scale(), 56.0f);  // [2, NaN]: still NaN
  s.record(4.0f);
  s.update();
  EXPECT_EQ(s.scale(), 112.0f);  // [4, 2]
}

TEST(DelayedScalingUnfused, ScaleIsTheReciprocalTimesTheMaxThenTheMargin) {
  // amax 0.9900729060173035 (0x3F7D756B): 448 / amax is 452.49194 (one rounding, the fused
  // kernel) but 448 * fp32(1 / amax) is 452.49191 (torch's `448 / tensor`), an ulp apart; the
  // value TE's Python update gave on the device (tests/golden: fp8_delayed, sequence random).
  const float amax = std::bit_cast<float>(0x3F7D756Bu);
  for (int margin : {0, 2, -1}) {
    delayed_scaling_state fused({.margin = static_cast<float>(margin), .amax_history_len = 1}, fp8_format::e4m3);
    delayed_scaling_state unfused({.margin = static_cast<float>(margin), .amax_history_len = 1, .unfused_update = true}, fp8_format::e4m3);
    fused.record(amax);
    fused.update();
    unfused.record(amax);
    unfused.update();
    const float reciprocal = 1.0f / amax;
    EXPECT_EQ(fused.scale(), std::ldexp(448.0f, -margin) / amax) << margin;
    EXPECT_EQ(unfused.scale(), std::ldexp(reciprocal * 448.0f, -margin)) << margin;
    EXPECT_EQ(std::ldexp(unfused.scale(), margin), 452.49191284179688f) << margin;
    EXPECT_EQ(std::ldexp(fused.scale(), margin), 452.491943359375f) << margin;
  }
}

TEST(DelayedScalingUnfused, TinyAmaxGivesFltMaxAndInfKeepsTheScale) {
  delayed_scaling_state s({.margin = 2, .amax_history_len = 1, .unfused_update = true}, fp8_format::e4m3);
  s.record(std::ldexp(1.0f, -140));
  s.update();
  EXPECT_EQ(s.scale(), FLT_MAX);  // 1 / 2^-140 is Inf already
  s.record(std::numeric_limits<float>::infinity());
  s.update();
  EXPECT_EQ(s.scale(), FLT_MAX);
}

// TE's _default_sf_compute (pytorch/quantization.py), sf = (fp8_max / amax) / 2**margin, the old
// scale for an amax that is not > 0 or not finite, FLT_MAX for an infinite sf, as torch 2.11
// evaluates it on an H100: eagerly (NVTE_TORCH_COMPILE=0) and compiled by torch.compile (TE's
// default; Inductor + Triton 3.6). 6323 amaxes (powers of two and their neighbours, fp8_max
// multiples, subnormals, the overflow edge, FLT_MAX, 0, -0, -1, Inf, NaN, random), fp8_max 448
// and 57344, margins 0, 1, 0.5, 2, -1. NVFP4_TE_UNFUSED_UPDATE_DIR points the test at another
// directory of the same files (the producer's --pack-all writes all 87,023 amaxes).
void expect_the_gpus_unfused_scales(unfused_update_form form, const char* prefix) {
  const char* other = std::getenv("NVFP4_TE_UNFUSED_UPDATE_DIR");
  const std::filesystem::path dir =
      other ? std::filesystem::path(other) : std::filesystem::path(NVFP4_SOURCE_DIR) / "tests/recipes/data/te_unfused_update";
  const std::vector<std::uint32_t> amaxes = io::read_npy(dir / "amax.npy").as<std::uint32_t>();
  if (!other) {
    ASSERT_EQ(amaxes.size(), 6323u);
  }
  const float old_scale = 0.75f;  // the producer's starting scale, which no amax here maps to
  struct config {
    float margin;
    const char* tag;
  };
  std::size_t checked = 0;
  for (const config& m : {config{0.0f, "0"}, config{1.0f, "1"}, config{0.5f, "0p5"}, config{2.0f, "2"}, config{-1.0f, "m1"}}) {
    for (const fp8_format format : {fp8_format::e4m3, fp8_format::e5m2}) {
      const std::string name = std::string(prefix) + (format == fp8_format::e4m3 ? "448" : "57344") + "_m" + m.tag + ".npy";
      const std::vector<std::uint32_t> expected = io::read_npy(dir / name).as<std::uint32_t>();
      ASSERT_EQ(expected.size(), amaxes.size()) << name;
      for (std::size_t i = 0; i < amaxes.size(); ++i) {
        delayed_scaling_state s({.margin = m.margin, .amax_history_len = 1, .unfused_update = true, .unfused_form = form}, format);
        s.restore(std::vector<float>{0.0f}, old_scale);
        s.record(std::bit_cast<float>(amaxes[i]));
        s.update();
        ASSERT_EQ(std::bit_cast<std::uint32_t>(s.scale()), expected[i])
            << name << " amax " << std::bit_cast<float>(amaxes[i]) << " (0x" << std::hex << amaxes[i] << ")";
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 10 * amaxes.size());
}

// A float margin (0.5) divides by the fp32 value of 2**0.5 as torch's CUDA div does with a CPU
// scalar (a product with its fp32 reciprocal).
TEST(DelayedScalingUnfused, EagerScaleIsTorchsEagerScaleOnTheGpu) {
  expect_the_gpus_unfused_scales(unfused_update_form::torch_eager, "eager_");
}

// The compiled form's reciprocal is the H100's div.full.f32 (recipes/detail/div_full_reciprocal.hpp);
// it differs from the eager scale for about one amax in eight here, by up to 7 ulp for subnormal
// scales, and where r * fp8_max overflows but the folded product does not (margins 1 and 2).
TEST(DelayedScalingUnfused, CompiledScaleIsTorchCompilesScaleOnAnH100) {
  expect_the_gpus_unfused_scales(unfused_update_form::torch_compile_h100, "compiled_");
}

// The eager and compiled forms are different rules: the same amaxes give different scales.
TEST(DelayedScalingUnfused, CompiledAndEagerFormsDiffer) {
  int differ = 0;
  for (int i = 0; i < 1000; ++i) {
    const float amax = 1.0f + static_cast<float>(i) * 0x1p-13f;
    float scales[2];
    for (const unfused_update_form form : {unfused_update_form::torch_eager, unfused_update_form::torch_compile_h100}) {
      delayed_scaling_state s({.amax_history_len = 1, .unfused_update = true, .unfused_form = form}, fp8_format::e4m3);
      s.record(amax);
      s.update();
      scales[form == unfused_update_form::torch_compile_h100] = s.scale();
    }
    differ += scales[0] != scales[1];
  }
  EXPECT_GT(differ, 50);
  EXPECT_LT(differ, 250);
}

// A recipe switch takes the new recipe's update form along with its path (TE picks both per update).
TEST(DelayedScalingUnfused, ASwitchTakesTheNewForm) {
  delayed_scaling_state s({.amax_history_len = 2}, fp8_format::e4m3);
  s.switch_to({.amax_history_len = 3, .unfused_update = true, .unfused_form = unfused_update_form::torch_compile_h100});
  EXPECT_TRUE(s.unfused());
  EXPECT_EQ(s.unfused_form(), unfused_update_form::torch_compile_h100);
  EXPECT_EQ(s.amax_history().size(), 3u);
}

// A step whose tensor holds Inf and NaN, as TE runs it under DelayedScaling: its quantizer
// (vectorized_pointwise.h unary_kernel) casts with the state's current scale, satfinite (Inf ->
// 0x7E, NaN -> 0x7F, the H100's codes), and records fmaxf's amax (Inf); the update
// (delayed_scaling.cu kernel_bulk, fused) keeps the scale while the Inf is in the window.
TEST(DelayedScaling, AStepWithInfRunsAsTeRunsIt) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  delayed_scaling_state s({.amax_history_len = 2}, fp8_format::e4m3);
  const std::vector<float> first = {1.0f, -4.0f};
  s.record(quantize_fp8_with_scale(matrix_view<const float>::row_major(first.data(), 1, 2), s.format(), s.scale()).amax());
  s.update();
  ASSERT_EQ(s.scale(), 112.0f);
  const std::vector<float> bad = {1.0f, inf, nan, -inf};
  const fp8_tensor q = quantize_fp8_with_scale(matrix_view<const float>::row_major(bad.data(), 2, 2), s.format(), s.scale(),
                                               quantized_axis::rowwise, fp8_non_finite::te_satfinite);
  EXPECT_EQ(q.code(0, 0), fp8_encode(112.0f, fp8_format::e4m3));
  EXPECT_EQ(q.code(0, 1), 0x7E);
  EXPECT_EQ(q.code(1, 0), 0x7F);
  EXPECT_EQ(q.code(1, 1), 0xFE);
  EXPECT_EQ(q.scale_inv()[0], 1.0f / 112.0f);
  s.record(q.amax());
  EXPECT_EQ(s.amax_history()[0], inf);
  s.update();
  EXPECT_EQ(s.scale(), 112.0f);  // the window's max is Inf: the scale stays
  s.record(2.0f);
  s.update();
  EXPECT_EQ(s.scale(), 112.0f);  // [Inf, 2]: still
  s.record(2.0f);
  s.update();
  EXPECT_EQ(s.scale(), 224.0f);  // [2, 2]
}

// Many steps against a plain model of the window (a deque), random amaxes with zeros.
TEST(DelayedScaling, ManyStepsAgainstAWindowModel) {
  const int length = 5;
  delayed_scaling_state s({.margin = 1, .amax_history_len = length}, fp8_format::e4m3);
  std::deque<float> window(length, 0.0f);
  float scale = 1.0f;
  unsigned state = 12345;
  for (int step = 0; step < 200; ++step) {
    state = state * 1103515245u + 12345u;
    const float a = (state >> 28) == 0 ? 0.0f : std::ldexp(1.0f + float((state >> 8) & 0xFFFF) / 65536.0f, int((state >> 24) & 15) - 8);
    if (a != 0.0f) s.record(a);
    s.update();
    if (a != 0.0f) {
      window.pop_front();
      window.push_back(a);
      float m = 0.0f;
      for (float v : window) m = std::max(m, v);
      scale = 224.0f / m;
    }
    ASSERT_EQ(s.scale(), scale) << step;
    ASSERT_EQ(s.amax_history()[length - 1], window.back()) << step;
  }
}

TEST(DelayedScaling, RestoreAndValidation) {
  delayed_scaling_state s({.amax_history_len = 2}, fp8_format::e4m3);
  const std::vector<float> saved = {0.0f, 3.0f};
  s.restore(saved, 2.0f);
  EXPECT_EQ(s.scale(), 2.0f);
  EXPECT_EQ(history_of(s), saved);
  EXPECT_EQ(test::error_code_of([&] { s.restore(std::vector<float>(3), 1.0f); }), errc::shape_mismatch);
  EXPECT_EQ(test::error_code_of([&] { s.restore(saved, 0.0f); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([] { delayed_scaling{.fp8_format = recipe_format::e5m2}.validate(); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([] { delayed_scaling_state({.amax_history_len = 0}, fp8_format::e4m3); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([] { delayed_scaling{.margin = 200}.validate(); }), errc::invalid_argument);
}

TEST(DelayedScaling, MarginIsValidWhereTwoToMinusMarginIsANormalFloat) {
  // The header's rule: 2^-margin must be a normal float, i.e. -margin in [-126, 127]. Both ends
  // and one step past them, through validate() and the state's constructor (which validates).
  for (int margin : {-127, 0, 125, 126}) {
    EXPECT_EQ(test::error_code_of([&] { delayed_scaling{.margin = static_cast<float>(margin)}.validate(); }), errc{}) << margin;
    EXPECT_EQ(test::error_code_of([&] { delayed_scaling_state({.margin = static_cast<float>(margin)}, fp8_format::e4m3); }), errc{})
        << margin;
  }
  for (int margin : {-128, 127, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()}) {
    EXPECT_EQ(test::error_code_of([&] { delayed_scaling{.margin = static_cast<float>(margin)}.validate(); }), errc::invalid_argument)
        << margin;
    EXPECT_EQ(test::error_code_of([&] { delayed_scaling_state({.margin = static_cast<float>(margin)}, fp8_format::e4m3); }),
              errc::invalid_argument)
        << margin;
  }
  // The accepted edge gives the documented scale: amax 1 maps to 448 * 2^-126 (FLT_MIN * 448).
  delayed_scaling_state s({.margin = 126, .amax_history_len = 1}, fp8_format::e4m3);
  s.record(1.0f);
  s.update();
  EXPECT_EQ(s.scale(), 448.0f * 0x1p-126f);
}

TEST(DelayedScaling, RestoreRejectsAScaleThatIsNotPositiveAndFiniteAndKeepsTheState) {
  // The header: invalid_argument for a scale that is not positive and finite; error.hpp: nothing
  // is changed unless every check passes.
  delayed_scaling_state s({.amax_history_len = 2}, fp8_format::e4m3);
  const std::vector<float> saved = {0.0f, 3.0f};
  s.restore(saved, 2.0f);
  const std::vector<float> other = {1.0f, 5.0f};
  for (float scale :
       {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity(), -1.0f, -0.0f, -std::numeric_limits<float>::denorm_min()}) {
    EXPECT_EQ(test::error_code_of([&] { s.restore(other, scale); }), errc::invalid_argument) << scale;
    EXPECT_EQ(s.scale(), 2.0f) << scale;
    EXPECT_EQ(history_of(s), saved) << scale;
  }
  // Positive and finite however small or large: the smallest subnormal and FLT_MAX are accepted.
  for (float scale : {std::numeric_limits<float>::denorm_min(), FLT_MAX}) {
    s.restore(other, scale);
    EXPECT_EQ(s.scale(), scale);
    EXPECT_EQ(history_of(s), other);
  }
}

}  // namespace recipes_delayed_scaling_test
}  // namespace
}  // namespace nvfp4
