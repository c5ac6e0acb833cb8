// tools/gemm_command.hpp: `nvfp4 gemm A B [OUT]`: quantizes A [M, K] and B [N, K] to NVFP4
// (1x16 along K), multiplies D = A * B^T, and reports the error against the fp32 product of the
// unquantized inputs, how many elements the exact and relaxed modes give differently, and
// timings. The core (gemm_arrays) works on bytes in memory, so the fuzz harness runs it too.
#pragma once

// GCC 12 reports false (maybe-)uninitialized positives inside Eigen's AVX-512 GEMM packing.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

#include "cli_support.hpp"
#include "nvfp4/gemm/fp4/gemm.hpp"
#include "nvfp4/metrics/error_metrics.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4::cli {

inline constexpr const char* gemm_help = R"(usage: nvfp4 gemm A.npy B.npy [OUT.npy] [options]

Quantizes A [M, K] and B [N, K] (or B [K, N] with --b-kn) to NVFP4 with one scale per 16
elements along K, computes D = A * B^T [M, N], and prints its error against the fp32 product of
the unquantized inputs, how many elements of D the exact and relaxed modes give differently,
and the time taken. OUT.npy receives D as float32. A and B may also be quantized tensors of
safetensors files (dequantized first; --name picks the tensor).

options:
  --mode M            exact (default): the Blackwell tensor core's block-scaled MMA, bit for bit
                      (docs/numerics_spec.md section 6), then TE's alpha epilogue
                      relaxed: the same block terms accumulated with plain fp32 FMAs
                      dequant: dequantize both operands, fp32 product with Eigen (baseline)
  --b-kn              B is given as [K, N] (it is quantized along K all the same)
  --name W            the quantized tensor of a safetensors argument
  --input-dtype T     auto (default) | bf16: raw 2-byte .npy arrays hold bfloat16 bits
  --json              print one JSON object instead of text
  --force             replace OUT.npy if it exists (an OUT that is A or B is always refused)
  --quiet             print nothing on success
  -h, --help          this help
Every result is the same for any thread count: the fp32 products (Eigen) are computed in fixed
blocks of 64 rows, each block on one thread.
)";

/// What `nvfp4 gemm` does, as options.
struct gemm_request {
  std::string mode = "exact";  ///< exact | relaxed | dequant
  bool b_kn = false;           ///< B given as [K, N]
  input_options input;
  /// Refuse an output D of more elements (the fuzz harness keeps it small).
  index_t max_output_elements = max_element_count;
};

/// What it produces.
struct gemm_result {
  index_t m = 0, n = 0, k = 0;
  std::vector<float> d;                 ///< [m, n], row-major
  error_report report;                  ///< D against the fp32 product of the unquantized inputs
  std::string compared_mode;            ///< the other of exact / relaxed ("" for dequant)
  std::int64_t differing_elements = 0;  ///< elements of D that mode gives differently
  double max_abs_difference = 0;
  double quantize_ms = 0, gemm_ms = 0, fp32_ms = 0;
};

namespace detail {

using row_matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// d [m, n] = a [m, k] * b^T (b [n, k]) or a * b (b [k, n] when `b_kn`), by Eigen in fixed blocks
/// of 64 rows, each on one thread: Eigen's own threading splits K by the thread count, which
/// changes the rounding; this does not.
inline void deterministic_product(const float* a, index_t m, index_t k, const float* b, index_t n, bool b_kn, float* d) {
  if (m == 0 || n == 0) return;
  const Eigen::Map<const row_matrix> a_map(a, m, k);
  const int eigen_threads = Eigen::nbThreads();
  Eigen::setNbThreads(1);
  constexpr index_t block_rows = 64;
  const index_t blocks = (m + block_rows - 1) / block_rows;
  simd::parallel_dynamic(
      blocks, true, [] { return 0; },
      [&](index_t block, int&) {
        const index_t r0 = block * block_rows, rows = std::min(block_rows, m - r0);
        Eigen::Map<row_matrix> d_block(d + r0 * n, rows, n);
        if (b_kn)
          d_block.noalias() = a_map.middleRows(r0, rows) * Eigen::Map<const row_matrix>(b, k, n);
        else
          d_block.noalias() = a_map.middleRows(r0, rows) * Eigen::Map<const row_matrix>(b, n, k).transpose();
      });
  Eigen::setNbThreads(eigen_threads);
}

/// The quantized product D = A * B^T by the chosen mode.
inline std::vector<float> quantized_product(const nvfp4_tensor& a, const nvfp4_tensor& b, const std::string& mode) {
  if (mode == "dequant") {
    const std::vector<float> a_values = dequantize(a), b_values = dequantize(b);
    std::vector<float> d(static_cast<std::size_t>(a.rows() * b.rows()));
    deterministic_product(a_values.data(), a.rows(), a.cols(), b_values.data(), b.rows(), false, d.data());
    return d;
  }
  gemm_options options;
  options.mode = nvfp4::detail::parse_name<gemm_mode>(mode, "--mode");  // "exact" / "relaxed" (checked by the parser)
  return gemm(a, b, options);
}

}  // namespace detail

/// The core of `nvfp4 gemm`: A and B read, quantized and multiplied; nothing written.
inline gemm_result gemm_arrays(const input_image& a_image, const input_image& b_image, const gemm_request& request) {
  const float_array a = load_float_array(a_image, request.input);
  const float_array b = load_float_array(b_image, request.input);
  if (a.shape.size() != 2 || b.shape.size() != 2)
    throw error(errc::shape_mismatch, "gemm: A and B must be 2-D, got " + shape_string(a.shape) + " and " + shape_string(b.shape));
  gemm_result result;
  result.m = a.shape[0];
  result.k = a.shape[1];
  result.n = request.b_kn ? b.shape[1] : b.shape[0];
  const index_t b_k = request.b_kn ? b.shape[0] : b.shape[1];
  if (b_k != result.k)
    throw error(errc::shape_mismatch, "gemm: A is " + shape_string(a.shape) + " but B" + (request.b_kn ? " [K, N]" : " [N, K]") + " is " +
                                          shape_string(b.shape) + ": K differs");
  const index_t m = result.m, n = result.n, k = result.k;
  const index_t d_count = nvfp4::detail::bounded_product(m, n, request.max_output_elements);
  if (d_count < 0)
    throw error(errc::invalid_argument, "gemm: D would be [" + std::to_string(m) + ", " + std::to_string(n) + "], more than " +
                                            std::to_string(request.max_output_elements) + " elements");

  const auto a_view = matrix_view<const float>::row_major(a.values.data(), m, k);
  const auto b_view = request.b_kn ? matrix_view<const float>::row_major(b.values.data(), k, n).transposed()
                                   : matrix_view<const float>::row_major(b.values.data(), n, k);
  using clock = std::chrono::steady_clock;
  const auto ms = [](auto from, auto to) { return std::chrono::duration<double, std::milli>(to - from).count(); };
  const auto t0 = clock::now();
  const auto quantize_operand = [](matrix_view<const float> x, const std::string& name) {
    try {
      return quantize<nvfp4_1x16>(x);
    } catch (const error& e) {
      throw nvfp4::detail::with_context(e, name);
    }
  };
  const nvfp4_tensor qa = quantize_operand(a_view, a_image.name);
  const nvfp4_tensor qb = quantize_operand(b_view, b_image.name);
  const auto t1 = clock::now();
  try {
    result.d = detail::quantized_product(qa, qb, request.mode);
  } catch (const error& e) {
    throw nvfp4::detail::with_context(e, "A = " + a_image.name + ", B = " + b_image.name);
  }
  const auto t2 = clock::now();
  std::vector<float> reference(static_cast<std::size_t>(d_count));
  detail::deterministic_product(a.values.data(), m, k, b.values.data(), n, request.b_kn, reference.data());
  const auto t3 = clock::now();
  for (std::size_t i = 0; i < reference.size(); ++i)
    if (!std::isfinite(reference[i]))
      throw error(errc::overflow, "gemm: the fp32 product of the unquantized inputs overflows float at (" +
                                      std::to_string(static_cast<index_t>(i) / n) + ", " + std::to_string(static_cast<index_t>(i) % n) +
                                      ")");
  result.report = compare(reference, result.d);
  result.quantize_ms = ms(t0, t1);
  result.gemm_ms = ms(t1, t2);
  result.fp32_ms = ms(t2, t3);
  if (request.mode != "dequant") {
    // The other mode's D, element by element: where relaxed accumulation rounds differently.
    result.compared_mode = request.mode == "exact" ? "relaxed" : "exact";
    const std::vector<float> other = detail::quantized_product(qa, qb, result.compared_mode);
    for (std::size_t i = 0; i < other.size(); ++i) {
      if (std::bit_cast<std::uint32_t>(other[i]) == std::bit_cast<std::uint32_t>(result.d[i])) continue;
      ++result.differing_elements;
      result.max_abs_difference = std::max(result.max_abs_difference, std::fabs(static_cast<double>(other[i]) - result.d[i]));
    }
  }
  return result;
}

inline int run_gemm(int argc, char** argv) {
  const arguments args(argc, argv, 2, {"--mode", "--name", "--input-dtype"}, {"--b-kn", "--json", "--quiet", "--force"});
  if (args.help()) {
    std::fputs(gemm_help, stdout);
    return exit_ok;
  }
  args.expect_positional(2, 3);
  gemm_request request;
  request.mode = args.choice("--mode", "exact", {"exact", "relaxed", "dequant"});
  request.b_kn = args.flag("--b-kn");
  request.input.tensor = args.value("--name", "");
  request.input.bf16 = input_is_bf16(args);
  if (args.positional().size() == 3) check_output(args.positional()[2], {args.positional()[0], args.positional()[1]}, args.flag("--force"));
  const std::vector<std::uint8_t> a_bytes = io::read_file_bytes(args.positional()[0]);
  const std::vector<std::uint8_t> b_bytes = io::read_file_bytes(args.positional()[1]);
  progress_bar progress("gemm", 2, a_bytes.size() + b_bytes.size() >= static_cast<std::size_t>(progress_threshold));
  progress.set_stage("quantized and fp32 products");
  const gemm_result r = gemm_arrays(input_image{a_bytes, args.positional()[0]}, input_image{b_bytes, args.positional()[1]}, request);
  progress.advance(1, "writing");
  if (args.positional().size() == 3) io::write_npy(args.positional()[2], io::make_float32_array(r.d, {r.m, r.n}));
  progress.finish();

  const double flops = 2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k);
  const double total = static_cast<double>(r.d.size());
  if (args.flag("--json")) {
    nlohmann::ordered_json j;
    j["m"] = r.m;
    j["n"] = r.n;
    j["k"] = r.k;
    j["mode"] = request.mode;
    j["sqnr_db"] = std::isfinite(r.report.sqnr_db) ? nlohmann::ordered_json(r.report.sqnr_db) : nlohmann::ordered_json(nullptr);
    j["max_abs_error"] = r.report.max_abs_error;
    j["cosine_similarity"] = r.report.cosine_similarity;
    if (!r.compared_mode.empty()) {
      j["compared_mode"] = r.compared_mode;
      j["differing_elements"] = r.differing_elements;
      j["max_abs_difference"] = r.max_abs_difference;
    }
    j["quantize_ms"] = r.quantize_ms;
    j["gemm_ms"] = r.gemm_ms;
    j["fp32_gemm_ms"] = r.fp32_ms;
    std::printf("%s\n", j.dump(2).c_str());
  } else if (!args.flag("--quiet")) {
    std::printf("D = A * B^T: [%lld x %lld] x [%lld x %lld]^T, NVFP4 1x16, mode %s\n", static_cast<long long>(r.m),
                static_cast<long long>(r.k), static_cast<long long>(r.n), static_cast<long long>(r.k), request.mode.c_str());
    std::printf("vs fp32 product: SQNR %.2f dB, max abs error %.4g, cosine %.6f\n", r.report.sqnr_db, r.report.max_abs_error,
                r.report.cosine_similarity);
    if (!r.compared_mode.empty())
      std::printf("%s vs %s: %lld of %lld elements differ (%.3g%%), largest difference %.4g\n", request.mode.c_str(),
                  r.compared_mode.c_str(), static_cast<long long>(r.differing_elements), static_cast<long long>(r.d.size()),
                  total > 0 ? 100.0 * static_cast<double>(r.differing_elements) / total : 0.0, r.max_abs_difference);
    const auto rate = [&](double milliseconds) { return milliseconds > 0 ? flops / milliseconds / 1e6 : 0.0; };
    std::printf("time: quantize %.2f ms, quantized GEMM %.2f ms (%.2f GFLOP/s), fp32 GEMM %.2f ms (%.2f GFLOP/s)\n", r.quantize_ms,
                r.gemm_ms, rate(r.gemm_ms), r.fp32_ms, rate(r.fp32_ms));
  }
  return exit_ok;
}

}  // namespace nvfp4::cli
