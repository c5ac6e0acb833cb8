// nvfp4/config.hpp: version, the ISA the translation unit was compiled for, OpenMP detection.
// Every other header includes this one first; nothing here depends on the rest of the library.
#pragma once

#include <cstddef>
#include <cstdint>

#define NVFP4_VERSION_MAJOR 0
#define NVFP4_VERSION_MINOR 1
#define NVFP4_VERSION_PATCH 0

// The results are bit-exact only under IEEE arithmetic as written. -ffast-math (GCC and Clang
// define __FAST_MATH__) reassociates sums and flushes subnormals, and it changes them (measured:
// the NVFP4 and FP8 recipes' Linear outputs). Contraction into FMAs does not: the results are the
// same with -ffp-contract=fast and off (tests/build_flags/).
#if defined(__FAST_MATH__) && !defined(NVFP4_ALLOW_FAST_MATH)
#error \
    "nvfp4: compiled with -ffast-math, which changes the library's bit-exact results; build without it (define NVFP4_ALLOW_FAST_MATH to accept inexact results)"
#endif

// SIMD is chosen at compile time from the compiler's target flags (as Eigen does). Defining
// NVFP4_FORCE_SCALAR before including any header turns every fast path into the scalar one.
#if !defined(NVFP4_FORCE_SCALAR) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#define NVFP4_HAS_AVX512 1
#else
#define NVFP4_HAS_AVX512 0
#endif

#if !defined(NVFP4_FORCE_SCALAR) && defined(__AVX512VNNI__) && NVFP4_HAS_AVX512
#define NVFP4_HAS_AVX512_VNNI 1
#else
#define NVFP4_HAS_AVX512_VNNI 0
#endif

#if !defined(NVFP4_FORCE_SCALAR) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define NVFP4_HAS_AVX2 1
#else
#define NVFP4_HAS_AVX2 0
#endif

#if defined(_OPENMP)
#define NVFP4_HAS_OPENMP 1
#else
#define NVFP4_HAS_OPENMP 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define NVFP4_ALWAYS_INLINE inline __attribute__((always_inline))
#define NVFP4_RESTRICT __restrict__
#define NVFP4_ASSUME(condition)                \
  do {                                         \
    if (!(condition)) __builtin_unreachable(); \
  } while (false)
/// Fetches the cache line at `address` into L1 ahead of use (never faults).
#define NVFP4_PREFETCH(address) __builtin_prefetch(address, 0, 3)
#else
#define NVFP4_ALWAYS_INLINE inline
#define NVFP4_RESTRICT
#define NVFP4_ASSUME(condition) ((void)0)
#define NVFP4_PREFETCH(address) ((void)(address))
#endif

// Brackets code that calls x86 intrinsics. GCC 12's AVX-512 intrinsics self-initialize their
// "undefined" operands, which its own -W(maybe-)uninitialized checks then flag wherever they are
// inlined (GCC bug 105593, fixed in 13). GCC looks the diagnostic state up along a warning's whole
// inlining chain, so silencing it over our kernels' lines is enough, whoever included
// <immintrin.h> first; the user's code keeps its warnings.
#if defined(__GNUC__) && !defined(__clang__)
#define NVFP4_BEGIN_INTRINSIC_CODE                                                           \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define NVFP4_END_INTRINSIC_CODE _Pragma("GCC diagnostic pop")
#else
#define NVFP4_BEGIN_INTRINSIC_CODE
#define NVFP4_END_INTRINSIC_CODE
#endif

namespace nvfp4 {

/// Signed index type for shapes and strides (like Eigen::Index): negative sizes are caught, not
/// wrapped around.
using index_t = std::ptrdiff_t;

/// Instruction sets the fast paths have kernels for (simd/dispatch.hpp picks one per kernel
/// family): the widest one this translation unit is compiled for is compiled_isa.
enum class isa { scalar, avx2, avx512, avx512_vnni, amx_bf16 };

inline constexpr isa compiled_isa = NVFP4_HAS_AVX512 ? isa::avx512 : (NVFP4_HAS_AVX2 ? isa::avx2 : isa::scalar);

constexpr const char* isa_name(isa value) {
  switch (value) {
    case isa::amx_bf16:
      return "amx_bf16";
    case isa::avx512_vnni:
      return "avx512_vnni";
    case isa::avx512:
      return "avx512";
    case isa::avx2:
      return "avx2";
    default:
      return "scalar";
  }
}

}  // namespace nvfp4
