// nvfp4/simd/amx/tiles.hpp: Intel AMX (tile registers and the BF16 tile multiply), chosen at run
// time. `available()` asks the CPU (CPUID: AMX-TILE and AMX-BF16), the OS (XCR0 enables the tile
// state) and Linux (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), without which the first
// tile instruction faults) once per process. `hardware_tiles` issues the instructions as inline
// assembly, so no compiler flag is needed: a build for any x86-64 CPU carries the AMX kernels and
// runs them only where available() says so. Other builds (non-x86, non-Linux) compile to
// available() == false. Two switches (environment NVFP4_AMX, or the setters below): the relaxed
// GEMMs on BF16 tiles are on by default, the FP4 GEMM's exact AMX kernels off.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "nvfp4/config.hpp"

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define NVFP4_AMX_COMPILED 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define NVFP4_AMX_COMPILED 0
#endif

namespace nvfp4::simd::amx {

/// Tile registers and their largest shape: 16 rows of 64 bytes.
inline constexpr int tile_count = 8;
inline constexpr int max_rows = 16;
inline constexpr int max_row_bytes = 64;

/// The 64-byte operand of LDTILECFG (palette 1): each tile's rows and bytes per row.
struct alignas(64) tile_config {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t row_bytes[16] = {};
  std::uint8_t rows[16] = {};

  constexpr void set(int tile, int tile_rows, int bytes_per_row) {
    rows[tile] = static_cast<std::uint8_t>(tile_rows);
    row_bytes[tile] = static_cast<std::uint16_t>(bytes_per_row);
  }
};
static_assert(sizeof(tile_config) == 64);

namespace detail {

/// What the CPU and the OS allow, asked once; false wherever AMX is not compiled.
inline bool detect() {
#if NVFP4_AMX_COMPILED
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool amx_bf16 = (edx >> 22) & 1, amx_tile = (edx >> 24) & 1;
  if (!amx_tile || !amx_bf16) return false;
  __cpuid(1, eax, ebx, ecx, edx);
  if (!((ecx >> 27) & 1)) return false;  // OSXSAVE: XGETBV is available
  std::uint32_t xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  constexpr std::uint32_t tile_state = (1u << 17) | (1u << 18);  // XTILECFG, XTILEDATA
  if ((xcr0_low & tile_state) != tile_state) return false;
  // Linux (5.16+) keeps the 8 KiB tile data out of a thread's state until the process asks for it;
  // the permission then holds for every thread of the process.
  constexpr long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
  return syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
#else
  return false;
#endif
}

/// NVFP4_AMX as read once: 1 / on (every AMX kernel), 0 / off (none), unset or anything else: the
/// default (the relaxed GEMMs on tiles only).
enum class amx_setting { all, none, relaxed_only };
inline amx_setting environment_setting() {
  const char* env = std::getenv("NVFP4_AMX");
  if (env && (std::strcmp(env, "1") == 0 || std::strcmp(env, "on") == 0)) return amx_setting::all;
  if (env && (std::strcmp(env, "0") == 0 || std::strcmp(env, "off") == 0)) return amx_setting::none;
  return amx_setting::relaxed_only;
}

inline std::atomic<bool>& allowed_flag() {
  static std::atomic<bool> flag{environment_setting() == amx_setting::all};
  return flag;
}

inline std::atomic<bool>& relaxed_allowed_flag() {
  static std::atomic<bool> flag{environment_setting() != amx_setting::none};
  return flag;
}

}  // namespace detail

/// True where this process can run AMX-BF16 tile instructions (asked once; thread-safe).
inline bool available() {
  static const bool result = detail::detect();
  return result;
}

/// True where AMX is available and the FP4 GEMM's exact AMX kernels (gemm/fp4/simd/mma_amx.hpp)
/// are turned on: environment NVFP4_AMX=1, or set_allowed(true). Off by default: on the one AMX
/// machine measured (a 16-core Sapphire Rapids class Xeon, see docs/benchmarks.md) those kernels
/// ran no faster than the AVX-512 ones (every 16-element group needs its own tile product stored
/// and read back, and that round trip bounds them), so the AVX-512 kernels are the better default.
inline bool usable() {
  // The flag first: available() asks the OS for tile permission, which a process that never
  // turned AMX on should not do.
  return detail::allowed_flag().load(std::memory_order_relaxed) && available();
}

/// Lets the exact AMX kernels run where available, or not (the default). Results do not change:
/// every kernel gives the reference's bits.
inline void set_allowed(bool allowed) { detail::allowed_flag().store(allowed, std::memory_order_relaxed); }

/// True where AMX is available and the relaxed GEMMs may run on BF16 tiles (gemm/detail/
/// tile_gemm.hpp): on by default; NVFP4_AMX=0 or set_relaxed_allowed(false) turns it off. The
/// relaxed results then follow the vector kernels' definition instead (docs/gemm.md, "Relaxed
/// mode"): the switch changes relaxed bits, never exact ones.
inline bool relaxed_usable() { return detail::relaxed_allowed_flag().load(std::memory_order_relaxed) && available(); }

/// Whether the relaxed GEMMs may run on BF16 tiles (the switch alone, whatever the machine has).
inline bool relaxed_allowed() { return detail::relaxed_allowed_flag().load(std::memory_order_relaxed); }

/// Lets the relaxed GEMMs run on BF16 tiles where available (the default), or not.
inline void set_relaxed_allowed(bool allowed) { detail::relaxed_allowed_flag().store(allowed, std::memory_order_relaxed); }

#if NVFP4_AMX_COMPILED
/// The tile instructions themselves. Tile numbers are template arguments (they are part of the
/// instruction). Every operation is ordered with memory ("memory" clobber): tile loads read what
/// plain stores just wrote, and plain loads read what tile stores wrote.
struct hardware_tiles {
  static void configure(const tile_config& config) { __asm__ volatile("ldtilecfg %0" ::"m"(config) : "memory"); }
  static void release() { __asm__ volatile("tilerelease" ::: "memory"); }
  template <int Tile>
  static void load(const void* base, index_t stride_bytes) {
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(stride_bytes), "i"(Tile) : "memory");
  }
  template <int Tile>
  static void store(void* base, index_t stride_bytes) {
    __asm__ volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(base), "r"(stride_bytes), "i"(Tile) : "memory");
  }
  template <int Tile>
  static void zero() {
    __asm__ volatile("tilezero %%tmm%c0" ::"i"(Tile));
  }
  /// tile C += A·B in fp32: for each row m and column n of C, the pairs of bf16 of A's row m and
  /// B's row k (the "VNNI" layout: B row k holds the pairs k of every column).
  template <int C, int A, int B>
  static void dot_bf16() {
    __asm__ volatile("tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(C), "i"(A), "i"(B));
  }
};
#else
/// Builds without the tile instructions: the same names, never reached (available() is false
/// there, and every caller asks it first), so that code over hardware_tiles compiles everywhere.
struct hardware_tiles {
  static void configure(const tile_config&) { std::abort(); }
  static void release() {}
  template <int Tile>
  static void load(const void*, index_t) {
    std::abort();
  }
  template <int Tile>
  static void store(void*, index_t) {
    std::abort();
  }
  template <int Tile>
  static void zero() {
    std::abort();
  }
  template <int C, int A, int B>
  static void dot_bf16() {
    std::abort();
  }
};
#endif

}  // namespace nvfp4::simd::amx
