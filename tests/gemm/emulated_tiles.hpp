// tests/gemm/emulated_tiles.hpp: a plain C++ model of the AMX tile unit (the operations of
// simd::amx::hardware_tiles), written from Intel's description of LDTILECFG, TILELOADD,
// TILESTORED, TILEZERO and TDPBF16PS (SDM vol. 2, "TDPBF16PS", Operation): per row m of C and
// column n, an even and an odd fp32 sum start at zero; for each pair k of A's row m and B's row k
// the even one takes a[2k]·b[2n]... (element 0 of both pairs) and the odd one element 1, each an
// FMA rounded to nearest even; then C = C + (even + odd). bf16 inputs that are denormal read as
// zero and denormal results are flushed to zero. It lets the tile kernels' logic (layouts,
// strides, block walk, fallbacks, epilogues) run and be checked against the references on CPUs
// without AMX; the device's hardware tests compare the real unit with the same references.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "nvfp4/simd/amx/tiles.hpp"

namespace nvfp4::gemm_test_data {

struct emulated_tiles {
  struct state {
    simd::amx::tile_config config;
    alignas(64) std::uint8_t tiles[simd::amx::tile_count][simd::amx::max_rows][simd::amx::max_row_bytes];
    bool configured = false;
  };
  static state& current() {
    static thread_local state s;
    return s;
  }
  static void configure(const simd::amx::tile_config& config) {
    current().config = config;
    std::memset(current().tiles, 0, sizeof current().tiles);
    current().configured = true;
  }
  static void release() { current().configured = false; }
  template <int Tile>
  static void load(const void* base, index_t stride_bytes) {
    state& s = current();
    require_configured(s);
    std::memset(s.tiles[Tile], 0, sizeof s.tiles[Tile]);
    for (int r = 0; r < s.config.rows[Tile]; ++r)
      std::memcpy(s.tiles[Tile][r], static_cast<const std::uint8_t*>(base) + r * stride_bytes, s.config.row_bytes[Tile]);
  }
  template <int Tile>
  static void store(void* base, index_t stride_bytes) {
    state& s = current();
    require_configured(s);
    for (int r = 0; r < s.config.rows[Tile]; ++r)
      std::memcpy(static_cast<std::uint8_t*>(base) + r * stride_bytes, s.tiles[Tile][r], s.config.row_bytes[Tile]);
  }
  template <int Tile>
  static void zero() {
    require_configured(current());
    std::memset(current().tiles[Tile], 0, sizeof current().tiles[Tile]);
  }
  template <int C, int A, int B>
  static void dot_bf16() {
    state& s = current();
    require_configured(s);
    const int rows = s.config.rows[C], columns = s.config.row_bytes[C] / 4, pairs = s.config.row_bytes[A] / 4;
    if (s.config.rows[A] != rows || s.config.rows[B] != pairs || s.config.row_bytes[B] != s.config.row_bytes[C]) std::abort();
    // The operands as floats once (denormals read as zero), then the SDM's loops.
    float a[simd::amx::max_rows][simd::amx::max_row_bytes / 2], b[simd::amx::max_rows][simd::amx::max_row_bytes / 2];
    for (int m = 0; m < rows; ++m)
      for (int e = 0; e < 2 * pairs; ++e) a[m][e] = read_bf16(s.tiles[A][m] + 2 * e);
    for (int k = 0; k < pairs; ++k)
      for (int e = 0; e < 2 * columns; ++e) b[k][e] = read_bf16(s.tiles[B][k] + 2 * e);
    for (int m = 0; m < rows; ++m)
      for (int n = 0; n < columns; ++n) {
        float even = 0.0f, odd = 0.0f;
        for (int k = 0; k < pairs; ++k) {
          even = flush(std::fma(a[m][2 * k], b[k][2 * n], even));
          odd = flush(std::fma(a[m][2 * k + 1], b[k][2 * n + 1], odd));
        }
        const float c = flush(flush(read_float(s.tiles[C][m] + 4 * n)) + flush(even + odd));
        std::memcpy(s.tiles[C][m] + 4 * n, &c, 4);
      }
  }

 private:
  static void require_configured(const state& s) {
    if (!s.configured) std::abort();  // the hardware raises #UD: a kernel that forgets LDTILECFG
  }
  static float flush(float x) { return std::fabs(x) < 0x1p-126f ? std::copysign(0.0f, x) : x; }
  static float read_float(const std::uint8_t* p) {
    float x;
    std::memcpy(&x, p, 4);
    return x;
  }
  static float read_bf16(const std::uint8_t* p) {
    std::uint16_t bits;
    std::memcpy(&bits, p, 2);
    return flush(std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16));
  }
};

/// Turns the relaxed GEMMs' tile path off (or on) for a scope, then restores the switch: tests of
/// the vector kernels' relaxed mode compare with the references' vector chain on AMX machines too.
class relaxed_tiles_scope {
 public:
  explicit relaxed_tiles_scope(bool allowed) : previous_(simd::amx::relaxed_allowed()) { simd::amx::set_relaxed_allowed(allowed); }
  ~relaxed_tiles_scope() { simd::amx::set_relaxed_allowed(previous_); }
  relaxed_tiles_scope(const relaxed_tiles_scope&) = delete;
  relaxed_tiles_scope& operator=(const relaxed_tiles_scope&) = delete;

 private:
  bool previous_;
};

}  // namespace nvfp4::gemm_test_data
