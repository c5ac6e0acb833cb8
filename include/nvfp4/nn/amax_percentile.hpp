// nvfp4/nn/amax_percentile.hpp: an adaptive global amax, the q-quantile of |x| instead of its
// maximum, as an nvfp4_amax_rule, and the NVFP4 Linear engine whose activations and gradients
// take their tensor scale from it.
// NOT a TransformerEngine recipe: TE's NVFP4 and FP8 scales always come from the true amax. A
// research control for tensors whose few largest values waste the scale's range.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "nvfp4/error.hpp"
#include "nvfp4/nn/dense.hpp"
#include "nvfp4/recipes/nvfp4_recipe.hpp"

namespace nvfp4::nn {

namespace detail {
/// The q-quantile of |v| over the `count` values `visit(f)` passes to f, always in the same order
/// (amax_percentile). A radix selection: the magnitudes' bit patterns order as the magnitudes do,
/// so one pass counts them by their top 16 bits (exponent and 7 mantissa bits), and a second
/// selects within the one bucket that holds the wanted rank. Exact, and touches no copy of the
/// tensor but that bucket.
template <class Visit>
float quantile_of_magnitudes(std::size_t count, double q, Visit&& visit) {
  nvfp4::detail::require(q > 0.0 && q <= 1.0, errc::invalid_argument, "amax_percentile: q must be in (0, 1], got " + std::to_string(q));
  if (count == 0) return 0.0f;
  constexpr std::uint32_t magnitude_mask = 0x7FFFFFFFu;
  constexpr int bucket_shift = 16;
  std::vector<std::size_t> buckets(std::size_t{1} << (31 - bucket_shift), 0);
  std::size_t index = 0;
  visit([&](float v) {
    if (!std::isfinite(v))
      nvfp4::detail::require(false, errc::non_finite_input, "amax_percentile: NaN or Inf at index " + std::to_string(index));
    ++buckets[(std::bit_cast<std::uint32_t>(v) & magnitude_mask) >> bucket_shift];
    ++index;
  });
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(count)));
  std::size_t wanted = std::min(count, std::max<std::size_t>(rank, 1)) - 1;  // 0-based, ascending
  std::uint32_t bucket = 0;
  while (wanted >= buckets[bucket]) wanted -= buckets[bucket++];
  std::vector<std::uint32_t> candidates;
  candidates.reserve(buckets[bucket]);
  visit([&](float v) {
    const std::uint32_t key = std::bit_cast<std::uint32_t>(v) & magnitude_mask;
    if (key >> bucket_shift == bucket) candidates.push_back(key);
  });
  std::nth_element(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(wanted), candidates.end());
  return std::bit_cast<float>(candidates[wanted]);
}
}  // namespace detail

/// The q-quantile of |x| (the smallest |x_i| with at least ceil(q·n) of the n values at or below
/// it); q = 1 is the amax. Exact and order-independent. Throws invalid_argument for q outside
/// (0, 1], non_finite_input for NaN/Inf in x. Zero for an empty x.
inline float amax_percentile(std::span<const float> x, double q) {
  return detail::quantile_of_magnitudes(x.size(), q, [&](auto&& f) {
    for (const float v : x) f(v);
  });
}
/// The same over a view's elements (NaN/Inf indices counted in row-major order).
inline float amax_percentile(matrix_view<const float> values, double q) {
  const auto count = static_cast<std::size_t>(std::max<index_t>(values.rows(), 0) * std::max<index_t>(values.cols(), 0));
  return detail::quantile_of_magnitudes(count, q, [&](auto&& f) {
    for (index_t r = 0; r < values.rows(); ++r)
      for (index_t c = 0; c < values.cols(); ++c) f(values(r, c));
  });
}

/// An nvfp4_amax_rule: the q-quantile of |x| as the global amax of activations and gradients
/// (over the transformed values for a copy with RHT, as TE takes its amax after the transform);
/// weights keep TE's amax. Throws invalid_argument for q outside (0, 1].
inline nvfp4_amax_rule percentile_amax_rule(double q) {
  nvfp4::detail::require(q > 0.0 && q <= 1.0, errc::invalid_argument,
                         "percentile_amax_rule: q must be in (0, 1], got " + std::to_string(q));
  return [q](const nvfp4_amax_query& query) { return query.role == tensor_role::weight ? query.amax : amax_percentile(query.values, q); };
}

struct percentile_amax_options {
  double quantile = 0.999;       ///< in (0, 1]; 1 is TE's amax (the maximum)
  nvfp4_block_scaling recipe{};  ///< every switch of the recipe (row-scaled activations keep their row amaxes)
  gemm_mode mode = gemm_mode::exact;
  std::uint64_t seed = 0;  ///< as linear_options::seed: gradient SR seeds derive from it per step
};

/// The Linear layer's NVFP4 (nn/linear.hpp, BF16 high precision) with percentile_amax_rule as its
/// linear_options::nvfp4_amax: TE's recipe except for the global amax of activations and
/// gradients. With quantile 1 every result equals the plain Linear's NVFP4 bit for bit.
class nvfp4_percentile_engine final : public gemm_engine {
 public:
  /// Throws invalid_argument for a quantile outside (0, 1] or a recipe TE rejects.
  nvfp4_percentile_engine(index_t in, index_t out, const percentile_amax_options& options)
      : engine_(in, out, options.recipe,
                {.dtype = high_precision::bf16,
                 .mode = options.mode,
                 .seed = options.seed,
                 .nvfp4_amax = percentile_amax_rule(options.quantile)}),
        name_(quantile_name(options.quantile)) {}
  std::string name() const override { return name_; }
  linear& layer() { return engine_.layer(); }

  void forward(matrix_view<const float> x, matrix_view<const float> w, matrix_view<float> y, bool training) override {
    engine_.forward(x, w, y, training);
  }
  void backward(matrix_view<const float> dy, matrix_view<float> dx, matrix_view<float> dw) override { engine_.backward(dy, dx, dw); }

 private:
  static std::string quantile_name(double quantile) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", quantile);
    return std::string("nvfp4_amax_q") + text;
  }

  linear_engine engine_;
  std::string name_;
};

}  // namespace nvfp4::nn
