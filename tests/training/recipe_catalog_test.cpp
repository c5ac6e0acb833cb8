// Tests for nvfp4/training/recipe_catalog.hpp: every recipe of the catalog trains the MLP on the
// cluster task below half its initial loss; each entry sets the engines, controls and optimizer
// states it says; unknown names are refused with the list of known ones.
#include "nvfp4/training/recipe_catalog.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "nvfp4/nn/mlp.hpp"
#include "nvfp4/nn/transformer.hpp"
#include "nvfp4/training/trainer.hpp"

namespace nvfp4::training {
namespace {
namespace training_recipe_catalog_test {

TEST(RecipeCatalog, EveryRecipeLearnsTheSyntheticTask) {
  const cluster_dataset data({.features = 32, .classes = 8, .spread = 1.0f, .batch_size = 32, .seed = 5});
  for (const auto& recipe : recipe_catalog()) {
    nn::mlp_classifier m({.inputs = 32, .hidden = 64, .depth = 2, .classes = 8, .seed = 7}, recipe.engines(3));
    adamw opt(m.parameters(), {.lr = 3e-3f, .states = {.default_formats = recipe.optimizer_states}});
    const auto r = train(m, data, opt, {.steps = 24, .controls = recipe.controls, .eval_every = 0, .eval_batches = 2});
    EXPECT_NEAR(r.steps[0].loss, std::log(8.0f), 0.8) << recipe.name;
    EXPECT_LT(r.final_train_loss(), 0.5f * r.steps[0].loss) << recipe.name;
    EXPECT_LT(r.final_val_loss(), 0.5f * r.steps[0].loss) << recipe.name;
    EXPECT_TRUE(r.nan_events.empty()) << recipe.name;
  }
}

TEST(RecipeCatalog, EntriesSetWhatTheySay) {
  const auto all = recipe_catalog();
  std::set<std::string> names;
  for (const auto& r : all) names.insert(r.name);
  EXPECT_EQ(names.size(), all.size());
  for (const char* required : {"fp32", "bf16", "fp8_delayed", "fp8_current", "mxfp8", "nvfp4", "nvfp4_no_rht", "nvfp4_no_sr",
                               "nvfp4_last_bf16", "nvfp4_cooldown", "nvfp4_4over6", "nvfp4_fp8_states"})
    EXPECT_TRUE(names.count(required)) << required;
  auto engine_of = [](const std::string& recipe) {
    nn::transformer_lm m({.width = 32, .depth = 1, .heads = 2, .seq_len = 16}, find_recipe(recipe).engines(1));
    return m.dense_layers()[0]->engine().name();
  };
  EXPECT_EQ(engine_of("fp32"), "fp32");
  EXPECT_EQ(engine_of("bf16"), "bf16");
  EXPECT_EQ(engine_of("fp8_delayed"), "fp8_delayed");
  EXPECT_EQ(engine_of("mxfp8"), "mxfp8");
  EXPECT_EQ(engine_of("nvfp4_4over6"), "nvfp4");
  EXPECT_EQ(engine_of("nvfp4_amax_q999"), "nvfp4_amax_q0.999");
  EXPECT_EQ(find_recipe("nvfp4_last_bf16").controls.skip_quant_last_layers, 1);
  EXPECT_EQ(find_recipe("nvfp4_cooldown").controls.cooldown_fraction, 0.2);
  EXPECT_EQ(find_recipe("nvfp4_fp8_states").optimizer_states.first, state_format::fp8_e4m3);
  EXPECT_EQ(find_recipe("nvfp4").optimizer_states.second, state_format::fp32);
}

TEST(RecipeCatalog, UnknownNamesAreRefused) {
  try {
    find_recipe("nvfp5");
    FAIL();
  } catch (const error& e) {
    EXPECT_EQ(e.code(), errc::invalid_argument);
    const std::string what = e.what();
    EXPECT_NE(what.find("unknown training recipe 'nvfp5'"), std::string::npos);
    EXPECT_NE(what.find("nvfp4_cooldown"), std::string::npos);  // the known names are listed
  }
}

}  // namespace training_recipe_catalog_test
}  // namespace
}  // namespace nvfp4::training
