// Shared helpers of the golden tests: where the vectors are, the manifest, .npy loading, and the
// per-kind "N passed, N failed" tally each golden program prints.
//
// The directory is $NVFP4_GOLDEN_DIR when set, else the copy shipped with the project (unpacked
// into the build tree). Any directory in the same format (manifest.json + .npy files) works.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "nvfp4/io/npy.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"

namespace nvfp4::golden {

inline std::filesystem::path directory() {
  if (const char* env = std::getenv("NVFP4_GOLDEN_DIR"); env && *env) return env;
  return NVFP4_DEFAULT_GOLDEN_DIR;
}

inline const nlohmann::json& manifest() {
  static const nlohmann::json value = [] {
    const auto path = directory() / "manifest.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("golden: cannot open " + path.string());
    return nlohmann::json::parse(in);
  }();
  return value;
}

/// Every case of the given kind, in manifest order.
inline std::vector<nlohmann::json> cases_of(const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (const auto& c : manifest().at("cases"))
    if (c.at("kind") == kind) out.push_back(c);
  return out;
}

/// Whether the vectors are the copy shipped with the project (not a directory from NVFP4_GOLDEN_DIR).
inline bool shipped() { return directory() == std::filesystem::path(NVFP4_DEFAULT_GOLDEN_DIR); }

/// The cases of a kind that the shipped archive holds but another directory may lack: there an
/// empty list prints "<kind>: absent" (the caller skips); in the shipped copy the caller asserts
/// that the list is not empty.
inline std::vector<nlohmann::json> cases_or_absent(const std::string& kind) {
  auto cases = cases_of(kind);
  if (cases.empty() && !shipped()) std::printf("%s: absent\n", kind.c_str());
  return cases;
}

/// Loads the .npy a case field names.
inline io::npy_array load(const nlohmann::json& test_case, const std::string& field) {
  return io::read_npy(directory() / test_case.at(field).get<std::string>());
}

template <class T>
std::vector<T> load_as(const nlohmann::json& test_case, const std::string& field) {
  return load(test_case, field).as<T>();
}

/// The bf16 values of a uint16 .npy of bf16 bits, widened to float (exact).
inline std::vector<float> load_bf16_as_float(const nlohmann::json& test_case, const std::string& field) {
  std::vector<float> out;
  for (std::uint16_t b : load_as<std::uint16_t>(test_case, field)) out.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16));
  return out;
}

/// A one-line description of a case for failure messages.
inline std::string describe(const nlohmann::json& test_case) {
  // Built with append(): GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
  std::string out = test_case.at("kind").get<std::string>();
  for (const char* key : {"mode", "dist", "format", "style"})
    if (test_case.contains(key)) out.append(" ").append(test_case.at(key).get<std::string>());
  if (test_case.contains("shape")) out.append(" ").append(test_case.at("shape").dump());
  for (const char* key : {"m", "n", "k"})
    if (test_case.contains(key)) out.append(" ").append(key).append("=").append(test_case.at(key).dump());
  return out;
}

/// Counts cases per kind and prints "<kind>: N passed, N failed[, N skipped]" at exit.
class tally {
 public:
  static tally& instance() {
    static tally t;
    return t;
  }
  void record(const std::string& kind, bool passed) { (passed ? counts_[kind].passed : counts_[kind].failed)++; }
  void skip(const std::string& kind) { counts_[kind].skipped++; }
  ~tally() {
    // Kinds in the manifest that no test of this program handles are reported as skipped.
    try {
      for (const auto& c : manifest().at("cases")) {
        // A case is tallied under its kind, or "kind mode" for kinds whose cases have modes.
        std::string label = c.at("kind").get<std::string>();
        if (c.contains("mode")) label.append(" ").append(c.at("mode").get<std::string>());
        if (!counts_.count(label)) unhandled_[label]++;
      }
    } catch (const std::exception&) {
    }
    for (const auto& [kind, n] : unhandled_) counts_[kind].skipped += n;
    for (const auto& [kind, c] : counts_) {
      std::printf("%s: %d passed, %d failed", kind.c_str(), c.passed, c.failed);
      if (c.skipped) std::printf(", %d skipped", c.skipped);
      std::printf("\n");
    }
  }

 private:
  struct count {
    int passed = 0, failed = 0, skipped = 0;
  };
  std::map<std::string, count> counts_;
  std::map<std::string, int> unhandled_;
};

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
long first_code_difference(const quantized_tensor<Format>& q, const std::vector<std::uint8_t>& expected,
                           matrix_view<const float> source) {
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
