// Tests of nvfp4/nn/autocast.hpp: dense layers under delayed scaling in TE's regions. Expected
// scales come from TE's rule (fused update: fp8_max / amax of the window, IEEE division; HYBRID:
// E4M3 forward, 448, and E5M2 backward, 57344), computed here from the inputs' amaxes.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "nvfp4/nn/autocast.hpp"
#include "nvfp4/nn/dense.hpp"
#include "test_support.hpp"

namespace nvfp4::nn {
namespace {
namespace nn_autocast_test {

using test::random_values;

constexpr index_t rows = 8, in = 32, out = 16;

struct fixture {
  dense d{"fc", 0, in, out, parameter_kind::matrix, linear_engines(delayed_scaling{.amax_history_len = 4})};
  std::vector<float> x = random_values(rows * in, 11), x3 = scaled(x, 3.0f), dy = random_values(rows * out, 12);
  fixture() { d.weight().value = random_values(out * in, 10); }
  linear& layer() { return dynamic_cast<linear_engine&>(d.engine()).layer(); }
  const delayed_scaling_state& state(tensor_role role) { return *layer().scaling_state(role); }
  std::vector<float> forward(const std::vector<float>& v, bool training = true) {
    std::vector<float> y;
    d.forward(v, rows, y, training);
    return y;
  }
  static std::vector<float> scaled(std::vector<float> v, float f) {
    for (float& e : v) e *= f;
    return v;
  }
};

float amax_of(const std::vector<float>& v) {
  float a = 0.0f;
  for (const float e : v) a = std::fmax(a, std::fabs(e));
  return a;
}

TEST(Autocast, OneScalePerRegionAndMaxMergedAmaxes) {
  // TE quantization.py autocast_exit -> reduce_and_update_fp8_tensors(forward=True): once, at the
  // outermost exit with grad enabled.
  fixture f;
  std::vector<float> y1;
  {
    const autocast region;
    y1 = f.forward(f.x);
    f.forward(f.x3);
    EXPECT_EQ(f.forward(f.x), y1);  // the same scale (1) for every call in the region
    EXPECT_EQ(f.state(tensor_role::input).scale(), 1.0f);
    EXPECT_EQ(f.state(tensor_role::input).amax_history()[0], amax_of(f.x3));
  }
  EXPECT_EQ(f.state(tensor_role::input).scale(), 448.0f / amax_of(f.x3));
  EXPECT_EQ(f.state(tensor_role::weight).scale(), 448.0f / amax_of(f.d.weight().value));
  const auto h = f.state(tensor_role::input).amax_history();
  EXPECT_EQ(std::vector<float>(h.begin(), h.end()), (std::vector<float>{0.0f, 0.0f, 0.0f, amax_of(f.x3)}));  // one entry
}

TEST(Autocast, OutsideARegionEachTrainingCallIsItsOwnRegion) {
  fixture f;
  const auto y1 = f.forward(f.x);
  EXPECT_EQ(f.state(tensor_role::input).scale(), 448.0f / amax_of(f.x));
  EXPECT_NE(f.forward(f.x), y1);
}

TEST(Autocast, NestedRegionsUpdateAtTheOutermostExit) {
  fixture f;
  {
    const autocast outer;
    {
      const autocast inner;
      f.forward(f.x);
    }
    EXPECT_EQ(f.state(tensor_role::input).scale(), 1.0f);
  }
  EXPECT_EQ(f.state(tensor_role::input).scale(), 448.0f / amax_of(f.x));
}

TEST(Autocast, EvaluationWithoutGradRecordsAmaxesForTheNextUpdate) {
  // TE under torch.no_grad(): amaxes recorded, the exit skips the update (torch.is_grad_enabled()
  // false), the next training update max-merges them.
  fixture f;
  const auto x5 = fixture::scaled(f.x, 5.0f);
  {
    const autocast eval({.grad_enabled = false});
    f.forward(x5, /*training=*/false);
  }
  EXPECT_EQ(f.state(tensor_role::input).scale(), 1.0f);
  EXPECT_EQ(f.state(tensor_role::input).amax_history()[0], amax_of(x5));
  {
    const autocast region;
    f.forward(f.x);
  }
  EXPECT_EQ(f.state(tensor_role::input).scale(), 448.0f / amax_of(x5));
  // The library's evaluation, named: records nothing.
  fixture g;
  {
    const autocast eval({.grad_enabled = false, .evaluation = eval_amaxes::record_nothing});
    g.forward(x5, false);
  }
  EXPECT_EQ(g.state(tensor_role::input).amax_history()[0], 0.0f);
}

TEST(Autocast, BackwardRoleUpdatesAtTheEndOfTheBackwardPass) {
  fixture f;
  {
    const backward_pass pass;
    {
      const autocast region;
      f.forward(f.x);
    }
    std::vector<float> dx;
    f.d.backward(f.dy, dx);
    EXPECT_EQ(f.state(tensor_role::grad_output).scale(), 1.0f);
  }
  EXPECT_EQ(f.state(tensor_role::grad_output).scale(), 57344.0f / amax_of(f.dy));
}

TEST(Autocast, ARegionLeftByAnExceptionStillUpdates) {
  // TE's fp8_autocast calls autocast_exit in a `finally`.
  fixture f;
  try {
    const autocast region;
    f.forward(f.x);
    throw std::runtime_error("user code failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(f.state(tensor_role::input).scale(), 448.0f / amax_of(f.x));
  EXPECT_EQ(autocast::current(), nullptr);
}

}  // namespace nn_autocast_test
}  // namespace
}  // namespace nvfp4::nn
