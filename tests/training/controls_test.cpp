// Tests for nvfp4/training/controls.hpp: each control switches exactly the layers and steps it
// names (a truth table over layers x steps, then on a real model), and bad settings are refused.
#include "nvfp4/training/controls.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nvfp4/nn/transformer.hpp"

namespace nvfp4::training {
namespace {
namespace training_controls_test {

/// The high-precision map as a string per step: one character per layer, 'B' for BF16, 'q' for
/// the recipe.
std::vector<std::string> table(const precision_controls& c, int layers, long long steps) {
  std::vector<std::string> out;
  for (long long s = 0; s < steps; ++s) {
    std::string row;
    for (int l = 0; l < layers; ++l) row += c.high_precision(l, layers, s, steps) ? 'B' : 'q';
    out.push_back(row);
  }
  return out;
}

TEST(PrecisionControls, EachControlSwitchesExactlyItsLayersAndSteps) {
  EXPECT_EQ(table({}, 5, 2), (std::vector<std::string>{"qqqqq", "qqqqq"}));
  EXPECT_EQ(table({.skip_quant_first_layers = 2}, 5, 2), (std::vector<std::string>{"BBqqq", "BBqqq"}));
  EXPECT_EQ(table({.skip_quant_last_layers = 1}, 5, 2), (std::vector<std::string>{"qqqqB", "qqqqB"}));
  EXPECT_EQ(table({.skip_quant_first_layers = 1, .skip_quant_last_layers = 2}, 5, 1), (std::vector<std::string>{"BqqBB"}));
  // Cooldown 0.2 of 10 steps: steps 8 and 9 all BF16.
  const auto cool = table({.cooldown_fraction = 0.2}, 3, 10);
  for (int s = 0; s < 8; ++s) EXPECT_EQ(cool[static_cast<std::size_t>(s)], "qqq") << s;
  EXPECT_EQ(cool[8], "BBB");
  EXPECT_EQ(cool[9], "BBB");
  EXPECT_EQ((precision_controls{.cooldown_fraction = 0.2}).cooldown_start(10), 8);
  EXPECT_EQ((precision_controls{.cooldown_fraction = 0.0}).cooldown_start(10), 10);
  EXPECT_EQ((precision_controls{.cooldown_fraction = 1.0}).cooldown_start(10), 0);
  EXPECT_EQ(table({.skip_quant_first_layers = 3}, 3, 1), (std::vector<std::string>{"BBB"}));
}

TEST(PrecisionControls, ApplyOnATransformerSetsItsDenseLayers) {
  nn::transformer_lm m({.width = 16, .depth = 3, .heads = 2, .seq_len = 8}, nn::fp32_engines());
  const precision_controls c{.skip_quant_first_layers = 1, .skip_quant_last_layers = 1, .cooldown_fraction = 0.5};
  c.apply(m, 0, 4);
  for (nn::dense* d : m.dense_layers()) {
    // Block 0 and the head (layer 3) in BF16; blocks 1 and 2 keep their engine.
    const bool expect_bf16 = d->layer() == 0 || d->name() == "head";
    EXPECT_EQ(d->active_engine().name(), expect_bf16 ? "bf16" : "fp32") << d->name();
  }
  c.apply(m, 2, 4);  // cooldown from step 2
  for (nn::dense* d : m.dense_layers()) EXPECT_EQ(d->active_engine().name(), "bf16") << d->name();
  c.apply(m, 1, 4);
  EXPECT_EQ(m.dense_layers()[4]->active_engine().name(), "fp32");  // blk1.qkv back on its engine
}

TEST(PrecisionControls, BadSettingsAreRefused) {
  auto code = [](const precision_controls& c, int layers) {
    try {
      c.validate(layers);
    } catch (const error& e) {
      return std::string(errc_name(e.code())) + ": " + e.what();
    }
    return std::string("ok");
  };
  EXPECT_EQ(code({.cooldown_fraction = 1.0}, 3), "ok");
  EXPECT_NE(code({.cooldown_fraction = 1.5}, 3).find("cooldown_fraction must be in [0, 1]"), std::string::npos);
  EXPECT_NE(code({.cooldown_fraction = -0.1}, 3).find("invalid_argument"), std::string::npos);
  EXPECT_NE(code({.skip_quant_first_layers = 2, .skip_quant_last_layers = 2}, 3).find("only 3 layers"), std::string::npos);
  EXPECT_NE(code({.skip_quant_last_layers = -1}, 3).find(">= 0"), std::string::npos);
}

}  // namespace training_controls_test
}  // namespace
}  // namespace nvfp4::training
