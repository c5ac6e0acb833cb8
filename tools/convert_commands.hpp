// tools/convert_commands.hpp: `nvfp4 quantize` (.npy -> safetensors in ModelOpt's layout) and
// `nvfp4 dequantize` (safetensors -> .npy float32). Each command's core (quantize_array,
// dequantize_image) works on bytes in memory and returns what the command writes, so the fuzz
// harness runs it without files; run_* parse the command line, read, write and print.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "cli_support.hpp"
#include "nvfp4/metrics/error_metrics.hpp"
#include "nvfp4/scaling/quantizer_flavor.hpp"
#include "nvfp4/transforms/hadamard.hpp"

namespace nvfp4::cli {

inline constexpr const char* quantize_help = R"(usage: nvfp4 quantize IN.npy OUT.safetensors [options]

Quantizes a float32 / float16 / bfloat16 / float64 .npy array (C or Fortran order; N-D arrays
are seen as [product of leading dims, last dim]) and writes it as a safetensors file in the
layout of NVIDIA ModelOpt's NVFP4 checkpoints: W.weight (U8, packed FP4 [rows, cols/2]),
W.weight_scale (F8_E4M3 [rows, cols/16]), W.weight_scale_2 (F32 scalar S_dec = 1 / S_enc with
S_enc = fp32(2688 / amax), TransformerEngine's rule: within 1 ulp of amax / 2688, which is what
ModelOpt stores, so the two can differ in the last bit). MX formats store E8M0 scales as U8 and
have no weight_scale_2 (see docs/cli.md).

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
  --flavor F          whose quantizer (1x16 nvfp4, or mxfp4 with te/ggml): te (default,
                      TransformerEngine) | modelopt | torchao | compressed_tensors | ggml, each
                      bit-exact with that project (docs/formats_and_layouts.md); `nvfp4 pack`
                      writes several weights, input scales and hf_quant_config.json
  --input-dtype T     auto (default) | bf16: the .npy holds bfloat16 bits in a raw 2-byte dtype
                      (|V2 or <u2, as NumPy saves bf16 data it has no type for)
  --force             replace OUT if it exists (an OUT that is IN, also through a link, is
                      always refused)
  --quiet             print nothing on success
  -h, --help          this help
The output is written to a temporary file and renamed, so it never exists half-written.
)";

inline constexpr const char* dequantize_help = R"(usage: nvfp4 dequantize IN OUT.npy [--name W]
       nvfp4 dequantize IN OUT --all

Dequantizes quantized tensor W of a checkpoint to a float32 .npy array of the source shape. IN is
any checkpoint the readers take (the format is detected and printed): a safetensors file written
by `nvfp4 quantize` or `nvfp4 pack`, a ModelOpt file or directory (single or sharded),
compressed-tensors, GGUF or torchao. Without --name the checkpoint must hold exactly one quantized
tensor. With --all every quantized weight is dequantized: OUT ending in .safetensors gets them as
F32 "W.weight" tensors beside every other tensor of IN unchanged; any other OUT is a directory
that gets one W.weight.npy per weight (and a float32 .npy per other floating-point tensor).

options:
  --name W                  which tensor (the prefix of W.weight)
  --all                     every quantized weight (see above)
  --accept-invalid-scales   read NaN / sign-bit block scales and a NaN, Inf or negative
                            weight_scale_2 as they are (forensics; refused by default)
  --force                   replace OUT if it exists (an OUT that is IN is always refused)
  --quiet                   print nothing on success, no warnings
  -h, --help                this help
)";

/// What `nvfp4 quantize` does, as options.
struct quantize_request {
  std::string name = "W";
  std::string format = "nvfp4";                    ///< nvfp4 | mxfp4 | mxfp8
  bool tiles = false;                              ///< 16x16 tiles (nvfp4 only)
  io::store_options store;                         ///< swizzle, rht, rounding, seed, MX rule
  input_options input;                             ///< --input-dtype
  quantizer_flavor flavor = quantizer_flavor::te;  ///< --flavor: whose quantizer (1x16 nvfp4, mxfp4)
};

/// What it produces: the file to write and the summary line's numbers.
struct quantize_result {
  io::safetensors_file file;
  io::npy_matrix_shape shape;
  double sqnr_db = 0;        ///< of the round trip, in the domain that was quantized (rotated with RHT)
  bool all_flushed = false;  ///< the input has non-zero elements and every one quantized to zero
};

namespace detail {

/// Quantizes x with the chosen format and adds it to `file`; returns the dequantized values (in
/// the domain that was quantized) for the summary line.
template <class T>
std::vector<float> quantize_into(io::safetensors_file& file, const quantize_request& request, matrix_view<const T> x) {
  const quantize_options& options = request.store.quantize;
  auto store_one = [&](const auto& q) {
    io::add_quantized_tensor(file, request.name, q, request.store);
    return nvfp4::dequantize(q);
  };
  if (request.flavor != quantizer_flavor::te) {  // the peers' quantizers (checkpoint_commands.hpp's pack has the rest)
    if (request.format == "mxfp4") return store_one(quantize_mxfp4_flavor(x, request.flavor));
    return store_one(quantize_nvfp4_flavor(x, request.flavor));
  }
  if (request.format == "nvfp4") {
    return request.tiles ? store_one(nvfp4::quantize<nvfp4_16x16>(x, options)) : store_one(nvfp4::quantize<nvfp4_1x16>(x, options));
  }
  if (request.format == "mxfp4") return store_one(nvfp4::quantize<mxfp4>(x, options));
  return store_one(nvfp4::quantize<mxfp8>(x, options));
}

}  // namespace detail

/// The core of `nvfp4 quantize`: the .npy image quantized into a safetensors file (not written).
inline quantize_result quantize_array(const input_image& input, const quantize_request& request) {
  const io::npy_array array = parse_npy_input(input, request.input, "quantize");
  quantize_result result;
  result.shape = io::matrix_shape_of(array);
  const std::vector<float> values = to_float32_of(array, input.name);
  io::store_options store = request.store;
  store.source_shape = array.shape;  // 0-d and 1-D too: dequantize gives back the shape that came in
  quantize_request effective = request;
  effective.store = store;
  const auto x = matrix_view<const float>::row_major(values.data(), result.shape.rows, result.shape.cols);
  result.file.metadata["source_file"] = std::filesystem::path(input.name).filename().string();
  try {
    std::vector<float> restored;
    if (store.rht) {
      const auto transform = hadamard_transform::te_default();
      if (result.shape.cols % transform.size() != 0)
        throw error(errc::shape_mismatch,
                    "--rht needs the number of columns (" + std::to_string(result.shape.cols) + ") to be a multiple of 16");
      std::vector<bf16> rotated(values.size());
      hadamard_rows(x, transform, matrix_view<bf16>::row_major(rotated.data(), result.shape.rows, result.shape.cols));
      restored = detail::quantize_into(result.file, effective,
                                       matrix_view<const bf16>::row_major(rotated.data(), result.shape.rows, result.shape.cols));
      std::vector<float> rotated_values(rotated.size());
      for (std::size_t i = 0; i < rotated.size(); ++i) rotated_values[i] = rotated[i].to_float();
      result.sqnr_db = compare(rotated_values, restored).sqnr_db;
    } else {
      restored = detail::quantize_into(result.file, effective, x);
      result.sqnr_db = compare(values, restored).sqnr_db;
    }
    // Denormal-only input: the recipe's scale arithmetic (bit-exact with the GPU) turns every
    // element into 0; run_quantize says so rather than a bare "SQNR 0.00 dB".
    const auto nonzero = [](float v) { return v != 0.0f; };
    result.all_flushed = std::any_of(values.begin(), values.end(), nonzero) && std::none_of(restored.begin(), restored.end(), nonzero);
  } catch (const error& e) {
    throw nvfp4::detail::with_context(e, input.name);  // the library names the element, this the file
  }
  return result;
}

inline int run_quantize(int argc, char** argv) {
  const arguments args(argc, argv, 2, {"--name", "--format", "--mode", "--seed", "--mx-rule", "--input-dtype", "--flavor"},
                       {"--rht", "--sr", "--swizzle", "--quiet", "--force"});
  if (args.help()) {
    std::fputs(quantize_help, stdout);
    return exit_ok;
  }
  args.expect_positional(2, 2);
  const std::string input = args.positional()[0], output = args.positional()[1];
  quantize_request request;
  request.name = args.value("--name", "W");
  request.format = args.choice("--format", "nvfp4", {"nvfp4", "mxfp4", "mxfp8"});
  const std::string mode = args.choice("--mode", "1d", {"1d", "2d"});
  request.tiles = mode == "2d";
  const std::string mx_rule = args.choice("--mx-rule", "ocp", {"ocp", "te"});
  if (request.name.empty()) throw usage_error("--name must not be empty");
  if (request.tiles && request.format != "nvfp4") throw usage_error("--mode 2d is defined for --format nvfp4 only");
  if (args.flag("--sr") && request.format == "mxfp8") throw usage_error("--sr needs FP4 elements (nvfp4 or mxfp4)");
  if (args.has("--seed") && !args.flag("--sr")) throw usage_error("--seed only matters with --sr");
  request.store.swizzle = args.flag("--swizzle");
  request.store.rht = args.flag("--rht");
  request.store.quantize.rounding = args.flag("--sr") ? rounding_mode::stochastic : rounding_mode::nearest_even;
  request.store.quantize.seed = args.unsigned_value("--seed", 0);
  request.store.quantize.mx_rule = mx_rule == "te" ? mx_scale_rule::te_ceil : mx_scale_rule::ocp_floor;
  request.input.bf16 = input_is_bf16(args);
  const auto flavor = parse_quantizer_flavor(args.value("--flavor", "te"));
  if (!flavor) throw usage_error("unknown --flavor '" + args.value("--flavor", "") + "' (te, modelopt, torchao, compressed_tensors, ggml)");
  request.flavor = *flavor;
  if (request.flavor != quantizer_flavor::te && (request.tiles || args.flag("--sr") || args.flag("--rht") || request.format == "mxfp8" ||
                                                 (request.format == "mxfp4" && request.flavor != quantizer_flavor::ggml)))
    throw usage_error("--flavor " + args.value("--flavor", "") + " quantizes 1x16 nvfp4 (and mxfp4 for ggml), without --sr or --rht");

  check_output(output, {input}, args.flag("--force"));
  const std::vector<std::uint8_t> bytes = io::read_file_bytes(input);
  progress_bar progress("quantize", 2, bytes.size() >= static_cast<std::size_t>(progress_threshold) * 2);
  progress.set_stage(request.store.rht ? "RHT + quantizing" : "quantizing");
  const quantize_result result = quantize_array(input_image{bytes, input}, request);
  progress.advance(1, "writing");
  io::write_safetensors(output, result.file);
  progress.finish();

  if (!args.flag("--quiet")) {
    std::printf("%s: %s %s%s [%lld x %lld] -> %s (SQNR %.2f dB%s)\n", input.c_str(), request.format.c_str(),
                request.format == "nvfp4" ? (request.tiles ? "16x16" : "1x16") : "1x32", request.store.rht ? " +RHT" : "",
                static_cast<long long>(result.shape.rows), static_cast<long long>(result.shape.cols), output.c_str(), result.sqnr_db,
                request.store.rht ? " in the rotated domain" : "");
  }
  if (result.all_flushed)
    std::fprintf(stderr,
                 "warning: %s: every non-zero element quantized to zero (the values are too small for the format's scale "
                 "arithmetic, denormal floats; the GPU gives the same zeros): the file holds zeros (docs/cli.md)\n",
                 input.c_str());
  return exit_ok;
}

/// What `nvfp4 dequantize` produces: the tensor's name and its values in the source shape.
struct dequantize_result {
  std::string name;
  io::restored_tensor restored;
};

/// The core of `nvfp4 dequantize`: the quantized tensor of a safetensors image, dequantized.
inline dequantize_result dequantize_image(const input_image& input, const input_options& options) {
  const io::safetensors_file file = parse_safetensors_input(input, "dequantize");
  dequantize_result result;
  result.name = pick_quantized_name(file, options.tensor, input.name);
  try {
    result.restored = io::dequantize_any(file, result.name, options.load);
  } catch (const error& e) {
    throw nvfp4::detail::with_context(e, input.name);
  }
  return result;
}

/// The name a tensor gets as a file of a directory: '/' (never in a module name we write, but a
/// file's names are its own) becomes '_'.
inline std::string file_name_of(const std::string& tensor) {
  std::string n = tensor;
  for (char& ch : n)
    if (ch == '/' || ch == '\\') ch = '_';
  if (n.empty() || n == "." || n == "..") n = "_" + n;
  return n;
}

/// Quantized weight `name` of `source` dequantized piece by piece into `sink` (the values of
/// io::dequantize_any, never held whole), its errors naming `input`.
inline void dequantize_into(const io::safetensors_file& weight, const std::string& name, const io::load_options& load,
                            const std::string& input, const io::float_sink& sink) {
  try {
    (void)io::dequantize_any_in_pieces(weight, name, load, sink);
  } catch (const error& e) {
    throw nvfp4::detail::with_context(e, input);
  }
}

/// The shape weight `name` dequantizes to, its errors naming `input`.
inline std::vector<std::int64_t> dequantized_shape_of(const io::safetensors_file& weight, const std::string& name,
                                                      const io::load_options& load, const std::string& input) {
  try {
    return io::dequantized_shape(weight, name, load);
  } catch (const error& e) {
    throw nvfp4::detail::with_context(e, input);
  }
}

/// A floating-point tensor's values as float32 (F32, F64, F16, BF16), for the .npy directory.
inline std::vector<float> float_values_of(const io::safetensors_tensor& t) {
  std::vector<float> values(static_cast<std::size_t>(t.element_count()));
  const std::uint8_t* b = t.bytes.data();
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (t.dtype == io::safetensors_dtype::f32)
      std::memcpy(&values[i], b + 4 * i, 4);
    else if (t.dtype == io::safetensors_dtype::f64) {
      double d;
      std::memcpy(&d, b + 8 * i, 8);
      values[i] = static_cast<float>(d);
    } else {
      const auto bits = static_cast<std::uint16_t>(b[2 * i] | (b[2 * i + 1] << 8));
      values[i] = t.dtype == io::safetensors_dtype::f16 ? io::half_to_float(bits) : bf16::from_bits(bits).to_float();
    }
  }
  return values;
}

/// `nvfp4 dequantize IN OUT --all`: every quantized weight of `source` dequantized into OUT (a
/// .safetensors file, or a directory of .npy files written as one: into a temporary directory
/// renamed into place), one weight at a time, each written as it is dequantized. Returns the
/// number of weights.
inline std::size_t dequantize_all(const io::safetensors_source& source, const std::string& input, const std::string& output,
                                  const io::load_options& load, bool force) {
  const std::vector<std::string> names = io::quantized_tensor_names(source);
  if (names.empty()) throw error(errc::invalid_argument, input + " holds no quantized tensor");
  std::set<std::string> consumed;
  for (const auto& name : names)
    for (const char* part : {".weight", ".weight_scale", ".weight_scale_2"}) consumed.insert(name + part);
  if (std::filesystem::path(output).extension() == ".safetensors") {
    // The header first (every weight's shape from its description), then the data in its order.
    std::vector<io::safetensors_description> tensors;
    for (const auto& name : names)
      tensors.push_back({name + ".weight", io::safetensors_dtype::f32,
                         dequantized_shape_of(io::load_quantized_weight_file(source, name), name, load, input)});
    for (const auto& e : source.entries())
      if (!consumed.contains(e.name)) tensors.push_back({e.name, e.dtype, e.shape});
    std::map<std::string, std::string> metadata = source.metadata();
    std::erase_if(metadata, [](const auto& kv) { return kv.first.rfind("nvfp4.", 0) == 0 || kv.first == io::checkpoint_annotation_key; });
    io::write_safetensors_streamed(output, tensors, metadata, [&](const io::byte_sink& sink) {
      for (const auto& name : names)
        dequantize_into(io::load_quantized_weight_file(source, name), name, load, input, [&](std::span<const float> values) {
          sink(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(values.data()), values.size_bytes()));
        });
      for (const auto& e : source.entries())
        if (!consumed.contains(e.name)) sink(source.load(e).bytes);
    });
    return names.size();
  }
  // A directory of .npy files, built beside OUT and renamed into place.
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target = fs::absolute(output, ec);
  if (ec) throw error(errc::io_error, "cannot write " + output + ": " + ec.message());
  const fs::path staging = target.parent_path() / ("." + target.filename().string() + ".nvfp4-tmp." + std::to_string(::getpid()));
  fs::remove_all(staging, ec);
  if (!fs::create_directories(staging, ec) || ec) throw error(errc::io_error, "cannot create " + staging.string() + ": " + ec.message());
  try {
    for (const auto& name : names) {
      const io::safetensors_file weight = io::load_quantized_weight_file(source, name);
      const std::vector<std::int64_t> shape = dequantized_shape_of(weight, name, load, input);
      io::write_float32_npy(staging / (file_name_of(name) + ".weight.npy"), shape,
                            [&](const io::float_sink& sink) { dequantize_into(weight, name, load, input, sink); });
    }
    for (const auto& e : source.entries()) {
      if (consumed.contains(e.name)) continue;
      if (e.dtype != io::safetensors_dtype::f32 && e.dtype != io::safetensors_dtype::f16 && e.dtype != io::safetensors_dtype::bf16 &&
          e.dtype != io::safetensors_dtype::f64)
        continue;  // input scales, integer tensors: kept in the .safetensors output only
      io::write_npy(staging / (file_name_of(e.name) + ".npy"), io::make_float32_array(float_values_of(source.load(e)), e.shape));
    }
    if (force && fs::exists(fs::symlink_status(target, ec))) {
      fs::remove_all(target, ec);
      if (ec) throw error(errc::io_error, "cannot replace " + output + ": " + ec.message());
    }
    fs::rename(staging, target, ec);
    if (ec) throw error(errc::io_error, "cannot rename the finished directory onto " + output + ": " + ec.message());
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
  return names.size();
}

inline int run_dequantize(int argc, char** argv) {
  const arguments args(argc, argv, 2, {"--name"}, {"--quiet", "--accept-invalid-scales", "--all", "--force"});
  if (args.help()) {
    std::fputs(dequantize_help, stdout);
    return exit_ok;
  }
  args.expect_positional(2, 2);
  const std::string input = args.positional()[0], output = args.positional()[1];
  if (args.flag("--all") && args.has("--name")) throw usage_error("--all and --name exclude each other");
  const bool quiet = args.flag("--quiet");
  input_options options;
  options.tensor = args.value("--name", "");
  options.load.accept_invalid_scales = args.flag("--accept-invalid-scales");
  check_output(output, {input}, args.flag("--force"));
  const io::modelopt_source opened = open_checkpoint_input(input, "dequantize");
  print_warnings_once(opened.warnings, quiet);
  if (args.flag("--all")) {
    const std::size_t n = dequantize_all(opened.source, input, output, options.load, args.flag("--force"));
    if (!quiet)
      std::printf("%s (%s): %zu quantized weights -> %s float32\n", input.c_str(), opened.found.description.c_str(), n, output.c_str());
    return exit_ok;
  }
  const std::string name = pick_quantized_name(
      options.tensor.empty() ? io::quantized_tensor_names(opened.source) : std::vector<std::string>{}, options.tensor, input);
  // Only this weight's tensors are read; its values go to the file piece by piece.
  const io::safetensors_file weight = io::load_quantized_weight_file(opened.source, name);
  const std::vector<std::int64_t> shape = dequantized_shape_of(weight, name, options.load, input);
  const std::int64_t count = nvfp4::detail::checked_element_count(shape, errc::malformed_file, input);
  progress_bar progress("dequantize", std::max<std::int64_t>(1, count), count >= progress_threshold / 2);
  progress.set_stage("dequantizing");
  io::write_float32_npy(output, shape, [&](const io::float_sink& sink) {
    dequantize_into(weight, name, options.load, input, [&](std::span<const float> values) {
      sink(values);
      progress.advance(static_cast<std::int64_t>(values.size()));
    });
  });
  progress.finish();
  if (!quiet)
    std::printf("%s (%s): %s -> %s %s float32\n", input.c_str(), opened.found.description.c_str(), name.c_str(), output.c_str(),
                shape_string(shape).c_str());
  return exit_ok;
}

}  // namespace nvfp4::cli
