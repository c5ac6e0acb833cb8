// nvfp4/training/optimizer_state.hpp: how one optimizer state tensor (an Adam moment, a momentum
// buffer) is kept between steps: FP32, BF16, FP8 (E4M3 or E5M2) with one scale per tensor as
// TransformerEngine's FusedAdam keeps it, or E4M3 with one scale per 256 values as torchao's
// low-bit AdamW keeps it. The optimizers decode to FP32, update in FP32 and encode back.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e5m2.hpp"
#include "nvfp4/scaling/bulk_codecs.hpp"

namespace nvfp4::training {

/// Storage of one optimizer state tensor.
enum class state_format {
  fp32,           ///< 4 bytes per value, exact
  bf16,           ///< 2 bytes per value, round to nearest even (TE FusedAdam's bf16 states)
  fp8_e4m3,       ///< 1 byte per value + one FP32 scale per tensor (TE FusedAdam, scale = absmax / 448)
  fp8_e5m2,       ///< the same with E5M2 (scale = absmax / 57344)
  block_fp8_e4m3  ///< 1 byte per value + one FP32 scale per 256 values (torchao's AdamWFp8)
};

/// Values per scale of block_fp8_e4m3 (torchao's default block_size for its FP8 AdamW).
inline constexpr index_t state_block_size = 256;

constexpr const char* state_format_name(state_format format) {
  switch (format) {
    case state_format::fp32:
      return "fp32";
    case state_format::bf16:
      return "bf16";
    case state_format::fp8_e4m3:
      return "fp8_e4m3";
    case state_format::fp8_e5m2:
      return "fp8_e5m2";
    case state_format::block_fp8_e4m3:
      return "block_fp8_e4m3";
  }
  return "?";
}

/// The format named `name` (as state_format_name writes it). Throws invalid_argument listing the
/// names for anything else.
inline state_format parse_state_format(std::string_view name) {
  for (state_format f :
       {state_format::fp32, state_format::bf16, state_format::fp8_e4m3, state_format::fp8_e5m2, state_format::block_fp8_e4m3}) {
    if (name == state_format_name(f)) return f;
  }
  throw error(errc::invalid_argument,
              "unknown optimizer state format '" + std::string(name) + "'; expected fp32, bf16, fp8_e4m3, fp8_e5m2 or block_fp8_e4m3");
}

/// Bytes a state of `size` values takes in `format`: the codes plus the FP32 scales.
constexpr std::size_t state_bytes(state_format format, index_t size) {
  const auto n = static_cast<std::size_t>(size);
  switch (format) {
    case state_format::fp32:
      return 4 * n;
    case state_format::bf16:
      return 2 * n;
    case state_format::fp8_e4m3:
    case state_format::fp8_e5m2:
      return n + 4;
    case state_format::block_fp8_e4m3:
      return n + 4 * ((n + static_cast<std::size_t>(state_block_size) - 1) / static_cast<std::size_t>(state_block_size));
  }
  return 0;
}

/// One state tensor of `size` values in a chosen format; starts at zero.
class state_tensor {
 public:
  state_tensor() = default;
  state_tensor(state_format format, index_t size) : format_(format), size_(size) {
    nvfp4::detail::require(size >= 0, errc::invalid_argument, "optimizer state: negative size");
    const auto n = static_cast<std::size_t>(size);
    switch (format) {
      case state_format::fp32:
        fp32_.assign(n, 0.0f);
        break;
      case state_format::bf16:
        bf16_.assign(n, bf16{});
        break;
      case state_format::fp8_e4m3:
      case state_format::fp8_e5m2:
        codes_.assign(n, 0);
        scales_.assign(1, 0.0f);
        break;
      case state_format::block_fp8_e4m3:
        codes_.assign(n, 0);
        scales_.assign((n + state_block_size - 1) / state_block_size, 0.0f);
        break;
    }
  }

  state_format format() const { return format_; }
  index_t size() const { return size_; }
  /// Bytes held: codes plus FP32 scales (state_bytes(format, size)).
  std::size_t bytes() const { return state_bytes(format_, size_); }
  /// The FP32 decode scales: one for a per-tensor FP8 state, one per block for a block state, none
  /// otherwise. A stored value is code * scale.
  std::span<const float> scales() const { return scales_; }
  /// The stored codes of an FP8 state (one byte per value).
  std::span<const std::uint8_t> codes() const { return codes_; }

  /// Writes the stored values, decoded to FP32, into out[0, size).
  void load(std::span<float> out) const {
    nvfp4::detail::require(static_cast<index_t>(out.size()) == size_, errc::shape_mismatch, "optimizer state load: wrong size");
    const index_t n = size_;
    switch (format_) {
      case state_format::fp32:
        std::copy(fp32_.begin(), fp32_.end(), out.begin());
        return;
      case state_format::bf16:
        for (index_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = bf16_[static_cast<std::size_t>(i)].to_float();
        return;
      case state_format::fp8_e4m3:
      case state_format::fp8_e5m2: {
        decode_codes(0, n, out.data());
        const float scale = scales_[0];
        for (index_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] *= scale;
        return;
      }
      case state_format::block_fp8_e4m3: {
        decode_codes(0, n, out.data());
        for (index_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] *= scales_[static_cast<std::size_t>(i / state_block_size)];
        return;
      }
    }
  }

  /// Stores values[0, size) (finite; the optimizers check gradients first). FP8 per tensor, as TE's
  /// FusedAdam: scale = absmax / fp8_max (FP32 division), codes = fp8(x * (1 / scale)) saturated,
  /// decode scale = 1 / (1 / scale). An all-zero tensor keeps scale 0 and +0 codes (TE would
  /// multiply by 1/0). Block FP8, as torchao: per 256 values scale = max(amax, 1e-12) / 448,
  /// codes = e4m3(x / scale); the last block may be shorter (torchao keeps such tensors in FP32).
  void store(std::span<const float> values) {
    nvfp4::detail::require(static_cast<index_t>(values.size()) == size_, errc::shape_mismatch, "optimizer state store: wrong size");
    const index_t n = size_;
    switch (format_) {
      case state_format::fp32:
        std::copy(values.begin(), values.end(), fp32_.begin());
        return;
      case state_format::bf16:
        for (index_t i = 0; i < n; ++i) bf16_[static_cast<std::size_t>(i)] = bf16::from_float(values[static_cast<std::size_t>(i)]);
        return;
      case state_format::fp8_e4m3:
      case state_format::fp8_e5m2: {
        float absmax = 0.0f;
        for (float v : values) absmax = std::max(absmax, std::fabs(v));
        scratch_.resize(static_cast<std::size_t>(n));
        if (absmax == 0.0f) {
          std::fill(codes_.begin(), codes_.end(), std::uint8_t{0});
          scales_[0] = 0.0f;
          return;
        }
        const float fp8_max = format_ == state_format::fp8_e4m3 ? e4m3_max : e5m2_max;
        const float scale = absmax / fp8_max;
        const float encode_scale = 1.0f / scale;
        for (index_t i = 0; i < n; ++i) scratch_[static_cast<std::size_t>(i)] = values[static_cast<std::size_t>(i)] * encode_scale;
        encode_codes(0, n);
        scales_[0] = 1.0f / encode_scale;
        return;
      }
      case state_format::block_fp8_e4m3: {
        scratch_.resize(static_cast<std::size_t>(n));
        for (index_t begin = 0; begin < n; begin += state_block_size) {
          const index_t end = std::min(n, begin + state_block_size);
          float amax = 0.0f;
          for (index_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(values[static_cast<std::size_t>(i)]));
          const float scale = std::max(amax, 1e-12f) / e4m3_max;
          for (index_t i = begin; i < end; ++i) scratch_[static_cast<std::size_t>(i)] = values[static_cast<std::size_t>(i)] / scale;
          scales_[static_cast<std::size_t>(begin / state_block_size)] = scale;
        }
        encode_codes(0, n);
        return;
      }
    }
  }

 private:
  void decode_codes(index_t begin, index_t count, float* out) const {
    if (format_ == state_format::fp8_e5m2) {
      nvfp4::decode_codes<e5m2_traits>(codes_.data() + begin, count, out);
    } else {
      nvfp4::decode_codes<e4m3_traits>(codes_.data() + begin, count, out);
    }
  }
  void encode_codes(index_t begin, index_t count) {
    if (format_ == state_format::fp8_e5m2) {
      nvfp4::encode_codes<e5m2_traits>(scratch_.data() + begin, count, codes_.data() + begin);
    } else {
      nvfp4::encode_codes<e4m3_traits>(scratch_.data() + begin, count, codes_.data() + begin);
    }
  }

  state_format format_ = state_format::fp32;
  index_t size_ = 0;
  std::vector<float> fp32_;
  std::vector<bf16> bf16_;
  std::vector<std::uint8_t> codes_;
  std::vector<float> scales_;
  std::vector<float> scratch_;
};

}  // namespace nvfp4::training
