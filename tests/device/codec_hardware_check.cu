// Cross-check on an NVIDIA GPU (sm_89 or newer): the hardware's own conversions
// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 and cvt.rn.bf16.f32 against nvfp4's codecs, over all 2^32
// float32 bit patterns. Not part of CI (no GPU there); see tests/device/README.md.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "nvfp4/formats.hpp"

namespace {

constexpr std::uint64_t kChunk = 1ull << 28;

__global__ void hardware_convert(std::uint32_t first, std::uint8_t* e4m3_out, std::uint8_t* e5m2_out,
                                 std::uint16_t* bf16_out, std::uint32_t count) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const float x = __uint_as_float(first + i);
  std::uint16_t pair;
  // Both halves get x; the low byte is the conversion of the second source operand.
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %1;" : "=h"(pair) : "f"(x));
  e4m3_out[i] = static_cast<std::uint8_t>(pair & 0xFF);
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %1;" : "=h"(pair) : "f"(x));
  e5m2_out[i] = static_cast<std::uint8_t>(pair & 0xFF);
  std::uint16_t b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(x));
  bf16_out[i] = b;
}

bool is_nan_code_e5m2(std::uint8_t c) { return (c & 0x7F) > 0x7C; }

}  // namespace

int main() {
  std::uint8_t *d_e4m3, *d_e5m2;
  std::uint16_t* d_bf16;
  cudaMalloc(&d_e4m3, kChunk);
  cudaMalloc(&d_e5m2, kChunk);
  cudaMalloc(&d_bf16, kChunk * 2);
  std::vector<std::uint8_t> e4m3(kChunk), e5m2(kChunk);
  std::vector<std::uint16_t> b16(kChunk);
  std::uint64_t mismatch_e4m3 = 0, mismatch_e5m2 = 0, mismatch_bf16 = 0;
  for (std::uint64_t first = 0; first < (1ull << 32); first += kChunk) {
    hardware_convert<<<kChunk / 256, 256>>>(static_cast<std::uint32_t>(first), d_e4m3, d_e5m2, d_bf16, kChunk);
    cudaMemcpy(e4m3.data(), d_e4m3, kChunk, cudaMemcpyDeviceToHost);
    cudaMemcpy(e5m2.data(), d_e5m2, kChunk, cudaMemcpyDeviceToHost);
    cudaMemcpy(b16.data(), d_bf16, kChunk * 2, cudaMemcpyDeviceToHost);
#pragma omp parallel for reduction(+ : mismatch_e4m3, mismatch_e5m2, mismatch_bf16)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(kChunk); ++i) {
      const std::uint32_t bits = static_cast<std::uint32_t>(first + static_cast<std::uint64_t>(i));
      float x;
      std::memcpy(&x, &bits, 4);
      const std::uint8_t ours4 = nvfp4::e4m3::from_float(x).bits();
      const std::uint8_t ours5 = nvfp4::e5m2::from_float(x).bits();
      const std::uint16_t oursb = nvfp4::bf16::from_float(x).bits();
      const bool nan = x != x;
      // E4M3 has one NaN code per sign, so NaN inputs must match exactly; E5M2 NaN payloads are
      // not part of the contract (any NaN code matches any NaN code).
      if (ours4 != e4m3[i]) {
        if (mismatch_e4m3 < 8) std::printf("e4m3 0x%08x: hw 0x%02x ours 0x%02x\n", bits, e4m3[i], ours4);
        ++mismatch_e4m3;
      }
      if (nan ? !is_nan_code_e5m2(e5m2[i]) || !is_nan_code_e5m2(ours5) : ours5 != e5m2[i]) {
        if (mismatch_e5m2 < 8) std::printf("e5m2 0x%08x: hw 0x%02x ours 0x%02x\n", bits, e5m2[i], ours5);
        ++mismatch_e5m2;
      }
      if (nan ? ((b16[i] & 0x7FFF) <= 0x7F80 || (oursb & 0x7FFF) <= 0x7F80) : oursb != b16[i]) {
        if (mismatch_bf16 < 8) std::printf("bf16 0x%08x: hw 0x%04x ours 0x%04x\n", bits, b16[i], oursb);
        ++mismatch_bf16;
      }
    }
  }
  {
    // The NaN codes the hardware writes, for the record.
    hardware_convert<<<1, 1>>>(0x7FC00000u, d_e4m3, d_e5m2, d_bf16, 1);
    std::uint8_t positive[2], negative[2];
    cudaMemcpy(&positive[0], d_e4m3, 1, cudaMemcpyDeviceToHost);
    cudaMemcpy(&positive[1], d_e5m2, 1, cudaMemcpyDeviceToHost);
    hardware_convert<<<1, 1>>>(0xFFC00000u, d_e4m3, d_e5m2, d_bf16, 1);
    cudaMemcpy(&negative[0], d_e4m3, 1, cudaMemcpyDeviceToHost);
    cudaMemcpy(&negative[1], d_e5m2, 1, cudaMemcpyDeviceToHost);
    std::printf("hardware NaN codes: e4m3 +NaN 0x%02x -NaN 0x%02x, e5m2 +NaN 0x%02x -NaN 0x%02x\n", positive[0],
                negative[0], positive[1], negative[1]);
  }
  std::printf("all 2^32 float32 inputs vs the GPU's cvt (satfinite):\n");
  std::printf("  e4m3: %llu mismatches (NaN inputs included, exact codes)\n", (unsigned long long)mismatch_e4m3);
  std::printf("  e5m2: %llu mismatches\n  bf16: %llu mismatches\n", (unsigned long long)mismatch_e5m2,
              (unsigned long long)mismatch_bf16);
  return (mismatch_e4m3 || mismatch_e5m2 || mismatch_bf16) ? 1 : 0;
}
