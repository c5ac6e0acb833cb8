// tools/gemm_command.hpp: `nvfp4 gemm A B [OUT]`: quantizes A [M, K] and B [N, K] to NVFP4
// (1x16 along K), multiplies D = A * B^T, and reports the error against the fp32 product of the
// unquantized inputs, with timings.
#pragma once

// GCC 12 reports false (maybe-)uninitialized positives inside Eigen's AVX-512 GEMM packing.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include <chrono>
#include <cstdio>
#include <string>

#include "cli_support.hpp"
#include "nvfp4/gemm/gemm.hpp"
#include "nvfp4/interop/eigen.hpp"
#include "nvfp4/interop/eigen_gemm.hpp"
#include "nvfp4/metrics/error_metrics.hpp"

namespace nvfp4::cli {

inline constexpr const char* gemm_help = R"(usage: nvfp4 gemm A.npy B.npy [OUT.npy] [options]

Quantizes A [M, K] and B [N, K] (or B [K, N] with --b-kn) to NVFP4 with one scale per 16
elements along K, computes D = A * B^T [M, N], and prints its error against the fp32 product of
the unquantized inputs and the time taken. OUT.npy receives D as float32.

options:
  --mode M            exact (default): the Blackwell tensor core's block-scaled MMA, bit for bit
                      (docs/numerics_spec.md section 6), then TE's alpha epilogue
                      relaxed: the same block terms accumulated with plain fp32 FMAs
                      dequant: dequantize both operands, fp32 product with Eigen (baseline)
  --b-kn              B is given as [K, N] (it is quantized along K all the same)
  --json              print one JSON object instead of text
  --quiet             print nothing on success
  -h, --help          this help
)";

namespace detail {

/// The quantized product D = A * B^T by the chosen mode.
inline eigen::row_major_matrix_f32 quantized_product(const nvfp4_tensor& a, const nvfp4_tensor& b, const std::string& mode) {
  if (mode == "dequant") return eigen::dequantize_then_gemm(a, b);
  eigen::row_major_matrix_f32 d(a.rows(), b.rows());
  gemm_options options;
  options.mode = mode == "exact" ? gemm_mode::exact : gemm_mode::relaxed;
  gemm(a, b, matrix_view<float>::row_major(d.data(), a.rows(), b.rows()), options);
  return d;
}

}  // namespace detail

inline int run_gemm(int argc, char** argv) {
  const arguments args(argc, argv, 2, {"--mode"}, {"--b-kn", "--json", "--quiet"});
  if (args.help()) {
    std::fputs(gemm_help, stdout);
    return exit_ok;
  }
  args.expect_positional(2, 3);
  const std::string mode = args.choice("--mode", "exact", {"exact", "relaxed", "dequant"});
  const float_array a = load_float_array(args.positional()[0]);
  const float_array b = load_float_array(args.positional()[1]);
  if (a.shape.size() != 2 || b.shape.size() != 2)
    throw error(errc::shape_mismatch, "gemm: A and B must be 2-D, got " + shape_string(a.shape) + " and " + shape_string(b.shape));
  const index_t m = a.shape[0], k = a.shape[1];
  const bool b_kn = args.flag("--b-kn");
  const index_t n = b_kn ? b.shape[1] : b.shape[0];
  const index_t b_k = b_kn ? b.shape[0] : b.shape[1];
  if (b_k != k)
    throw error(errc::shape_mismatch, "gemm: A is " + shape_string(a.shape) + " but B" + (b_kn ? " [K, N]" : " [N, K]") + " is " +
                                          shape_string(b.shape) + ": K differs");

  progress_bar progress("gemm", 3, m * n * k >= progress_threshold * 16);
  const auto a_view = matrix_view<const float>::row_major(a.values.data(), m, k);
  const auto b_view = b_kn ? matrix_view<const float>::row_major(b.values.data(), k, n).transposed()
                           : matrix_view<const float>::row_major(b.values.data(), n, k);
  using clock = std::chrono::steady_clock;
  progress.set_stage("quantizing");
  const auto t0 = clock::now();
  const nvfp4_tensor qa = quantize<nvfp4_1x16>(a_view);
  const nvfp4_tensor qb = quantize<nvfp4_1x16>(b_view);
  const auto t1 = clock::now();
  progress.advance(1, "quantized product");
  const eigen::row_major_matrix_f32 d = detail::quantized_product(qa, qb, mode);
  const auto t2 = clock::now();
  progress.advance(1, "fp32 product");
  const Eigen::Map<const eigen::row_major_matrix_f32> a_map(a.values.data(), m, k);
  eigen::row_major_matrix_f32 reference;
  if (b_kn) reference = a_map * Eigen::Map<const eigen::row_major_matrix_f32>(b.values.data(), k, n);
  else reference = a_map * Eigen::Map<const eigen::row_major_matrix_f32>(b.values.data(), n, k).transpose();
  const auto t3 = clock::now();
  progress.advance(1, "writing");
  if (args.positional().size() == 3)
    io::write_npy(args.positional()[2], io::make_float32_array(std::span<const float>(d.data(), static_cast<std::size_t>(d.size())), {m, n}));
  progress.finish();

  const error_report r = compare(std::span<const float>(reference.data(), static_cast<std::size_t>(reference.size())),
                                 std::span<const float>(d.data(), static_cast<std::size_t>(d.size())));
  const auto ms = [](auto from, auto to) { return std::chrono::duration<double, std::milli>(to - from).count(); };
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (args.flag("--json")) {
    nlohmann::ordered_json j;
    j["m"] = m;
    j["n"] = n;
    j["k"] = k;
    j["mode"] = mode;
    j["sqnr_db"] = std::isfinite(r.sqnr_db) ? nlohmann::ordered_json(r.sqnr_db) : nlohmann::ordered_json(nullptr);
    j["max_abs_error"] = r.max_abs_error;
    j["cosine_similarity"] = r.cosine_similarity;
    j["quantize_ms"] = ms(t0, t1);
    j["gemm_ms"] = ms(t1, t2);
    j["fp32_gemm_ms"] = ms(t2, t3);
    std::printf("%s\n", j.dump(2).c_str());
  } else if (!args.flag("--quiet")) {
    std::printf("D = A * B^T: [%lld x %lld] x [%lld x %lld]^T, NVFP4 1x16, mode %s\n", static_cast<long long>(m),
                static_cast<long long>(k), static_cast<long long>(n), static_cast<long long>(k), mode.c_str());
    std::printf("vs fp32 product: SQNR %.2f dB, max abs error %.4g, cosine %.6f\n", r.sqnr_db, r.max_abs_error, r.cosine_similarity);
    std::printf("time: quantize %.2f ms, quantized GEMM %.2f ms (%.2f GFLOP/s), fp32 GEMM %.2f ms (%.2f GFLOP/s)\n", ms(t0, t1),
                ms(t1, t2), flops / ms(t1, t2) / 1e6, ms(t2, t3), flops / ms(t2, t3) / 1e6);
  }
  return exit_ok;
}

}  // namespace nvfp4::cli
