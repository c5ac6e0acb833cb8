// Fixture: scaling/ including gemm/, a higher layer, which the check refuses.
#pragma once
#include "nvfp4/gemm/high.hpp"
