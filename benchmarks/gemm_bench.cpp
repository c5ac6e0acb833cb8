// Benchmarks of the block-scaled FP4 GEMM: exact (Blackwell-bit-exact) and relaxed modes, with B
// packed per call and (decode shape, M = 16) packed once beforehand, the AVX-512 kernels on
// machines where the AMX ones run by default, the dequantize-then-Eigen path, and fp32 SGEMM by
// Eigen and OpenBLAS on the same shape, in the same run. Thread counts: bench_threads.hpp.
// Counters: FLOP/s = 2·M·N·K / time (effective, as for a dense GEMM).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "nvfp4/gemm/gemm.hpp"
#include "nvfp4/gemm/packed_weight.hpp"
#include "nvfp4/interop/eigen_gemm.hpp"
#include "nvfp4/scaling/quantize.hpp"

#include "bench_threads.hpp"

namespace {

using namespace nvfp4;

struct problem {
  index_t m, n, k;
  eigen::row_major_matrix_f32 x, w;  // [m, k], [n, k]
  nvfp4_tensor a, b;
};

const problem& get_problem(index_t m, index_t n, index_t k) {
  static std::vector<std::unique_ptr<problem>> cache;
  for (const auto& p : cache)
    if (p->m == m && p->n == n && p->k == k) return *p;
  auto p = std::make_unique<problem>();
  p->m = m, p->n = n, p->k = k;
  std::mt19937 rng(42);
  std::normal_distribution<float> normal;
  p->x.resize(m, k);
  p->w.resize(n, k);
  for (index_t i = 0; i < p->x.size(); ++i) p->x.data()[i] = normal(rng);
  for (index_t i = 0; i < p->w.size(); ++i) p->w.data()[i] = normal(rng);
  p->a = eigen::quantize<nvfp4_1x16>(p->x);
  p->b = eigen::quantize<nvfp4_1x16>(p->w);
  cache.push_back(std::move(p));
  return *cache.back();
}

void set_threads(benchmark::State& state) { nvfp4_bench::use_threads(state, 3); }

void report(benchmark::State& state, const problem& p) {
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * double(p.m) * double(p.n) * double(p.k) * double(state.iterations()),
                                                benchmark::Counter::kIsRate);
}

template <gemm_mode Mode>
void BM_nvfp4_gemm(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  std::vector<float> d(static_cast<std::size_t>(p.m * p.n));
  for (auto _ : state) {
    block_scaled_mma(p.a, p.b, {}, matrix_view<float>::row_major(d.data(), p.m, p.n), Mode);
    benchmark::DoNotOptimize(d.data());
  }
  report(state, p);
}

/// B packed once (packed_weight), as an inference engine holds its weights.
template <gemm_mode Mode>
void BM_nvfp4_gemm_packed(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  static std::vector<std::pair<const problem*, std::unique_ptr<packed_weight<nvfp4_1x16>>>> packed;
  auto it = std::find_if(packed.begin(), packed.end(), [&](const auto& e) { return e.first == &p; });
  if (it == packed.end()) it = packed.insert(packed.end(), {&p, std::make_unique<packed_weight<nvfp4_1x16>>(p.b)});
  std::vector<float> d(static_cast<std::size_t>(p.m * p.n));
  for (auto _ : state) {
    block_scaled_mma(p.a, *it->second, {}, matrix_view<float>::row_major(d.data(), p.m, p.n), Mode);
    benchmark::DoNotOptimize(d.data());
  }
  report(state, p);
}

/// The AVX-512 kernels where the AMX ones would run (registered on AMX machines only).
template <gemm_mode Mode>
void BM_nvfp4_gemm_without_amx(benchmark::State& state) {
  simd::amx::set_allowed(false);
  BM_nvfp4_gemm<Mode>(state);
  simd::amx::set_allowed(true);
}

/// What a user would otherwise write: dequantize both operands, then Eigen's SGEMM. The buffers
/// are allocated once (as the SGEMM baseline's output is), so that first-touch page faults of
/// fresh 16-64 MiB allocations, costly on virtual machines, do not count; eigen::dequantize_then_gemm
/// allocates them per call.
void BM_dequantize_then_eigen(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  eigen::row_major_matrix_f32 a_values(p.m, p.k), b_values(p.n, p.k), out(p.m, p.n);
  for (auto _ : state) {
    dequantize(p.a, matrix_view<float>::row_major(a_values.data(), p.m, p.k));
    dequantize(p.b, matrix_view<float>::row_major(b_values.data(), p.n, p.k));
    out.noalias() = a_values * b_values.transpose();
    benchmark::DoNotOptimize(out.data());
  }
  report(state, p);
}
void BM_eigen_sgemm(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  eigen::row_major_matrix_f32 out(p.m, p.n);
  for (auto _ : state) {
    out.noalias() = p.x * p.w.transpose();
    benchmark::DoNotOptimize(out.data());
  }
  report(state, p);
}

#ifdef NVFP4_HAVE_CBLAS
void BM_openblas_sgemm(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  std::vector<float> out(static_cast<std::size_t>(p.m * p.n));
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(p.m), static_cast<int>(p.n),
                static_cast<int>(p.k), 1.0f, p.x.data(), static_cast<int>(p.k), p.w.data(), static_cast<int>(p.k), 0.0f,
                out.data(), static_cast<int>(p.n));
    benchmark::DoNotOptimize(out.data());
  }
  report(state, p);
}
#endif

// {M, N, K, threads}: square 2048 and 4096, and a decode-like skinny M = 16.
void shapes(benchmark::internal::Benchmark* b) {
  for (int threads : nvfp4_bench::thread_counts()) {
    b->Args({2048, 2048, 2048, threads});
    b->Args({4096, 4096, 4096, threads});
    b->Args({16, 4096, 4096, threads});
  }
  b->ArgNames({"M", "N", "K", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
}

// The decode shape alone: M = 16 against a 4096 x 4096 weight.
void decode_shape(benchmark::internal::Benchmark* b) {
  for (int threads : nvfp4_bench::thread_counts()) b->Args({16, 4096, 4096, threads});
  b->ArgNames({"M", "N", "K", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
}

BENCHMARK(BM_nvfp4_gemm<gemm_mode::exact>)->Name("nvfp4_gemm_exact")->Apply(shapes);
BENCHMARK(BM_nvfp4_gemm<gemm_mode::relaxed>)->Name("nvfp4_gemm_relaxed")->Apply(shapes);
BENCHMARK(BM_nvfp4_gemm_packed<gemm_mode::exact>)->Name("nvfp4_gemm_exact_packed_weight")->Apply(decode_shape);
BENCHMARK(BM_nvfp4_gemm_packed<gemm_mode::relaxed>)->Name("nvfp4_gemm_relaxed_packed_weight")->Apply(decode_shape);
[[maybe_unused]] const bool amx_comparisons_registered = [] {
  if (simd::amx::available()) {
    benchmark::RegisterBenchmark("nvfp4_gemm_exact_avx512_on_amx_machine", BM_nvfp4_gemm_without_amx<gemm_mode::exact>)->Apply(shapes);
    benchmark::RegisterBenchmark("nvfp4_gemm_relaxed_avx512_on_amx_machine", BM_nvfp4_gemm_without_amx<gemm_mode::relaxed>)->Apply(shapes);
  }
  return true;
}();
BENCHMARK(BM_dequantize_then_eigen)->Name("dequantize_then_eigen")->Apply(shapes);
BENCHMARK(BM_eigen_sgemm)->Name("eigen_sgemm_fp32")->Apply(shapes);
#ifdef NVFP4_HAVE_CBLAS
BENCHMARK(BM_openblas_sgemm)->Name("openblas_sgemm_fp32")->Apply(shapes);
#endif

}  // namespace

BENCHMARK_MAIN();
