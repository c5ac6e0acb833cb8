// libFuzzer harness for the command-line pipeline: the cores of `nvfp4 quantize`, `dequantize`,
// `inspect`, `stats` and `gemm` (tools/*.hpp), RHT included, called in memory on the input as
// file images, nothing written. Any input must either succeed or throw nvfp4::error; anything
// else (another exception, a crash, UB, a leak, a hang) is a finding.
//
// Input layout: byte 0 picks the command (mod 5), byte 1 its options (bits, below); for one file
// the image is the rest; for two (stats, gemm) bytes 2-3 give the first image's length (little
// endian, clamped), the second image is what follows it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "convert_commands.hpp"
#include "gemm_command.hpp"
#include "report_commands.hpp"

namespace {

using namespace nvfp4;
using nvfp4::cli::input_image;

/// D above this many elements is refused in gemm (small budgets keep each run quick).
constexpr index_t gemm_output_budget = index_t{1} << 16;

void run_quantize(const input_image& image, std::uint8_t bits) {
  cli::quantize_request request;
  const char* formats[] = {"nvfp4", "mxfp4", "mxfp8", "nvfp4"};
  request.format = formats[bits & 3];
  request.tiles = (bits & 4) != 0 && request.format == "nvfp4";
  request.store.rht = (bits & 8) != 0;
  if ((bits & 16) != 0 && request.format != "mxfp8") request.store.quantize.rounding = rounding_mode::stochastic;
  request.store.quantize.seed = bits;
  request.store.swizzle = (bits & 32) != 0;
  request.store.quantize.mx_rule = (bits & 64) != 0 ? mx_scale_rule::te_ceil : mx_scale_rule::ocp_floor;
  request.input.bf16 = (bits & 128) != 0;
  const cli::quantize_result result = cli::quantize_array(image, request);
  // What quantize writes, dequantize reads back, always: a tensor that would not (RHT or TE's
  // ceil MX rule overflowing near float's maximum) is refused before anything is stored (issue 34).
  const auto bytes = io::serialize_safetensors(result.file);
  const auto back = cli::dequantize_image(input_image{bytes, "roundtrip.safetensors"}, {});
  if (static_cast<index_t>(back.restored.values.size()) != result.shape.rows * result.shape.cols) std::abort();
}

void run_one_file(int command, const input_image& image, std::uint8_t bits) {
  cli::input_options options;
  options.load.accept_invalid_scales = (bits & 1) != 0;
  options.bf16 = (bits & 2) != 0;
  if (command == 1) {
    const auto result = cli::dequantize_image(image, options);
    (void)io::serialize_npy(io::make_float32_array(result.restored.values, result.restored.shape));
  } else {
    (void)cli::inspect_image(image, options.load).dump(2);  // strict: a name that is not UTF-8 would throw here
  }
}

void run_two_files(int command, const input_image& a, const input_image& b, std::uint8_t bits) {
  if (command == 3) {
    cli::input_options options;
    options.load.accept_invalid_scales = (bits & 1) != 0;
    options.bf16 = (bits & 2) != 0;
    (void)cli::stats_report(a, b, options).dump();
    return;
  }
  cli::gemm_request request;
  const char* modes[] = {"exact", "relaxed", "dequant", "exact"};
  request.mode = modes[bits & 3];
  request.b_kn = (bits & 4) != 0;
  request.input.bf16 = (bits & 8) != 0;
  request.max_output_elements = gemm_output_budget;
  const cli::gemm_result r = cli::gemm_arrays(a, b, request);
  if (static_cast<index_t>(r.d.size()) != r.m * r.n) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const int command = data[0] % 5;
  const std::uint8_t bits = data[1];
  try {
    if (command == 0 || command == 1 || command == 2) {
      const input_image image{std::span<const std::uint8_t>(data + 2, size - 2), "fuzz.bin"};
      if (command == 0)
        run_quantize(image, bits);
      else
        run_one_file(command, image, bits);
    } else {
      if (size < 4) return 0;
      const std::size_t rest = size - 4;
      const std::size_t first = std::min<std::size_t>(rest, static_cast<std::size_t>(data[2] | (data[3] << 8)));
      const input_image a{std::span<const std::uint8_t>(data + 4, first), "a.bin"};
      const input_image b{std::span<const std::uint8_t>(data + 4 + first, rest - first), "b.bin"};
      run_two_files(command, a, b, bits);
    }
  } catch (const nvfp4::error&) {
  }
  return 0;
}
