// Benchmarks of the transforms layer on 4096x4096 bf16, elements/s, threads from bench_threads.hpp: RHT alone,
// RHT + quantize of the columnwise copy, SR quantize, beside the plain 1x16 RN quantize (rowwise
// and columnwise) as baselines in the same binary.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/transforms/hadamard.hpp"

#include "bench_threads.hpp"

namespace {

constexpr nvfp4::index_t kSize = 4096;

const std::vector<nvfp4::bf16>& input() {
  static const std::vector<nvfp4::bf16> values = [] {
    std::mt19937 gen(1);
    std::normal_distribution<float> normal;
    std::vector<nvfp4::bf16> v(static_cast<std::size_t>(kSize * kSize));
    for (auto& e : v) e = nvfp4::bf16::from_float(normal(gen));
    return v;
  }();
  return values;
}
nvfp4::matrix_view<const nvfp4::bf16> view() { return nvfp4::matrix_view<const nvfp4::bf16>::row_major(input().data(), kSize, kSize); }

using nvfp4_bench::one_thread_args;
using nvfp4_bench::thread_args;
void set_threads(benchmark::State& state) { nvfp4_bench::use_threads(state); }
void finish(benchmark::State& state) { state.SetItemsProcessed(state.iterations() * kSize * kSize); }

void BM_quantize_rn_rowwise(benchmark::State& state) {  // baseline: plain 1x16 quantize
  set_threads(state);
  for (auto _ : state) benchmark::DoNotOptimize(nvfp4::quantize<nvfp4::nvfp4_1x16>(view()));
  finish(state);
}
void BM_quantize_rn_columnwise(benchmark::State& state) {  // baseline: the columnwise copy without RHT
  set_threads(state);
  for (auto _ : state) benchmark::DoNotOptimize(nvfp4::quantize<nvfp4::nvfp4_1x16>(view().transposed()));
  finish(state);
}
void BM_rht_columnwise(benchmark::State& state) {
  set_threads(state);
  for (auto _ : state) benchmark::DoNotOptimize(nvfp4::rht_columnwise(view()));
  finish(state);
}
void BM_rht_columnwise_into(benchmark::State& state) {  // the same transform into a buffer the caller keeps
  set_threads(state);
  std::vector<nvfp4::bf16> out(static_cast<std::size_t>(kSize * kSize));
  const auto out_view = nvfp4::matrix_view<nvfp4::bf16>::row_major(out.data(), kSize, kSize);
  for (auto _ : state) {
    nvfp4::hadamard_rows(view().transposed(), nvfp4::hadamard_transform::te_default(), out_view);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  finish(state);
}
void BM_rht_quantize_columnwise(benchmark::State& state) {
  set_threads(state);
  for (auto _ : state) benchmark::DoNotOptimize(nvfp4::quantize_columnwise_rht(view()));
  finish(state);
}
void BM_quantize_sr_rowwise(benchmark::State& state) {
  set_threads(state);
  for (auto _ : state)
    benchmark::DoNotOptimize(nvfp4::quantize<nvfp4::nvfp4_1x16>(view(), {.rounding = nvfp4::rounding_mode::stochastic, .seed = 3}));
  finish(state);
}
void BM_quantize_sr_reference_rowwise(benchmark::State& state) {  // the scalar reference, for scale
  for (auto _ : state)
    benchmark::DoNotOptimize(
        nvfp4::reference::quantize<nvfp4::nvfp4_1x16>(view(), {.rounding = nvfp4::rounding_mode::stochastic, .seed = 3}));
  finish(state);
}
void BM_random_bytes(benchmark::State& state) {
  set_threads(state);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(kSize * kSize));
  for (auto _ : state) {
    nvfp4::fill_random_bytes(3, 0, bytes.size(), bytes.data());
    benchmark::DoNotOptimize(bytes.data());
  }
  finish(state);
}

BENCHMARK(BM_quantize_rn_rowwise)->Apply(thread_args);
BENCHMARK(BM_quantize_rn_columnwise)->Apply(thread_args);
BENCHMARK(BM_rht_columnwise)->Apply(thread_args);
BENCHMARK(BM_rht_columnwise_into)->Apply(thread_args);
BENCHMARK(BM_rht_quantize_columnwise)->Apply(thread_args);
BENCHMARK(BM_quantize_sr_rowwise)->Apply(thread_args);
BENCHMARK(BM_random_bytes)->Apply(thread_args);
BENCHMARK(BM_quantize_sr_reference_rowwise)->Apply(one_thread_args)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
