// nvfp4/io/checkpoint_checks.hpp: the checks every checkpoint reader runs on load and every
// writer before it writes (io/checkpoint_model.hpp's weights and configs): byte counts, invalid or
// suspicious scales, configs that do not describe the weights, fused siblings' tensor scales.
#pragma once

#include <fnmatch.h>
#include <nlohmann/json.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e8m0.hpp"
#include "nvfp4/formats/packed_fp4.hpp"
#include "nvfp4/io/checkpoint_model.hpp"
#include "nvfp4/io/detail/checkpoint_bits.hpp"
#include "nvfp4/io/json_limits.hpp"

namespace nvfp4::io {

/// Checks one weight on load: byte counts against its shape (throws malformed_file naming `where`
/// and the tensor), then adds a warning for each suspicious value: UE4M3 scale bytes with the
/// sign bit set (read as their low 7 bits by the GPU, kept here) or 0x7F (NaN), E8M0 0xFF (NaN),
/// a non-zero padding nibble at the end of an odd-length row, a tensor scale that is not a
/// positive finite number.
inline void check_weight_on_load(const quantized_weight& w, const std::string& where, std::vector<std::string>& warnings) {
  using detail_checkpoint_model::fail;
  const std::string what = "tensor '" + w.name + "'";
  if (w.rows < 0 || w.cols <= 0) fail(errc::malformed_file, where, what + " has an empty or negative shape");
  const auto expect = [&](const std::vector<std::uint8_t>& bytes, index_t cols, const char* part) {
    if (static_cast<std::uint64_t>(bytes.size()) != static_cast<std::uint64_t>(w.rows) * static_cast<std::uint64_t>(cols))
      fail(errc::malformed_file, where,
           what + ": " + part + ": " + std::to_string(bytes.size()) + " bytes, the shape [" + std::to_string(w.rows) + ", " +
               std::to_string(w.cols) + "] needs " + std::to_string(w.rows) + " x " + std::to_string(cols));
  };
  expect(w.data, w.data_cols(), "packed data");
  expect(w.scales, w.scale_cols(), "block scales");
  std::size_t sign_bits = 0, nans = 0;
  for (auto b : w.scales) {
    if (w.format == weight_format::nvfp4) {
      sign_bits += (b & 0x80) != 0;
      nans += (b & 0x7F) == 0x7F;
    } else {
      nans += b == 0xFF;
    }
  }
  if (sign_bits)
    warnings.push_back(what + ": " + std::to_string(sign_bits) +
                       " UE4M3 block scale bytes have the sign bit set (a GPU reads them as their low 7 bits; "
                       "llama.cpp's converter strips it)");
  if (nans)
    warnings.push_back(what + ": " + std::to_string(nans) + " block scale bytes are NaN (" +
                       (w.format == weight_format::nvfp4 ? "0x7F" : "0xFF") + "); their blocks decode to NaN");
  if (w.cols % 2) {
    std::size_t tails = 0;
    for (index_t r = 0; r < w.rows; ++r) tails += (w.data[static_cast<std::size_t>(r * w.data_cols() + w.data_cols() - 1)] & 0xF0) != 0;
    if (tails) warnings.push_back(what + ": " + std::to_string(tails) + " rows have a non-zero padding nibble after the last element");
  }
  auto check_scale = [&](const scale_pair& s, const char* name) {
    if (!(std::isfinite(s.decode) && s.decode > 0.0f && std::isfinite(s.encode) && s.encode > 0.0f))
      warnings.push_back(what + ": " + name + " is not a positive finite number (decode " + detail_checkpoint_model::float_text(s.decode) +
                         ", encode " + detail_checkpoint_model::float_text(s.encode) + ")");
  };
  if (w.format == weight_format::nvfp4) check_scale(w.weight_scale, "the weight's tensor scale");
  if (w.input_scale) check_scale(*w.input_scale, "the input scale");
}

/// Throws malformed_file, naming `where` and the weight, for what every reader refuses in it (the
/// checks of io/quantized_checkpoint.hpp's dequantize_tensor without accept_invalid_scales, which
/// inspect and dequantize run on every format): a block scale byte that is NaN or has its sign bit
/// set (UE4M3 0x7F / 0x80-0xFF, E8M0 0xFF), an NVFP4 tensor scale whose decode sense is NaN, Inf or
/// negative, values whose dequantization overflows float. Every writer runs it on each weight
/// before anything is written, so nothing is written that its readers refuse (issue 39: convert
/// wrote NaN and sign-bit scales with a warning; inspect of the output then exited 18).
inline void require_readable_weight(const quantized_weight& w, const std::string& where) {
  using detail_checkpoint_model::fail;
  const std::string what = "weight '" + w.name + "'";
  const bool nv = w.format == weight_format::nvfp4;
  const index_t scale_cols = w.scale_cols();
  const std::string remedy =
      "; the readers refuse it (inspect / dequantize --accept-invalid-scales read such a source), so it is not written";
  for (std::size_t i = 0; i < w.scales.size(); ++i) {
    const std::uint8_t b = w.scales[i];
    if (nv ? (b & 0x80) != 0 || (b & 0x7F) == 0x7F : b == 0xFF)
      fail(errc::malformed_file, where,
           what + ": block scale (" + std::to_string(static_cast<index_t>(i) / scale_cols) + ", " +
               std::to_string(static_cast<index_t>(i) % scale_cols) + ") is byte " + std::to_string(b) +
               ((nv ? (b & 0x7F) == 0x7F : true) ? " (NaN)" : " (sign bit set)") + remedy);
  }
  const float decode = nv ? w.weight_scale.decode : 1.0f;
  if (!std::isfinite(decode) || std::signbit(decode))
    fail(errc::malformed_file, where,
         what + ": the tensor scale (decode sense) is " + detail_checkpoint_model::float_text(decode) + ", not a finite number >= 0" +
             remedy);
  // Values overflow only where block scale x 6 (the largest E2M1 magnitude) x decode reaches
  // float's top: only then is each such block's largest element looked at, as the reader
  // computes it ((element x scale) x decode, in float).
  float largest_scale = 0.0f;
  for (const std::uint8_t b : w.scales)
    largest_scale = std::max(largest_scale, nv ? ue4m3::from_bits(b).to_float() : e8m0::from_bits(b).to_float());
  if (static_cast<double>(largest_scale) * 6.0 * decode < static_cast<double>(FLT_MAX)) return;
  const index_t block = w.block_cols();
  for (index_t r = 0; r < w.rows; ++r)
    for (index_t c = 0; c < w.cols; ++c) {
      const std::uint8_t sb = w.scales[static_cast<std::size_t>(r * scale_cols + c / block)];
      const float scale = nv ? ue4m3::from_bits(sb).to_float() : e8m0::from_bits(sb).to_float();
      const float value = e2m1::from_bits(detail_checkpoint_model::packed_code(w.data, w.cols, r, c)).to_float() * scale * decode;
      if (!std::isfinite(value))
        fail(errc::overflow, where,
             what + ": dequantized element (" + std::to_string(r) + ", " + std::to_string(c) +
                 ") overflows float (element times its scales is beyond float's range)" + remedy);
    }
}

/// Throws, naming `where`, for a configuration that does not describe the weights it goes with (a
/// reader refuses it, a writer does not write it; issue 39: a GGUF annotation's hf_quant_config
/// saying MXFP8 with group_size 7 was copied onto NVFP4 weights, an exclude_modules entry naming a
/// module stored quantized went into compressed-tensors' ignore list):
/// - hf_quant_config (when not null): its "quantization" object must name the format of every
///   weight (quant_algo NVFP4 / MXFP4; any other, e.g. MXFP8 or FP8, only with no NVFP4 / MXFP4
///   weight), or, for MIXED_PRECISION, each weight as its quantized_layers entry lists it (else
///   malformed_file); NVFP4 with group_size 16, MXFP4 with 32 (else unsupported);
/// - ignore (exclude_modules): no entry may name, exactly or as a shell pattern (* ? [...], as
///   ModelOpt matches it), a weight stored quantized (malformed_file); compressed-tensors' "re:"
///   regular expressions are not evaluated.
inline void check_configs(const checkpoint& c, const std::string& where) {
  using detail_checkpoint_model::fail;
  if (!c.hf_quant_config.is_null()) {
    const std::string config = where + ": hf_quant_config";
    const auto q = c.hf_quant_config.find("quantization");
    if (q == c.hf_quant_config.end() || !q->is_object()) throw error(errc::malformed_file, config + ": no \"quantization\" object");
    const auto algo_it = q->find("quant_algo");
    const std::string algo = algo_it != q->end() && algo_it->is_string() ? algo_it->get<std::string>() : "?";
    if (algo != "NVFP4" && algo != "MXFP4" && algo != "MIXED_PRECISION") {
      // (MXFP8, FP8, ...: the weights of such a checkpoint are plain tensors here, none quantized.)
      if (!c.weights.empty())
        throw error(errc::malformed_file, config + " says quant_algo " + clip_for_message(algo) + ", but weight '" + c.weights[0].name +
                                              "' is " + weight_format_name(c.weights[0].format) +
                                              ": the config does not describe these weights");
    }
    const auto group_size = [&](const nlohmann::ordered_json& o, int expected) -> std::string {
      const auto g = o.find("group_size");
      if (g == o.end() || (g->is_number_integer() && g->get<std::int64_t>() == expected)) return "";
      return json_for_message(*g);
    };
    if (algo == "NVFP4" || algo == "MXFP4") {
      const bool nv = algo == "NVFP4";
      if (const std::string g = group_size(*q, nv ? 16 : 32); !g.empty())
        throw error(errc::unsupported, config + ": " + algo + " group_size " + g + " (" + (nv ? "16" : "32") + " is the format)");
      for (const auto& w : c.weights)
        if ((w.format == weight_format::nvfp4) != nv)
          throw error(errc::malformed_file, config + " says quant_algo " + algo + ", but weight '" + w.name + "' is " +
                                                weight_format_name(w.format) + ": the config does not describe these weights");
    } else if (const auto layers = q->find("quantized_layers"); algo == "MIXED_PRECISION" && layers != q->end() && layers->is_object()) {
      std::unordered_map<std::string_view, const quantized_weight*> by_name;
      for (const auto& w : c.weights) by_name.emplace(w.name, &w);
      for (const auto& [layer, entry] : layers->items()) {
        const auto found = by_name.find(layer);
        if (found == by_name.end() || !entry.is_object()) continue;
        const auto layer_algo_it = entry.find("quant_algo");
        const std::string layer_algo = layer_algo_it != entry.end() && layer_algo_it->is_string() ? layer_algo_it->get<std::string>() : "?";
        const bool nv = found->second->format == weight_format::nvfp4;
        if (layer_algo != (nv ? "NVFP4" : "MXFP4") || !group_size(entry, nv ? 16 : 32).empty())
          throw error(errc::malformed_file, config + ": quantized_layers says " + clip_for_message(layer) + " is " +
                                                json_for_message(entry) + ", but it is stored as " +
                                                weight_format_name(found->second->format) + " with groups of " +
                                                std::to_string(found->second->block_cols()));
      }
    }
  }
  if (c.ignore.empty() || c.weights.empty()) return;
  std::unordered_set<std::string_view> quantized;
  for (const auto& w : c.weights) quantized.insert(w.name);
  const auto refuse = [&](const std::string& entry, const std::string& weight) {
    throw error(errc::malformed_file, where + ": the ignore list (exclude_modules) names '" + clip_for_message(entry) + "', but " +
                                          (entry == weight ? "that module" : "module '" + weight + "'") +
                                          " is stored quantized: an engine would run it unquantized on these bytes");
  };
  std::size_t patterns = 0;
  for (const auto& entry : c.ignore) {
    if (quantized.contains(entry)) refuse(entry, entry);
    if (entry.rfind("re:", 0) == 0 || entry.find_first_of("*?[") == std::string::npos) continue;
    // Each pattern against each weight: bounded, so a file cannot make this quadratic in time.
    if (++patterns * c.weights.size() > 100'000'000)
      throw error(errc::unsupported, where + ": the ignore list has too many shell patterns to check against " +
                                         std::to_string(c.weights.size()) + " quantized weights");
    for (const auto& w : c.weights)
      if (::fnmatch(entry.c_str(), w.name.c_str(), 0) == 0) refuse(entry, w.name);
  }
}

/// The fused group of a module, as "<parent>#<n>" (the siblings q/k/v_proj, gate/up_proj or
/// w1/w3 under one parent share it), or nothing for a module no engine fuses.
inline std::optional<std::string> fused_group_of(const std::string& module) {
  static const std::vector<std::vector<std::string>> groups = {{"q_proj", "k_proj", "v_proj"}, {"gate_proj", "up_proj"}, {"w1", "w3"}};
  const auto dot = module.rfind('.');
  const std::string parent = dot == std::string::npos ? "" : module.substr(0, dot);
  const std::string leaf = dot == std::string::npos ? module : module.substr(dot + 1);
  for (std::size_t g = 0; g < groups.size(); ++g)
    if (std::find(groups[g].begin(), groups[g].end(), leaf) != groups[g].end()) return parent + "#" + std::to_string(g);
  return std::nullopt;
}

/// Fused-layer check: modules that inference engines run as one GEMM (q/k/v_proj -> qkv,
/// gate/up_proj -> gate_up, w1/w3 of an expert) need one weight tensor scale. Adds a warning for
/// each such group of siblings whose scales differ (vLLM, for one, then uses the largest and
/// rescales or warns).
inline void check_fused_scales(const checkpoint& c, std::vector<std::string>& warnings) {
  std::map<std::string, std::vector<const quantized_weight*>> by_group;
  for (const auto& w : c.weights) {
    if (w.format != weight_format::nvfp4) continue;
    if (const auto group = fused_group_of(w.name)) by_group[*group].push_back(&w);
  }
  for (const auto& [key, members] : by_group) {
    if (members.size() < 2) continue;
    bool differ = false;
    for (const auto* m : members) differ |= m->weight_scale.decode != members[0]->weight_scale.decode;
    if (!differ) continue;
    std::string list;
    for (const auto* m : members)
      list.append(list.empty() ? "" : ", ").append(m->name).append(" ").append(detail_checkpoint_model::float_text(m->weight_scale.decode));
    warnings.push_back("fused layers with different weight tensor scales (" + list +
                       "): an engine that runs them as one GEMM must pick one scale");
  }
}

}  // namespace nvfp4::io
