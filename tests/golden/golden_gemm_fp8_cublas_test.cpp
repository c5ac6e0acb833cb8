// Golden test, kinds `gemm_fp8_cublas` and `gemm_fp8_h100_epilogue`: whole FP8 GEMMs as an H100's
// cuBLASLt computes them (torch._scaled_mm; producers: the shared set's and
// tests/golden/producers/run_h100_judge.py), every output bit compared through the public
// fp8_gemm (and, for the epilogue cases, its scalar reference too): fast accumulation
// (promotion_interval 0) or the split accumulator (the GPU's interval) as the case says,
// per-tensor and per-row scales, fp32 and bf16 outputs, a bf16 bias.
#include <gtest/gtest.h>

#include <bit>

#include "golden/golden_support.hpp"
#include "nvfp4/gemm/fp8/gemm.hpp"

namespace nvfp4 {
namespace {
namespace golden_gemm_fp8_cublas_test {

fp8_format format_of(golden::case_fields& f, const char* field) {
  return f.choice(field, {"e4m3", "e5m2"}) == "e4m3" ? fp8_format::e4m3 : fp8_format::e5m2;
}

/// An FP8 tensor of the case's codes [rows, k] with one decode scale (per_row false) or one per row.
fp8_tensor operand(golden::case_fields& f, const char* field, const char* format_field, index_t rows, index_t k, bool per_row,
                   const std::vector<float>& scales) {
  fp8_tensor t(rows, k, format_of(f, format_field), per_row ? 1 : 0, 0);
  const auto codes = f.load_shaped<std::uint8_t>(field, {rows, k});
  std::copy(codes.begin(), codes.end(), t.codes().begin());
  if (scales.size() != t.scale_inv().size())
    throw golden::refusal(std::string(field) + ": " + std::to_string(scales.size()) + " decode scales, the scaling needs " +
                          std::to_string(t.scale_inv().size()));
  std::copy(scales.begin(), scales.end(), t.scale_inv().begin());
  return t;
}

/// Counts the outputs whose bits differ (reports the first three).
template <class T>
int mismatches(const std::vector<T>& got, const std::vector<T>& expected, index_t n, const char* what) {
  int count = 0;
  for (std::size_t i = 0; i < got.size() && i < expected.size(); ++i) {
    const auto g = std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint16_t>>(got[i]);
    const auto e = std::bit_cast<std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint16_t>>(expected[i]);
    if (g != e && count++ < 3)
      ADD_FAILURE() << what << " D[" << i / static_cast<std::size_t>(n) << "][" << i % static_cast<std::size_t>(n) << "]: ours 0x"
                    << std::hex << g << ", the GPU's 0x" << e << std::dec;
  }
  if (got.size() != expected.size()) ++count;
  return count;
}

/// use_split_accumulator: cuBLASLt's split accumulator at the GPU's promotion interval, else fast
/// accumulation (the whole K chain in the tensor core).
index_t promotion_of(golden::case_fields& f, const golden::gpu_gemm& gpu) {
  return f.boolean("use_split_accumulator") ? gpu.promotion_interval : 0;
}

bool check_cublas_case(const nlohmann::json& c) {
  golden::case_fields f(
      c, "gemm_fp8_cublas case",
      {"a_format", "b_format", "m", "n", "k", "use_split_accumulator", "scale_inv_a", "scale_inv_b", "source", "a", "b", "d"},
      {"style", "semantics", "subset_of"});
  const auto gpu = golden::gpu_of(f, "gemm_fp8_cublas");
  const index_t m = f.integer("m"), n = f.integer("n"), k = f.integer("k");
  const auto a = operand(f, "a", "a_format", m, k, false, {f.number("scale_inv_a")});
  const auto b = operand(f, "b", "b_format", n, k, false, {f.number("scale_inv_b")});
  std::vector<float> d(static_cast<std::size_t>(m * n));
  fp8_gemm(a, b, matrix_view<float>::row_major(d.data(), m, n), {.core = gpu.core, .promotion_interval = promotion_of(f, gpu)});
  const bool ok = mismatches(d, f.load_shaped<float>("d", {m, n}), n, "fp8_gemm") == 0;
  return f.finish() && ok;
}

const bool cublas_registered = golden::register_check("gemm_fp8_cublas", check_cublas_case);

TEST(GoldenGemmFp8Cublas, EveryCaseBitForBit) { golden::check_every_case("gemm_fp8_cublas"); }

template <class Out>
int run_epilogue(const fp8_tensor& a, const fp8_tensor& b, const fp8_gemm_options& options, const std::vector<Out>& expected) {
  const index_t m = a.rows(), n = b.rows();
  std::vector<Out> fast(static_cast<std::size_t>(m * n)), ref(fast.size());
  fp8_gemm(a, b, matrix_view<Out>::row_major(fast.data(), m, n), options);
  reference::fp8_gemm(a, b, matrix_view<Out>::row_major(ref.data(), m, n), options);
  return mismatches(fast, expected, n, "fp8_gemm") + mismatches(ref, expected, n, "reference::fp8_gemm");
}

/// `scaling` tensor (one decode scale per operand) or row (one per row of A, one per row of B,
/// torch's [M, 1] / [1, N]); `out_dtype` float32 (`d`) or bfloat16 (`d_bf16`), with an optional
/// bf16 bias.
bool check_epilogue_case(const nlohmann::json& c) {
  golden::case_fields f(c, "gemm_fp8_h100_epilogue case",
                        {"a_format", "b_format", "m", "n", "k", "use_split_accumulator", "scaling", "out_dtype", "a", "b", "a_scale_inv",
                         "b_scale_inv", "bias_bf16", "d", "d_bf16", "source"});
  const auto gpu = golden::gpu_of(f, "gemm_fp8_h100_epilogue");
  const index_t m = f.integer("m"), n = f.integer("n"), k = f.integer("k");
  const bool per_row = f.choice("scaling", {"tensor", "row"}) == "row";
  const auto a = operand(f, "a", "a_format", m, k, per_row, f.load_as<float>("a_scale_inv"));
  const auto b = operand(f, "b", "b_format", n, k, per_row, f.load_as<float>("b_scale_inv"));
  std::vector<float> bias;
  if (f.has("bias_bf16")) bias = f.load_bf16_as_float("bias_bf16", {n});
  const fp8_gemm_options options{.core = gpu.core, .promotion_interval = promotion_of(f, gpu), .bias = bias};
  const bool fp32_out = f.choice("out_dtype", {"float32", "bfloat16"}) == "float32";
  // The output field is the dtype's; the other one would be a field the case does not explain.
  if (f.has(fp32_out ? "d_bf16" : "d"))
    throw golden::refusal(std::string("out_dtype ") + (fp32_out ? "float32" : "bfloat16") + " with the other dtype's output");
  int bad = 0;
  if (fp32_out) {
    bad = run_epilogue(a, b, options, f.load_shaped<float>("d", {m, n}));
  } else {
    std::vector<bf16> expected;
    for (std::uint16_t bits : f.load_shaped<std::uint16_t>("d_bf16", {m, n})) expected.push_back(bf16::from_bits(bits));
    bad = run_epilogue(a, b, options, expected);
  }
  return f.finish() && bad == 0;
}

const bool epilogue_registered = golden::register_check("gemm_fp8_h100_epilogue", check_epilogue_case);

TEST(GoldenGemmFp8H100Epilogue, EveryCaseBitForBit) { golden::check_every_case("gemm_fp8_h100_epilogue"); }

}  // namespace golden_gemm_fp8_cublas_test
}  // namespace
}  // namespace nvfp4
