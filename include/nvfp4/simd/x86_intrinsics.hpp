// nvfp4/simd/x86_intrinsics.hpp: <immintrin.h> for the ISA kernels; they put their code between
// NVFP4_BEGIN_INTRINSIC_CODE and NVFP4_END_INTRINSIC_CODE (config.hpp says why).
#pragma once

#include <immintrin.h>

#include "nvfp4/config.hpp"
