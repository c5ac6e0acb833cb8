// Benchmarks of the block-scaled FP4 GEMM: exact (Blackwell-bit-exact) and relaxed modes, with B
// packed per call and (decode shape, M = 16) packed once beforehand, the vector kernels' register
// block alone on L1-resident operands, the AMX kernels and isolated pieces of them on AMX
// machines, the dequantize-then-Eigen path, and fp32 SGEMM by
// Eigen and OpenBLAS on the same shape, in the same run. Thread counts: bench_threads.hpp.
// Counters: FLOP/s = 2·M·N·K / time (effective, as for a dense GEMM).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#include "nvfp4/gemm/fp4/gemm.hpp"
#include "nvfp4/gemm/fp4/packed_weight.hpp"
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

/// For N independent copies on N Google Benchmark threads: false (and the run marked an error)
/// when the calling thread may run on fewer than N CPUs. Threads inherit the affinity of the one
/// that starts them, and with OMP_PROC_BIND set, OpenMP pins the main thread to one core: the
/// copies then share it, and their figures say nothing about N cores.
bool copies_have_their_cores(benchmark::State& state) {
#if defined(__linux__)
  cpu_set_t cpus;
  if (state.threads() > 1 && sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) < state.threads()) {
    state.SkipWithError("fewer CPUs than copies in this thread's affinity (unset OMP_PROC_BIND for the copies)");
    return false;
  }
#endif
  return true;
}

/// FLOP/s of one copy among the benchmark's threads (Google Benchmark sums a counter over the
/// threads; kAvgThreads divides by their number).
void report_per_copy(benchmark::State& state, double flop_per_iteration) {
  state.counters["FLOP/s per copy"] = benchmark::Counter(flop_per_iteration * double(state.iterations()),
                                                         benchmark::Counter::kIsRate | benchmark::Counter::kAvgThreads);
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

/// The compiled kernel set's largest register block alone, on operands that stay in L1: 8 steps
/// (K = 512) of R rows against C tiles, 64 calls per iteration into one accumulator block. What
/// the kernel's instruction stream sustains without the driver, the packing or the memory
/// hierarchy: the GEMM's ceiling on this core (docs/benchmarks.md, "Kernel ceilings"). With N
/// copies at once (kernel_copies), the counter is one copy's rate: N cores sustain N times it.
template <gemm_mode Mode>
void BM_kernel_in_l1(benchmark::State& state) {
  if (!copies_have_their_cores(state)) return;
  using kernels = detail::compiled_mma_kernels;
  using scale_type = nvfp4_1x16::scale_type;
  constexpr int R = kernels::block_rows, C = kernels::block_tiles;
  constexpr index_t k = 512, steps = k / fp4::mma::step_k, calls = 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(R * k)), w(static_cast<std::size_t>(C * detail::tile_lanes * k));
  for (float& v : x) v = normal(rng);
  for (float& v : w) v = normal(rng);
  const auto a = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(x.data(), R, k));
  const auto b = quantize<nvfp4_1x16>(matrix_view<const float>::row_major(w.data(), C * detail::tile_lanes, k));
  const auto rows = kernels::packers::make_broadcast_rows(a);
  std::vector<detail::tile_step> tiles(static_cast<std::size_t>(C * steps));
  const detail::row_step* row_steps[R];
  const detail::tile_step* tile_steps[C];
  for (int r = 0; r < R; ++r) row_steps[r] = rows.row(r);
  for (int t = 0; t < C; ++t) {
    kernels::packers::pack_tile(b, t * detail::tile_lanes, tiles.data() + t * steps);
    tile_steps[t] = tiles.data() + t * steps;
  }
  alignas(64) float out[R * C * detail::tile_lanes] = {};
  for (auto _ : state) {
    for (index_t call = 0; call < calls; ++call) {
      if constexpr (Mode == gemm_mode::exact)
        kernels::exact_block<scale_type, R, C>(row_steps, tile_steps, steps, out, C * detail::tile_lanes);
      else
        kernels::relaxed_block<scale_type, R, C, true>(row_steps, tile_steps, steps, out, C * detail::tile_lanes);
      benchmark::DoNotOptimize(out);
      for (float& v : out) v = 0.0f;  // a fixed starting accumulator, so every call takes the same path
    }
  }
  report_per_copy(state, 2.0 * R * C * detail::tile_lanes * k * calls);
}

/// N independent one-thread GEMMs at once (2048³, the library held to one thread in each Google
/// Benchmark thread), on shared operands, each copy packing its own B panels: the memory traffic of
/// N one-thread GEMMs, with no team, no shared packing and no scheduling. The counter is one copy's
/// rate. Against one copy alone, the per-core loss of a host whose cores all run GEMMs; against
/// the N-thread GEMM, what the parallel driver adds or loses beyond that.
template <gemm_mode Mode>
void BM_gemm_copies(benchmark::State& state) {
  if (!copies_have_their_cores(state)) return;
  nvfp4_bench::set_threads(1);
  static const problem& p = get_problem(2048, 2048, 2048);
  std::vector<float> d(static_cast<std::size_t>(p.m * p.n));
  for (auto _ : state) {
    block_scaled_mma(p.a, p.b, {}, matrix_view<float>::row_major(d.data(), p.m, p.n), Mode);
    benchmark::DoNotOptimize(d.data());
  }
  report_per_copy(state, 2.0 * double(p.m) * double(p.n) * double(p.k));
}

/// The AMX kernels (off by default, see simd/amx/tiles.hpp; registered on AMX machines only).
template <gemm_mode Mode>
void BM_nvfp4_gemm_amx(benchmark::State& state) {
  simd::amx::set_allowed(true);
  BM_nvfp4_gemm<Mode>(state);
  simd::amx::set_allowed(false);
}

#if NVFP4_HAS_AVX512_VNNI && NVFP4_AMX_COMPILED
/// Isolated pieces of the AMX kernels (registered on AMX machines only), to see what bounds them:
/// 4096 groups per iteration, each the kernel's 2 x 2 block of tile multiplies of one group
/// (A 16 rows x 16 bf16, B 8 pair rows x 16 columns, 16 x 16 fp32 products): the multiplies alone
/// (zero + multiply), with the products stored, and stored then read back by vector loads as the
/// kernel does; and full-width multiplies (32 bf16 of K) accumulating in place, the unit's peak.
/// Counter `ns/multiply`: time per tile multiply; FLOP/s counts 2·16·16·K per multiply.
enum class amx_piece { multiply, multiply_store, multiply_store_reload, full_width_accumulate };
template <amx_piece Piece>
void BM_amx_piece(benchmark::State& state) {
  using tiles = simd::amx::hardware_tiles;
  constexpr int groups = 4096;
  struct alignas(64) operands {
    std::uint16_t a[2][16][64];
    std::uint16_t b[2][16][32];
    float products[2][4][2][2][256];
  };
  auto buffers = std::make_unique<operands>();
  for (int t = 0; t < 2; ++t)
    for (int r = 0; r < 16; ++r)
      for (int k = 0; k < 64; ++k) buffers->a[t][r][k] = 0x3F80;  // bf16 1.0
  for (int t = 0; t < 2; ++t)
    for (int r = 0; r < 16; ++r)
      for (int k = 0; k < 32; ++k) buffers->b[t][r][k] = 0x3F80;
  simd::amx::tile_config config = detail::amx::tile_setup();
  if constexpr (Piece == amx_piece::full_width_accumulate) {
    for (int t = 0; t < 2; ++t) config.set(t, 16, 64);
    for (int t = 2; t < 4; ++t) config.set(t, 16, 64);
  }
  tiles::configure(config);
  __m512 sink = _mm512_setzero_ps();
  for (auto _ : state) {
    for (int g = 0; g < groups; ++g) {
      float(&out)[4][2][2][256] = buffers->products[g & 1];
      const int group = g & 3;
      tiles::load<0>(buffers->a[0][0] + (Piece == amx_piece::full_width_accumulate ? 0 : group * 16), 128);
      tiles::load<1>(buffers->a[1][0] + (Piece == amx_piece::full_width_accumulate ? 0 : group * 16), 128);
      tiles::load<2>(buffers->b[0][0], 64);
      tiles::load<3>(buffers->b[1][0], 64);
      if constexpr (Piece != amx_piece::full_width_accumulate) {
        tiles::zero<4>(), tiles::zero<5>(), tiles::zero<6>(), tiles::zero<7>();
      }
      tiles::dot_bf16<4, 0, 2>();
      tiles::dot_bf16<5, 0, 3>();
      tiles::dot_bf16<6, 1, 2>();
      tiles::dot_bf16<7, 1, 3>();
      if constexpr (Piece == amx_piece::multiply_store || Piece == amx_piece::multiply_store_reload) {
        tiles::store<4>(out[group][0][0], 64);
        tiles::store<5>(out[group][0][1], 64);
        tiles::store<6>(out[group][1][0], 64);
        tiles::store<7>(out[group][1][1], 64);
      }
      if constexpr (Piece == amx_piece::multiply_store_reload)
        for (int t = 0; t < 4; ++t)
          for (int row = 0; row < 16; ++row) sink = _mm512_add_ps(sink, _mm512_load_ps(out[group][t / 2][t % 2] + row * 16));
    }
  }
  if constexpr (Piece == amx_piece::full_width_accumulate) tiles::store<4>(buffers->products[0][0][0][0], 64);
  tiles::release();
  benchmark::DoNotOptimize(sink);
  const double multiplies = 4.0 * groups * static_cast<double>(state.iterations());
  const double k = Piece == amx_piece::full_width_accumulate ? 32 : 16;
  state.counters["ns/multiply"] = benchmark::Counter(multiplies * 1e-9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["FLOP/s"] = benchmark::Counter(multiplies * 2 * 16 * 16 * k, benchmark::Counter::kIsRate);
}
#endif

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
/// The kernels with the other schedule of the tile work (see gemm/fp4/simd/mma_amx.hpp), for comparison.
template <gemm_mode Mode>
void BM_nvfp4_gemm_amx_phased(benchmark::State& state) {
#if NVFP4_HAS_AVX512_VNNI && NVFP4_AMX_COMPILED
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  std::vector<float> d(static_cast<std::size_t>(p.m * p.n));
  const auto d_view = matrix_view<float>::row_major(d.data(), p.m, p.n);
  for (auto _ : state) {
    detail::amx::block_scaled_mma<simd::amx::hardware_tiles, detail::amx::schedule::phased>(
        p.a, p.b, nullptr, {}, detail::store_to_matrix{d_view}, Mode);
    benchmark::DoNotOptimize(d.data());
  }
  report(state, p);
#else
  state.SkipWithError("no AMX kernels in this build");
#endif
}

[[maybe_unused]] const bool amx_comparisons_registered = [] {
  if (simd::amx::available()) {
    benchmark::RegisterBenchmark("nvfp4_gemm_exact_amx_phased", BM_nvfp4_gemm_amx_phased<gemm_mode::exact>)->Apply(shapes);
    benchmark::RegisterBenchmark("nvfp4_gemm_relaxed_amx_phased", BM_nvfp4_gemm_amx_phased<gemm_mode::relaxed>)->Apply(shapes);
#if NVFP4_HAS_AVX512_VNNI && NVFP4_AMX_COMPILED
    for (auto [name, f] : {std::pair{"amx_piece_multiply", &BM_amx_piece<amx_piece::multiply>},
                           std::pair{"amx_piece_multiply_store", &BM_amx_piece<amx_piece::multiply_store>},
                           std::pair{"amx_piece_multiply_store_reload", &BM_amx_piece<amx_piece::multiply_store_reload>},
                           std::pair{"amx_piece_full_width_accumulate", &BM_amx_piece<amx_piece::full_width_accumulate>}})
      benchmark::RegisterBenchmark(name, f)->Unit(benchmark::kMicrosecond)->UseRealTime();
#endif
    benchmark::RegisterBenchmark("nvfp4_gemm_exact_amx", BM_nvfp4_gemm_amx<gemm_mode::exact>)->Apply(shapes);
    benchmark::RegisterBenchmark("nvfp4_gemm_relaxed_amx", BM_nvfp4_gemm_amx<gemm_mode::relaxed>)->Apply(shapes);
  }
  return true;
}();
BENCHMARK(BM_dequantize_then_eigen)->Name("dequantize_then_eigen")->Apply(shapes);
// The kernels alone also run as N independent copies on N threads (Google Benchmark's threads, one
// per count of bench_threads.hpp): with no shared data and no memory traffic, what N cores sustain
// together is the ceiling of an N-thread GEMM's scaling. The whole one-thread GEMM runs so too
// (nvfp4_exact_gemm_copies): the same ceiling with each core's memory traffic.
void kernel_copies(benchmark::internal::Benchmark* b) {
  for (int threads : nvfp4_bench::thread_counts()) b->Threads(threads);
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}
BENCHMARK(BM_kernel_in_l1<gemm_mode::exact>)->Name("nvfp4_exact_kernel_in_l1")->Apply(kernel_copies);
BENCHMARK(BM_kernel_in_l1<gemm_mode::relaxed>)->Name("nvfp4_relaxed_kernel_in_l1")->Apply(kernel_copies);
BENCHMARK(BM_gemm_copies<gemm_mode::exact>)->Name("nvfp4_exact_gemm_copies")->Apply(kernel_copies);
BENCHMARK(BM_eigen_sgemm)->Name("eigen_sgemm_fp32")->Apply(shapes);
#ifdef NVFP4_HAVE_CBLAS
BENCHMARK(BM_openblas_sgemm)->Name("openblas_sgemm_fp32")->Apply(shapes);
#endif

}  // namespace

BENCHMARK_MAIN();
