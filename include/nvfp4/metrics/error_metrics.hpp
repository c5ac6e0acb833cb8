// nvfp4/metrics/error_metrics.hpp: how far a quantized-and-restored tensor is from the original:
// MSE, RMSE, SQNR (dB), max abs / max rel error, cosine similarity. Sums are taken in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>

#include "nvfp4/error.hpp"

namespace nvfp4 {

/// All metrics of `approx` against `reference` in one pass.
struct error_report {
  double mse = 0;                ///< mean of (approx - reference)^2
  double rmse = 0;               ///< sqrt(mse)
  double sqnr_db = 0;            ///< 10 log10(Σ reference^2 / Σ error^2); +Inf when exact
  double max_abs_error = 0;      ///< max |approx - reference| (NaN when a pair gives NaN)
  double max_rel_error = 0;      ///< max |approx - reference| / |reference| over reference != 0
  double cosine_similarity = 0;  ///< <approx, reference> / (|approx| |reference|); 1 when both are 0
};

namespace detail {
inline void check_same_length(std::span<const float> reference, std::span<const float> approx) {
  require(reference.size() == approx.size(), errc::shape_mismatch,
          "error metrics: reference has " + std::to_string(reference.size()) + " elements, approximation " + std::to_string(approx.size()));
}
}  // namespace detail

/// Computes every metric. Throws nvfp4::error on a length mismatch. Empty inputs give an all-zero
/// report with sqnr +Inf and cosine 1 (nothing differs).
inline error_report compare(std::span<const float> reference, std::span<const float> approx) {
  detail::check_same_length(reference, approx);
  double signal = 0, noise = 0, dot = 0, approx_norm = 0;
  error_report r;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double x = reference[i], y = approx[i], e = y - x;
    signal += x * x;
    noise += e * e;
    dot += x * y;
    approx_norm += y * y;
    // NaN propagates (std::max would drop it: compare(x, all-NaN) reported 0, issue 34).
    if (!(std::fabs(e) <= r.max_abs_error)) r.max_abs_error = std::isnan(r.max_abs_error) ? r.max_abs_error : std::fabs(e);
    if (x != 0 && !(std::fabs(e) / std::fabs(x) <= r.max_rel_error))
      r.max_rel_error = std::isnan(r.max_rel_error) ? r.max_rel_error : std::fabs(e) / std::fabs(x);
  }
  const double n = static_cast<double>(reference.size());
  r.mse = n > 0 ? noise / n : 0.0;
  r.rmse = std::sqrt(r.mse);
  r.sqnr_db = noise == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(signal / noise);
  r.cosine_similarity = (signal == 0 && approx_norm == 0)   ? 1.0
                        : (signal == 0 || approx_norm == 0) ? 0.0
                                                            : dot / std::sqrt(signal * approx_norm);
  return r;
}

inline double mse(std::span<const float> reference, std::span<const float> approx) { return compare(reference, approx).mse; }
inline double rmse(std::span<const float> reference, std::span<const float> approx) { return compare(reference, approx).rmse; }
inline double sqnr_db(std::span<const float> reference, std::span<const float> approx) { return compare(reference, approx).sqnr_db; }
inline double max_abs_error(std::span<const float> reference, std::span<const float> approx) {
  return compare(reference, approx).max_abs_error;
}
inline double max_rel_error(std::span<const float> reference, std::span<const float> approx) {
  return compare(reference, approx).max_rel_error;
}
inline double cosine_similarity(std::span<const float> reference, std::span<const float> approx) {
  return compare(reference, approx).cosine_similarity;
}

}  // namespace nvfp4
