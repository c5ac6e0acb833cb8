// Tests for nvfp4/nn/transformer.hpp: the whole backward pass against central differences, the
// layer map the precision controls use, 1 vs 2 threads bit for bit, and bad configurations/batches.
#include "nvfp4/nn/transformer.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "nn/model_test_support.hpp"

#include "test_support.hpp"

namespace nvfp4::nn {
namespace {
namespace nn_transformer_test {

batch token_batch(index_t rows, index_t seq, index_t vocab, unsigned seed) {
  batch b;
  b.rows = rows;
  b.seq_len = seq;
  for (index_t i = 0; i < rows * seq; ++i) {
    b.inputs.push_back(static_cast<std::int32_t>((i * 7 + seed) % vocab));
    b.targets.push_back(static_cast<std::int32_t>((i * 5 + 3 * seed + 1) % vocab));
  }
  return b;
}

TEST(Transformer, GradientsMatchCentralDifferences) {
  // Large init so every gradient is well above the FP32 noise of the difference quotient.
  transformer_lm m({.vocab = 11, .width = 8, .depth = 2, .heads = 2, .seq_len = 6, .mlp_ratio = 2, .init_std = 0.5f, .seed = 3},
                   fp32_engines());
  testing::expect_gradients_match(m, token_batch(2, 5, 11, 1), 3, 1e-2f, 2e-3, 0.03);
}

TEST(Transformer, LayerMapAndParameters) {
  transformer_lm m({.width = 16, .depth = 3, .heads = 2, .seq_len = 8}, fp32_engines());
  EXPECT_EQ(m.layer_count(), 4);
  const auto dense = m.dense_layers();
  ASSERT_EQ(dense.size(), 13u);  // 4 per block + head
  EXPECT_EQ(dense[0]->name(), "blk0.qkv");
  EXPECT_EQ(dense[5]->name(), "blk1.proj");
  EXPECT_EQ(dense[5]->layer(), 1);
  EXPECT_EQ(dense[12]->name(), "head");
  EXPECT_EQ(dense[12]->layer(), 3);
  EXPECT_EQ(dense[12]->weight().kind, parameter_kind::head);
  // 256·16 + 8·16 embeddings, per block 2·16 gains + (48 + 16 + 64 + 64)·16 weights, final gain, head.
  EXPECT_EQ(m.parameter_count(), 256u * 16 + 8 * 16 + 3 * (32 + 192 * 16) + 16 + 256 * 16);
  EXPECT_EQ(m.weight_bytes(), 4 * m.parameter_count());
}

TEST(Transformer, SameBitsForOneAndTwoThreads) {
#if NVFP4_HAS_OPENMP
  const batch b = token_batch(8, 32, 256, 2);
  auto run = [&](int threads) {
    test::set_threads(threads);
    transformer_lm m({.width = 64, .depth = 1, .heads = 4, .seq_len = 32}, bf16_engines());
    std::vector<float> out{m.forward_backward(b, 1.0f)};
    for (parameter* p : m.parameters()) out.insert(out.end(), p->grad.begin(), p->grad.end());
    return out;
  };
  EXPECT_EQ(run(1), run(2));
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

TEST(Transformer, RejectsBadConfigurationsAndBatches) {
  EXPECT_EQ(test::error_code_of([] { transformer_lm({.width = 10, .heads = 4}, fp32_engines()); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([] { transformer_lm({.depth = 0}, fp32_engines()); }), errc::invalid_argument);
  EXPECT_EQ(test::error_code_of([] { transformer_lm({}, engine_factory{}); }), errc::null_pointer);  // as dense's
  transformer_lm m({.vocab = 16, .width = 8, .depth = 1, .heads = 2, .seq_len = 4}, fp32_engines());
  EXPECT_EQ(test::error_code_of([&] { m.evaluate(token_batch(1, 5, 16, 0)); }), errc::invalid_argument);  // longer than seq_len
  batch bad = token_batch(1, 4, 16, 0);
  bad.inputs[2] = 16;  // outside the vocabulary
  EXPECT_EQ(test::error_code_of([&] { m.evaluate(bad); }), errc::invalid_argument);
  bad = token_batch(1, 4, 16, 0);
  bad.targets.pop_back();
  EXPECT_EQ(test::error_code_of([&] { m.evaluate(bad); }), errc::shape_mismatch);
}

}  // namespace nn_transformer_test
}  // namespace
}  // namespace nvfp4::nn
