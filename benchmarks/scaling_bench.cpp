// Benchmarks of the block-scaling layer's fast paths (nvfp4/scaling/quantize.hpp) and the bulk
// format codecs (nvfp4/scaling/bulk_codecs.hpp) on a 4096x4096 fp32 matrix, with the thread counts of
// bench_threads.hpp, beside memory baselines (memcpy and a read-only pass over the same bytes) and the
// scalar references, all in this one binary.
#include <benchmark/benchmark.h>

#include <bit>
#include <cstring>
#include <random>
#include <vector>

#include "nvfp4/formats/e2m1.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e5m2.hpp"
#include "nvfp4/scaling/bulk_codecs.hpp"
#include "nvfp4/scaling/four_over_six.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/mxfp8_quantize.hpp"
#include "nvfp4/scaling/quantize.hpp"

#include "bench_threads.hpp"

namespace {

using namespace nvfp4;

constexpr index_t kRows = 4096;
constexpr index_t kCols = 4096;
constexpr double kElements = static_cast<double>(kRows * kCols);

const std::vector<float>& source() {
  static const std::vector<float> values = [] {
    std::vector<float> v(static_cast<std::size_t>(kRows * kCols));
    std::mt19937 rng(42);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& x : v) x = normal(rng);
    return v;
  }();
  return values;
}

matrix_view<const float> source_view() { return matrix_view<const float>::row_major(source().data(), kRows, kCols); }

using nvfp4_bench::one_thread_args;
using nvfp4_bench::thread_args;
void set_threads(benchmark::State& state) { nvfp4_bench::use_threads(state); }

/// Elements/s plus the bytes the operation reads and writes per element (its memory traffic).
void report(benchmark::State& state, double bytes_per_element) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kElements));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kElements * bytes_per_element));
}

// ---- baselines ------------------------------------------------------------------------------

/// memcpy of the fp32 matrix (4 B read + 4 B written per element), split like the kernels.
void BM_memcpy_fp32(benchmark::State& state) {
  set_threads(state);
  std::vector<float> out(source().size());
  for (auto _ : state) {
    simd::parallel_ranges(kRows, true, [&](index_t r0, index_t r1) {
      std::memcpy(out.data() + r0 * kCols, source().data() + r0 * kCols, static_cast<std::size_t>((r1 - r0) * kCols) * 4);
    });
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report(state, 8.0);
}

/// One read-only pass over the fp32 matrix (an XOR of the bits, which the compiler vectorizes):
/// the floor for amax, 4 B per element.
void BM_read_fp32(benchmark::State& state) {
  set_threads(state);
  for (auto _ : state) {
    const std::uint32_t bits = simd::parallel_max(kRows, true, [&](index_t r0, index_t r1) {
      std::uint32_t folded = 0;
      const float* p = source().data();
      for (index_t i = r0 * kCols; i < r1 * kCols; ++i) folded ^= std::bit_cast<std::uint32_t>(p[i]);
      return folded;
    });
    benchmark::DoNotOptimize(bits);
  }
  report(state, 4.0);
}

// ---- the library ----------------------------------------------------------------------------

void BM_amax(benchmark::State& state) {
  set_threads(state);
  for (auto _ : state) benchmark::DoNotOptimize(amax(source_view()));
  report(state, 4.0);
}

/// quantize() = amax pass + quantize pass: 8 B read, 0.5 B data + 1/16 B scale written.
template <class Format>
void BM_quantize(benchmark::State& state) {
  set_threads(state);
  for (auto _ : state) {
    auto q = quantize<Format>(source_view());
    benchmark::DoNotOptimize(q.data().data());
  }
  const double written = Format::is_fp4 ? 0.5 : 1.0;
  report(state, 8.0 + written + 1.0 / (Format::block_cols * Format::block_rows));
}

/// quantize_into(): the same amax pass + quantize pass into a tensor kept across iterations (no
/// allocation, no zero-fill): the form the bandwidth target is about, beside memcpy.
template <class Format>
void BM_quantize_into(benchmark::State& state) {
  set_threads(state);
  quantized_tensor<Format> q(kRows, kCols);
  for (auto _ : state) {
    quantize_into(source_view(), q);
    benchmark::DoNotOptimize(q.data().data());
    benchmark::ClobberMemory();
  }
  const double written = Format::is_fp4 ? 0.5 : 1.0;
  report(state, 8.0 + written + 1.0 / (Format::block_cols * Format::block_rows));
}

/// An isolated piece: the quantize pass alone (amax given) on the first 32 rows (512 KiB, resident
/// in L2 after the first iteration): the kernel's own speed without DRAM, to tell a compute bound
/// from a memory bound in the full-size rows above. One thread only.
void BM_quantize_pass_cache_resident_nvfp4_1x16(benchmark::State& state) {
  set_threads(state);  // (without it the pass ran on every thread: its figure was a 2-thread one)
  constexpr index_t rows = 32;
  const auto x = matrix_view<const float>::row_major(source().data(), rows, kCols);
  quantized_tensor<nvfp4_1x16> q(rows, kCols);
  const float global_amax = amax(x);
  for (auto _ : state) {
    detail::quantize_with_amax_fast(x, global_amax, {}, q);
    benchmark::DoNotOptimize(q.data().data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * rows * kCols));
}

/// The columnwise copy: the 1x16 quantization of xᵀ (a view with non-contiguous rows).
void BM_quantize_nvfp4_1x16_columnwise(benchmark::State& state) {
  set_threads(state);
  for (auto _ : state) {
    auto q = quantize<nvfp4_1x16>(source_view().transposed());
    benchmark::DoNotOptimize(q.data().data());
  }
  report(state, 8.0 + 0.5 + 1.0 / 16);
}

/// MXFP8 by TransformerEngine's rule (quantize_mxfp8_te: the MXFP8 recipe's quantizer, run on every
/// GEMM operand and, for training, on its transpose), amax pass included: the rowwise copy, and the
/// columnwise one (xᵀ).
template <bool Columnwise>
void BM_quantize_mxfp8_te(benchmark::State& state) {
  set_threads(state);
  for (auto _ : state) {
    auto q = Columnwise ? quantize_mxfp8_te<mxfp8>(source_view().transposed(), quantized_axis::columnwise)
                        : quantize_mxfp8_te<mxfp8>(source_view());
    benchmark::DoNotOptimize(q.data().data());
  }
  report(state, 8.0 + 1.0 + 1.0 / 32);
}

/// MXFP8 by TE's rule from bf16 (a bf16 layer's tensors as stored), rowwise or columnwise.
template <bool Columnwise>
void BM_quantize_mxfp8_te_bf16(benchmark::State& state) {
  set_threads(state);
  static const std::vector<bf16> values = [] {
    std::vector<bf16> v;
    v.reserve(source().size());
    for (float f : source()) v.push_back(bf16::from_float(f));
    return v;
  }();
  const auto view = matrix_view<const bf16>::row_major(values.data(), kRows, kCols);
  quantized_tensor<mxfp8> q;
  for (auto _ : state) {
    if (Columnwise)
      quantize_mxfp8_te_into(view.transposed(), q, quantized_axis::columnwise);
    else
      quantize_mxfp8_te_into(view, q);
    benchmark::DoNotOptimize(q.data().data());
    benchmark::ClobberMemory();
  }
  report(state, 4.0 + 1.0 + 1.0 / 32);
}

/// Both MXFP8 copies of one tensor, as the MXFP8 recipe's policy makes them for X, W and dY (the
/// rowwise copy, then the columnwise one of xᵀ, into tensors kept across iterations).
void BM_quantize_mxfp8_te_both_copies(benchmark::State& state) {
  set_threads(state);
  quantized_tensor<mxfp8> row, col;
  for (auto _ : state) {
    quantize_mxfp8_te_into(source_view(), row);
    quantize_mxfp8_te_into(source_view().transposed(), col, quantized_axis::columnwise);
    benchmark::DoNotOptimize(row.data().data());
    benchmark::DoNotOptimize(col.data().data());
    benchmark::ClobberMemory();
  }
  report(state, 2 * (8.0 + 1.0 + 1.0 / 32));
}

/// The same two copies by quantize_mxfp8_te_both_into: one amax pass, each tile read once and
/// quantized both ways.
void BM_quantize_mxfp8_te_both_into(benchmark::State& state) {
  set_threads(state);
  quantized_tensor<mxfp8> row, col;
  for (auto _ : state) {
    quantize_mxfp8_te_both_into(source_view(), row, col);
    benchmark::DoNotOptimize(row.data().data());
    benchmark::DoNotOptimize(col.data().data());
    benchmark::ClobberMemory();
  }
  report(state, 8.0 + 2.0 + 2.0 / 32);
}

/// FP8 block scaling (quantize_fp8_blockwise: TE's Float8BlockScaling quantizer, E4M3, power-of-two
/// scales): 1x128 blocks (X, dY) or 128x128 (W), the rowwise copy or the columnwise one (of xᵀ),
/// amax pass included.
template <fp8_block_shape Shape, bool Columnwise>
void BM_quantize_fp8_block(benchmark::State& state) {
  set_threads(state);
  for (auto _ : state) {
    auto q = Columnwise ? quantize_fp8_blockwise(source_view().transposed(), fp8_format::e4m3, Shape, {.power_2_scale = true},
                                                 quantized_axis::columnwise)
                        : quantize_fp8_blockwise(source_view(), fp8_format::e4m3, Shape);
    benchmark::DoNotOptimize(q.codes().data());
  }
  report(state, 8.0 + 1.0);
}

/// Both FP8 block copies of one tensor, as the Float8BlockScaling policy makes them (the rowwise
/// copy, then the columnwise one of xᵀ, each a fresh tensor).
template <fp8_block_shape Shape>
void BM_quantize_fp8_block_both_copies(benchmark::State& state) {
  set_threads(state);
  for (auto _ : state) {
    auto row = quantize_fp8_blockwise(source_view(), fp8_format::e4m3, Shape);
    auto col =
        quantize_fp8_blockwise(source_view().transposed(), fp8_format::e4m3, Shape, {.power_2_scale = true}, quantized_axis::columnwise);
    benchmark::DoNotOptimize(row.codes().data());
    benchmark::DoNotOptimize(col.codes().data());
  }
  report(state, 2 * (8.0 + 1.0));
}

/// The same two copies by quantize_fp8_blockwise_both_into: one amax pass, each 128 x 128 tile
/// read once and quantized both ways, into tensors kept across iterations (what the policy can
/// call instead of the two by-value calls above).
template <fp8_block_shape Shape>
void BM_quantize_fp8_block_both_into(benchmark::State& state) {
  set_threads(state);
  fp8_tensor row, col;
  for (auto _ : state) {
    quantize_fp8_blockwise_both_into(source_view(), fp8_format::e4m3, Shape, {.power_2_scale = true}, row, col);
    benchmark::DoNotOptimize(row.codes().data());
    benchmark::DoNotOptimize(col.codes().data());
    benchmark::ClobberMemory();
  }
  report(state, 8.0 + 2.0);
}

/// One copy by quantize_fp8_blockwise_into (kept tensor: no allocation or zero-fill).
template <fp8_block_shape Shape, bool Columnwise>
void BM_quantize_fp8_block_into(benchmark::State& state) {
  set_threads(state);
  fp8_tensor q;
  for (auto _ : state) {
    if (Columnwise)
      quantize_fp8_blockwise_into(source_view().transposed(), fp8_format::e4m3, Shape, {.power_2_scale = true}, q,
                                  quantized_axis::columnwise);
    else
      quantize_fp8_blockwise_into(source_view(), fp8_format::e4m3, Shape, {.power_2_scale = true}, q);
    benchmark::DoNotOptimize(q.codes().data());
    benchmark::ClobberMemory();
  }
  report(state, 8.0 + 1.0);
}

/// quantize_with_amax alone (the amax known, as for a columnwise copy sharing the rowwise amax).
void BM_quantize_with_amax_nvfp4_1x16(benchmark::State& state) {
  set_threads(state);
  const float global_amax = amax(source_view());
  for (auto _ : state) {
    auto q = quantize_with_amax<nvfp4_1x16>(source_view(), global_amax);
    benchmark::DoNotOptimize(q.data().data());
  }
  report(state, 4.0 + 0.5 + 1.0 / 16);
}

/// 4over6 quantization (both candidates per block, the error of each, the better one kept), amax
/// pass included: 8 B read (two passes), 0.5 B + scales written per element.
template <class Format>
void BM_quantize_4over6(benchmark::State& state) {
  set_threads(state);
  for (auto _ : state) {
    auto q = quantize_4over6<Format>(source_view());
    benchmark::DoNotOptimize(q.data().data());
  }
  report(state, 8.0 + 0.5 + 1.0 / (Format::block_cols * Format::block_rows));
}

/// Its scalar reference (one thread), for the vector kernel's speed-up.
void BM_reference_quantize_4over6_nvfp4_1x16(benchmark::State& state) {
  const float global_amax = amax(source_view());
  for (auto _ : state) {
    auto q = reference::quantize_4over6_with_amax<nvfp4_1x16>(source_view(), global_amax);
    benchmark::DoNotOptimize(q.data().data());
  }
  report(state, 4.0 + 0.5 + 1.0 / 16);
}

/// Dequantize NVFP4 1x16 into an fp32 matrix: 0.5 + 1/16 B read, 4 B written.
template <class Format>
void BM_dequantize(benchmark::State& state) {
  set_threads(state);
  const auto q = quantize<Format>(source_view());
  std::vector<float> out(source().size());
  for (auto _ : state) {
    dequantize(q, matrix_view<float>::row_major(out.data(), kRows, kCols));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report(state, (Format::is_fp4 ? 0.5 : 1.0) + 4.0);
}

/// Bulk codec encode to one code per byte (RNE, saturating): 4 B read, 1 B written per element.
template <minifloat_traits T>
void BM_encode(benchmark::State& state) {
  set_threads(state);
  std::vector<std::uint8_t> codes(source().size());
  for (auto _ : state) {
    simd::parallel_ranges(kRows, true, [&](index_t r0, index_t r1) {
      encode_codes<T>(source().data() + r0 * kCols, (r1 - r0) * kCols, codes.data() + r0 * kCols);
    });
    benchmark::DoNotOptimize(codes.data());
    benchmark::ClobberMemory();
  }
  report(state, 5.0);
}

/// Bulk codec decode of one code per byte: 1 B read, 4 B written per element.
template <minifloat_traits T>
void BM_decode(benchmark::State& state) {
  set_threads(state);
  std::vector<std::uint8_t> codes(source().size());
  encode_codes<T>(source().data(), kRows * kCols, codes.data());
  std::vector<float> out(source().size());
  for (auto _ : state) {
    simd::parallel_ranges(kRows, true, [&](index_t r0, index_t r1) {
      decode_codes<T>(codes.data() + r0 * kCols, (r1 - r0) * kCols, out.data() + r0 * kCols);
    });
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report(state, 5.0);
}

/// The scalar codec (minifloat<T>::from_float per element), for the speed-up of BM_encode.
template <minifloat_traits T>
void BM_reference_encode(benchmark::State& state) {
  std::vector<std::uint8_t> codes(source().size());
  for (auto _ : state) {
    const float* x = source().data();
    for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = minifloat<T>::from_float(x[i]).bits();
    benchmark::DoNotOptimize(codes.data());
    benchmark::ClobberMemory();
  }
  report(state, 5.0);
}

/// The scalar reference, for the speed-up (one thread: it has no parallel path).
void BM_reference_quantize_nvfp4_1x16(benchmark::State& state) {
  for (auto _ : state) {
    auto q = reference::quantize<nvfp4_1x16>(source_view());
    benchmark::DoNotOptimize(q.data().data());
  }
  report(state, 8.0 + 0.5 + 1.0 / 16);
}

BENCHMARK(BM_memcpy_fp32)->Apply(thread_args);
BENCHMARK(BM_read_fp32)->Apply(thread_args);
BENCHMARK(BM_amax)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize, nvfp4_1x16)->Apply(thread_args);
BENCHMARK(BM_quantize_with_amax_nvfp4_1x16)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_into, nvfp4_1x16)->Apply(thread_args);
BENCHMARK(BM_quantize_pass_cache_resident_nvfp4_1x16)->Apply(one_thread_args);
BENCHMARK_TEMPLATE(BM_quantize, nvfp4_16x16)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize, mxfp4)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize, mxfp8)->Apply(thread_args);
BENCHMARK(BM_quantize_nvfp4_1x16_columnwise)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_mxfp8_te, false)->Name("BM_quantize_mxfp8_te_rowwise")->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_mxfp8_te, true)->Name("BM_quantize_mxfp8_te_columnwise")->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_mxfp8_te_bf16, false)->Name("BM_quantize_mxfp8_te_bf16_rowwise")->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_mxfp8_te_bf16, true)->Name("BM_quantize_mxfp8_te_bf16_columnwise")->Apply(thread_args);
BENCHMARK(BM_quantize_mxfp8_te_both_copies)->Apply(thread_args);
BENCHMARK(BM_quantize_mxfp8_te_both_into)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_fp8_block, fp8_block_shape::block_1x128, false)
    ->Name("BM_quantize_fp8_block_1x128_rowwise")
    ->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_fp8_block, fp8_block_shape::block_1x128, true)
    ->Name("BM_quantize_fp8_block_1x128_columnwise")
    ->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_fp8_block, fp8_block_shape::block_128x128, false)
    ->Name("BM_quantize_fp8_block_128x128_rowwise")
    ->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_fp8_block, fp8_block_shape::block_128x128, true)
    ->Name("BM_quantize_fp8_block_128x128_columnwise")
    ->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_fp8_block_both_copies, fp8_block_shape::block_1x128)
    ->Name("BM_quantize_fp8_block_1x128_both_copies")
    ->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_fp8_block_both_copies, fp8_block_shape::block_128x128)
    ->Name("BM_quantize_fp8_block_128x128_both_copies")
    ->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_fp8_block_into, fp8_block_shape::block_1x128, false)
    ->Name("BM_quantize_fp8_block_into_1x128_rowwise")
    ->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_fp8_block_into, fp8_block_shape::block_1x128, true)
    ->Name("BM_quantize_fp8_block_into_1x128_columnwise")
    ->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_fp8_block_both_into, fp8_block_shape::block_1x128)
    ->Name("BM_quantize_fp8_block_both_into_1x128")
    ->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_fp8_block_both_into, fp8_block_shape::block_128x128)
    ->Name("BM_quantize_fp8_block_both_into_128x128")
    ->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_4over6, nvfp4_1x16)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_quantize_4over6, nvfp4_16x16)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_dequantize, nvfp4_1x16)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_dequantize, mxfp8)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_encode, e2m1_traits)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_encode, e4m3_traits)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_encode, e5m2_traits)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_decode, e2m1_traits)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_decode, e4m3_traits)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_decode, e5m2_traits)->Apply(thread_args);
BENCHMARK_TEMPLATE(BM_reference_encode, e2m1_traits)->Apply(one_thread_args);
BENCHMARK_TEMPLATE(BM_reference_encode, e4m3_traits)->Apply(one_thread_args);
BENCHMARK(BM_reference_quantize_nvfp4_1x16)->Apply(one_thread_args);
BENCHMARK(BM_reference_quantize_4over6_nvfp4_1x16)->Apply(one_thread_args);

}  // namespace

BENCHMARK_MAIN();
