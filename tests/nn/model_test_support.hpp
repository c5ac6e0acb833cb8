// tests/nn/model_test_support.hpp: a gradient check shared by the model tests: central differences
// of a model's loss against the gradients its backward pass writes.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>

#include "nvfp4/nn/model.hpp"

namespace nvfp4::nn::testing {

/// For every parameter, entries 0, step, 2·step, ...: |analytic − numeric| ≤ abs + rel·|numeric|.
inline void expect_gradients_match(model& m, const batch& b, std::size_t step, float h, double abs, double rel) {
  m.forward_backward(b, 1.0f);
  for (parameter* p : m.parameters()) {
    const std::vector<float> analytic = p->grad;
    for (std::size_t i = 0; i < p->value.size(); i += step) {
      const float saved = p->value[i];
      p->value[i] = saved + h;
      const double up = m.evaluate(b);
      p->value[i] = saved - h;
      const double down = m.evaluate(b);
      p->value[i] = saved;
      const double numeric = (up - down) / (2.0 * static_cast<double>(h));
      EXPECT_NEAR(analytic[i], numeric, abs + rel * std::fabs(numeric)) << p->name << "[" << i << "]";
    }
  }
}

}  // namespace nvfp4::nn::testing
