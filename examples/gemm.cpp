// examples/gemm.cpp: NVFP4 GEMM D = A·Bᵀ three ways (the tensor core's exact MMA, relaxed fp32
// accumulation, dequantize + Eigen fp32) against the fp32 Eigen product of the unquantized
// inputs: error, how often the cheaper modes differ from the exact one, and speed.
// GCC 12 reports false (maybe-)uninitialized positives inside Eigen's AVX-512 GEMM packing.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include <cmath>
#include <cstdio>
#include <vector>

#include "example_support.hpp"
#include "nvfp4/gemm/fp4/gemm.hpp"
#include "nvfp4/interop/eigen.hpp"
#include "nvfp4/interop/eigen_gemm.hpp"
#include "nvfp4/nvfp4.hpp"

namespace {

constexpr const char* usage = R"(usage: gemm [--m M] [--n N] [--k K] [--seed S] [--repeat R]
A [M, K] (normal with outliers) and B [N, K] (normal) are quantized to NVFP4 1x16 along K; D = A*B^T
is computed with gemm_mode::exact, gemm_mode::relaxed and dequantize + Eigen, and compared with
the fp32 Eigen product. Times are the best of R runs.
defaults: --m 1024 --n 1024 --k 1024 --seed 1 --repeat 3
)";

using matrix = nvfp4::eigen::row_major_matrix_f32;

template <class F>
double best_ms(int repeat, F&& f) {
  double best = 1e300;
  for (int i = 0; i < repeat; ++i) best = std::min(best, examples::time_ms(f));
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const examples::flags flags(argc, argv, usage);
  examples::print_kernels();
  const long long m = flags.integer("m", 1024), n = flags.integer("n", 1024), k = flags.integer("k", 1024);
  const auto seed = static_cast<unsigned>(flags.integer("seed", 1));
  const int repeat = static_cast<int>(std::max<long long>(1, flags.integer("repeat", 3)));
  const std::vector<float> a_values = examples::normal_with_outliers(m * k, seed);
  const std::vector<float> b_values = examples::normal_with_outliers(n * k, seed + 1, n * k + 1);
  const Eigen::Map<const matrix> a(a_values.data(), m, k), b(b_values.data(), n, k);

  try {
    nvfp4::nvfp4_tensor qa, qb;
    const double quantize_ms = best_ms(repeat, [&] {
      qa = nvfp4::eigen::quantize<nvfp4::nvfp4_1x16>(a);
      qb = nvfp4::eigen::quantize<nvfp4::nvfp4_1x16>(b);
    });

    matrix reference, exact(m, n), relaxed(m, n), dequantized;
    const double fp32_ms = best_ms(repeat, [&] { reference = a * b.transpose(); });
    nvfp4::gemm_options exact_options, relaxed_options;
    relaxed_options.mode = nvfp4::gemm_mode::relaxed;
    const double exact_ms =
        best_ms(repeat, [&] { nvfp4::gemm(qa, qb, nvfp4::matrix_view<float>::row_major(exact.data(), m, n), exact_options); });
    const double relaxed_ms =
        best_ms(repeat, [&] { nvfp4::gemm(qa, qb, nvfp4::matrix_view<float>::row_major(relaxed.data(), m, n), relaxed_options); });
    const double dequant_ms = best_ms(repeat, [&] { dequantized = nvfp4::eigen::dequantize_then_gemm(qa, qb); });

    const auto span_of = [](const matrix& x) { return std::span<const float>(x.data(), static_cast<std::size_t>(x.size())); };
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    std::printf("D = A * B^T, A [%lld x %lld], B [%lld x %lld], NVFP4 1x16 along K; quantizing both: %.2f ms\n\n", m, k, n, k, quantize_ms);
    std::printf("%-26s %10s %12s %14s %16s %10s %10s\n", "mode", "SQNR dB", "max |err|", "max |D-exact|", "elements != exact", "ms",
                "GFLOP/s");
    struct row {
      const char* name;
      const matrix* d;
      double ms;
    };
    for (const row& r : {row{"exact (tensor core model)", &exact, exact_ms}, row{"relaxed (fp32 FMA chain)", &relaxed, relaxed_ms},
                         row{"dequantize + Eigen fp32", &dequantized, dequant_ms}, row{"fp32 Eigen, unquantized", &reference, fp32_ms}}) {
      const nvfp4::error_report e = nvfp4::compare(span_of(reference), span_of(*r.d));
      long long differing = 0;
      double max_diff = 0;
      for (long long i = 0; i < r.d->size(); ++i) {
        const double diff = std::fabs(static_cast<double>(r.d->data()[i]) - exact.data()[i]);
        differing += diff != 0;
        max_diff = std::max(max_diff, diff);
      }
      std::printf("%-26s %10.2f %12.4g %14.4g %16lld %10.2f %10.2f\n", r.name, e.sqnr_db, e.max_abs_error, max_diff, differing, r.ms,
                  flops / r.ms / 1e6);
    }
    std::printf(
        "\nSQNR and errors are against the fp32 product of the unquantized inputs (the last row is that\n"
        "product itself). 'exact' is what a Blackwell GPU returns bit for bit; the other modes are\n"
        "cheaper approximations of it and differ from it in the last bits of many elements.\n");
  } catch (const nvfp4::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
