// Benchmarks of the training recipes: one Linear layer step (forward + backward: quantize
// everything the recipe quantizes, then fprop, dgrad and wgrad) per recipe, beside the same three
// GEMMs in fp32 by Eigen and OpenBLAS in the same run; the decode-shaped inference forward on a
// kept quantized weight per recipe beside fp32 Y = X Wᵀ; and the FP8 / MXFP8 GEMMs (exact and
// relaxed), the FP8 / MXFP8 steps' three GEMMs alone on operands quantized beforehand, and their
// step kernels alone on L1-resident operands, beside SGEMM. Counters: FLOP/s = 2·M·N·K per GEMM
// (x3 for a step) / time; faults = the process's minor page faults per timed step (getrusage).
// Thread counts: NVFP4_BENCH_THREADS, through benchmarks/bench_threads.hpp (1 and 2 by default).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "nvfp4/interop/eigen.hpp"
#include "nvfp4/nn/linear.hpp"

#include "bench_threads.hpp"

namespace {

using namespace nvfp4;
using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// X [m, k], W [n, k], dY [m, n] with N(0, 1) values (W and dY scaled like a layer's).
struct problem {
  index_t m, n, k;
  matrix x, w, dy;
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
  p->dy.resize(m, n);
  for (index_t i = 0; i < p->x.size(); ++i) p->x.data()[i] = normal(rng);
  for (index_t i = 0; i < p->w.size(); ++i) p->w.data()[i] = normal(rng) * 0.02f;
  for (index_t i = 0; i < p->dy.size(); ++i) p->dy.data()[i] = normal(rng) * 0.01f;
  cache.push_back(std::move(p));
  return *cache.back();
}

void set_threads(benchmark::State& state) { nvfp4_bench::use_threads(state, 3); }

/// The process's minor page faults so far (fresh memory touched: what kept buffers avoid).
long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}
void report_faults(benchmark::State& state, long faults_before) {
  state.counters["faults"] = double(minor_faults() - faults_before) / double(std::max<benchmark::IterationCount>(1, state.iterations()));
}

void report(benchmark::State& state, const problem& p, double gemms) {
  state.counters["FLOP/s"] =
      benchmark::Counter(gemms * 2.0 * double(p.m) * double(p.n) * double(p.k) * double(state.iterations()), benchmark::Counter::kIsRate);
}

/// The recipes a step is measured for, by index (Google Benchmark arguments are integers).
struct named_recipe {
  const char* name;
  recipe value;
  nn::linear_options options;
};
const std::vector<named_recipe>& recipes() {
  static const std::vector<named_recipe> list = {
      {"fp32", no_quantization{}, {}},
      {"bf16", no_quantization{}, {.dtype = high_precision::bf16}},
      {"nvfp4", nvfp4_block_scaling{}, {.dtype = high_precision::bf16}},
      {"nvfp4_4over6_weights", nvfp4_block_scaling{.nvfp4_4over6 = four_over_six_scope::weights}, {.dtype = high_precision::bf16}},
      {"fp8_current_hopper", float8_current_scaling{}, {.dtype = high_precision::bf16}},
      {"fp8_current_hopper_relaxed", float8_current_scaling{}, {.dtype = high_precision::bf16, .mode = gemm_mode::relaxed}},
      {"fp8_delayed_hopper", delayed_scaling{}, {.dtype = high_precision::bf16}},
      {"fp8_block_hopper", float8_block_scaling{}, {.dtype = high_precision::bf16}},
      {"mxfp8_blackwell", mxfp8_block_scaling{}, {.dtype = high_precision::bf16}},
      {"mxfp8_blackwell_relaxed", mxfp8_block_scaling{}, {.dtype = high_precision::bf16, .mode = gemm_mode::relaxed}},
  };
  return list;
}

/// The threads and problem of a Linear benchmark {M, N, K, threads, recipe}.
const problem& linear_problem(benchmark::State& state) {
  set_threads(state);
  return get_problem(state.range(0), state.range(1), state.range(2));
}
/// A layer under the benchmark's recipe (its name as the label) holding the problem's W.
nn::linear bench_layer(benchmark::State& state, const problem& p) {
  const named_recipe& r = recipes()[static_cast<std::size_t>(state.range(4))];
  state.SetLabel(r.name);
  nn::linear layer(p.k, p.n, r.value, r.options);
  std::copy(p.w.data(), p.w.data() + p.w.size(), layer.weight().begin());
  return layer;
}

/// One training step of a Linear layer: forward then backward (the layer keeps its buffers, as a
/// training loop's layer does).
void BM_linear_step(benchmark::State& state) {
  const problem& p = linear_problem(state);
  nn::linear layer = bench_layer(state, p);
  std::vector<float> y(static_cast<std::size_t>(p.m * p.n)), dx(static_cast<std::size_t>(p.m * p.k));
  const auto x = matrix_view<const float>::row_major(p.x.data(), p.m, p.k);
  const auto dy = matrix_view<const float>::row_major(p.dy.data(), p.m, p.n);
  // One untimed step first: a training loop's layer has its buffers from earlier steps.
  layer.forward(x, matrix_view<float>::row_major(y.data(), p.m, p.n));
  layer.backward(dy, matrix_view<float>::row_major(dx.data(), p.m, p.k));
  const long faults = minor_faults();
  for (auto _ : state) {
    layer.forward(x, matrix_view<float>::row_major(y.data(), p.m, p.n));
    layer.backward(dy, matrix_view<float>::row_major(dx.data(), p.m, p.k));
    benchmark::DoNotOptimize(dx.data());
  }
  report_faults(state, faults);
  report(state, p, 3.0);
}

/// Inference: Y of the layer's infer() on the weight kept by an untimed refresh (TE's
/// is_first_microbatch False), as a decoding loop runs it; only X is quantized per call.
void BM_linear_infer(benchmark::State& state) {
  const problem& p = linear_problem(state);
  nn::linear layer = bench_layer(state, p);
  std::vector<float> y(static_cast<std::size_t>(p.m * p.n));
  const auto x = matrix_view<const float>::row_major(p.x.data(), p.m, p.k);
  const auto out = matrix_view<float>::row_major(y.data(), p.m, p.n);
  layer.infer(x, out, nn::weight_cache::refresh);
  for (auto _ : state) {
    layer.infer(x, out, nn::weight_cache::reuse);
    benchmark::DoNotOptimize(y.data());
  }
  report(state, p, 1.0);
}

/// The fp32 step by Eigen: Y = X Wᵀ, dX = dY W, dW = dYᵀ X, outputs allocated once.
void BM_eigen_step(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  matrix y(p.m, p.n), dx(p.m, p.k), dw(p.n, p.k);
  const auto step = [&] {
    y.noalias() = p.x * p.w.transpose();
    dx.noalias() = p.dy * p.w;
    dw.noalias() = p.dy.transpose() * p.x;
  };
  step();  // untimed, as the layer's first step (working memory touched once)
  for (auto _ : state) {
    step();
    benchmark::DoNotOptimize(dw.data());
  }
  report(state, p, 3.0);
}

#ifdef NVFP4_HAVE_CBLAS
void BM_openblas_step(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  std::vector<float> y(static_cast<std::size_t>(p.m * p.n)), dx(static_cast<std::size_t>(p.m * p.k)),
      dw(static_cast<std::size_t>(p.n * p.k));
  const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  const auto step = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, p.x.data(), k, p.w.data(), k, 0.0f, y.data(), n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, k, n, 1.0f, p.dy.data(), n, p.w.data(), k, 0.0f, dx.data(), k);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, m, 1.0f, p.dy.data(), n, p.x.data(), k, 0.0f, dw.data(), k);
  };
  step();  // untimed, as the layer's first step
  for (auto _ : state) {
    step();
    benchmark::DoNotOptimize(dw.data());
  }
  report(state, p, 3.0);
}
void BM_openblas_sgemm(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  std::vector<float> out(static_cast<std::size_t>(p.m * p.n));
  const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, p.x.data(), k, p.w.data(), k, 0.0f, out.data(), n);
    benchmark::DoNotOptimize(out.data());
  }
  report(state, p, 1.0);
}
#endif

void BM_eigen_sgemm(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  matrix out(p.m, p.n);
  for (auto _ : state) {
    out.noalias() = p.x * p.w.transpose();
    benchmark::DoNotOptimize(out.data());
  }
  report(state, p, 1.0);
}

/// The library's fp32 GEMM (nvfp4::float_gemm: every output one FMA chain in K order), Y = X Wᵀ,
/// beside Eigen's and OpenBLAS's SGEMM on the same shape.
void BM_float_gemm(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  std::vector<float> out(static_cast<std::size_t>(p.m * p.n));
  for (auto _ : state) {
    float_gemm(matrix_view<const float>::row_major(p.x.data(), p.m, p.k), matrix_view<const float>::row_major(p.w.data(), p.n, p.k), {},
               matrix_view<float>::row_major(out.data(), p.m, p.n));
    benchmark::DoNotOptimize(out.data());
  }
  report(state, p, 1.0);
}
/// The fp32 step's three GEMMs by float_gemm alone (the operand layouts of nn::linear's fp32
/// recipe: fprop X·Wᵀ, dgrad dY·W with W as a transposed view, wgrad dYᵀ·X with both transposed),
/// to separate the kernel from the layer's own work.
void BM_float_gemm_step(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  std::vector<float> y(static_cast<std::size_t>(p.m * p.n)), dx(static_cast<std::size_t>(p.m * p.k)),
      dw(static_cast<std::size_t>(p.n * p.k));
  const auto x = matrix_view<const float>::row_major(p.x.data(), p.m, p.k), w = matrix_view<const float>::row_major(p.w.data(), p.n, p.k);
  const auto dy = matrix_view<const float>::row_major(p.dy.data(), p.m, p.n);
  const auto step = [&] {
    float_gemm(x, w, {}, matrix_view<float>::row_major(y.data(), p.m, p.n));
    float_gemm(dy, w.transposed(), {}, matrix_view<float>::row_major(dx.data(), p.m, p.k));
    float_gemm(dy.transposed(), x.transposed(), {}, matrix_view<float>::row_major(dw.data(), p.n, p.k));
  };
  step();  // untimed: float_gemm's packing scratch is then the thread's, as in a training loop
  for (auto _ : state) {
    step();
    benchmark::DoNotOptimize(dw.data());
  }
  report(state, p, 3.0);
}
/// The fp32 GEMM's tile kernel alone (gemm/detail/float_tile_kernel.hpp) on packed operands that
/// stay in L1 (K = 256, one tile of A, one panel of B), 64 calls per iteration: its ceiling.
void BM_float_tile_kernel_in_l1(benchmark::State& state) {
  using kernel = detail::float_gemm_blocking::kernel;
  constexpr index_t k = 256, calls = 64;
  std::vector<float> a(static_cast<std::size_t>(kernel::mr * k), 0.5f), b(static_cast<std::size_t>(kernel::nr * k), 0.25f);
  alignas(64) float acc[kernel::mr * kernel::nr] = {};
  for (auto _ : state)
    for (index_t call = 0; call < calls; ++call) {
      kernel::run(k, a.data(), b.data(), std::integral_constant<index_t, kernel::nr>{}, nullptr, 0, acc, kernel::nr);
      benchmark::DoNotOptimize(acc);
    }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * kernel::mr * kernel::nr * k * calls * double(state.iterations()), benchmark::Counter::kIsRate);
}

/// FP8 per-tensor GEMM (E4M3 x E4M3 current scaling) with the given tensor core and mode, split
/// accumulation every 128; and the MXFP8 GEMM.
template <fp8::mma::tensor_core Core, gemm_mode Mode>
void BM_fp8_gemm(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  const auto a = quantize_fp8_current(matrix_view<const float>::row_major(p.x.data(), p.m, p.k), fp8_format::e4m3);
  const auto b = quantize_fp8_current(matrix_view<const float>::row_major(p.w.data(), p.n, p.k), fp8_format::e4m3);
  std::vector<float> out(static_cast<std::size_t>(p.m * p.n));
  for (auto _ : state) {
    fp8_gemm(a, b, matrix_view<float>::row_major(out.data(), p.m, p.n), {.core = Core, .mode = Mode});
    benchmark::DoNotOptimize(out.data());
  }
  report(state, p, 1.0);
}
/// The FP8 step kernels alone on operands that stay in L1: 4 steps (K = 128) of the driver's block
/// (8 rows x 4 tiles, per-tensor E4M3, Hopper), 64 calls per iteration into one accumulator
/// block. What the kernels' instruction stream sustains without the driver, the operand staging
/// or the memory hierarchy: the FP8 GEMM's ceiling on this core (docs/benchmarks.md). Carried:
/// the accumulators are not reset between calls, as in a chain over all of K without promotion
/// (fprop's default in the per-tensor recipes), whose c grows step after step.
template <gemm_mode Mode, bool Carried = false>
void BM_fp8_kernel_in_l1(benchmark::State& state) {
  namespace f8 = fp8_gemm_detail;
  constexpr int rows = f8::block_rows, tiles = f8::block_tiles;
  constexpr index_t k = 128, steps = k / fp8::mma::step_k, calls = 64, stride = tiles * f8::lanes;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(rows * k)), w(static_cast<std::size_t>(stride * k));
  for (float& v : x) v = normal(rng);
  for (float& v : w) v = normal(rng);
  const auto a8 = quantize_fp8_current(matrix_view<const float>::row_major(x.data(), rows, k), fp8_format::e4m3);
  const auto b8 = quantize_fp8_current(matrix_view<const float>::row_major(w.data(), stride, k), fp8_format::e4m3);
  const f8::operand_rows a = detail::unpack_operand(a8), b = detail::unpack_operand(b8);
  const f8::staged_parts parts = f8::fp8_step_kernels<simd::fp8_gemm_isa>::staging(Mode);
  f8::row_staging staged;
  f8::stage_rows(a, 0, rows, 0, steps, parts, staged);
  std::vector<f8::column_tile> packed(tiles);
  f8::step_block blk{&a, &staged, 0, rows, &b, {}, {}, tiles, fp8::mma::tensor_core::hopper, Mode};
  for (int t = 0; t < tiles; ++t) {
    f8::pack_tile(b, t * f8::lanes, packed[static_cast<std::size_t>(t)], parts);
    blk.tiles[t] = &packed[static_cast<std::size_t>(t)];
    blk.j0[t] = t * f8::lanes;
  }
  alignas(64) float acc[rows * stride] = {};
  for (auto _ : state) {
    for (index_t call = 0; call < calls; ++call) {
      f8::run_steps(blk, 0, steps, acc, stride);
      benchmark::DoNotOptimize(acc);
      if (!Carried)
        for (float& v : acc) v = 0.0f;  // a fixed starting accumulator, so every call takes the same path
    }
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * rows * stride * k * calls * double(state.iterations()), benchmark::Counter::kIsRate);
}
template <gemm_mode Mode>
void BM_mxfp8_gemm(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  const auto a = quantize_mxfp8_te<mxfp8>(matrix_view<const float>::row_major(p.x.data(), p.m, p.k));
  const auto b = quantize_mxfp8_te<mxfp8>(matrix_view<const float>::row_major(p.w.data(), p.n, p.k));
  std::vector<float> out(static_cast<std::size_t>(p.m * p.n));
  for (auto _ : state) {
    mxfp8_gemm(a, b, matrix_view<float>::row_major(out.data(), p.m, p.n), {.mode = Mode, .promotion_interval = 0});
    benchmark::DoNotOptimize(out.data());
  }
  report(state, p, 1.0);
}

/// The three GEMMs of an FP8 step alone, on operands quantized once beforehand in the layouts the
/// policies hand them (fprop X·Wᵀ, dgrad dY·(Wᵀ)ᵀ, wgrad dYᵀ·(Xᵀ)ᵀ: every operand row-major
/// [rows, K]; E4M3 for X and W, E5M2 for dY, as the HYBRID default), with the policies' options:
/// per-tensor current scaling on the Hopper step, split every 128 where the recipe's defaults
/// split (dgrad, wgrad; fprop's chain runs over all of K), or MXFP8 on Blackwell's without
/// promotion. Against the step of the same recipe it separates the GEMMs from the quantizers and
/// copies.
template <bool Mx, gemm_mode Mode>
void BM_fp8_gemm_step(benchmark::State& state) {
  set_threads(state);
  const auto& p = get_problem(state.range(0), state.range(1), state.range(2));
  const matrix wt = p.w.transpose(), dyt = p.dy.transpose(), xt = p.x.transpose();
  const auto view = [](const matrix& m) { return matrix_view<const float>::row_major(m.data(), m.rows(), m.cols()); };
  std::vector<float> y(static_cast<std::size_t>(p.m * p.n)), dx(static_cast<std::size_t>(p.m * p.k)),
      dw(static_cast<std::size_t>(p.n * p.k));
  const auto y_view = matrix_view<float>::row_major(y.data(), p.m, p.n), dx_view = matrix_view<float>::row_major(dx.data(), p.m, p.k),
             dw_view = matrix_view<float>::row_major(dw.data(), p.n, p.k);
  std::function<void()> step;
  if constexpr (Mx) {
    const fp8_gemm_options options{.core = fp8::mma::tensor_core::blackwell, .mode = Mode, .promotion_interval = 0};
    auto ops = std::make_shared<std::tuple<quantized_tensor<mxfp8>, quantized_tensor<mxfp8>, quantized_tensor<mxfp8_e5m2>,
                                           quantized_tensor<mxfp8>, quantized_tensor<mxfp8_e5m2>, quantized_tensor<mxfp8>>>(
        quantize_mxfp8_te<mxfp8>(view(p.x)), quantize_mxfp8_te<mxfp8>(view(p.w)), quantize_mxfp8_te<mxfp8_e5m2>(view(p.dy)),
        quantize_mxfp8_te<mxfp8>(view(wt)), quantize_mxfp8_te<mxfp8_e5m2>(view(dyt)), quantize_mxfp8_te<mxfp8>(view(xt)));
    step = [=] {
      const auto& [x8, w8, g8, wt8, gt8, xt8] = *ops;
      mxfp8_gemm(x8, w8, y_view, options);
      mxfp8_gemm(g8, wt8, dx_view, options);
      mxfp8_gemm(gt8, xt8, dw_view, options);
    };
  } else {
    const float8_current_scaling defaults{};
    const auto options_for = [](const mm_params& params) {
      return fp8_gemm_options{
          .core = fp8::mma::tensor_core::hopper, .mode = Mode, .promotion_interval = params.use_split_accumulator ? 128 : 0};
    };
    const fp8_gemm_options fprop = options_for(defaults.fp8_gemm_fprop), dgrad = options_for(defaults.fp8_gemm_dgrad),
                           wgrad = options_for(defaults.fp8_gemm_wgrad);
    auto ops = std::make_shared<std::vector<fp8_tensor>>();
    for (auto [m, f] : {std::pair{&p.x, fp8_format::e4m3},
                        {&p.w, fp8_format::e4m3},
                        {&p.dy, fp8_format::e5m2},
                        {&wt, fp8_format::e4m3},
                        {&dyt, fp8_format::e5m2},
                        {&xt, fp8_format::e4m3}})
      ops->push_back(quantize_fp8_current(view(*m), f));
    step = [=] {
      const auto& o = *ops;
      fp8_gemm(o[0], o[1], y_view, fprop);
      fp8_gemm(o[2], o[3], dx_view, dgrad);
      fp8_gemm(o[4], o[5], dw_view, wgrad);
    };
  }
  step();  // untimed, as the layer's first step
  const long faults = minor_faults();
  for (auto _ : state) {
    step();
    benchmark::DoNotOptimize(dw.data());
  }
  report_faults(state, faults);
  report(state, p, 3.0);
}

// Steps: {M, N, K, threads, recipe}: 4096 tokens x 4096 x 4096, and a decode-like 16 tokens.
void step_shapes(benchmark::internal::Benchmark* b, bool per_recipe) {
  for (int threads : nvfp4_bench::thread_counts())
    for (auto [m, n, k] : {std::tuple{4096, 4096, 4096}, std::tuple{16, 4096, 4096}}) {
      if (!per_recipe) {
        b->Args({m, n, k, threads, 0});
        continue;
      }
      for (int r = 0; r < static_cast<int>(recipes().size()); ++r) b->Args({m, n, k, threads, r});
    }
  b->ArgNames({"M", "N", "K", "threads", "recipe"})->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
}
void gemm_shapes(benchmark::internal::Benchmark* b) {
  for (int threads : nvfp4_bench::thread_counts()) b->Args({2048, 2048, 2048, threads});
  b->ArgNames({"M", "N", "K", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
}

// Decode-shaped inference {16, 4096, 4096, threads, recipe} beside fp32 Y = X Wᵀ by Eigen / OpenBLAS.
void infer_shapes(benchmark::internal::Benchmark* b, bool per_recipe) {
  for (int threads : nvfp4_bench::thread_counts())
    for (int r = 0; r < (per_recipe ? static_cast<int>(recipes().size()) : 1); ++r) b->Args({16, 4096, 4096, threads, r});
  b->ArgNames({"M", "N", "K", "threads", "recipe"})->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(0.5);
}

BENCHMARK(BM_linear_step)->Name("linear_step")->Apply([](auto* b) { step_shapes(b, true); });
BENCHMARK(BM_linear_infer)->Name("linear_infer_kept_weight")->Apply([](auto* b) { infer_shapes(b, true); });
BENCHMARK(BM_eigen_sgemm)->Name("eigen_forward_fp32")->Apply([](auto* b) { infer_shapes(b, false); });
#ifdef NVFP4_HAVE_CBLAS
BENCHMARK(BM_openblas_sgemm)->Name("openblas_forward_fp32")->Apply([](auto* b) { infer_shapes(b, false); });
#endif
BENCHMARK(BM_float_gemm_step)->Name("float_gemm_step_fp32")->Apply([](auto* b) { step_shapes(b, false); });
BENCHMARK(BM_eigen_step)->Name("eigen_step_fp32")->Apply([](auto* b) { step_shapes(b, false); });
#ifdef NVFP4_HAVE_CBLAS
BENCHMARK(BM_openblas_step)->Name("openblas_step_fp32")->Apply([](auto* b) { step_shapes(b, false); });
#endif
BENCHMARK(BM_fp8_gemm_step<false, gemm_mode::relaxed>)->Name("fp8_current_gemms_alone_relaxed")->Apply([](auto* b) {
  step_shapes(b, false);
});
BENCHMARK(BM_fp8_gemm_step<false, gemm_mode::exact>)->Name("fp8_current_gemms_alone_exact")->Apply([](auto* b) { step_shapes(b, false); });
BENCHMARK(BM_fp8_gemm_step<true, gemm_mode::relaxed>)->Name("mxfp8_gemms_alone_relaxed")->Apply([](auto* b) { step_shapes(b, false); });
BENCHMARK(BM_fp8_gemm<fp8::mma::tensor_core::hopper, gemm_mode::exact>)->Name("fp8_gemm_hopper_exact")->Apply(gemm_shapes);
BENCHMARK(BM_fp8_gemm<fp8::mma::tensor_core::blackwell, gemm_mode::exact>)->Name("fp8_gemm_blackwell_exact")->Apply(gemm_shapes);
BENCHMARK(BM_fp8_gemm<fp8::mma::tensor_core::hopper, gemm_mode::relaxed>)->Name("fp8_gemm_relaxed")->Apply(gemm_shapes);
BENCHMARK(BM_mxfp8_gemm<gemm_mode::exact>)->Name("mxfp8_gemm_exact")->Apply(gemm_shapes);
BENCHMARK(BM_mxfp8_gemm<gemm_mode::relaxed>)->Name("mxfp8_gemm_relaxed")->Apply(gemm_shapes);
BENCHMARK(BM_fp8_kernel_in_l1<gemm_mode::exact>)->Name("fp8_hopper_exact_kernel_in_l1")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_fp8_kernel_in_l1<gemm_mode::exact, true>)->Name("fp8_hopper_exact_kernel_in_l1_carried")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_fp8_kernel_in_l1<gemm_mode::relaxed>)->Name("fp8_relaxed_kernel_in_l1")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_float_gemm)->Name("float_gemm_fp32")->Apply(gemm_shapes);
BENCHMARK(BM_float_tile_kernel_in_l1)->Name("float_tile_kernel_in_l1")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_eigen_sgemm)->Name("eigen_sgemm_fp32")->Apply(gemm_shapes);
#ifdef NVFP4_HAVE_CBLAS
BENCHMARK(BM_openblas_sgemm)->Name("openblas_sgemm_fp32")->Apply(gemm_shapes);
#endif

}  // namespace

BENCHMARK_MAIN();
