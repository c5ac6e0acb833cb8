// tools/convert_commands.hpp: `nvfp4 quantize` (.npy -> safetensors in ModelOpt's layout) and
// `nvfp4 dequantize` (safetensors -> .npy float32).
#pragma once

#include <cstdio>
#include <string>

#include "cli_support.hpp"
#include "nvfp4/metrics/error_metrics.hpp"
#include "nvfp4/transforms/hadamard.hpp"

namespace nvfp4::cli {

inline constexpr const char* quantize_help = R"(usage: nvfp4 quantize IN.npy OUT.safetensors [options]

Quantizes a float32 / float16 / bfloat16 / float64 .npy array (C or Fortran order; N-D arrays
are seen as [product of leading dims, last dim]) and writes it as a safetensors file in the
layout of NVIDIA ModelOpt's NVFP4 checkpoints: W.weight (U8, packed FP4 [rows, cols/2]),
W.weight_scale (F8_E4M3 [rows, cols/16]), W.weight_scale_2 (F32 scalar, amax/2688). MX
formats store E8M0 scales as U8 and have no weight_scale_2 (see docs/cli.md).

options:
  --name W            tensor name prefix (default: weight name "W")
  --format F          nvfp4 (default) | mxfp4 | mxfp8
  --mode M            1d (default: one scale per 16 elements of a row) | 2d (16x16 tiles; nvfp4)
  --rht               apply TransformerEngine's 16-point random Hadamard transform to each row
                      block before quantizing (dequantize undoes it); cols must be a multiple of 16
  --sr                stochastic rounding (FP4 formats), reproducible from --seed
  --seed N            seed of the stochastic rounding stream (default 0)
  --mx-rule R         ocp (default, OCP MX v1.0 floor rule) | te (TransformerEngine's ceil rule)
  --swizzle           write the block scales in the 128x4 layout cuBLAS/CUTLASS GEMMs read
  --quiet             print nothing on success
  -h, --help          this help
The output is written to a temporary file and renamed, so it never exists half-written.
)";

inline constexpr const char* dequantize_help = R"(usage: nvfp4 dequantize IN.safetensors OUT.npy [--name W]

Dequantizes quantized tensor W of a safetensors file (written by `nvfp4 quantize`, or a ModelOpt
NVFP4 / MX checkpoint tensor) to a float32 .npy array of the source shape. Without --name the
file must hold exactly one quantized tensor.

options:
  --name W            which tensor (the prefix of W.weight)
  --quiet             print nothing on success
  -h, --help          this help
)";

namespace detail {

/// Quantizes x with the chosen format and adds it to `file`; returns the dequantized values (in
/// the domain that was quantized) for the summary line.
template <class T>
std::vector<float> quantize_into(io::safetensors_file& file, const std::string& name, const std::string& format, bool tiles,
                                 matrix_view<const T> x, const io::store_options& store) {
  const quantize_options& options = store.quantize;
  auto store_one = [&](const auto& q) {
    io::add_quantized_tensor(file, name, q, store);
    return nvfp4::dequantize(q);
  };
  if (format == "nvfp4") {
    return tiles ? store_one(nvfp4::quantize<nvfp4_16x16>(x, options)) : store_one(nvfp4::quantize<nvfp4_1x16>(x, options));
  }
  if (format == "mxfp4") return store_one(nvfp4::quantize<mxfp4>(x, options));
  return store_one(nvfp4::quantize<mxfp8>(x, options));
}

}  // namespace detail

inline int run_quantize(int argc, char** argv) {
  const arguments args(argc, argv, 2, {"--name", "--format", "--mode", "--seed", "--mx-rule"},
                       {"--rht", "--sr", "--swizzle", "--quiet"});
  if (args.help()) {
    std::fputs(quantize_help, stdout);
    return exit_ok;
  }
  args.expect_positional(2, 2);
  const std::string input = args.positional()[0], output = args.positional()[1];
  const std::string name = args.value("--name", "W");
  const std::string format = args.choice("--format", "nvfp4", {"nvfp4", "mxfp4", "mxfp8"});
  const std::string mode = args.choice("--mode", "1d", {"1d", "2d"});
  const std::string mx_rule = args.choice("--mx-rule", "ocp", {"ocp", "te"});
  if (name.empty()) throw usage_error("--name must not be empty");
  if (mode == "2d" && format != "nvfp4") throw usage_error("--mode 2d is defined for --format nvfp4 only");
  if (args.flag("--sr") && format == "mxfp8") throw usage_error("--sr needs FP4 elements (nvfp4 or mxfp4)");
  if (args.has("--seed") && !args.flag("--sr")) throw usage_error("--seed only matters with --sr");

  io::store_options store;
  store.swizzle = args.flag("--swizzle");
  store.rht = args.flag("--rht");
  store.quantize.rounding = args.flag("--sr") ? rounding_mode::stochastic : rounding_mode::nearest_even;
  store.quantize.seed = args.unsigned_value("--seed", 0);
  store.quantize.mx_rule = mx_rule == "te" ? mx_scale_rule::te_ceil : mx_scale_rule::ocp_floor;

  const io::npy_array array = io::read_npy(input);
  const io::npy_matrix_shape shape = io::matrix_shape_of(array);
  progress_bar progress("quantize", 3, shape.rows * shape.cols >= progress_threshold);
  progress.set_stage("reading");
  const std::vector<float> values = io::to_float32(array);
  store.source_shape = array.shape.empty() ? std::vector<std::int64_t>{1, 1} : array.shape;
  if (array.shape.size() < 2) store.source_shape = {shape.rows, shape.cols};
  const auto x = matrix_view<const float>::row_major(values.data(), shape.rows, shape.cols);
  progress.advance(1, store.rht ? "RHT + quantizing" : "quantizing");

  io::safetensors_file file;
  file.metadata["source_file"] = std::filesystem::path(input).filename().string();
  std::vector<float> restored;
  std::vector<float> reference_domain;  // what was quantized, to report the error against
  if (store.rht) {
    const auto transform = hadamard_transform::te_default();
    if (shape.cols % transform.size() != 0)
      throw error(errc::shape_mismatch, "--rht needs the number of columns (" + std::to_string(shape.cols) + ") to be a multiple of 16");
    std::vector<bf16> rotated(values.size());
    hadamard_rows(x, transform, matrix_view<bf16>::row_major(rotated.data(), shape.rows, shape.cols));
    restored = detail::quantize_into(file, name, format, mode == "2d", matrix_view<const bf16>::row_major(rotated.data(), shape.rows, shape.cols), store);
    reference_domain.reserve(rotated.size());
    for (auto v : rotated) reference_domain.push_back(v.to_float());
  } else {
    restored = detail::quantize_into(file, name, format, mode == "2d", x, store);
  }
  progress.advance(1, "writing");
  io::write_safetensors(output, file);
  progress.finish();

  if (!args.flag("--quiet")) {
    const error_report report = compare(store.rht ? std::span<const float>(reference_domain) : std::span<const float>(values), restored);
    std::printf("%s: %s %s%s [%lld x %lld] -> %s (SQNR %.2f dB%s)\n", input.c_str(), format.c_str(),
                format == "nvfp4" ? (mode == "2d" ? "16x16" : "1x16") : "1x32", store.rht ? " +RHT" : "",
                static_cast<long long>(shape.rows), static_cast<long long>(shape.cols), output.c_str(), report.sqnr_db,
                store.rht ? " in the rotated domain" : "");
  }
  return exit_ok;
}

inline int run_dequantize(int argc, char** argv) {
  const arguments args(argc, argv, 2, {"--name"}, {"--quiet"});
  if (args.help()) {
    std::fputs(dequantize_help, stdout);
    return exit_ok;
  }
  args.expect_positional(2, 2);
  const std::string input = args.positional()[0], output = args.positional()[1];
  const io::safetensors_file file = io::read_safetensors(input);
  const std::string name = pick_quantized_name(file, args.value("--name", ""), input);
  const io::stored_tensor_info info = io::describe_quantized_tensor(file, name);
  progress_bar progress("dequantize", 2, info.rows * info.cols >= progress_threshold);
  progress.set_stage("dequantizing");
  const io::restored_tensor restored = io::dequantize_tensor(file, name);
  progress.advance(1, "writing");
  io::write_npy(output, io::make_float32_array(restored.values, restored.shape));
  progress.finish();
  if (!args.flag("--quiet"))
    std::printf("%s: %s -> %s %s float32\n", input.c_str(), name.c_str(), output.c_str(), shape_string(restored.shape).c_str());
  return exit_ok;
}

}  // namespace nvfp4::cli
