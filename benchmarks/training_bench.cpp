// Benchmarks of training: one step (forward + backward + AdamW update) of the tiny transformer LM
// under every recipe of the catalog, FP32 first (the baseline), in tokens/s; and one AdamW update
// of a 1M-parameter matrix per optimizer-state storage, FP32 states first (the baseline), in
// parameters/s. Training steps at the thread counts of benchmarks/bench_threads.hpp
// (NVFP4_BENCH_THREADS), the optimizer step at one thread.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "nvfp4/nn/transformer.hpp"
#include "nvfp4/training/optimizer.hpp"
#include "nvfp4/training/recipe_catalog.hpp"
#include "nvfp4/training/text_dataset.hpp"

#include "bench_threads.hpp"

namespace {

using namespace nvfp4;

using nvfp4_bench::set_threads;

/// Random bytes as the text: the step's cost does not depend on the content.
std::vector<std::uint8_t> random_text(std::size_t n) {
  std::vector<std::uint8_t> bytes(n);
  std::uint64_t x = 88172645463325252ull;
  for (auto& b : bytes) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<std::uint8_t>(32 + x % 95);
  }
  return bytes;
}

/// The train_compare default model: width 64, 2 blocks, 4 heads, 16 sequences of 64 bytes.
void BM_train_step(benchmark::State& state, const training::training_recipe& recipe, int threads) {
  set_threads(threads);
  const training::text_dataset data(random_text(1 << 16), {.seq_len = 64, .batch_size = 16});
  nn::transformer_lm model({.width = 64, .depth = 2, .heads = 4, .seq_len = 64}, recipe.engines(1));
  training::adamw opt(model.parameters(), {.lr = 1e-3f, .states = {.default_formats = recipe.optimizer_states}});
  long long step = 0;
  for (auto _ : state) {
    recipe.controls.apply(model, step, 1 << 30);
    for (nn::dense* d : model.dense_layers()) d->begin_step(step);
    const nn::batch b = data.train_batch(step++);
    benchmark::DoNotOptimize(model.forward_backward(b, 1.0f));
    opt.step();
  }
  state.SetItemsProcessed(state.iterations() * 16 * 64);
  state.counters["threads"] = threads;
}

void BM_optimizer_step(benchmark::State& state, training::state_format format) {
  set_threads(1);
  nn::parameter p("w", nn::parameter_kind::matrix, 1024, 1024);
  for (std::size_t i = 0; i < p.value.size(); ++i) {
    p.value[i] = 0.01f * static_cast<float>(static_cast<int>(i % 201) - 100);
    p.grad[i] = 0.001f * static_cast<float>(static_cast<int>((i * 7) % 101) - 50);
  }
  training::adamw opt({&p}, {.lr = 1e-4f, .states = {.default_formats = {format, format}}});
  for (auto _ : state) {
    opt.step();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(p.value.size()));
  state.counters["state_bytes"] = static_cast<double>(opt.state_bytes());
}

const bool registered = [] {
  for (const auto& recipe : training::recipe_catalog()) {
    for (int threads : nvfp4_bench::thread_counts()) {
      benchmark::RegisterBenchmark(("BM_train_step/" + recipe.name + "/threads:" + std::to_string(threads)).c_str(),
                                   [recipe, threads](benchmark::State& s) { BM_train_step(s, recipe, threads); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  for (auto format : {training::state_format::fp32, training::state_format::bf16, training::state_format::fp8_e4m3,
                      training::state_format::fp8_e5m2, training::state_format::block_fp8_e4m3}) {
    benchmark::RegisterBenchmark((std::string("BM_adamw_step/") + training::state_format_name(format)).c_str(), [format](
                                                                                                                    benchmark::State& s) {
      BM_optimizer_step(s, format);
    })->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
