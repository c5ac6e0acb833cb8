// tools/checkpoint_commands.hpp: the whole-checkpoint commands. `nvfp4 convert` (ModelOpt,
// compressed-tensors, GGUF, torchao into one another, bits kept), `nvfp4 pack` (quantize many
// weights, or an unquantized checkpoint, into one checkpoint with input scales and configs, with
// any project's quantizer flavor) and `nvfp4 diff` (where two checkpoints, or two flavors of one
// tensor, disagree).
#pragma once

#include <fnmatch.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli_support.hpp"
#include "nvfp4/io/checkpoint_diff.hpp"
#include "nvfp4/io/checkpoint_formats.hpp"
#include "nvfp4/scaling/quantizer_flavor.hpp"

namespace nvfp4::cli {

inline constexpr const char* convert_help = R"(usage: nvfp4 convert IN OUT --to FORMAT [options]

Converts a quantized checkpoint between ModelOpt, compressed-tensors, GGUF and torchao, keeping
every bit: the E2M1 codes, the block scale bytes and the FP32 tensor scales (a sense a format does
not store, e.g. compressed-tensors' 2688/amax for ModelOpt's amax/2688, is kept exactly in an
annotation when its fp32 reciprocal would not give it back). IN is a .safetensors or .gguf file or
a Hugging Face directory (model.safetensors or shards + index, config.json,
hf_quant_config.json); OUT likewise (a directory for ModelOpt / compressed-tensors unless it ends
in .safetensors). A weight the target cannot hold is refused by name, with the reason, before
anything is written (e.g. GGUF NVFP4 needs K % 64 == 0; compressed-tensors and torchao hold no
MXFP4). Load-time findings (sign bits in scale bytes, NaN scales, fused layers with different
tensor scales, ...) are printed as warnings.

options:
  --to FORMAT         modelopt | compressed-tensors | gguf | torchao
  --from FORMAT       the input's format (default: detected)
  --max-shard-size N  directory outputs: shard above N bytes (default 5 GiB)
  --no-swizzle        torchao: compact block scales (default: the 128x4 layout torchao uses)
  --hf-quant-config   ModelOpt .safetensors output: also write hf_quant_config.json beside it
  --strict            treat warnings as errors (nothing is written)
  --force             replace OUT if it exists (an OUT that is IN, or holds a file of IN, is
                      always refused)
  --quiet             print nothing on success, no warnings
  -h, --help          this help
)";

inline constexpr const char* pack_help = R"(usage: nvfp4 pack OUT INPUT... [options]

Quantizes many weights into one checkpoint. Each INPUT is NAME=FILE.npy (the weight of module NAME,
[out_features, in_features], float32/float16/bfloat16/float64), or an unquantized checkpoint (a
.safetensors file or a Hugging Face directory): its 2-D floating-point "*.weight" tensors are
quantized unless excluded (see --exclude, --include), every other tensor is kept.

options:
  --to FORMAT         modelopt (default) | compressed-tensors | gguf | torchao
  --format F          nvfp4 (default) | mxfp4 | mxfp8 (ModelOpt's MXFP8 layout: W.weight F8_E4M3,
                      W.weight_scale E8M0 as U8, quant_algo MXFP8) | fp8 (ModelOpt's FP8 layout:
                      W.weight F8_E4M3, W.weight_scale F32 = amax/448 by TE's current scaling,
                      W.input_scale = A/448 with --input-amax, quant_algo FP8); these two:
                      --to modelopt, flavor te
  --flavor F          whose quantizer: te (default, TransformerEngine) | modelopt | torchao |
                      compressed_tensors | ggml; each bit-exact with that project's own code
  --input-amax NAME=A the calibrated activation amax of module NAME: writes its input scale
                      (ModelOpt input_scale = A/2688 by the flavor's arithmetic; repeatable)
  --exclude PATTERN   leave matching modules unquantized (a module name, or a wildcard pattern
                      with * ? [...] as ModelOpt's exclude_modules; repeatable; --ignore is the
                      same); they are listed in hf_quant_config.json's exclude_modules / the
                      config's ignore
  --include PATTERN   quantize matching modules that are left out by default: the LM head and
                      the embeddings (*lm_head, *embed*, wte, wpe), as ModelOpt leaves them
  --fuse-scales       one tensor scale per group of modules an engine fuses into one GEMM
                      (q/k/v_proj, gate/up_proj, w1/w3 under one parent): the group's largest
                      amax, as llm-compressor writes and vLLM requires (NVFP4)
  --max-shard-size N  directory outputs: shard above N bytes (default 5 GiB)
  --hf-quant-config   ModelOpt .safetensors output: also write hf_quant_config.json beside it
  --force             replace OUT if it exists (an OUT that is an input is always refused)
  --quiet             print nothing on success, no warnings
  -h, --help          this help
Warnings (modules left out by default, fused layers with different scales) are printed once each.
)";

inline constexpr const char* diff_help = R"(usage: nvfp4 diff A B [options]
       nvfp4 diff X.npy --flavors F1,F2[,F3...] [options]

Compares two quantized checkpoints (any formats) weight by weight and block by block, or quantizes
one tensor with several quantizer flavors and compares each with the first. For every weight: how
many blocks differ in their effective scale (scale byte x tensor scale), how many in their codes,
how many elements and by how much in value, the worst blocks, and why: a different tensor scale,
the zero-block rule, a clamped scale, the block-scale formula, the tie rule (told only when the
source values are known, as with --flavors), the element scaling's arithmetic, the sign of zero.

options:
  --flavors LIST      te | modelopt | torchao | compressed_tensors | ggml, comma separated
  --format F          with --flavors: nvfp4 (default) | mxfp4 (flavors te and ggml)
  --bf16              with --flavors: round the input to bf16 first (what the peers quantize)
  --name W            compare only weight W
  --worst N           worst blocks to list per weight (default 10)
  --json FILE         also write the comparison as JSON (- for stdout, replacing the table)
  --force             replace the --json FILE if it exists
  --quiet             no load-time warnings
  -h, --help          this help
)";

namespace detail {

/// Whether `arg` names something that exists (then it is a checkpoint, even with a '=' in its
/// name); false, without throwing, when it cannot be a path at all (a component over 255 bytes,
/// longer than PATH_MAX, a loop of links): `NAME=FILE` with a long NAME is an assignment.
inline bool is_existing_path(const std::string& arg) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::symlink_status(arg, ec));
}

inline std::pair<std::string, std::string> split_assignment(const std::string& arg, const char* what) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    throw usage_error(std::string(what) + " must be NAME=VALUE, got '" + arg + "'");
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

inline io::checkpoint_format format_option(const arguments& args, const std::string& option, const std::string& fallback) {
  const std::string v = args.value(option, fallback);
  const auto f = io::parse_checkpoint_format(v);
  if (!f) throw usage_error("option " + option + " must be modelopt, compressed-tensors, gguf or torchao, got '" + v + "'");
  return *f;
}

inline quantizer_flavor flavor_option(const std::string& v) {
  const auto f = parse_quantizer_flavor(v);
  if (!f) throw usage_error("unknown quantizer flavor '" + v + "' (te, modelopt, torchao, compressed_tensors, ggml)");
  return *f;
}

/// Prints each distinct warning once (none with `quiet`); with `strict` any warning refuses the run.
inline void print_warnings(const std::vector<std::string>& warnings, bool strict, bool quiet = false) {
  print_warnings_once(warnings, quiet && !strict);
  if (strict && !warnings.empty())
    throw error(errc::malformed_file, std::to_string(warnings.size()) + " warning(s) and --strict: nothing written");
}

/// A matrix to quantize, as the dtype it came in (bf16 stays bf16: some flavors compute in it).
struct source_matrix {
  index_t rows = 0, cols = 0;
  std::vector<float> f32;
  std::vector<bf16> b16;
  bool is_bf16 = false;
};

inline source_matrix matrix_from_npy(const std::filesystem::path& path) {
  const io::npy_array array = io::read_npy(path);
  const io::npy_matrix_shape shape = io::matrix_shape_of(array);
  source_matrix m;
  m.rows = shape.rows;
  m.cols = shape.cols;
  m.f32 = io::to_float32(array);
  if (array.dtype == io::npy_dtype::bfloat16) {
    m.is_bf16 = true;
    for (float v : m.f32) m.b16.push_back(bf16::from_float(v));
  }
  return m;
}

inline source_matrix matrix_from_tensor(const io::safetensors_tensor& t) {
  source_matrix m;
  m.rows = t.shape[0];
  m.cols = t.shape[1];
  const std::size_t n = static_cast<std::size_t>(m.rows * m.cols);
  if (t.dtype == io::safetensors_dtype::bf16) {
    m.is_bf16 = true;
    m.b16.resize(n);
    for (std::size_t i = 0; i < n; ++i) m.b16[i] = bf16::from_bits(static_cast<std::uint16_t>(t.bytes[2 * i] | (t.bytes[2 * i + 1] << 8)));
  } else if (t.dtype == io::safetensors_dtype::f16) {
    m.f32.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      m.f32[i] = io::half_to_float(static_cast<std::uint16_t>(t.bytes[2 * i] | (t.bytes[2 * i + 1] << 8)));
  } else if (t.dtype == io::safetensors_dtype::f32) {
    m.f32.resize(n);
    std::memcpy(m.f32.data(), t.bytes.data(), n * 4);
  } else {
    m.f32.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, t.bytes.data() + 8 * i, 8);
      m.f32[i] = static_cast<float>(v);
    }
  }
  return m;
}

/// Quantizes m as `name` with the flavor and format; `shared_amax` (NVFP4) replaces m's own amax
/// in the tensor scale (--fuse-scales).
inline io::quantized_weight quantize_weight(const std::string& name, const source_matrix& m, quantizer_flavor flavor, bool mx,
                                            std::optional<float> shared_amax = std::nullopt) {
  auto run = [&](auto view) {
    return mx ? io::make_quantized_weight(name, quantize_mxfp4_flavor(view, flavor))
              : io::make_quantized_weight(name, quantize_nvfp4_flavor(view, flavor, shared_amax));
  };
  try {
    if (m.is_bf16) return run(matrix_view<const bf16>::row_major(m.b16.data(), m.rows, m.cols));
    return run(matrix_view<const float>::row_major(m.f32.data(), m.rows, m.cols));
  } catch (const error& e) {
    throw nvfp4::detail::with_context(e, "weight '" + name + "'");
  }
}

/// max |m| (throws non_finite_input naming the weight for NaN / Inf).
inline float amax_of(const source_matrix& m, const std::string& name) {
  try {
    if (m.is_bf16) return nvfp4::amax(matrix_view<const bf16>::row_major(m.b16.data(), m.rows, m.cols));
    return nvfp4::amax(matrix_view<const float>::row_major(m.f32.data(), m.rows, m.cols));
  } catch (const error& e) {
    throw nvfp4::detail::with_context(e, "weight '" + name + "'");
  }
}

/// m as an unquantized tensor (an excluded module's weight): BF16 when it came as bf16, else F32.
inline io::safetensors_tensor tensor_of(const std::string& name, const source_matrix& m) {
  io::safetensors_tensor t;
  t.name = name;
  t.shape = {m.rows, m.cols};
  if (m.is_bf16) {
    t.dtype = io::safetensors_dtype::bf16;
    t.bytes.resize(m.b16.size() * 2);
    for (std::size_t i = 0; i < m.b16.size(); ++i) {
      const std::uint16_t bits = m.b16[i].bits();
      t.bytes[2 * i] = static_cast<std::uint8_t>(bits & 0xFF);
      t.bytes[2 * i + 1] = static_cast<std::uint8_t>(bits >> 8);
    }
  } else {
    t.dtype = io::safetensors_dtype::f32;
    t.bytes.resize(m.f32.size() * 4);
    if (!m.f32.empty()) std::memcpy(t.bytes.data(), m.f32.data(), t.bytes.size());
  }
  return t;
}

/// The modules `pack` leaves unquantized unless --include names them: the LM head and the
/// embeddings, which ModelOpt's default configs leave in high precision too.
inline const std::vector<std::string>& default_excludes() {
  static const std::vector<std::string> patterns = {"*lm_head", "*embed*", "wte", "*.wte", "wpe", "*.wpe"};
  return patterns;
}

/// The input scale of calibrated activation amax `a`, by the flavor's tensor-scale arithmetic.
inline io::scale_pair input_scale_for(float a, quantizer_flavor flavor) {
  nvfp4::detail::require(std::isfinite(a) && a > 0.0f, errc::invalid_argument, "--input-amax must be a positive finite number");
  switch (flavor) {
    case quantizer_flavor::te: {
      const tensor_scale s = nvfp4_tensor_scale(a);
      return {s.decode, s.encode};
    }
    case quantizer_flavor::torchao:
      return io::scale_pair::from_decode(flavor_rules::torchao_per_tensor_scale(a));
    case quantizer_flavor::compressed_tensors:
      return io::scale_pair::from_encode(flavor_rules::compressed_tensors_global_scale(a, false));
    default:
      return io::scale_pair::from_decode(flavor_rules::modelopt_weight_scale_2(a));
  }
}

/// Whether --ignore skips `module`: an exact name, or a shell-style pattern (* ? [...]) matched
/// as ModelOpt matches its exclude_modules (Python's fnmatch; POSIX fnmatch here).
inline bool ignored(const std::string& module, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns)
    if (module == p || ::fnmatch(p.c_str(), module.c_str(), 0) == 0) return true;
  return false;
}

}  // namespace detail

inline int run_convert(int argc, char** argv) {
  const arguments args(argc, argv, 2, {"--to", "--from", "--max-shard-size"},
                       {"--no-swizzle", "--hf-quant-config", "--strict", "--quiet", "--force"});
  if (args.help()) {
    std::fputs(convert_help, stdout);
    return exit_ok;
  }
  args.expect_positional(2, 2);
  if (!args.has("--to")) throw usage_error("--to FORMAT is required");
  const auto to = detail::format_option(args, "--to", "");
  std::optional<io::checkpoint_format> from;
  if (args.has("--from")) from = detail::format_option(args, "--from", "");
  const std::string input = args.positional()[0], output = args.positional()[1];
  check_output(output, {input}, args.flag("--force"));
  const io::checkpoint_format source_format = from ? *from : io::detect_checkpoint_format(input);
  io::checkpoint c = io::read_checkpoint(input, source_format);
  detail::print_warnings(c.warnings, args.flag("--strict"), args.flag("--quiet"));
  io::checkpoint_write_options options;
  options.max_shard_bytes = args.unsigned_value("--max-shard-size", options.max_shard_bytes);
  options.torchao_swizzled_scales = !args.flag("--no-swizzle");
  options.hf_quant_config_beside_file = args.flag("--hf-quant-config");
  io::write_checkpoint(output, to, c, options);
  if (!args.flag("--quiet"))
    std::printf("%s (%s) -> %s (%s): %zu quantized weights, %zu other tensors\n", input.c_str(), io::checkpoint_format_name(source_format),
                output.c_str(), io::checkpoint_format_name(to), c.weights.size(), c.tensors.size());
  return exit_ok;
}

inline int run_pack(int argc, char** argv) {
  // --input-amax, --exclude (alias --ignore) and --include repeat: collect them by hand before the
  // common parser sees argv.
  std::vector<std::string> amax_args, exclude_args, include_args;
  std::vector<char*> rest;
  const std::pair<const char*, std::vector<std::string>*> repeated[] = {
      {"--input-amax", &amax_args}, {"--ignore", &exclude_args}, {"--exclude", &exclude_args}, {"--include", &include_args}};
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    bool taken = false;
    for (const auto& [option, list] : repeated) {
      if (i < 2 || taken) break;
      if (a == option) {
        if (i + 1 >= argc) throw usage_error("option " + a + " needs a value");
        list->push_back(argv[++i]);
        taken = true;
      } else if (a.rfind(std::string(option) + "=", 0) == 0) {
        list->push_back(a.substr(a.find('=') + 1));
        taken = true;
      }
    }
    if (!taken) rest.push_back(argv[i]);
  }
  const arguments args(static_cast<int>(rest.size()), rest.data(), 2, {"--to", "--format", "--flavor", "--max-shard-size"},
                       {"--hf-quant-config", "--quiet", "--force", "--fuse-scales"});
  if (args.help()) {
    std::fputs(pack_help, stdout);
    return exit_ok;
  }
  args.expect_positional(2, 1u << 20);
  const bool quiet = args.flag("--quiet");
  const auto to = detail::format_option(args, "--to", "modelopt");
  const std::string format = args.choice("--format", "nvfp4", {"nvfp4", "mxfp4", "mxfp8", "fp8"});
  const quantizer_flavor flavor = detail::flavor_option(args.value("--flavor", "te"));
  const bool mx = format == "mxfp4";
  const bool mxfp8 = format == "mxfp8", fp8 = format == "fp8";
  if (mxfp8 &&
      (flavor != quantizer_flavor::te || to != io::checkpoint_format::modelopt || args.flag("--fuse-scales") || !amax_args.empty()))
    throw usage_error(
        "--format mxfp8 writes ModelOpt's MXFP8 layout with the library's quantizer: no --flavor, --to, --fuse-scales "
        "or --input-amax (MXFP8 has no tensor or input scale)");
  if (fp8 && (flavor != quantizer_flavor::te || to != io::checkpoint_format::modelopt || args.flag("--fuse-scales")))
    throw usage_error("--format fp8 writes ModelOpt's per-tensor FP8 layout with TE's current scaling: no --flavor, --to or --fuse-scales");
  if (mx && flavor != quantizer_flavor::te && flavor != quantizer_flavor::ggml)
    throw usage_error("--format mxfp4 has the flavors te and ggml");
  if (mx && args.flag("--fuse-scales")) throw usage_error("--fuse-scales shares NVFP4's tensor scale; MXFP4 has none");
  std::map<std::string, float> input_amax;
  for (const auto& a : amax_args) {
    const auto [name, value] = detail::split_assignment(a, "--input-amax");
    char* end = nullptr;
    const float v = std::strtof(value.c_str(), &end);
    if (end != value.c_str() + value.size()) throw usage_error("--input-amax " + name + ": '" + value + "' is not a number");
    input_amax[name] = v;
  }
  const auto& positional = args.positional();
  std::vector<std::string> input_paths;
  for (std::size_t i = 1; i < positional.size(); ++i) {
    const std::string& in = positional[i];
    const auto eq = in.find('=');
    input_paths.push_back(eq != std::string::npos && !detail::is_existing_path(in) ? in.substr(eq + 1) : in);
  }
  check_output(positional[0], input_paths, args.flag("--force"));

  // Gather every weight to quantize (and every tensor to keep) first: --fuse-scales needs the
  // amax of a whole group before its first member is quantized.
  struct candidate {
    std::string module;
    detail::source_matrix matrix;
  };
  std::vector<candidate> candidates;
  io::checkpoint c;
  std::set<std::string> modules;
  std::vector<std::string> excluded, excluded_by_default;
  auto exclude = [&](const std::string& module) {
    if (detail::ignored(module, exclude_args)) return true;
    if (detail::ignored(module, detail::default_excludes()) && !detail::ignored(module, include_args)) {
      excluded_by_default.push_back(module);
      return true;
    }
    return false;
  };
  progress_bar progress("pack", static_cast<std::int64_t>(2 * (positional.size() - 1)), positional.size() > 2);
  for (std::size_t i = 1; i < positional.size(); ++i) {
    const std::string& in = positional[i];
    const auto eq = in.find('=');
    if (eq != std::string::npos && !detail::is_existing_path(in)) {
      const auto [name, file] = detail::split_assignment(in, "an input");
      if (!modules.insert(name).second) throw usage_error("module '" + name + "' is given twice");
      progress.set_stage(name);
      auto m = detail::matrix_from_npy(file);
      if (exclude(name)) {
        excluded.push_back(name);
        c.tensors.push_back(detail::tensor_of(name + ".weight", m));
      } else {
        candidates.push_back({name, std::move(m)});
      }
    } else {
      const io::safetensors_file source = io::read_safetensors_checkpoint(in);
      for (const auto& [k, v] : source.metadata) c.metadata.emplace(k, v);
      for (const auto& t : source.tensors) {
        const auto stem = io::name_before_suffix(t.name, ".weight");
        const bool is_weight = stem.has_value();
        const bool floating = t.dtype == io::safetensors_dtype::f32 || t.dtype == io::safetensors_dtype::bf16 ||
                              t.dtype == io::safetensors_dtype::f16 || t.dtype == io::safetensors_dtype::f64;
        const std::string module = stem.value_or(t.name);
        if (is_weight && floating && t.shape.size() == 2) {
          if (!modules.insert(module).second) throw usage_error("module '" + module + "' is given twice");
          if (exclude(module)) {
            excluded.push_back(module);
            c.tensors.push_back(t);
          } else {
            candidates.push_back({module, detail::matrix_from_tensor(t)});
          }
        } else {
          c.tensors.push_back(t);
        }
      }
    }
    progress.advance();
  }
  // exclude_modules: the patterns given, then each module left out that no given entry names.
  c.ignore = exclude_args;
  for (const auto& m : excluded)
    if (std::find(c.ignore.begin(), c.ignore.end(), m) == c.ignore.end() && !detail::ignored(m, exclude_args)) c.ignore.push_back(m);
  std::map<std::string, float> shared_amax;  // module -> its group's amax, with --fuse-scales
  if (args.flag("--fuse-scales")) {
    std::map<std::string, float> group_amax;
    std::map<std::string, std::string> group_of;
    std::map<std::string, const candidate*> group_first;
    for (const auto& cand : candidates) {
      const auto group = io::fused_group_of(cand.module);
      if (!group) continue;
      // An engine fuses the group into one GEMM along out_features: one in_features for all.
      const auto [first, inserted] = group_first.emplace(*group, &cand);
      if (!inserted && first->second->matrix.cols != cand.matrix.cols)
        throw error(errc::shape_mismatch, "--fuse-scales: '" + first->second->module + "' has " +
                                              std::to_string(first->second->matrix.cols) + " in_features but '" + cand.module + "' has " +
                                              std::to_string(cand.matrix.cols) +
                                              "; modules fused into one GEMM share their input, so they cannot share a tensor scale "
                                              "as one layer (nothing written)");
      const float a = detail::amax_of(cand.matrix, cand.module);
      group_of[cand.module] = *group;
      group_amax[*group] = std::max(group_amax[*group], a);
    }
    for (const auto& [module, group] : group_of) shared_amax[module] = group_amax[group];
  }
  std::size_t quantized = 0;
  for (const auto& cand : candidates) {
    progress.set_stage(cand.module);
    ++quantized;
    if (fp8) {  // ModelOpt's FP8 layout: E4M3 codes [N, K], weight_scale = the decode scale (TE: 1 / (448 / amax))
      fp8_tensor t;
      try {
        const auto& m = cand.matrix;
        t = m.is_bf16 ? quantize_fp8_current(matrix_view<const bf16>::row_major(m.b16.data(), m.rows, m.cols), fp8_format::e4m3)
                      : quantize_fp8_current(matrix_view<const float>::row_major(m.f32.data(), m.rows, m.cols), fp8_format::e4m3);
      } catch (const error& e) {
        throw nvfp4::detail::with_context(e, "weight '" + cand.module + "'");
      }
      c.tensors.push_back(
          {cand.module + ".weight", io::safetensors_dtype::f8_e4m3, {t.rows(), t.cols()}, {t.codes().begin(), t.codes().end()}});
      c.tensors.push_back(io::detail_modelopt::f32_tensor(cand.module + ".weight_scale", t.scale_inv()[0], {}));
      if (const auto a = input_amax.find(cand.module); a != input_amax.end()) {
        nvfp4::detail::require(std::isfinite(a->second) && a->second > 0.0f, errc::invalid_argument,
                               "--input-amax must be a positive finite number");
        c.tensors.push_back(io::detail_modelopt::f32_tensor(cand.module + ".input_scale", a->second / 448.0f, {}));
      }
      continue;
    }
    if (mxfp8) {  // the layout `nvfp4 quantize --format mxfp8` writes: E4M3 codes, E8M0 scales as U8
      io::safetensors_file one;
      try {
        const auto& m = cand.matrix;
        if (m.is_bf16)
          io::add_quantized_tensor(one, cand.module,
                                   quantize<nvfp4::mxfp8>(matrix_view<const bf16>::row_major(m.b16.data(), m.rows, m.cols)));
        else
          io::add_quantized_tensor(one, cand.module,
                                   quantize<nvfp4::mxfp8>(matrix_view<const float>::row_major(m.f32.data(), m.rows, m.cols)));
      } catch (const error& e) {
        throw nvfp4::detail::with_context(e, "weight '" + cand.module + "'");
      }
      for (auto& t : one.tensors) c.tensors.push_back(std::move(t));
      for (auto& [k, v] : one.metadata) c.metadata[k] = v;
      continue;
    }
    const auto it = shared_amax.find(cand.module);
    c.weights.push_back(detail::quantize_weight(cand.module, cand.matrix, flavor, mx,
                                                it == shared_amax.end() ? std::nullopt : std::optional<float>(it->second)));
  }
  for (const auto& [name, a] : input_amax) {
    if (fp8 && std::any_of(candidates.begin(), candidates.end(), [&](const auto& cand) { return cand.module == name; })) continue;
    auto it = std::find_if(c.weights.begin(), c.weights.end(), [&](const io::quantized_weight& w) { return w.name == name; });
    if (it == c.weights.end()) throw usage_error("--input-amax names module '" + name + "', which is not quantized here");
    it->input_scale = detail::input_scale_for(a, flavor);
  }
  if (quantized == 0) throw usage_error("nothing to quantize");
  if (mxfp8 || fp8) {
    nlohmann::ordered_json q = {{"quant_algo", mxfp8 ? "MXFP8" : "FP8"}, {"kv_cache_quant_algo", nullptr}};
    if (mxfp8) q["group_size"] = 32;
    q["exclude_modules"] = c.ignore;
    c.hf_quant_config = {{"producer",
                          {{"name", "nvfp4"},
                           {"version", std::to_string(NVFP4_VERSION_MAJOR) + "." + std::to_string(NVFP4_VERSION_MINOR) + "." +
                                           std::to_string(NVFP4_VERSION_PATCH)}}},
                         {"quantization", q}};
  }
  if (!excluded_by_default.empty()) {
    std::string list;
    for (const auto& m : excluded_by_default) list += (list.empty() ? "" : ", ") + m;
    c.warnings.push_back("left unquantized by default (the LM head and embeddings, as ModelOpt leaves them): " + list +
                         "; --include PATTERN quantizes them");
  }
  io::check_fused_scales(c, c.warnings);
  if (!args.flag("--fuse-scales") &&
      std::any_of(c.warnings.begin(), c.warnings.end(), [](const std::string& w) { return w.rfind("fused layers", 0) == 0; }))
    c.warnings.push_back("--fuse-scales gives each fused group one tensor scale (what vLLM needs)");
  print_warnings_once(c.warnings, quiet);
  c.warnings.clear();
  io::checkpoint_write_options options;
  options.max_shard_bytes = args.unsigned_value("--max-shard-size", options.max_shard_bytes);
  options.hf_quant_config_beside_file = args.flag("--hf-quant-config");
  io::write_checkpoint(positional[0], to, c, options);
  progress.finish();
  if (!quiet)
    std::printf("%s: %zu %s weights (flavor %s), %zu other tensors, %s\n", positional[0].c_str(), quantized, format.c_str(),
                std::string(quantizer_flavor_name(flavor)).c_str(),
                c.tensors.size() - (mxfp8 || fp8 ? 2 * quantized + (fp8 ? input_amax.size() : 0) : 0), io::checkpoint_format_name(to));
  return exit_ok;
}

inline int run_diff(int argc, char** argv) {
  const arguments args(argc, argv, 2, {"--flavors", "--format", "--name", "--worst", "--json"}, {"--bf16", "--force", "--quiet"});
  if (args.help()) {
    std::fputs(diff_help, stdout);
    return exit_ok;
  }
  io::diff_options options;
  options.worst = static_cast<std::size_t>(args.unsigned_value("--worst", 10));
  const std::string json_path = args.value("--json", "");
  if (!json_path.empty() && json_path != "-") check_output(json_path, args.positional(), args.flag("--force"));
  nlohmann::ordered_json json;
  std::string table;
  if (args.has("--flavors")) {
    args.expect_positional(1, 1);
    std::vector<quantizer_flavor> flavors;
    std::string list = args.value("--flavors", "");
    for (std::size_t start = 0; start <= list.size();) {
      const auto comma = list.find(',', start);
      flavors.push_back(detail::flavor_option(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (flavors.size() < 2) throw usage_error("--flavors needs at least two flavors");
    const bool mx = args.choice("--format", "nvfp4", {"nvfp4", "mxfp4"}) == "mxfp4";
    auto m = detail::matrix_from_npy(args.positional()[0]);
    if (args.flag("--bf16") && !m.is_bf16) {
      m.is_bf16 = true;
      for (auto& v : m.f32) v = bf16::from_float(v).to_float();
      for (float v : m.f32) m.b16.push_back(bf16::from_float(v));
    }
    const std::string name = args.value("--name", std::filesystem::path(args.positional()[0]).stem().string());
    const auto first = detail::quantize_weight(name, m, flavors[0], mx);
    json["source"] = args.positional()[0];
    json["comparisons"] = nlohmann::ordered_json::array();
    for (std::size_t k = 1; k < flavors.size(); ++k) {
      const auto other = detail::quantize_weight(name, m, flavors[k], mx);
      const auto d = io::diff_weights(first, other, m.f32.data(), options);
      const std::string a = std::string(quantizer_flavor_name(flavors[0])), b = std::string(quantizer_flavor_name(flavors[k]));
      table += io::format_table(d, a, b);
      auto j = io::to_json(d);
      j["a"] = a;
      j["b"] = b;
      json["comparisons"].push_back(j);
    }
  } else {
    args.expect_positional(2, 2);
    const io::detected_file found_a = io::require_readable(args.positional()[0], false);
    const io::detected_file found_b = io::require_readable(args.positional()[1], false);
    io::checkpoint a = io::read_checkpoint(args.positional()[0], found_a.format);
    io::checkpoint b = io::read_checkpoint(args.positional()[1], found_b.format);
    detail::print_warnings(a.warnings, false, args.flag("--quiet"));
    detail::print_warnings(b.warnings, false, args.flag("--quiet"));
    if (json_path != "-")
      table =
          "A: " + args.positional()[0] + " (" + found_a.description + ")\nB: " + args.positional()[1] + " (" + found_b.description + ")\n";
    if (args.has("--name")) {
      const std::string only = args.value("--name", "");
      std::erase_if(a.weights, [&](const io::quantized_weight& w) { return w.name != only; });
      std::erase_if(b.weights, [&](const io::quantized_weight& w) { return w.name != only; });
      a.tensors.clear();
      b.tensors.clear();
      if (a.weights.empty() && b.weights.empty())
        throw error(errc::invalid_argument, "no quantized weight '" + only + "' in either checkpoint");
    }
    const auto d = io::diff_checkpoints(a, b, options);
    table += io::format_table(d, args.positional()[0], args.positional()[1]);
    json = io::to_json(d);
    json["format_a"] = found_a.description;
    json["format_b"] = found_b.description;
  }
  if (json_path == "-") {
    std::printf("%s\n", json.dump(2).c_str());
  } else {
    std::fputs(table.c_str(), stdout);
    if (!json_path.empty()) {
      const std::string text = json.dump(2) + "\n";
      io::write_file_atomically(json_path, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
    }
  }
  return exit_ok;
}

}  // namespace nvfp4::cli
