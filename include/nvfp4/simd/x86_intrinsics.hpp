// nvfp4/simd/x86_intrinsics.hpp: <immintrin.h>, included so that GCC 12's false
// "uninitialized" warnings on its AVX-512 intrinsics stay quiet (GCC bug 105593).
#pragma once

// GCC 12's AVX-512 intrinsics self-initialize their "undefined" operands, which its own
// (-W)uninitialized checks flag wherever they are inlined. The check follows the state of the
// diagnostic at the intrinsic header's lines, so this only helps when this header is the first
// to include <immintrin.h> in a translation unit: include it instead of <immintrin.h>.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
