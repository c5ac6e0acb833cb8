// nvfp4/scaling/quantizer_flavor.hpp: the NVFP4 (and MXFP4) weight quantizers of the peer projects,
// each reproduced bit for bit: TransformerEngine (the library's default), NVIDIA ModelOpt, torchao,
// compressed-tensors (llm-compressor) and ggml. They agree on the format and disagree on the
// arithmetic: how the tensor and block scales are formed, where a division stands for a multiply
// by a reciprocal, what a zero block gets, how ties and zeros round. Each non-default flavor is a
// scalar rule written like its project's code (docs/formats_and_layouts.md names the source file
// and commit of every rule); golden vectors from each project's own code pin them down.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "nvfp4/detail/enum_names.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/formats/e2m1.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e8m0.hpp"
#include "nvfp4/formats/packed_fp4.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/simd/parallel.hpp"

namespace nvfp4 {

/// Whose quantizer to reproduce.
enum class quantizer_flavor {
  te,                  ///< TransformerEngine (NUMERICS.md §2), the library's default and fast path
  modelopt,            ///< NVIDIA ModelOpt NVFP4QTensor, as it runs on a GPU
  torchao,             ///< torchao nvfp4_quantize with a per-tensor scale, as it runs on a GPU
  compressed_tensors,  ///< compressed-tensors / llm-compressor NVFP4 preset (minmax observer)
  ggml,                ///< ggml quantize_row_nvfp4_ref / quantize_row_mxfp4_ref (no tensor scale)
};

inline constexpr quantizer_flavor all_quantizer_flavors[] = {quantizer_flavor::te, quantizer_flavor::modelopt, quantizer_flavor::torchao,
                                                             quantizer_flavor::compressed_tensors, quantizer_flavor::ggml};

/// Its names as the CLI spells them (one table: nvfp4/detail/enum_names.hpp).
namespace detail {
template <>
struct enum_table<quantizer_flavor> {
  static constexpr enum_entry<quantizer_flavor> entries[] = {{"te", quantizer_flavor::te},
                                                             {"modelopt", quantizer_flavor::modelopt},
                                                             {"torchao", quantizer_flavor::torchao},
                                                             {"compressed_tensors", quantizer_flavor::compressed_tensors},
                                                             {"ggml", quantizer_flavor::ggml}};
};
}  // namespace detail

/// The flavor's name as the CLI spells it ("te", "modelopt", "torchao", "compressed_tensors", "ggml").
constexpr std::string_view quantizer_flavor_name(quantizer_flavor f) { return detail::name_of(f); }

/// The flavor named `name` (also accepts "compressed-tensors"), or nothing.
constexpr std::optional<quantizer_flavor> parse_quantizer_flavor(std::string_view name) {
  if (name == "compressed-tensors") return quantizer_flavor::compressed_tensors;
  return detail::value_of<quantizer_flavor>(name);
}

/// The scalar rules of each flavor, one function per step of the peer's code. They take and return
/// exactly what the peer computes (fp32 values, scale bytes, E2M1 codes), so tests can check them
/// on hand-worked values. "On a GPU" matters: PyTorch's CUDA kernels divide a tensor by a Python
/// number as a multiply by its fp32 reciprocal (its CPU kernels divide), and a 0/0 there is the
/// positive NaN 0x7FFFFFFF.
namespace flavor_rules {

namespace detail {
/// `a / b` where b is a Python number, as a CUDA kernel computes it: a * fp32(1 / b).
inline float cuda_divide_by_scalar(float a, float b) {
  const float inverse = 1.0f / b;
  return a * inverse;
}
}  // namespace detail

/// PyTorch's float -> float8_e4m3fn cast (c10 Float8_e4m3fn): round to nearest even, but NOT
/// saturating: a magnitude above 464 (the midpoint between 448 and the NaN code) and NaN become
/// 0x7F, with the input's sign bit; a NaN made on a GPU is positive.
inline std::uint8_t torch_float8_e4m3fn_byte(float x) {
  const std::uint8_t sign = (nvfp4::detail::float_bits(x) >> 24) & 0x80u;
  const float a = std::fabs(x);
  if (std::isnan(x)) return 0x7F;  // a GPU NaN carries no sign
  if (a > 464.0f) return static_cast<std::uint8_t>(0x7F | sign);
  return static_cast<std::uint8_t>(e4m3::from_float(a).bits() | sign);
}

/// Largest finite bf16 below a float's rounding: the bf16 value nearest to x, ties to even.
inline float round_to_bf16(float x) { return bf16::from_float(x).to_float(); }

// --- ModelOpt: modelopt/torch/quantization/qtensor/nvfp4_tensor.py (NVFP4QTensor) ---

/// weight_scale_2 = amax / (6 * 448): on a GPU, amax * fp32(1/2688).
inline float modelopt_weight_scale_2(float amax) { return detail::cuda_divide_by_scalar(amax, 6.0f * 448.0f); }

/// get_weights_scaling_factor: block_amax / (6 * weight_scale_2) (an fp32 multiply, then a true
/// division); an exact zero becomes 1.0 (0x38), then the torch float8 cast. 0/0 stays NaN (0x7F).
inline std::uint8_t modelopt_block_scale(float block_amax, float weight_scale_2) {
  float s = block_amax / (6.0f * weight_scale_2);
  if (s == 0.0f) s = 1.0f;
  return torch_float8_e4m3fn_byte(s);
}

/// _cast_fp4 of one scaled value: the sign bit is (q < 0) (so -0.0 gives +0), the magnitude's
/// index is the count of bounds {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5} below |q| (searchsorted),
/// plus one when |q| is exactly 0.75, 1.75 or 3.5: round to nearest, ties to even. NaN gives 7.
inline std::uint8_t modelopt_e2m1_code(float q) {
  static constexpr float bounds[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const std::uint8_t sign = q < 0.0f ? 1 : 0;
  const float a = std::fabs(q);
  std::uint8_t index = 7;  // searchsorted puts NaN after every bound
  if (!std::isnan(a)) {
    index = 0;
    while (index < 7 && bounds[index] < a) ++index;
  }
  const bool odd_bound = a == 0.75f || a == 1.75f || a == 3.5f;
  return static_cast<std::uint8_t>((sign << 3) + index + (odd_bound ? 1 : 0));
}

/// The element step: x / (float(scale) * weight_scale_2), both fp32 operations, then _cast_fp4.
inline std::uint8_t modelopt_element_code(float x, std::uint8_t scale_byte, float weight_scale_2) {
  const float block_factor = ue4m3::from_bits(scale_byte & 0x7F).to_float() * weight_scale_2;
  // A 0x7F scale byte is NaN in float8_e4m3fn (ue4m3's NaN code too), so the product is NaN.
  return modelopt_e2m1_code(x / block_factor);
}

// --- torchao: torchao/prototype/mx_formats/nvfp4_tensor.py (nvfp4_quantize, per_tensor_amax_to_scale) ---

/// per_tensor_scale = amax / (448 * 6): on a GPU, amax * fp32(1/2688).
inline float torchao_per_tensor_scale(float amax) { return detail::cuda_divide_by_scalar(amax, 448.0f * 6.0f); }

/// block_scale = max_abs / 6 (a GPU multiply by fp32(1/6)), divided by per_tensor_scale, clamped
/// to [torch.finfo(float8_e4m3fn).tiny = 2^-6, 448] (a NaN passes the clamp), cast to float8.
inline std::uint8_t torchao_block_scale(float block_amax, float per_tensor_scale) {
  const float block_scale = detail::cuda_divide_by_scalar(block_amax, 6.0f);
  float scaled = block_scale / per_tensor_scale;
  if (!std::isnan(scaled)) scaled = std::fmin(std::fmax(scaled, 0.015625f), 448.0f);
  return torch_float8_e4m3fn_byte(scaled);
}

/// torchao's float32 -> E2M1 bit conversion (custom_fp_utils._f32_to_floatx_unpacked), applied
/// after the clamp to [-6, 6]: round to nearest even, the sign bit kept (so -0.0 gives 0x8). The
/// integer formula is reproduced as it is, so a NaN gives what it gives there.
inline std::uint8_t torchao_e2m1_code(float v) {
  constexpr std::uint32_t mbits = 1, ebits = 2, exp_bias = 1;
  constexpr std::uint32_t magic_adder = (1u << (23 - mbits - 1)) - 1;
  constexpr float max_normal = 6.0f, min_normal = 1.0f;
  std::uint32_t x = std::isnan(v) ? 0x7FFFFFFFu : nvfp4::detail::float_bits(v);  // a GPU's NaN
  const std::uint32_t sign = x & 0x80000000u;
  x ^= sign;
  const float a = nvfp4::detail::bits_float(x);
  std::uint8_t out;
  if (a >= max_normal) {
    out = 0x7;
  } else if (a < min_normal) {
    // denormal branch: add 2^(denorm_exp - 127 ... ) as a float, take the low bits
    constexpr std::uint32_t denorm_exp = (127 - exp_bias) + (23 - mbits) + 1;
    constexpr std::uint32_t denorm_mask_int = denorm_exp << 23;
    const float denormal = a + nvfp4::detail::bits_float(denorm_mask_int);
    out = static_cast<std::uint8_t>(nvfp4::detail::float_bits(denormal) - denorm_mask_int);
  } else {
    std::uint32_t normal = x;
    const std::uint32_t mant_odd = (normal >> (23 - mbits)) & 1;
    normal += ((exp_bias - 127u) << 23) + magic_adder;  // unsigned wrap-around as int32 adds
    normal += mant_odd;
    out = static_cast<std::uint8_t>(normal >> (23 - mbits));
  }
  (void)ebits;
  return static_cast<std::uint8_t>((out & 0x7) | ((sign >> 28) & 0x8));
}

/// The element step: x * ((1 / per_tensor_scale) / float(scale)), clamped to [-6, 6].
inline std::uint8_t torchao_element_code(float x, std::uint8_t scale_byte, float per_tensor_scale) {
  const float reciprocal = (1.0f / per_tensor_scale) / ue4m3::from_bits(scale_byte & 0x7F).to_float();
  float scaled = x * reciprocal;
  if (!std::isnan(scaled)) scaled = std::fmin(std::fmax(scaled, -6.0f), 6.0f);
  return torchao_e2m1_code(scaled);
}

// --- compressed-tensors: quantization/utils/helpers.py (generate_gparam, calculate_qparams),
//     lifecycle/forward_helpers.py (_quantize), utils/fp4_utils.py (cast_to_fp4),
//     compressors/nvfp4/helpers.py (pack_fp4_to_uint8); llm-compressor's minmax observer ---

/// generate_gparam: 448 * 6 / max(amax, tiny) in the weight's dtype. A Python number divided by a
/// tensor is the tensor's reciprocal times the number (Tensor.__rtruediv__), each rounded to the
/// dtype: for bf16 weights bf16(bf16(1 / amax) * 2688). A NaN or Inf becomes 1.0; then fp32.
inline float compressed_tensors_global_scale(float amax, bool bf16_weights) {
  const float tiny = FLT_MIN;  // torch.finfo(bfloat16).tiny == torch.finfo(float32).tiny
  float reciprocal = 1.0f / std::fmax(amax, tiny);
  if (bf16_weights) reciprocal = round_to_bf16(reciprocal);
  float g = reciprocal * 2688.0f;
  if (bf16_weights) g = round_to_bf16(g);
  if (std::isnan(g) || std::isinf(g)) g = 1.0f;
  return g;
}

/// calculate_qparams for one 16-element group: (amax / 6 in the weight's dtype, a GPU or reduced
/// precision multiply by fp32(1/6)), times the global scale in fp32, clamped to +-448, cast to
/// float8; a zero becomes float8_e4m3fn's "eps" 0.125 (0x20).
inline std::uint8_t compressed_tensors_block_scale(float block_amax, float global_scale, bool bf16_weights) {
  float local = detail::cuda_divide_by_scalar(block_amax, 6.0f);
  if (bf16_weights) local = round_to_bf16(local);
  const float s = std::fmin(global_scale * local, 448.0f);
  const std::uint8_t byte = torch_float8_e4m3fn_byte(s);
  return (byte & 0x7F) == 0 ? std::uint8_t{0x20} : byte;
}

/// _quantize + cast_to_fp4 + pack_fp4_to_uint8 for one element: x / (float(scale) / global_scale)
/// (two fp32 divisions), clamped to [-6, 6], rounded to nearest even by the thresholds of
/// cast_to_fp4, multiplied by torch.sign; the sign bit is signbit of the result, so a negative
/// value that rounds to zero gives 0x8 while -0.0 itself gives 0x0.
inline std::uint8_t compressed_tensors_element_code(float x, std::uint8_t scale_byte, float global_scale) {
  const float effective = ue4m3::from_bits(scale_byte & 0x7F).to_float() / global_scale;
  float v = x / effective;
  v = std::fmin(std::fmax(v, -6.0f), 6.0f);
  const float a = std::fabs(v);
  std::uint8_t index;
  if (a <= 0.25f)
    index = 0;
  else if (a < 0.75f)
    index = 1;
  else if (a <= 1.25f)
    index = 2;
  else if (a < 1.75f)
    index = 3;
  else if (a <= 2.5f)
    index = 4;
  else if (a < 3.5f)
    index = 5;
  else if (a <= 5.0f)
    index = 6;
  else
    index = 7;
  const bool negative = v < 0.0f;  // torch.sign(-0.0) is 0, so -0.0 * ... keeps no sign
  return static_cast<std::uint8_t>(index | (negative ? 0x8 : 0x0));
}

// --- ggml: ggml/src/ggml-quants.c (quantize_row_nvfp4_ref, quantize_row_mxfp4_ref, best_index_mxfp4),
//     ggml/src/ggml-impl.h (ggml_fp32_to_ue4m3, ggml_ue4m3_to_fp32, ggml_e8m0_to_fp32_half) ---

/// ggml's E2M1 table, doubled so that it holds integers (kvalues_fp4), indexed by the E2M1 code.
inline constexpr std::int8_t ggml_doubled_e2m1[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/// ggml_fp32_to_ue4m3: not(x > 0) -> 0; x clamped to 448; normal range: the top three mantissa
/// bits plus the next bit (round half up, not to even); below 2^-6: int(x * 512 + 0.5) limited to
/// 7 (never rounds up into the normal range).
inline std::uint8_t ggml_fp32_to_ue4m3(float x) {
  if (!(x > 0.0f)) return 0;
  if (x > 448.0f) x = 448.0f;
  const std::uint32_t bits = nvfp4::detail::float_bits(x);
  const int fp32_exp = static_cast<int>((bits >> 23) & 0xFF) - 127;
  const int fp32_man = static_cast<int>((bits >> 20) & 0x7);
  int ue4m3_exp = fp32_exp + 7;
  if (ue4m3_exp <= 0) {
    int man = static_cast<int>(x * 512.0f + 0.5f);
    if (man > 7) man = 7;
    if (man < 1) return 0;
    return static_cast<std::uint8_t>(man);
  }
  if (ue4m3_exp >= 15) return 0x7E;
  int ue4m3_man = fp32_man + static_cast<int>((bits >> 19) & 1);
  if (ue4m3_man > 7) {
    ue4m3_man = 0;
    if (++ue4m3_exp >= 15) return 0x7E;
  }
  return static_cast<std::uint8_t>((ue4m3_exp << 3) | ue4m3_man);
}

/// ggml_ue4m3_to_fp32: half the UE4M3 value (it pairs with the doubled table); 0 and 0x7F read 0,
/// the sign bit is ignored.
inline float ggml_ue4m3_half(std::uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const int exp = (x >> 3) & 0xF, man = x & 0x7;
  const float raw = exp == 0 ? std::ldexp(static_cast<float>(man), -9) : std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  return raw * 0.5f;
}

/// ggml_e8m0_to_fp32_half: 2^(e - 128), subnormal for e < 2.
inline float ggml_e8m0_half(std::uint8_t e) {
  return e < 2 ? nvfp4::detail::bits_float(0x00200000u << e) : nvfp4::detail::bits_float(static_cast<std::uint32_t>(e - 1) << 23);
}

/// best_index_mxfp4: the code whose doubled value times d is nearest x, |k*d - x| in fp32; a tie
/// keeps the lower code, so ties go toward zero and a negative value that rounds to zero gets the
/// positive zero 0x0.
inline std::uint8_t ggml_best_index(float x, float d) {
  std::uint8_t best = 0;
  float best_err = std::fabs(static_cast<float>(ggml_doubled_e2m1[0]) * d - x);
  for (std::uint8_t i = 1; i < 16; ++i) {
    const float err = std::fabs(static_cast<float>(ggml_doubled_e2m1[i]) * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

/// The UE4M3 scale byte of an NVFP4 sub-block: ggml_fp32_to_ue4m3(amax / 6) (a true division).
inline std::uint8_t ggml_nvfp4_block_scale(float block_amax) { return ggml_fp32_to_ue4m3(block_amax / 6.0f); }

/// The E8M0 byte of an MXFP4 block: floor(log2f(amax)) - 2 + 127 converted to uint8 (0 for a zero
/// block). log2f is the C library's, as in ggml; a value below 2^-125 makes the conversion of a
/// negative number, undefined in C: x86-64 compilers keep the low byte of the truncated int, and
/// so does this.
inline std::uint8_t ggml_mxfp4_scale(float block_amax) {
  if (!(block_amax > 0.0f)) return 0;
  const float e = std::floor(std::log2(block_amax)) - 2.0f + 127.0f;
  return static_cast<std::uint8_t>(static_cast<std::int32_t>(e) & 0xFF);
}

}  // namespace flavor_rules

namespace detail {

/// Runs `per_block(r, block, c0, c1, block_amax)` over every 16-wide block of x's rows; rows are
/// independent, so they are split among threads and the result does not depend on their number.
template <int BlockCols, class T, class Fn>
void for_each_row_block(matrix_view<const T> x, Fn&& per_block) {
  const index_t rows = x.rows(), cols = x.cols();
  const index_t blocks = (cols + BlockCols - 1) / BlockCols;
  // An empty matrix may still have 2^40 rows (or columns): without this, an unoptimized build
  // walks every empty row (issue 34).
  if (rows == 0 || blocks == 0) return;
  simd::parallel_ranges(rows, simd::worth_parallel(rows * cols), [&](index_t first_row, index_t last_row) {
    for (index_t r = first_row; r < last_row; ++r)
      for (index_t b = 0; b < blocks; ++b) {
        const index_t c0 = b * BlockCols, c1 = std::min<index_t>(c0 + BlockCols, cols);
        float block_amax = 0.0f;
        for (index_t c = c0; c < c1; ++c) block_amax = std::fmax(block_amax, std::fabs(to_float32(x(r, c))));
        per_block(r, b, c0, c1, block_amax);
      }
  });
}

inline void require_block_multiple(index_t cols, index_t multiple, quantizer_flavor f) {
  require(cols % multiple == 0, errc::shape_mismatch,
          std::string("quantize (flavor ") + std::string(quantizer_flavor_name(f)) + "): " + std::to_string(cols) +
              " columns is not a multiple of " + std::to_string(multiple) + ", which that project requires");
}

}  // namespace detail

/// Quantizes x to NVFP4 (1x16 blocks along its rows) as the named project's quantizer does, bit
/// for bit. te is nvfp4::quantize (the fast path). The result's tensor scale is what the project
/// stores: decode_scale() is ModelOpt's weight_scale_2 / torchao's per_tensor_scale (encode_scale()
/// its fp32 reciprocal), encode_scale() is compressed-tensors' weight_global_scale (decode_scale()
/// its reciprocal); ggml has none (both 1). torchao, compressed-tensors and ggml need cols % 16 == 0;
/// ModelOpt pads with zeros like TE. Throws non_finite_error for NaN/Inf, shape_mismatch otherwise.
/// `shared_amax` (>= amax(x)) replaces x's own amax in the tensor scale: one scale for layers an
/// engine fuses into one GEMM (q/k/v, gate/up), as llm-compressor gives them.
template <quantizer_input T>
nvfp4_tensor quantize_nvfp4_flavor(matrix_view<const T> x, quantizer_flavor flavor, std::optional<float> shared_amax = std::nullopt) {
  namespace rules = flavor_rules;
  if (flavor == quantizer_flavor::te && !shared_amax) return quantize<nvfp4_1x16>(x);
  detail::check_input_view(x, "quantize input");
  const float own_amax = amax(x);  // rejects NaN/Inf first
  detail::require(!shared_amax || *shared_amax >= own_amax, errc::invalid_argument,
                  "quantize_nvfp4_flavor: shared_amax below the tensor's amax");
  if (flavor == quantizer_flavor::te) return quantize_with_amax<nvfp4_1x16>(x, *shared_amax);
  const float global_amax = shared_amax ? *shared_amax : own_amax;
  if (flavor != quantizer_flavor::modelopt) detail::require_block_multiple(x.cols(), 16, flavor);
  nvfp4_tensor q(x.rows(), x.cols());
  auto data = q.data();
  auto scales = q.scales();
  const index_t stride = q.data_row_stride(), scale_cols = q.scale_cols();
  auto put = [&](index_t r, index_t c, std::uint8_t code) {
    auto& unit = data[static_cast<std::size_t>(r * stride + c / 2)];
    unit = unit.with(c & 1, e2m1::from_bits(code));
  };
  float decode = 1.0f, encode = 1.0f;
  switch (flavor) {
    case quantizer_flavor::modelopt: {
      decode = rules::modelopt_weight_scale_2(global_amax);
      encode = 1.0f / decode;
      detail::for_each_row_block<16>(x, [&](index_t r, index_t b, index_t c0, index_t c1, float block_amax) {
        const std::uint8_t s = rules::modelopt_block_scale(block_amax, decode);
        scales[static_cast<std::size_t>(r * scale_cols + b)] = ue4m3::from_bits(s);
        for (index_t c = c0; c < c1; ++c) put(r, c, rules::modelopt_element_code(to_float32(x(r, c)), s, decode));
      });
      break;
    }
    case quantizer_flavor::torchao: {
      decode = rules::torchao_per_tensor_scale(global_amax);
      encode = 1.0f / decode;
      detail::for_each_row_block<16>(x, [&](index_t r, index_t b, index_t c0, index_t c1, float block_amax) {
        const std::uint8_t s = rules::torchao_block_scale(block_amax, decode);
        scales[static_cast<std::size_t>(r * scale_cols + b)] = ue4m3::from_bits(s);
        for (index_t c = c0; c < c1; ++c) put(r, c, rules::torchao_element_code(to_float32(x(r, c)), s, decode));
      });
      break;
    }
    case quantizer_flavor::compressed_tensors: {
      constexpr bool bf16_weights = std::is_same_v<T, bf16>;
      encode = rules::compressed_tensors_global_scale(global_amax, bf16_weights);
      decode = 1.0f / encode;
      detail::for_each_row_block<16>(x, [&](index_t r, index_t b, index_t c0, index_t c1, float block_amax) {
        const std::uint8_t s = rules::compressed_tensors_block_scale(block_amax, encode, bf16_weights);
        scales[static_cast<std::size_t>(r * scale_cols + b)] = ue4m3::from_bits(s);
        for (index_t c = c0; c < c1; ++c) put(r, c, rules::compressed_tensors_element_code(to_float32(x(r, c)), s, encode));
      });
      break;
    }
    case quantizer_flavor::ggml: {
      detail::for_each_row_block<16>(x, [&](index_t r, index_t b, index_t c0, index_t c1, float block_amax) {
        const std::uint8_t s = rules::ggml_nvfp4_block_scale(block_amax);
        scales[static_cast<std::size_t>(r * scale_cols + b)] = ue4m3::from_bits(s);
        const float d = rules::ggml_ue4m3_half(s);
        for (index_t c = c0; c < c1; ++c) put(r, c, rules::ggml_best_index(to_float32(x(r, c)), d));
      });
      break;
    }
    case quantizer_flavor::te:
      break;
  }
  q.set_tensor_scale(global_amax, encode, decode);
  return q;
}

/// Quantizes x to MXFP4 (E8M0 per 32) as the named project does: te is nvfp4::quantize<mxfp4>
/// with the OCP floor rule, ggml is quantize_row_mxfp4_ref (needs cols % 32 == 0). Others throw
/// unsupported.
template <quantizer_input T>
mxfp4_tensor quantize_mxfp4_flavor(matrix_view<const T> x, quantizer_flavor flavor) {
  if (flavor == quantizer_flavor::te) return quantize<mxfp4>(x);
  detail::require(flavor == quantizer_flavor::ggml, errc::unsupported,
                  "quantize: no MXFP4 quantizer of flavor " + std::string(quantizer_flavor_name(flavor)) + " (te and ggml have one)");
  detail::check_input_view(x, "quantize input");
  const float global_amax = amax(x);
  detail::require_block_multiple(x.cols(), 32, flavor);
  mxfp4_tensor q(x.rows(), x.cols());
  auto data = q.data();
  auto scales = q.scales();
  const index_t stride = q.data_row_stride(), scale_cols = q.scale_cols();
  detail::for_each_row_block<32>(x, [&](index_t r, index_t b, index_t c0, index_t c1, float block_amax) {
    const std::uint8_t e = flavor_rules::ggml_mxfp4_scale(block_amax);
    scales[static_cast<std::size_t>(r * scale_cols + b)] = e8m0::from_bits(e);
    const float d = flavor_rules::ggml_e8m0_half(e);
    for (index_t c = c0; c < c1; c += 2) {
      const std::uint8_t lo = flavor_rules::ggml_best_index(to_float32(x(r, c)), d);
      const std::uint8_t hi = flavor_rules::ggml_best_index(to_float32(x(r, c + 1)), d);
      data[static_cast<std::size_t>(r * stride + c / 2)] = e2m1x2::from_bits(static_cast<std::uint8_t>(lo | (hi << 4)));
    }
  });
  q.set_tensor_scale(global_amax, 1.0f, 1.0f);
  return q;
}

}  // namespace nvfp4
