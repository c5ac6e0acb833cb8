// examples/roundtrip.cpp: quantize one realistic tensor with every mode the library has and
// print one table: SQNR, MSE, max abs error, bits per element, quantize/dequantize time. Times
// are the median of --repeat runs after one warm-up run, each writing into buffers kept across
// runs (quantize itself allocates the tensor it returns).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "example_support.hpp"
#include "nvfp4/io/npy.hpp"
#include "nvfp4/nvfp4.hpp"

namespace {

constexpr const char* usage = R"(usage: roundtrip [--rows N] [--cols N] [--seed S] [--repeat R] [--input FILE.npy]
Quantizes a rows x cols tensor (N(0,1) with a few outliers 40-100x larger, or the 2-D float
.npy given by --input) with every NVFP4 / MX mode and prints the error and the time of each
(the median of R timed runs after one warm-up run).
defaults: --rows 2048 --cols 4096 --seed 1 --repeat 5
)";

struct mode_result {
  std::vector<float> restored;
  double quantize_ms = 0;
  double dequantize_ms = 0;
};

/// The median wall time of `repeat` calls of f, after one untimed warm-up call.
template <class F>
double median_ms(int repeat, F&& f) {
  f();
  std::vector<double> times;
  for (int i = 0; i < repeat; ++i) times.push_back(examples::time_ms(f));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// Quantize with Format, then dequantize into a kept buffer, timing both.
template <class Format>
mode_result run_mode(nvfp4::matrix_view<const float> x, int repeat, const nvfp4::quantize_options& options = {}) {
  mode_result r;
  r.restored.resize(static_cast<std::size_t>(x.rows() * x.cols()));
  const auto out = nvfp4::matrix_view<float>::row_major(r.restored.data(), x.rows(), x.cols());
  nvfp4::quantized_tensor<Format> q;
  r.quantize_ms = median_ms(repeat, [&] { q = nvfp4::quantize<Format>(x, options); });
  r.dequantize_ms = median_ms(repeat, [&] { nvfp4::dequantize(q, out); });
  return r;
}

/// NVFP4 1x16 of RHT(x) (TE's 16-point transform on every row block), restored with the inverse
/// transform, so the error is measured against x itself. Both times include the transform.
mode_result run_rht(nvfp4::matrix_view<const float> x, int repeat) {
  const auto transform = nvfp4::hadamard_transform::te_default();
  const auto rows = x.rows(), cols = x.cols();
  std::vector<nvfp4::bf16> rotated(static_cast<std::size_t>(rows * cols)), back(rotated.size());
  std::vector<float> dequantized(rotated.size());
  const auto rotated_view = nvfp4::matrix_view<nvfp4::bf16>::row_major(rotated.data(), rows, cols);
  const auto back_view = nvfp4::matrix_view<nvfp4::bf16>::row_major(back.data(), rows, cols);
  const auto dequantized_view = nvfp4::matrix_view<float>::row_major(dequantized.data(), rows, cols);
  mode_result r;
  nvfp4::nvfp4_tensor q;
  r.quantize_ms = median_ms(repeat, [&] {
    nvfp4::hadamard_rows(x, transform, rotated_view);
    q = nvfp4::quantize<nvfp4::nvfp4_1x16>(nvfp4::matrix_view<const nvfp4::bf16>(rotated_view));
  });
  r.dequantize_ms = median_ms(repeat, [&] {
    nvfp4::dequantize(q, dequantized_view);
    nvfp4::hadamard_rows(nvfp4::matrix_view<const float>(dequantized_view), transform, back_view, nvfp4::hadamard_direction::inverse);
  });
  r.restored.resize(back.size());
  for (std::size_t i = 0; i < back.size(); ++i) r.restored[i] = back[i].to_float();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const examples::flags flags(argc, argv, usage);
  examples::print_kernels();
  long long rows = flags.integer("rows", 2048), cols = flags.integer("cols", 4096);
  const auto seed = static_cast<unsigned>(flags.integer("seed", 1));
  const int repeat = static_cast<int>(std::max<long long>(1, flags.integer("repeat", 5)));
  std::vector<float> x;
  try {
    if (const std::string input = flags.text("input", ""); !input.empty()) {
      const nvfp4::io::npy_array array = nvfp4::io::read_npy(input);
      const auto shape = nvfp4::io::matrix_shape_of(array);
      rows = shape.rows;
      cols = shape.cols;
      x = nvfp4::io::to_float32(array);
      std::printf("input %s: [%lld x %lld]\n", input.c_str(), rows, cols);
    } else {
      x = examples::normal_with_outliers(rows * cols, seed);
      std::printf("input: N(0,1) with outliers, [%lld x %lld], seed %u\n", rows, cols, seed);
    }
    const auto view = nvfp4::matrix_view<const float>::row_major(x.data(), rows, cols);
    std::printf("amax %.4g\n\n", nvfp4::amax(view));

    nvfp4::quantize_options stochastic;
    stochastic.rounding = nvfp4::rounding_mode::stochastic;
    stochastic.seed = seed;
    nvfp4::quantize_options te_rule;
    te_rule.mx_rule = nvfp4::mx_scale_rule::te_ceil;
    // Storage cost per element: element bits + scale bits / block size (+ 32 / N for NVFP4's
    // tensor scale). A 16x16 tile has one scale per 256 elements.
    const double tensor_scale_bits = 32.0 / static_cast<double>(rows * cols);
    struct mode {
      const char* name;
      double bits;
      std::function<mode_result()> run;
    };
    const std::vector<mode> modes = {
        {"NVFP4 1x16", 4.5 + tensor_scale_bits, [&] { return run_mode<nvfp4::nvfp4_1x16>(view, repeat); }},
        {"NVFP4 16x16 (2-D)", 4 + 8.0 / 256 + tensor_scale_bits, [&] { return run_mode<nvfp4::nvfp4_16x16>(view, repeat); }},
        {"NVFP4 1x16 + RHT", 4.5 + tensor_scale_bits, [&] { return run_rht(view, repeat); }},
        {"NVFP4 1x16 SR", 4.5 + tensor_scale_bits, [&] { return run_mode<nvfp4::nvfp4_1x16>(view, repeat, stochastic); }},
        {"MXFP4 (OCP)", 4.25, [&] { return run_mode<nvfp4::mxfp4>(view, repeat); }},
        {"MXFP4 (TE ceil)", 4.25, [&] { return run_mode<nvfp4::mxfp4>(view, repeat, te_rule); }},
        {"MXFP8 E4M3", 8.25, [&] { return run_mode<nvfp4::mxfp8>(view, repeat); }},
    };
    std::printf("%-20s %9s %12s %12s %8s %12s %14s\n", "mode", "SQNR dB", "MSE", "max |err|", "bits/el", "quantize ms", "dequantize ms");
    for (const auto& m : modes) {
      if (std::string(m.name).find("RHT") != std::string::npos && cols % 16 != 0) {
        std::printf("%-20s (needs cols %% 16 == 0)\n", m.name);
        continue;
      }
      const mode_result r = m.run();
      const nvfp4::error_report e = nvfp4::compare(x, r.restored);
      std::printf("%-20s %9.2f %12.4e %12.4e %8.3f %12.2f %14.2f\n", m.name, e.sqnr_db, e.mse, e.max_abs_error, m.bits, r.quantize_ms,
                  r.dequantize_ms);
    }
    int threads = 1;
#if defined(_OPENMP)
    threads = omp_get_max_threads();
#endif
    std::printf(
        "\nSQNR: higher is better (+6 dB ~ one more bit). Times: median of %d runs after a warm-up,\n"
        "outputs into kept buffers (quantize allocates the tensor it returns), %d threads.\n",
        repeat, threads);
  } catch (const nvfp4::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
