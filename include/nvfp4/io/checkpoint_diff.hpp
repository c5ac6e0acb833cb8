// nvfp4/io/checkpoint_diff.hpp: where two quantizations of the same weights disagree, block by
// block: two checkpoints (any formats), or two quantizer flavors of one tensor. Counts the blocks
// whose effective scale differs and those whose codes differ, how far apart the dequantized values
// are, and names why, from the bits (and from the source values when they are given): a different
// tensor scale, the zero-block rule, a clamped or flushed block scale, the block-scale formula, the
// tie rule, the arithmetic of the element scaling, the sign of zero. Rendered as a table or JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "nvfp4/formats/e2m1.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e8m0.hpp"
#include "nvfp4/io/checkpoint.hpp"

namespace nvfp4::io {

/// Why a block differs, most telling first.
enum class diff_reason {
  zero_block,       ///< an all-zero block got different scales (e.g. ModelOpt's 1.0 vs TE's 0)
  scale_clamp,      ///< a block scale clamped (448, torchao's 2^-6 floor), flushed to 0, or subnormal
                    ///< (UE4M3 below 2^-6 keeps fewer bits: ggml's scales without a tensor scale)
  tensor_scale,     ///< the tensor scales differ, so every effective block scale moves with them
  scale_formula,    ///< same tensor scale, the block scales differ by the scale formula's rounding
  tie_rule,         ///< the scaled value sat exactly between two E2M1 values (source needed)
  element_scaling,  ///< division vs multiply by a reciprocal put a near-tie on different sides
  rounding,         ///< codes one step apart, no source to tell a tie from scaling arithmetic
  sign_of_zero,     ///< +0 vs -0 codes (the same value)
  other,            ///< codes further apart than one step with the same effective scale
};

constexpr const char* diff_reason_name(diff_reason r) {
  switch (r) {
    case diff_reason::zero_block:
      return "zero-block scale";
    case diff_reason::scale_clamp:
      return "scale clamp / underflow";
    case diff_reason::tensor_scale:
      return "tensor scale";
    case diff_reason::scale_formula:
      return "block-scale formula";
    case diff_reason::tie_rule:
      return "tie rule";
    case diff_reason::element_scaling:
      return "element scaling arithmetic";
    case diff_reason::rounding:
      return "rounding step";
    case diff_reason::sign_of_zero:
      return "sign of zero";
    case diff_reason::other:
      return "other";
  }
  return "?";
}

/// One differing block.
struct block_difference {
  index_t row = 0;
  index_t block = 0;  ///< block column: elements [block * size, (block + 1) * size)
  std::uint8_t scale_a = 0, scale_b = 0;
  int codes_differ = 0;     ///< elements whose codes differ
  double max_abs_diff = 0;  ///< largest |x̂_a - x̂_b| in the block
  double block_max = 0;     ///< largest |x̂_a| in the block (for scale)
  diff_reason reason = diff_reason::other;
};

/// The comparison of two versions of one weight.
struct tensor_difference {
  std::string name;
  std::string format;
  index_t rows = 0, cols = 0;
  std::int64_t blocks = 0;
  float decode_a = 1, decode_b = 1;  ///< tensor scales (decode sense)
  bool tensor_scale_differs = false;
  std::int64_t blocks_scale_differ = 0;  ///< effective block scale (byte x tensor scale) differs by more than 1e-6
  std::int64_t scale_bytes_differ = 0;   ///< scale bytes differ (not comparable if the tensor scale differs)
  std::int64_t blocks_codes_differ = 0;  ///< same effective scale, some codes differ
  std::int64_t codes_differ = 0;         ///< elements with different codes (any block)
  std::int64_t values_differ = 0;        ///< elements whose dequantized values differ
  double max_abs_diff = 0;
  double mean_abs_diff = 0;  ///< over all elements
  double rms_a = 0;          ///< RMS of the dequantized A (to read the errors against)
  std::map<diff_reason, std::int64_t> blocks_by_reason;
  std::map<diff_reason, std::int64_t> elements_by_reason;
  std::vector<block_difference> worst;  ///< the blocks with the largest max_abs_diff
};

/// The comparison of two checkpoints.
struct checkpoint_difference {
  std::vector<tensor_difference> weights;
  std::vector<std::string> only_in_a, only_in_b;
  std::vector<std::string> incomparable;    ///< same name, different format or shape (with why)
  std::vector<std::string> tensors_differ;  ///< other tensors with different bytes
  std::int64_t tensors_same = 0;
};

/// How much detail to keep.
struct diff_options {
  std::size_t worst = 10;  ///< how many worst blocks per tensor
};

namespace detail_diff {

inline bool is_midpoint(double v) {
  static constexpr double mids[] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
  for (double m : mids)
    if (v == m) return true;
  return false;
}

inline double scale_value(const quantized_weight& w, std::uint8_t byte) {
  if (w.format == weight_format::nvfp4) return static_cast<double>(ue4m3::from_bits(byte & 0x7F).to_float()) * w.weight_scale.decode;
  return e8m0::from_bits(byte).to_float();
}

inline int magnitude_step(std::uint8_t code) { return code & 0x7; }

}  // namespace detail_diff

/// Compares two versions of one weight (same format and shape; invalid_argument otherwise).
/// `source` (nullable): the values both were quantized from, row-major [rows, cols]; with it a
/// one-step code difference is told apart as a tie (the scaled value exactly between two E2M1
/// values) or as element-scaling arithmetic.
inline tensor_difference diff_weights(const quantized_weight& a, const quantized_weight& b, const float* source = nullptr,
                                      const diff_options& options = {}) {
  using namespace detail_diff;
  detail::require(a.format == b.format && a.rows == b.rows && a.cols == b.cols, errc::invalid_argument,
                  "diff: '" + a.name + "' is " + weight_format_name(a.format) + " [" + std::to_string(a.rows) + ", " +
                      std::to_string(a.cols) + "] in A and " + weight_format_name(b.format) + " [" + std::to_string(b.rows) + ", " +
                      std::to_string(b.cols) + "] in B");
  tensor_difference d;
  d.name = a.name;
  d.format = weight_format_name(a.format);
  d.rows = a.rows;
  d.cols = a.cols;
  d.decode_a = a.weight_scale.decode;
  d.decode_b = b.weight_scale.decode;
  d.tensor_scale_differs = std::bit_cast<std::uint32_t>(d.decode_a) != std::bit_cast<std::uint32_t>(d.decode_b);
  const index_t bs = a.block_cols(), nb = a.scale_cols();
  d.blocks = static_cast<std::int64_t>(a.rows) * nb;
  double sum_abs = 0, sum_sq = 0;
  std::vector<block_difference> diffs;
  for (index_t r = 0; r < a.rows; ++r)
    for (index_t blk = 0; blk < nb; ++blk) {
      const std::size_t si = static_cast<std::size_t>(r * nb + blk);
      block_difference bd;
      bd.row = r;
      bd.block = blk;
      bd.scale_a = a.scales[si];
      bd.scale_b = b.scales[si];
      const double sa = scale_value(a, bd.scale_a), sb = scale_value(b, bd.scale_b);
      // Effective scales a few ulp apart (equal bytes, tensor scales one rounding apart) are the
      // same scale for the codes' purpose; the tensor-level line reports the tensor scales.
      const bool scale_differs = !(std::fabs(sa - sb) <= 1e-6 * std::fabs(sa) || (std::isnan(sa) && std::isnan(sb)));
      d.scale_bytes_differ += bd.scale_a != bd.scale_b;
      bool all_zero = true, any_code = false;
      std::map<diff_reason, int> element_reasons;
      for (index_t c = blk * bs; c < std::min<index_t>((blk + 1) * bs, a.cols); ++c) {
        const std::uint8_t ca = detail_checkpoint_model::packed_code(a.data, a.cols, r, c),
                           cb = detail_checkpoint_model::packed_code(b.data, b.cols, r, c);
        const double va = e2m1::from_bits(ca).to_float() * sa, vb = e2m1::from_bits(cb).to_float() * sb;
        const double diff = std::fabs(va - vb);
        sum_abs += std::isfinite(diff) ? diff : 0.0;
        sum_sq += std::isfinite(va) ? va * va : 0.0;
        bd.max_abs_diff = std::max(bd.max_abs_diff, std::isfinite(diff) ? diff : 0.0);
        bd.block_max = std::max(bd.block_max, std::isfinite(va) ? std::fabs(va) : 0.0);
        d.values_differ += va != vb && !(std::isnan(va) && std::isnan(vb));
        if (source)
          all_zero = all_zero && source[static_cast<std::size_t>(r * a.cols + c)] == 0.0f;
        else
          all_zero = all_zero && magnitude_step(ca) == 0 && magnitude_step(cb) == 0;
        if (ca == cb) continue;
        any_code = true;
        ++bd.codes_differ;
        diff_reason why = diff_reason::other;
        if (magnitude_step(ca) == 0 && magnitude_step(cb) == 0) {
          why = diff_reason::sign_of_zero;
        } else if (!scale_differs && (ca & 0x8) == (cb & 0x8) && std::abs(magnitude_step(ca) - magnitude_step(cb)) == 1) {
          why = diff_reason::rounding;
          if (source && sa > 0) {
            const double scaled = std::fabs(static_cast<double>(source[static_cast<std::size_t>(r * a.cols + c)]) / sa);
            why = is_midpoint(scaled) ? diff_reason::tie_rule : diff_reason::element_scaling;
          }
        }
        ++element_reasons[why];
      }
      d.codes_differ += bd.codes_differ;
      if (!scale_differs && !any_code) continue;
      if (scale_differs) {
        ++d.blocks_scale_differ;
        // 0x7E is 448, 0x08 torchao's floor 2^-6, exponent field 0 a flushed or subnormal scale.
        const auto clamped = [&](const quantized_weight& w, std::uint8_t s) {
          return w.format == weight_format::nvfp4 ? ((s & 0x7F) == 0x7E || (s & 0x7F) == 0x08 || (s & 0x78) == 0) : (s == 0 || s == 0xFE);
        };
        bd.reason = all_zero                                             ? diff_reason::zero_block
                    : (clamped(a, bd.scale_a) || clamped(b, bd.scale_b)) ? diff_reason::scale_clamp
                    : d.tensor_scale_differs                             ? diff_reason::tensor_scale
                                                                         : diff_reason::scale_formula;
      } else {
        ++d.blocks_codes_differ;
        // The block's reason: the most telling of its elements' (lowest enum value).
        bd.reason = element_reasons.begin()->first;
        for (const auto& [why, n] : element_reasons) d.elements_by_reason[why] += n;
      }
      ++d.blocks_by_reason[bd.reason];
      diffs.push_back(bd);
    }
  const double n = static_cast<double>(std::max<std::int64_t>(1, static_cast<std::int64_t>(a.rows) * a.cols));
  d.mean_abs_diff = sum_abs / n;
  d.rms_a = std::sqrt(sum_sq / n);
  for (const auto& bd : diffs) d.max_abs_diff = std::max(d.max_abs_diff, bd.max_abs_diff);
  std::stable_sort(diffs.begin(), diffs.end(), [](const block_difference& x, const block_difference& y) {
    return x.max_abs_diff != y.max_abs_diff ? x.max_abs_diff > y.max_abs_diff : (x.row != y.row ? x.row < y.row : x.block < y.block);
  });
  if (diffs.size() > options.worst) diffs.resize(options.worst);
  d.worst = std::move(diffs);
  return d;
}

/// Compares two checkpoints weight by weight (by module name), and their other tensors by bytes.
inline checkpoint_difference diff_checkpoints(const checkpoint& a, const checkpoint& b, const diff_options& options = {}) {
  checkpoint_difference out;
  // Name indexes built once: a lookup per entry in the vectors would be quadratic in the number
  // of tensors (a checkpoint may hold a million).
  const auto index = [](const auto& items) {
    std::unordered_map<std::string_view, const std::remove_cvref_t<decltype(items[0])>*> by_name;
    by_name.reserve(items.size());
    for (const auto& item : items) by_name.emplace(item.name, &item);
    return by_name;
  };
  const auto lookup = [](const auto& by_name, const std::string& name) {
    const auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second;
  };
  const auto a_weights = index(a.weights), b_weights = index(b.weights);
  const auto a_tensors = index(a.tensors), b_tensors = index(b.tensors);
  for (const auto& wa : a.weights) {
    const auto* wb = lookup(b_weights, wa.name);
    if (!wb) {
      out.only_in_a.push_back(wa.name);
      continue;
    }
    if (wa.format != wb->format || wa.rows != wb->rows || wa.cols != wb->cols) {
      out.incomparable.push_back(wa.name + ": " + weight_format_name(wa.format) + " [" + std::to_string(wa.rows) + ", " +
                                 std::to_string(wa.cols) + "] vs " + weight_format_name(wb->format) + " [" + std::to_string(wb->rows) +
                                 ", " + std::to_string(wb->cols) + "]");
      continue;
    }
    out.weights.push_back(diff_weights(wa, *wb, nullptr, options));
  }
  for (const auto& wb : b.weights)
    if (!lookup(a_weights, wb.name)) out.only_in_b.push_back(wb.name);
  for (const auto& ta : a.tensors) {
    const auto* tb = lookup(b_tensors, ta.name);
    if (!tb) {
      out.only_in_a.push_back(ta.name);
    } else if (ta.dtype != tb->dtype || ta.shape != tb->shape || ta.bytes != tb->bytes) {
      out.tensors_differ.push_back(ta.name);
    } else {
      ++out.tensors_same;
    }
  }
  for (const auto& tb : b.tensors)
    if (!lookup(a_tensors, tb.name)) out.only_in_b.push_back(tb.name);
  return out;
}

/// The JSON form of a weight's comparison.
inline nlohmann::ordered_json to_json(const tensor_difference& d) {
  nlohmann::ordered_json j;
  j["name"] = d.name;
  j["format"] = d.format;
  j["shape"] = {d.rows, d.cols};
  j["blocks"] = d.blocks;
  j["tensor_scale"] = {{"a", d.decode_a}, {"b", d.decode_b}, {"differs", d.tensor_scale_differs}};
  j["blocks_scale_differ"] = d.blocks_scale_differ;
  j["scale_bytes_differ"] = d.scale_bytes_differ;
  j["blocks_codes_differ"] = d.blocks_codes_differ;
  j["codes_differ"] = d.codes_differ;
  j["values_differ"] = d.values_differ;
  j["max_abs_diff"] = d.max_abs_diff;
  j["mean_abs_diff"] = d.mean_abs_diff;
  j["rms_a"] = d.rms_a;
  nlohmann::ordered_json blocks = nlohmann::ordered_json::object(), elements = nlohmann::ordered_json::object();
  for (const auto& [r, n] : d.blocks_by_reason) blocks[diff_reason_name(r)] = n;
  for (const auto& [r, n] : d.elements_by_reason) elements[diff_reason_name(r)] = n;
  j["blocks_by_reason"] = blocks;
  j["elements_by_reason"] = elements;
  nlohmann::ordered_json worst = nlohmann::ordered_json::array();
  for (const auto& b : d.worst)
    worst.push_back({{"row", b.row},
                     {"block", b.block},
                     {"scale_a", b.scale_a},
                     {"scale_b", b.scale_b},
                     {"codes_differ", b.codes_differ},
                     {"max_abs_diff", b.max_abs_diff},
                     {"block_max", b.block_max},
                     {"reason", diff_reason_name(b.reason)}});
  j["worst_blocks"] = worst;
  return j;
}

/// The JSON form of a checkpoint comparison.
inline nlohmann::ordered_json to_json(const checkpoint_difference& d) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json weights = nlohmann::ordered_json::array();
  for (const auto& w : d.weights) weights.push_back(to_json(w));
  j["weights"] = weights;
  j["only_in_a"] = d.only_in_a;
  j["only_in_b"] = d.only_in_b;
  j["incomparable"] = d.incomparable;
  j["tensors_differ"] = d.tensors_differ;
  j["tensors_same"] = d.tensors_same;
  return j;
}

/// A readable report of one weight's comparison (what `nvfp4 diff` prints).
inline std::string format_table(const tensor_difference& d, const std::string& label_a = "A", const std::string& label_b = "B") {
  std::string out;
  char line[512];
  auto pct = [&](std::int64_t n, std::int64_t of) { return of ? 100.0 * static_cast<double>(n) / static_cast<double>(of) : 0.0; };
  std::snprintf(line, sizeof line, "%s (%s [%lld x %lld], %lld blocks): %s vs %s\n", d.name.c_str(), d.format.c_str(),
                static_cast<long long>(d.rows), static_cast<long long>(d.cols), static_cast<long long>(d.blocks), label_a.c_str(),
                label_b.c_str());
  out += line;
  std::snprintf(line, sizeof line, "  tensor scale (decode)      %.9g vs %.9g%s\n", d.decode_a, d.decode_b,
                d.tensor_scale_differs ? "  DIFFERS: scale bytes are not comparable, effective scales are" : "  same");
  out += line;
  std::snprintf(line, sizeof line, "  blocks, effective scale    %10lld differ (%.3f%%)   scale bytes differ in %lld\n",
                static_cast<long long>(d.blocks_scale_differ), pct(d.blocks_scale_differ, d.blocks),
                static_cast<long long>(d.scale_bytes_differ));
  out += line;
  std::snprintf(line, sizeof line, "  blocks, same scale, codes  %10lld differ (%.3f%%)\n", static_cast<long long>(d.blocks_codes_differ),
                pct(d.blocks_codes_differ, d.blocks));
  out += line;
  std::snprintf(line, sizeof line, "  elements, codes / values   %10lld / %lld differ of %lld\n", static_cast<long long>(d.codes_differ),
                static_cast<long long>(d.values_differ), static_cast<long long>(d.rows) * d.cols);
  out += line;
  std::snprintf(line, sizeof line, "  |value A - value B|        max %.6g, mean %.6g (RMS of A %.6g)\n", d.max_abs_diff, d.mean_abs_diff,
                d.rms_a);
  out += line;
  if (!d.blocks_by_reason.empty()) {
    out += "  why (blocks)              ";
    // Built with append(): GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
    for (const auto& [r, n] : d.blocks_by_reason)
      out.append(" ").append(diff_reason_name(r)).append(" ").append(std::to_string(n)).append(";");
    out += "\n";
  }
  if (!d.elements_by_reason.empty()) {
    out += "  why (elements, same scale)";
    for (const auto& [r, n] : d.elements_by_reason)
      out.append(" ").append(diff_reason_name(r)).append(" ").append(std::to_string(n)).append(";");
    out += "\n";
  }
  if (!d.worst.empty()) {
    out += "  worst blocks:   row  block  scale A  scale B  codes  max |diff|  block max  why\n";
    for (const auto& b : d.worst) {
      std::snprintf(line, sizeof line, "               %6lld %6lld     0x%02x     0x%02x  %5d  %10.4g %10.4g  %s\n",
                    static_cast<long long>(b.row), static_cast<long long>(b.block), b.scale_a, b.scale_b, b.codes_differ, b.max_abs_diff,
                    b.block_max, diff_reason_name(b.reason));
      out += line;
    }
  }
  return out;
}

/// A readable report of a checkpoint comparison.
inline std::string format_table(const checkpoint_difference& d, const std::string& label_a = "A", const std::string& label_b = "B") {
  std::string out;
  for (const auto& w : d.weights) out += format_table(w, label_a, label_b);
  auto list = [&](const char* title, const std::vector<std::string>& v) {
    if (v.empty()) return;
    out += title;
    for (const auto& s : v) out.append(" ").append(s).append(";");
    out += "\n";
  };
  list("only in A:", d.only_in_a);
  list("only in B:", d.only_in_b);
  list("not comparable:", d.incomparable);
  list("other tensors that differ:", d.tensors_differ);
  out += "other tensors identical: " + std::to_string(d.tensors_same) + "\n";
  return out;
}

}  // namespace nvfp4::io
