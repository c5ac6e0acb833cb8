// nvfp4/nvfp4.hpp: the whole core library (standard library + OpenMP only): formats, block
// scaling, the Hadamard transform, the block-scaled GEMM, the NVFP4 recipe, error metrics. Eigen
// interop and file I/O are opt-in: nvfp4/interop/eigen.hpp, nvfp4/io/*.hpp.
#pragma once

#include "nvfp4/config.hpp"
#include "nvfp4/error.hpp"
#include "nvfp4/formats.hpp"
#include "nvfp4/gemm/fp4/gemm.hpp"
#include "nvfp4/metrics/error_metrics.hpp"
#include "nvfp4/nn/linear.hpp"
#include "nvfp4/random/philox.hpp"
#include "nvfp4/scaling.hpp"
#include "nvfp4/transforms/hadamard.hpp"
