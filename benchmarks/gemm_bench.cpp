// Benchmarks of the block-scaled FP4 GEMM: exact (Blackwell-bit-exact) and relaxed modes, with B
// packed per call and (decode shape, M = 16) packed once beforehand, the vector kernels' register
// block alone on L1-resident operands, the AMX kernels and isolated pieces of them on AMX
// machines, the dequantize-then-Eigen path, and fp32 SGEMM by Eigen and OpenBLAS on the same
// shape, in the same run. The relaxed GEMMs of every family (NVFP4, MXFP4, FP8 per tensor, FP8
// 1x128 x 128x128 blocks, MXFP8, bf16) on BF16 tiles where the machine runs them and with the
// tile path turned off (`_vector`), their packing and their tile kernel alone (AMX machines).
// Thread counts: bench_threads.hpp. Counters: FLOP/s = 2·M·N·K / time (effective, as for a dense
// GEMM).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <span>
#include <tuple>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#include "nvfp4/gemm/float_gemm.hpp"
#include "nvfp4/gemm/fp4/gemm.hpp"
#include "nvfp4/gemm/fp4/packed_weight.hpp"
#include "nvfp4/gemm/fp8/gemm.hpp"
#include "nvfp4/interop/eigen_gemm.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/mxfp8_quantize.hpp"
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
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * double(p.m) * double(p.n) * double(p.k) * double(state.iterations()), benchmark::Counter::kIsRate);
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
  state.counters["FLOP/s per copy"] =
      benchmark::Counter(flop_per_iteration * double(state.iterations()), benchmark::Counter::kIsRate | benchmark::Counter::kAvgThreads);
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
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), 1.0f,
                p.x.data(), static_cast<int>(p.k), p.w.data(), static_cast<int>(p.k), 0.0f, out.data(), static_cast<int>(p.n));
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
    detail::amx::block_scaled_mma<simd::amx::hardware_tiles, detail::amx::schedule::phased>(p.a, p.b, nullptr, {},
                                                                                            detail::store_to_matrix{d_view}, Mode);
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
// ---- the relaxed GEMMs of every family, on BF16 tiles and on the vector kernels -------------------

enum class family { nvfp4, mxfp4, fp8, fp8_block, mxfp8, bf16 };

/// One problem's operands in every family (quantized from the same X and W), made once.
struct family_operands {
  quantized_tensor<mxfp4> mx4_a, mx4_b;
  fp8_tensor fp8_a, fp8_b, block_a, block_b;
  quantized_tensor<mxfp8> mx8_a, mx8_b;
  std::vector<float> bf16_x, bf16_w;  // X and W rounded to bf16, held in floats
};

const family_operands& operands_of(const problem& p) {
  static std::vector<std::pair<const problem*, std::unique_ptr<family_operands>>> cache;
  for (const auto& [key, ops] : cache)
    if (key == &p) return *ops;
  auto ops = std::make_unique<family_operands>();
  const auto x = matrix_view<const float>::row_major(p.x.data(), p.m, p.k), w = matrix_view<const float>::row_major(p.w.data(), p.n, p.k);
  ops->mx4_a = quantize<mxfp4>(x);
  ops->mx4_b = quantize<mxfp4>(w);
  ops->fp8_a = quantize_fp8_current(x, fp8_format::e4m3);
  ops->fp8_b = quantize_fp8_current(w, fp8_format::e4m3);
  ops->block_a = quantize_fp8_blockwise(x, fp8_format::e4m3, fp8_block_shape::block_1x128);
  ops->block_b = quantize_fp8_blockwise(w, fp8_format::e4m3, fp8_block_shape::block_128x128);
  ops->mx8_a = quantize_mxfp8_te<mxfp8>(x);
  ops->mx8_b = quantize_mxfp8_te<mxfp8>(w);
  for (float v : std::span<const float>(p.x.data(), static_cast<std::size_t>(p.x.size())))
    ops->bf16_x.push_back(bf16::from_float(v).to_float());
  for (float v : std::span<const float>(p.w.data(), static_cast<std::size_t>(p.w.size())))
    ops->bf16_w.push_back(bf16::from_float(v).to_float());
  cache.emplace_back(&p, std::move(ops));
  return *cache.back().second;
}

/// The relaxed GEMM of family F into a float [M, N], with the BF16 tile path allowed (Tiles: the
/// default, which runs on the tiles where the machine has AMX) or turned off (the vector kernels).
template <family F, bool Tiles>
void BM_relaxed(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  const family_operands& ops = operands_of(p);
  std::vector<float> d(static_cast<std::size_t>(p.m * p.n));
  const auto out = matrix_view<float>::row_major(d.data(), p.m, p.n);
  const bool previous = simd::amx::relaxed_allowed();
  simd::amx::set_relaxed_allowed(Tiles);
  const fp8_gemm_options relaxed8{.mode = gemm_mode::relaxed};
  for (auto _ : state) {
    if constexpr (F == family::nvfp4) block_scaled_mma(p.a, p.b, {}, out, gemm_mode::relaxed);
    if constexpr (F == family::mxfp4) block_scaled_mma(ops.mx4_a, ops.mx4_b, {}, out, gemm_mode::relaxed);
    if constexpr (F == family::fp8) fp8_gemm(ops.fp8_a, ops.fp8_b, out, relaxed8);
    if constexpr (F == family::fp8_block) fp8_gemm(ops.block_a, ops.block_b, out, relaxed8);
    if constexpr (F == family::mxfp8) mxfp8_gemm(ops.mx8_a, ops.mx8_b, out, relaxed8);
    if constexpr (F == family::bf16)
      float_gemm(matrix_view<const float>::row_major(ops.bf16_x.data(), p.m, p.k),
                 matrix_view<const float>::row_major(ops.bf16_w.data(), p.n, p.k), {}, out, gemm_mode::relaxed);
    benchmark::DoNotOptimize(d.data());
  }
  simd::amx::set_relaxed_allowed(previous);
  report(state, p);
}

/// Folding and packing one operand for the tiles (A's layout), alone: NVFP4, FP8 and bf16 A.
template <family F>
void BM_tiles_pack(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  const family_operands& ops = operands_of(p);
  for (auto _ : state) {
    detail::tiles::packed_operand packed;
    if constexpr (F == family::nvfp4) detail::tiles::pack(detail::tiles::fp4_source<nvfp4_1x16>{p.a}, p.m, p.k, false, packed);
    if constexpr (F == family::fp8) detail::tiles::pack(detail::tiles::source_of(ops.fp8_a), p.m, p.k, false, packed);
    if constexpr (F == family::bf16)
      detail::tiles::pack(detail::tiles::float_source{matrix_view<const float>::row_major(ops.bf16_x.data(), p.m, p.k)}, p.m, p.k, false,
                          packed);
    benchmark::DoNotOptimize(packed.storage.data());
  }
  state.counters["bytes/s"] = benchmark::Counter(double(p.m) * double(p.k) * 2.0 * double(state.iterations()), benchmark::Counter::kIsRate);
}

/// Where a relaxed GEMM's time goes: folding and packing A, packing B (as the tiles read it),
/// then the tile driver with a plain fp32 store as the epilogue; counters in ms per call.
template <family F>
void BM_relaxed_phases(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  const family_operands& ops = operands_of(p);
  std::vector<float> d(static_cast<std::size_t>(p.m * p.n));
  using clock = std::chrono::steady_clock;
  double pack_a = 0, pack_b = 0, run = 0;
  const auto source = [&](bool b_side) {
    if constexpr (F == family::nvfp4)
      return detail::tiles::fp4_source<nvfp4_1x16>{b_side ? p.b : p.a};
    else if constexpr (F == family::fp8)
      return detail::tiles::source_of(b_side ? ops.fp8_b : ops.fp8_a);
    else if constexpr (F == family::mxfp8)
      return detail::tiles::source_of(b_side ? ops.mx8_b : ops.mx8_a);
    else
      return detail::tiles::float_source{
          matrix_view<const float>::row_major(b_side ? ops.bf16_w.data() : ops.bf16_x.data(), b_side ? p.n : p.m, p.k)};
  };
  for (auto _ : state) {
    detail::tiles::packed_operand pa, pb;
    const auto t0 = clock::now();
    detail::tiles::pack(source(false), p.m, p.k, false, pa);
    const auto t1 = clock::now();
    detail::tiles::pack(source(true), p.n, p.k, true, pb);
    const auto t2 = clock::now();
    detail::tiles::run<simd::amx::hardware_tiles>(
        pa, pb, 0, detail::tiles::no_block_merge{},
        [&](index_t i, index_t j0, const float* v, index_t count) { std::copy_n(v, count, d.data() + i * p.n + j0); });
    const auto t3 = clock::now();
    pack_a += std::chrono::duration<double, std::milli>(t1 - t0).count();
    pack_b += std::chrono::duration<double, std::milli>(t2 - t1).count();
    run += std::chrono::duration<double, std::milli>(t3 - t2).count();
  }
  const double n = double(state.iterations());
  state.counters["pack_a_ms"] = pack_a / n;
  state.counters["pack_b_ms"] = pack_b / n;
  state.counters["run_ms"] = run / n;
  report(state, p);
}

/// The packer's pieces on one operand, per element: the family's fill (decode, scale, fp32 bits
/// of 16 rows x 32 K), the bf16 narrowing with the fold statistics, and B's pair transpose.
template <family F>
void BM_tiles_pack_pieces(benchmark::State& state) {
  const auto& p = get_problem(4096, 4096, 4096);
  const family_operands& ops = operands_of(p);
  alignas(64) std::uint32_t bits[16][32];
  alignas(64) std::uint16_t words[512];
  detail::tiles::tile out;
  using clock = std::chrono::steady_clock;
  double fill = 0, narrow = 0, transpose = 0, elements = 0;
  const index_t blocks = 64, steps = p.k / 32;
  for (auto _ : state) {
    for (index_t b = 0; b < blocks; ++b) {
      const auto t0 = clock::now();
      for (index_t s = 0; s < steps; ++s) {
        if constexpr (F == family::nvfp4)
          detail::tiles::fp4_source<nvfp4_1x16>{p.a}.fill(b * 16, s, bits);
        else if constexpr (F == family::fp8)
          detail::tiles::source_of(ops.fp8_a).fill(b * 16, s, bits);
        else
          detail::tiles::float_source{matrix_view<const float>::row_major(ops.bf16_x.data(), p.m, p.k)}.fill(b * 16, s, bits);
        benchmark::DoNotOptimize(bits);
      }
      const auto t1 = clock::now();
      for (index_t s = 0; s < steps; ++s) {
        benchmark::DoNotOptimize(detail::tiles::narrow_to_bf16(bits, words));
        benchmark::ClobberMemory();
      }
      const auto t2 = clock::now();
      for (index_t s = 0; s < steps; ++s) {
        detail::tiles::transpose_pairs(words, out.words);
        benchmark::DoNotOptimize(out);
      }
      const auto t3 = clock::now();
      fill += std::chrono::duration<double, std::nano>(t1 - t0).count();
      narrow += std::chrono::duration<double, std::nano>(t2 - t1).count();
      transpose += std::chrono::duration<double, std::nano>(t3 - t2).count();
      elements += double(steps) * 512;
    }
  }
  state.counters["fill_ns_per_element"] = fill / elements;
  state.counters["narrow_ns_per_element"] = narrow / elements;
  state.counters["transpose_ns_per_element"] = transpose / elements;
}

/// The tile driver alone on NVFP4 operands packed beforehand (no packing, no epilogue beyond a
/// row copy), with the work item shape of the arguments: rows of A per item (blocks of 16),
/// columns of B (blocks of 16), K steps per chunk. Registered on AMX machines only.
void BM_tiles_run(benchmark::State& state) {
  nvfp4_bench::use_threads(state, 6);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  detail::tiles::packed_operand pa, pb;
  detail::tiles::pack(detail::tiles::fp4_source<nvfp4_1x16>{p.a}, p.m, p.k, false, pa);
  detail::tiles::pack(detail::tiles::fp4_source<nvfp4_1x16>{p.b}, p.n, p.k, true, pb);
  const detail::tiles::blocking shape{state.range(3), state.range(4), state.range(5)};
  float sink = 0;
  for (auto _ : state)
    detail::tiles::run<simd::amx::hardware_tiles>(
        pa, pb, 0, detail::tiles::no_block_merge{}, [&](index_t, index_t, const float* v, index_t) { sink += v[0]; }, shape);
  benchmark::DoNotOptimize(sink);
  report(state, p);
}

/// The tile kernel alone on L1-resident operands: a 2 x 2 block of accumulator tiles over 8 K
/// steps (A and B 16 KiB each), 256 calls per iteration, each from zeroed tiles and stored: what
/// the tile unit sustains on this core, the relaxed GEMMs' ceiling. Registered on AMX machines.
void BM_tiles_kernel_in_l1(benchmark::State& state) {
  if (!copies_have_their_cores(state)) return;
  using tiles = simd::amx::hardware_tiles;
  constexpr index_t steps = 8, calls = 256;
  std::vector<float> x(static_cast<std::size_t>(32 * steps * 32)), w(x.size());
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (float& v : x) v = bf16::from_float(normal(rng)).to_float();
  for (float& v : w) v = bf16::from_float(normal(rng)).to_float();
  detail::tiles::packed_operand pa, pb;
  detail::tiles::pack(detail::tiles::float_source{matrix_view<const float>::row_major(x.data(), 32, steps * 32)}, 32, steps * 32, false,
                      pa);
  detail::tiles::pack(detail::tiles::float_source{matrix_view<const float>::row_major(w.data(), 32, steps * 32)}, 32, steps * 32, true, pb);
  const detail::tiles::tile* ta[2] = {pa.at(0, 0), pa.at(1, 0)};
  const detail::tiles::tile* tb[2] = {pb.at(0, 0), pb.at(1, 0)};
  alignas(64) float out[4][256];
  {
    const detail::tiles::tile_session<tiles> session;
    for (auto _ : state)
      for (index_t call = 0; call < calls; ++call) {
        tiles::zero<0>(), tiles::zero<1>(), tiles::zero<2>(), tiles::zero<3>();
        detail::tiles::accumulate<tiles, 2, 2>(ta, tb, steps);
        tiles::store<0>(out[0], 64), tiles::store<1>(out[1], 64), tiles::store<2>(out[2], 64), tiles::store<3>(out[3], 64);
      }
  }
  benchmark::DoNotOptimize(out);
  report_per_copy(state, 2.0 * 32 * 32 * steps * 32 * calls);
}

void tiles_run_shapes(benchmark::internal::Benchmark* b) {
  for (int threads : nvfp4_bench::thread_counts())
    for (auto [items, panel, chunk] : {std::tuple{8, 16, 16}, std::tuple{8, 16, 8}, std::tuple{8, 16, 32}, std::tuple{4, 32, 16},
                                       std::tuple{16, 8, 16}, std::tuple{8, 32, 8}})
      b->Args({4096, 4096, 4096, items, panel, chunk, threads});
  b->ArgNames({"M", "N", "K", "item_blocks", "panel_blocks", "chunk", "threads"})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->MinTime(0.3);
}

BENCHMARK(BM_relaxed<family::nvfp4, true>)->Name("relaxed_nvfp4")->Apply(shapes);
BENCHMARK(BM_relaxed<family::mxfp4, true>)->Name("relaxed_mxfp4")->Apply(shapes);
BENCHMARK(BM_relaxed<family::fp8, true>)->Name("relaxed_fp8_per_tensor")->Apply(shapes);
BENCHMARK(BM_relaxed<family::fp8_block, true>)->Name("relaxed_fp8_block_1x128_128x128")->Apply(shapes);
BENCHMARK(BM_relaxed<family::mxfp8, true>)->Name("relaxed_mxfp8")->Apply(shapes);
BENCHMARK(BM_relaxed<family::bf16, true>)->Name("relaxed_bf16")->Apply(shapes);
BENCHMARK(BM_relaxed<family::nvfp4, false>)->Name("relaxed_nvfp4_vector")->Apply(shapes);
BENCHMARK(BM_relaxed<family::fp8, false>)->Name("relaxed_fp8_per_tensor_vector")->Apply(shapes);
BENCHMARK(BM_relaxed<family::fp8_block, false>)->Name("relaxed_fp8_block_1x128_128x128_vector")->Apply(shapes);
BENCHMARK(BM_relaxed<family::mxfp8, false>)->Name("relaxed_mxfp8_vector")->Apply(shapes);
BENCHMARK(BM_tiles_pack<family::nvfp4>)->Name("tiles_pack_nvfp4")->Apply(shapes);
BENCHMARK(BM_tiles_pack<family::fp8>)->Name("tiles_pack_fp8")->Apply(shapes);
BENCHMARK(BM_tiles_pack<family::bf16>)->Name("tiles_pack_bf16")->Apply(shapes);
BENCHMARK(BM_tiles_pack_pieces<family::nvfp4>)->Name("tiles_pack_pieces_nvfp4")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_tiles_pack_pieces<family::fp8>)->Name("tiles_pack_pieces_fp8")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_tiles_pack_pieces<family::bf16>)->Name("tiles_pack_pieces_bf16")->Unit(benchmark::kMillisecond);

[[maybe_unused]] const bool tile_kernels_registered = [] {
  if (simd::amx::available()) {
    benchmark::RegisterBenchmark("tiles_run", BM_tiles_run)->Apply(tiles_run_shapes);
    for (auto [name, f] : {std::pair{"relaxed_phases_nvfp4", &BM_relaxed_phases<family::nvfp4>},
                           std::pair{"relaxed_phases_fp8", &BM_relaxed_phases<family::fp8>},
                           std::pair{"relaxed_phases_mxfp8", &BM_relaxed_phases<family::mxfp8>},
                           std::pair{"relaxed_phases_bf16", &BM_relaxed_phases<family::bf16>}})
      benchmark::RegisterBenchmark(name, f)->Apply(shapes);
    benchmark::RegisterBenchmark("tiles_kernel_in_l1", BM_tiles_kernel_in_l1)->Apply([](auto* b) {
      for (int threads : nvfp4_bench::thread_counts()) b->Threads(threads);
      b->UseRealTime()->Unit(benchmark::kMicrosecond);
    });
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
