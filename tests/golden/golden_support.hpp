// Shared helpers of the golden tests: where the vectors are, the manifest, reading a case's fields
// (every one the check understands, a refusal for any other), the recipe calls Linear cases name,
// the registry of checks per kind, and the per-kind "N passed, N failed" tally golden_test prints.
//
// The directory is $NVFP4_GOLDEN_DIR when set, else the copy shipped with the project (unpacked
// into the build tree). Any directory in the same format (manifest.json + .npy files) works: a
// check takes every parameter from its case, so vectors made with other shapes, seeds and settings
// are checked as they are, and a case the check cannot read as written is refused, not guessed at.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "nvfp4/gemm/fp8/mma_model.hpp"
#include "nvfp4/io/npy.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4::golden {

inline std::filesystem::path directory() {
  if (const char* env = std::getenv("NVFP4_GOLDEN_DIR"); env && *env) return env;
  return NVFP4_DEFAULT_GOLDEN_DIR;
}

/// Whether the vectors are the copy shipped with the project (not a directory from NVFP4_GOLDEN_DIR).
inline bool shipped() { return directory() == std::filesystem::path(NVFP4_DEFAULT_GOLDEN_DIR); }

inline const nlohmann::json& manifest() {
  static const nlohmann::json value = [] {
    const auto path = directory() / "manifest.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("golden: cannot open " + path.string());
    return nlohmann::json::parse(in);
  }();
  return value;
}

/// The manifest's own fields besides `cases` (none changes what a check computes).
inline const std::set<std::string>& manifest_fields() {
  static const std::set<std::string> fields = {"cases", "seed"};
  return fields;
}

/// A case's label: its kind, or "kind mode" for a case that names a mode. Checks are registered,
/// and cases tallied, by label.
inline std::string label_of(const nlohmann::json& test_case) {
  std::string out = test_case.at("kind").get<std::string>();
  if (test_case.contains("mode")) out.append(" ").append(test_case.at("mode").get<std::string>());
  return out;
}

/// Every case of the given label, in manifest order.
inline std::vector<nlohmann::json> cases_of(const std::string& label) {
  std::vector<nlohmann::json> out;
  for (const auto& c : manifest().at("cases"))
    if (label_of(c) == label) out.push_back(c);
  return out;
}

/// A one-line description of a case for failure messages.
inline std::string describe(const nlohmann::json& test_case) {
  // Built with append(): GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
  std::string out = test_case.at("kind").get<std::string>();
  for (const char* key : {"mode", "dist", "format", "style", "arch", "a_format", "b_format"})
    if (test_case.contains(key) && test_case.at(key).is_string()) out.append(" ").append(test_case.at(key).get<std::string>());
  if (test_case.contains("shape")) out.append(" ").append(test_case.at("shape").dump());
  for (const char* key : {"m", "n", "k"})
    if (test_case.contains(key)) out.append(" ").append(key).append("=").append(test_case.at(key).dump());
  if (test_case.contains("recipe") && test_case.at("recipe").is_string()) out.append(" ").append(test_case.at("recipe").get<std::string>());
  return out;
}

// ------------------------------------------------------------------------------ reading a case

/// A case (or a step of one) that its check cannot run as written: a field or a value the check
/// does not understand, or a field it needs missing or of another type. Thrown before the check
/// computes anything with the case; the case then fails with this message.
class refusal : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The numpy dtype a vector of T is read from.
template <class T>
constexpr io::npy_dtype npy_dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return io::npy_dtype::float32;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return io::npy_dtype::uint8;
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return io::npy_dtype::uint16;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return io::npy_dtype::uint32;
  else
    static_assert(sizeof(T) == 0, "no npy dtype for this element type");
}

/// The fields of one case, or of one step of a case, as its check reads them. Made with every
/// field the check understands and those that only describe the case (`dist`, `style`,
/// `semantics`, ...: prose or labels that change nothing computed); a case holding any other
/// field is refused at once, naming it. Reads go through the typed accessors below, which refuse
/// a missing field, a value of another type and a value outside the allowed ones; finish() then
/// says whether the check read every understood field the case holds (a check that declares a
/// field must use it).
class case_fields {
 public:
  case_fields(const nlohmann::json& fields, std::string where, std::vector<std::string> understood,
              std::vector<std::string> descriptive = {})
      : json_(fields), where_(std::move(where)), understood_(understood.begin(), understood.end()) {
    if (!json_.is_object()) throw refusal(where_ + " is not a JSON object");
    // The dispatch read these already: a case's kind and mode choose its check.
    for (const char* key : {"kind", "mode"})
      if (json_.contains(key)) read_.insert(key);
    std::set<std::string> known = understood_;
    known.insert(descriptive.begin(), descriptive.end());
    known.insert({"kind", "mode"});
    std::string unknown;
    int count = 0;
    for (const auto& [key, value] : json_.items())
      if (!known.count(key)) unknown.append(count++ ? ", " : "").append("'" + key + "'");
    if (count)
      throw refusal(where_ + (count == 1 ? ": field " : ": fields ") + unknown +
                    (count == 1 ? " is not one this check understands" : " are not ones this check understands") + " (it reads " +
                    list(understood_) + "); refusing the case rather than ignoring it");
  }

  const std::string& where() const { return where_; }

  /// Whether the case holds the field (an optional one).
  bool has(const std::string& name) {
    declared(name);
    read_.insert(name);
    return json_.contains(name);
  }
  /// A field the check needs.
  const nlohmann::json& at(const std::string& name) {
    if (!has(name)) throw refusal(where_ + ": field '" + name + "' is missing");
    return json_.at(name);
  }
  bool boolean(const std::string& name) { return typed(name, &nlohmann::json::is_boolean, "true or false").get<bool>(); }
  std::string text(const std::string& name) { return typed(name, &nlohmann::json::is_string, "a string").get<std::string>(); }
  /// An integer (a JSON number without a fraction; 2.0 and 2.5 are refused for a count).
  std::int64_t integer(const std::string& name) {
    return typed(name, &nlohmann::json::is_number_integer, "an integer").get<std::int64_t>();
  }
  /// A number, read as float (the producers write float32 values, which JSON carries exactly).
  float number(const std::string& name) { return typed(name, &nlohmann::json::is_number, "a number").get<float>(); }
  /// A string field whose value must be one of `allowed`.
  std::string choice(const std::string& name, std::initializer_list<const char*> allowed) {
    const std::string value = text(name);
    for (const char* a : allowed)
      if (value == a) return value;
    std::string options;
    for (const char* a : allowed) options.append(options.empty() ? "" : ", ").append(a);
    throw refusal(where_ + ": field '" + name + "' is '" + value + "', which this check does not know (it knows " + options + ")");
  }
  /// [rows, cols] of a two-element integer array field (`shape`).
  std::pair<index_t, index_t> shape(const std::string& name) {
    const auto& s = at(name);
    if (!s.is_array() || s.size() != 2 || !s[0].is_number_integer() || !s[1].is_number_integer())
      throw refusal(where_ + ": field '" + name + "' must be [rows, cols], got " + s.dump());
    return {s[0].get<index_t>(), s[1].get<index_t>()};
  }

  /// The .npy file a field names (C order refused otherwise; its shape not checked here).
  io::npy_array load(const std::string& name) {
    auto array = io::read_npy(file(name));
    if (array.fortran_order) throw refusal(where_ + ": '" + name + "' is in Fortran order; the checks read C order");
    return array;
  }
  /// Its elements as T, from an .npy of T's dtype (any other dtype refused).
  template <class T>
  std::vector<T> load_as(const std::string& name) {
    const auto array = load(name);
    if (array.dtype != npy_dtype_of<T>())
      throw refusal(where_ + ": '" + name + "' holds " + std::string(io::npy_descr(array.dtype)) + ", the check reads " +
                    std::string(io::npy_descr(npy_dtype_of<T>())));
    return array.as<T>();
  }
  /// Its elements as T, and the array's shape must be `dims` (e.g. {m, k}).
  template <class T>
  std::vector<T> load_shaped(const std::string& name, std::vector<std::int64_t> dims) {
    const auto array = load(name);
    if (array.shape != dims) {
      std::string want, got;
      for (auto d : dims) want.append(want.empty() ? "" : ", ").append(std::to_string(d));
      for (auto d : array.shape) got.append(got.empty() ? "" : ", ").append(std::to_string(d));
      throw refusal(where_ + ": '" + name + "' has shape [" + got + "], the case's parameters say [" + want + "]");
    }
    return load_as<T>(name);
  }
  /// The bf16 values of a uint16 .npy of bf16 bits, widened to float (exact).
  std::vector<float> load_bf16_as_float(const std::string& name, std::vector<std::int64_t> dims) {
    std::vector<float> out;
    for (std::uint16_t b : load_shaped<std::uint16_t>(name, std::move(dims)))
      out.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16));
    return out;
  }
  /// The path of a file the field names, in the golden directory.
  std::filesystem::path file(const std::string& name) { return directory() / text(name); }

  /// True when every understood field the case holds was read; otherwise one failure per field
  /// left unread (a check that declares a field and never uses it: a defect of the test).
  bool finish() const {
    bool ok = true;
    for (const auto& key : understood_)
      if (json_.contains(key) && !read_.count(key)) {
        ADD_FAILURE() << where_ << ": the check declares field '" << key << "' but never read it";
        ok = false;
      }
    return ok;
  }

 private:
  void declared(const std::string& name) const {
    if (!understood_.count(name) && name != "kind" && name != "mode")
      throw std::logic_error(where_ + ": the check reads field '" + name + "' without declaring it");
  }
  const nlohmann::json& typed(const std::string& name, bool (nlohmann::json::*is)() const noexcept, const char* what) {
    const auto& value = at(name);
    if (!(value.*is)()) throw refusal(where_ + ": field '" + name + "' must be " + what + ", got " + value.dump());
    return value;
  }
  static std::string list(const std::set<std::string>& names) {
    std::string out;
    for (const auto& n : names) out.append(out.empty() ? "" : ", ").append(n);
    return out;
  }

  const nlohmann::json& json_;
  std::string where_;
  std::set<std::string> understood_;
  std::set<std::string> read_;
};

/// Values a peer was given as bf16 (stored widened to float32), as bf16; refuses the field when a
/// value is not a bf16 value (the peer cannot have seen it).
inline std::vector<bf16> bf16_values(const std::vector<float>& values, const std::string& field) {
  std::vector<bf16> out;
  out.reserve(values.size());
  for (float v : values) {
    out.push_back(bf16::from_float(v));
    if (std::bit_cast<std::uint32_t>(out.back().to_float()) != std::bit_cast<std::uint32_t>(v))
      throw refusal("'" + field + "' is said to hold bf16 values but holds " + std::to_string(v));
  }
  return out;
}

/// The FP8 GEMM arithmetic of the GPU that computed a case: the tensor core and the interval (in
/// elements of K) at which cuBLASLt's split accumulator promotes partial sums into fp32.
struct gpu_gemm {
  fp8::mma::tensor_core core = fp8::mma::tensor_core::hopper;
  index_t promotion_interval = 128;
};

/// The GPU of a hardware case: its `source` must name a Hopper GPU (H100, H200, H800, H20,
/// GH200: wgmma, and cuBLASLt's split accumulator promoting every 128 of K, docs/numerics.md);
/// a case without a source is of a kind whose README defines it as an H100's output (the
/// `*_h100` kinds, and the shared set's gemm_fp8_cublas and gemm_fp8_block_cublas). Refuses any
/// other GPU: the library's model of another generation's cuBLASLt was never held to hardware.
inline gpu_gemm gpu_of(case_fields& f, const std::string& kind) {
  if (f.has("source")) {
    const std::string source = f.text("source");
    static const std::regex hopper(R"((^|[^A-Za-z0-9])G?H(100|200|800|20)([^0-9]|$))");
    if (!std::regex_search(source, hopper))
      throw refusal(f.where() + ": source '" + source +
                    "' names no Hopper GPU (H100, H200, H800, H20, GH200), the only cuBLASLt this test models");
    return {};
  }
  const bool h100_kind =
      kind == "gemm_fp8_cublas" || kind == "gemm_fp8_block_cublas" || (kind.size() > 5 && kind.compare(kind.size() - 5, 5, "_h100") == 0);
  if (!h100_kind) throw refusal(f.where() + ": no 'source' naming the GPU that computed the case");
  return {};
}

// ------------------------------------------------------------------------------ recipe calls

/// A recipe written as a constructor call, as a Linear case's `recipe` field holds it (TE's
/// signature: `DelayedScaling(margin=1, fp8_format=Format.HYBRID, amax_history_len=4,
/// amax_compute_algo='max')`). A value is a number, a name (`HYBRID`, `Format.HYBRID`, `True`),
/// a quoted string or another call (`MMParams(use_split_accumulator=True)`,
/// `QParams(power_2_scale=False)`); an argument left out has TE's default, which the library's
/// recipe struct holds. Reading works as case_fields: every argument must be understood.
class recipe_call {
 public:
  recipe_call(const std::string& text, std::string where) : where_(std::move(where)) {
    std::size_t at = 0;
    parse(text, at);
    skip_spaces(text, at);
    if (at != text.size()) fail(text, at, "text after the call");
  }

  const std::string& name() const { return name_; }
  const std::string& where() const { return where_; }

  /// Refuses an argument outside `understood`, naming it; call once, before reading.
  void expect(const std::string& recipe, std::initializer_list<const char*> understood) {
    if (name_ != recipe) throw refusal(where_ + ": '" + name_ + "' is not " + recipe);
    std::set<std::string> known(understood.begin(), understood.end());
    for (const auto& [key, value] : args_)
      if (!known.count(key))
        throw refusal(where_ + ": " + name_ + " argument '" + key + "' is not one this check understands; refusing the case");
  }
  bool has(const std::string& key) const { return args_.count(key) != 0; }
  bool boolean(const std::string& key) const {
    const std::string v = value(key);
    if (v == "True") return true;
    if (v == "False") return false;
    throw refusal(where_ + ": " + name_ + "(" + key + "=" + v + "): True or False expected");
  }
  std::int64_t integer(const std::string& key) const {
    const std::string v = value(key);
    if (!std::regex_match(v, std::regex(R"(-?[0-9]+)")))
      throw refusal(where_ + ": " + name_ + "(" + key + "=" + v + "): an integer expected");
    return std::stoll(v);
  }
  float number(const std::string& key) const {
    const std::string v = value(key);
    if (!std::regex_match(v, std::regex(R"(-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?)")))
      throw refusal(where_ + ": " + name_ + "(" + key + "=" + v + "): a number expected");
    return std::stof(v);
  }
  /// A name or a quoted string, with a `Format.` prefix and the quotes dropped; must be one of `allowed`.
  std::string choice(const std::string& key, std::initializer_list<const char*> allowed) const {
    std::string v = value(key);
    if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
    if (v.rfind("Format.", 0) == 0) v = v.substr(7);
    for (const char* a : allowed)
      if (v == a) return v;
    throw refusal(where_ + ": " + name_ + "(" + key + "=" + value(key) + ") is not a value this check knows");
  }
  /// A nested call (MMParams(...), QParams(...)).
  recipe_call call(const std::string& key) const { return recipe_call(value(key), where_ + ", " + name_ + "." + key); }

 private:
  std::string value(const std::string& key) const {
    const auto it = args_.find(key);
    if (it == args_.end()) throw std::logic_error(where_ + ": " + key + " read without has()");
    return it->second;
  }
  static void skip_spaces(const std::string& t, std::size_t& at) {
    while (at < t.size() && t[at] == ' ') ++at;
  }
  [[noreturn]] void fail(const std::string& t, std::size_t at, const char* what) const {
    throw refusal(where_ + ": recipe '" + t + "' is not a call Name(key=value, ...): " + what + " at character " + std::to_string(at));
  }
  // Name(key=value, ...) with nested calls and quoted strings; values kept as their text.
  void parse(const std::string& t, std::size_t& at) {
    skip_spaces(t, at);
    const std::size_t name_begin = at;
    while (at < t.size() && (std::isalnum(static_cast<unsigned char>(t[at])) || t[at] == '_' || t[at] == '.')) ++at;
    name_ = t.substr(name_begin, at - name_begin);
    if (name_.empty() || at >= t.size() || t[at] != '(') fail(t, at, "no name followed by '('");
    ++at;
    skip_spaces(t, at);
    if (at < t.size() && t[at] == ')') {
      ++at;
      return;
    }
    while (true) {
      skip_spaces(t, at);
      const std::size_t key_begin = at;
      while (at < t.size() && (std::isalnum(static_cast<unsigned char>(t[at])) || t[at] == '_')) ++at;
      const std::string key = t.substr(key_begin, at - key_begin);
      skip_spaces(t, at);
      if (key.empty() || at >= t.size() || t[at] != '=') fail(t, at, "no key=");
      ++at;
      skip_spaces(t, at);
      const std::size_t value_begin = at;
      int depth = 0;
      char quote = 0;
      for (; at < t.size(); ++at) {
        const char ch = t[at];
        if (quote) {
          if (ch == quote) quote = 0;
        } else if (ch == '\'' || ch == '"') {
          quote = ch;
        } else if (ch == '(') {
          ++depth;
        } else if (ch == ')' || ch == ',') {
          if (depth == 0) break;
          if (ch == ')') --depth;
        }
      }
      if (at >= t.size() || quote) fail(t, at, "an unterminated value");
      std::string value = t.substr(value_begin, at - value_begin);
      while (!value.empty() && value.back() == ' ') value.pop_back();
      if (value.empty()) fail(t, at, "an empty value");
      if (!args_.emplace(key, value).second) fail(t, at, "a repeated key");
      if (t[at++] == ')') return;
    }
  }

  std::string where_;
  std::string name_;
  std::map<std::string, std::string> args_;
};

// ------------------------------------------------------------------------------ checks and tally

/// Counts cases per label and prints "<label>: N passed, N failed" at exit, with the labels of the
/// manifest that no check of this program handled ("N not handled"; GoldenManifest fails them).
class tally {
 public:
  static tally& instance() {
    static tally t;
    return t;
  }
  void record(const std::string& label, bool passed) { (passed ? counts_[label].passed : counts_[label].failed)++; }
  ~tally() {
    std::map<std::string, int> unhandled;
    try {
      for (const auto& c : manifest().at("cases"))
        if (!counts_.count(label_of(c))) unhandled[label_of(c)]++;
    } catch (const std::exception&) {
    }
    for (const auto& [label, c] : counts_) std::printf("%s: %d passed, %d failed\n", label.c_str(), c.passed, c.failed);
    for (const auto& [label, n] : unhandled) std::printf("%s: %d not handled\n", label.c_str(), n);
  }

 private:
  struct count {
    int passed = 0, failed = 0;
  };
  std::map<std::string, count> counts_;
};

/// The check of one case: true when every compared output matches (failures reported through
/// gtest); throws refusal for a case it cannot run as written.
using case_check = std::function<bool(const nlohmann::json&)>;

/// The registered check of each label ("kind" or "kind mode").
inline std::map<std::string, case_check>& checks() {
  static std::map<std::string, case_check> registry;
  return registry;
}

/// Registers `check` for the cases of `label`; returns true, for a namespace-scope initializer.
inline bool register_check(const std::string& label, case_check check) {
  checks()[label] = std::move(check);
  return true;
}

/// Runs one case through `check` and tallies it under the case's label: a refusal fails it with
/// its message.
inline bool run_case(const nlohmann::json& test_case, const case_check& check) {
  SCOPED_TRACE(describe(test_case));
  bool ok = false;
  try {
    ok = check(test_case);
  } catch (const refusal& r) {
    ADD_FAILURE() << "refused: " << r.what();
  } catch (const std::exception& e) {  // e.g. the library refusing a parameter: this case fails, the others run
    ADD_FAILURE() << "threw: " << e.what();
  }
  tally::instance().record(label_of(test_case), ok);
  return ok;
}

/// The message a check refuses the case with, or "" when it runs it (for the refusal tests).
inline std::string refusal_of(const nlohmann::json& test_case, const case_check& check) {
  try {
    (void)check(test_case);
  } catch (const refusal& r) {
    return r.what();
  }
  return "";
}

/// Every case of `label` through its registered check. The shipped archive must hold the label;
/// another directory (NVFP4_GOLDEN_DIR) may lack it, which prints "<label>: absent" and skips.
inline void check_every_case(const std::string& label) {
  const auto it = checks().find(label);
  ASSERT_NE(it, checks().end()) << "no check registered for " << label;
  const auto cases = cases_of(label);
  if (cases.empty()) {
    ASSERT_FALSE(shipped()) << "the shipped golden archive holds no " << label << " case";
    std::printf("%s: absent\n", label.c_str());
    GTEST_SKIP() << label << " absent from " << directory();
  }
  for (const auto& c : cases) run_case(c, it->second);
}

// ------------------------------------------------------------------------------ comparisons

/// Index of the first differing byte of two equal-length byte arrays, or -1.
template <class A, class B>
long first_difference(const A& a, const B& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<long>(i);
  return -1;
}

/// The packed data bytes and the scale bytes of a quantized tensor.
template <class Format>
std::vector<std::uint8_t> data_bytes(const quantized_tensor<Format>& q) {
  std::vector<std::uint8_t> out;
  for (auto unit : q.data()) out.push_back(unit.bits());
  return out;
}
template <class Format>
std::vector<std::uint8_t> scale_bytes(const quantized_tensor<Format>& q) {
  std::vector<std::uint8_t> out;
  for (auto s : q.scales()) out.push_back(s.bits());
  return out;
}

/// Index of the byte of the first E2M1 code that differs from the peer's, or -1. The one
/// tolerated difference is the peer quirk the golden README documents: TE's reference encodes an
/// input of exactly -0.0 as +0 (0x0), where we keep the sign (0x8) as the hardware's cvt does;
/// both decode to zero. `source` is the matrix that was quantized (same shape as q).
template <class Format>
long first_code_difference(const quantized_tensor<Format>& q, const std::vector<std::uint8_t>& expected, matrix_view<const float> source) {
  const auto got = data_bytes(q);
  if (got.size() != expected.size()) return 0;
  for (index_t r = 0; r < q.rows(); ++r)
    for (index_t c = 0; c < q.cols(); ++c) {
      const auto i = static_cast<std::size_t>(r * q.data_row_stride() + c / 2);
      const int shift = (c & 1) ? 4 : 0;
      const int ours = (got[i] >> shift) & 0xF, theirs = (expected[i] >> shift) & 0xF;
      const bool negative_zero_input = std::bit_cast<std::uint32_t>(source(r, c)) == 0x80000000u;
      if (ours != theirs && !(negative_zero_input && ours == 0x8 && theirs == 0x0)) return static_cast<long>(i);
    }
  return -1;
}

}  // namespace nvfp4::golden
