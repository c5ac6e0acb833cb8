// A C ABI over nvfp4's scalar codecs, for the ml_dtypes cross-check (tests/device/).
#include <cstddef>
#include <cstdint>

#include "nvfp4/formats.hpp"

namespace {
nvfp4::overflow_policy policy_of(int p) { return p ? nvfp4::overflow_policy::propagate : nvfp4::overflow_policy::saturate; }
}  // namespace

extern "C" {
void nvfp4_encode_e4m3(const float* x, std::uint8_t* out, std::size_t n, int policy) {
#pragma omp parallel for
  for (std::size_t i = 0; i < n; ++i) out[i] = nvfp4::e4m3::from_float(x[i], policy_of(policy)).bits();
}
void nvfp4_encode_e5m2(const float* x, std::uint8_t* out, std::size_t n, int policy) {
#pragma omp parallel for
  for (std::size_t i = 0; i < n; ++i) out[i] = nvfp4::e5m2::from_float(x[i], policy_of(policy)).bits();
}
void nvfp4_encode_e2m1(const float* x, std::uint8_t* out, std::size_t n, int policy) {
#pragma omp parallel for
  for (std::size_t i = 0; i < n; ++i) out[i] = nvfp4::e2m1::from_float(x[i], policy_of(policy)).bits();
}
}
