// Golden test, kinds `gemm_fp8_block_cublas` and `fp8_block_quantize_h100`: FP8 block scaling
// (TE Float8BlockScaling) as an H100 computes it. The GEMMs (cuBLASLt's blockwise scaling through
// torch._scaled_mm; 1x128 x 128x128, 1x128 x 1x128, 128x128 x 1x128, as each case says) through
// the public fp8_gemm with its default (hardware) block epilogue, fp32 and bf16 outputs, every
// bit; with power-of-two scales TE's reference order must agree as well. The quantizer (1x128 /
// 128x128 block amax, the scale rule, torch's FP8 cast of the scaled values) through
// quantize_fp8_blockwise and its reference: codes, decode scales and block amaxes, every bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>

#include "golden/golden_support.hpp"
#include "nvfp4/gemm/fp8/gemm.hpp"
#include "nvfp4/scaling/fp8_quantize.hpp"
#include "nvfp4/scaling/quantize.hpp"

namespace nvfp4 {
namespace {
namespace golden_gemm_fp8_block_cublas_test {

fp8_format format_of(golden::case_fields& f, const char* field) {
  return f.choice(field, {"e4m3", "e5m2"}) == "e4m3" ? fp8_format::e4m3 : fp8_format::e5m2;
}

fp8_block_shape block_of(golden::case_fields& f, const char* field) {
  return f.choice(field, {"1x128", "128x128"}) == "1x128" ? fp8_block_shape::block_1x128 : fp8_block_shape::block_128x128;
}

/// A block-scaled operand: codes [rows, k], decode scales [rows, k/128] (1x128) or
/// [rows/128, k/128] (128x128), edge blocks rounded up.
fp8_tensor block_operand(golden::case_fields& f, const char* codes_field, const char* scale_field, const char* block_field,
                         const char* format_field, index_t rows, index_t k) {
  const index_t block_rows = fp8_block_rows(block_of(f, block_field));
  fp8_tensor t(rows, k, format_of(f, format_field), block_rows, fp8_block_size);
  const auto codes = f.load_shaped<std::uint8_t>(codes_field, {rows, k});
  const auto scales = f.load_shaped<float>(scale_field, {t.scale_rows(), t.scale_cols()});
  std::copy(codes.begin(), codes.end(), t.codes().begin());
  std::copy(scales.begin(), scales.end(), t.scale_inv().begin());
  return t;
}

template <class T>
int count_differences(const std::vector<T>& got, const std::vector<std::uint32_t>& expected_bits, const char* what, bool report) {
  int count = 0;
  for (std::size_t i = 0; i < got.size() && i < expected_bits.size(); ++i) {
    std::uint32_t bits = 0;
    if constexpr (std::is_same_v<T, float>) {
      bits = std::bit_cast<std::uint32_t>(got[i]);
    } else {
      bits = got[i].bits();
    }
    if (bits != expected_bits[i] && count++ < 3 && report)
      ADD_FAILURE() << what << " output " << i << ": ours 0x" << std::hex << bits << ", the GPU's 0x" << expected_bits[i] << std::dec;
  }
  return got.size() == expected_bits.size() ? count : count + 1;
}

/// TE's reference epilogue against the GPU where the scales are arbitrary: outputs that differ,
/// and outputs compared, over all cases (printed, the documented difference; not a failure).
int te_differs = 0, te_outputs = 0;

/// `d` (fp32) and `d_bf16` (each optional, one at least) through the hardware block epilogue, and
/// with power-of-two scales through TE's reference order too (the orders then agree).
bool check_gemm_case(const nlohmann::json& c) {
  golden::case_fields f(c, "gemm_fp8_block_cublas case",
                        {"a_format", "b_format", "m", "n", "k", "a_block", "b_block", "power_of_2_scales", "a", "b", "a_scale_inv",
                         "b_scale_inv", "d", "d_bf16", "source"},
                        {"semantics"});
  const auto gpu = golden::gpu_of(f, "gemm_fp8_block_cublas");
  const index_t m = f.integer("m"), n = f.integer("n"), k = f.integer("k");
  const auto a = block_operand(f, "a", "a_scale_inv", "a_block", "a_format", m, k);
  const auto b = block_operand(f, "b", "b_scale_inv", "b_block", "b_format", n, k);
  // The flag says how the producer drew the scales; held to the scales themselves.
  const bool pow2 = f.boolean("power_of_2_scales");
  for (const fp8_tensor* t : {&a, &b})
    for (float s : t->scale_inv()) {
      int exponent = 0;
      if (pow2 && std::frexp(s, &exponent) != 0.5f) throw golden::refusal("power_of_2_scales with a scale that is not a power of two");
    }
  std::vector<std::uint32_t> want32, want16;
  if (f.has("d"))
    for (float v : f.load_shaped<float>("d", {m, n})) want32.push_back(std::bit_cast<std::uint32_t>(v));
  if (f.has("d_bf16"))
    for (std::uint16_t v : f.load_shaped<std::uint16_t>("d_bf16", {m, n})) want16.push_back(v);
  if (want32.empty() && want16.empty()) throw golden::refusal("neither 'd' nor 'd_bf16': nothing to compare");
  int mismatches = 0;
  for (const auto epilogue : {fp8_block_epilogue::hardware, fp8_block_epilogue::te_reference}) {
    const bool hardware = epilogue == fp8_block_epilogue::hardware;
    const fp8_gemm_options options{.core = gpu.core, .promotion_interval = gpu.promotion_interval, .block_epilogue = epilogue};
    std::vector<float> d(static_cast<std::size_t>(m * n));
    std::vector<bf16> d16(d.size());
    fp8_gemm(a, b, matrix_view<float>::row_major(d.data(), m, n), options);
    fp8_gemm(a, b, matrix_view<bf16>::row_major(d16.data(), m, n), options);
    if (!hardware && !pow2) {
      // TE's order is held to the GPU's bits only where the orders agree: power-of-two scales.
      if (!want32.empty()) {
        te_differs += count_differences(d, want32, "", false);
        te_outputs += static_cast<int>(d.size());
      }
      continue;
    }
    const char* label = hardware ? "hardware epilogue" : "TE reference epilogue";
    if (!want32.empty()) mismatches += count_differences(d, want32, label, true);
    if (!want16.empty()) mismatches += count_differences(d16, want16, label, true);
    if (hardware && !want32.empty() && m * n * k <= (1 << 21)) {  // the scalar reference too, where it is quick
      std::vector<float> r(d.size());
      reference::fp8_gemm(a, b, matrix_view<float>::row_major(r.data(), m, n), options);
      mismatches += count_differences(r, want32, "reference::fp8_gemm", true);
    }
  }
  return f.finish() && mismatches == 0;
}

const bool gemm_registered = golden::register_check("gemm_fp8_block_cublas", check_gemm_case);

TEST(GoldenGemmFp8BlockCublas, EveryCaseBitForBit) {
  golden::check_every_case("gemm_fp8_block_cublas");
  std::printf("gemm_fp8_block_cublas: TE's reference epilogue differs from the GPU in %d of %d fp32 outputs (arbitrary scales)\n",
              te_differs, te_outputs);
}

/// TE Float8BlockScaling's quantizer on the GPU: codes, decode scales and the block amaxes, through
/// quantize_fp8_blockwise and its reference, in the case's format, block shape and scale rule.
bool check_quantize_case(const nlohmann::json& c) {
  golden::case_fields f(c, "fp8_block_quantize_h100 case",
                        {"shape", "block", "power_2_scale", "format", "input_bf16", "codes", "scale_inv", "amax", "source"});
  (void)golden::gpu_of(f, "fp8_block_quantize_h100");  // casts only: any Hopper's are the same
  const auto [rows, cols] = f.shape("shape");
  const fp8_format format = format_of(f, "format");
  const fp8_block_shape shape_kind = block_of(f, "block");
  std::vector<bf16> x;
  for (std::uint16_t bits : f.load_shaped<std::uint16_t>("input_bf16", {rows, cols})) x.push_back(bf16::from_bits(bits));
  const auto view = matrix_view<const bf16>::row_major(x.data(), rows, cols);
  const fp8_scale_options options{.power_2_scale = f.boolean("power_2_scale")};
  const index_t block_rows = fp8_block_rows(shape_kind);
  const index_t scale_rows = (rows + block_rows - 1) / block_rows, scale_cols = (cols + fp8_block_size - 1) / fp8_block_size;
  const auto codes = f.load_shaped<std::uint8_t>("codes", {rows, cols});
  const auto scales = f.load_shaped<float>("scale_inv", {scale_rows, scale_cols});
  const auto amaxes = f.load_shaped<float>("amax", {scale_rows, scale_cols});
  bool ok = true;
  for (bool fast : {true, false}) {
    const fp8_tensor q = fast ? quantize_fp8_blockwise(view, format, shape_kind, options)
                              : reference::quantize_fp8_blockwise(view, format, shape_kind, options);
    const long code_at = golden::first_difference(std::vector<std::uint8_t>(q.codes().begin(), q.codes().end()), codes);
    std::vector<std::uint32_t> ours, theirs;
    for (float s : q.scale_inv()) ours.push_back(std::bit_cast<std::uint32_t>(s));
    for (float s : scales) theirs.push_back(std::bit_cast<std::uint32_t>(s));
    const long scale_at = golden::first_difference(ours, theirs);
    EXPECT_EQ(code_at, -1) << (fast ? "quantize_fp8_blockwise" : "reference") << ": first differing code";
    EXPECT_EQ(scale_at, -1) << (fast ? "quantize_fp8_blockwise" : "reference") << ": first differing scale_inv";
    ok = ok && code_at == -1 && scale_at == -1;
  }
  // The GPU's block amaxes against the library's amax of each block.
  int amax_bad = 0;
  for (index_t br = 0; br < scale_rows; ++br)
    for (index_t bc = 0; bc < scale_cols; ++bc) {
      const index_t r0 = br * block_rows, c0 = bc * fp8_block_size;
      const matrix_view<const bf16> block(&view(r0, c0), std::min(block_rows, rows - r0), std::min(fp8_block_size, cols - c0),
                                          view.row_stride(), view.col_stride());
      const float ours = amax(block), theirs = amaxes[static_cast<std::size_t>(br * scale_cols + bc)];
      if (std::bit_cast<std::uint32_t>(ours) != std::bit_cast<std::uint32_t>(theirs) && amax_bad++ < 3)
        ADD_FAILURE() << "block (" << br << ", " << bc << ") amax: ours " << ours << ", the GPU's " << theirs;
    }
  return f.finish() && ok && amax_bad == 0;
}

const bool quantize_registered = golden::register_check("fp8_block_quantize_h100", check_quantize_case);

TEST(GoldenFp8BlockQuantizeH100, EveryCaseBitForBit) { golden::check_every_case("fp8_block_quantize_h100"); }

}  // namespace golden_gemm_fp8_block_cublas_test
}  // namespace
}  // namespace nvfp4
