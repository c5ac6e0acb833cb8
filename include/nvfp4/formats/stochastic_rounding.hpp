// nvfp4/formats/stochastic_rounding.hpp: stochastic rounding of a float to E2M1 from 8 random
// bits, the rule of the hardware's cvt.rs.satfinite.e2m1x4.f32 as TE models it (docs/numerics_spec.md §5).
#pragma once

#include <cmath>
#include <cstdint>

#include "nvfp4/formats/e2m1.hpp"

namespace nvfp4 {

namespace detail {
/// Spacing of the E2M1 grid at magnitude a (the step to the next code up).
constexpr float e2m1_step(float a) { return a >= 4.0f ? 2.0f : (a >= 2.0f ? 1.0f : 0.5f); }
}  // namespace detail

/// Rounds x to E2M1, up with probability equal to the fraction of the grid step x lies above the
/// lower neighbour: t = fma(r8 / 256, step(|x|), |x|); q = min(floor(t / step(t)) * step(t), 6).
/// Exact grid points never move. x must be finite.
inline e2m1 e2m1_from_float_stochastic(float x, std::uint8_t random8) {
  const float magnitude = std::fabs(x);
  const float u = static_cast<float>(random8) * (1.0f / 256.0f);
  const float t = std::fma(u, detail::e2m1_step(magnitude), magnitude);
  const float step = detail::e2m1_step(t);
  const float q = std::fmin(std::floor(t / step) * step, e2m1_max);
  return e2m1::from_float(std::signbit(x) ? -q : q);
}

}  // namespace nvfp4
