// nvfp4/formats.hpp: every element and scale format of the library (layer 1).
#pragma once

#include "nvfp4/formats/bf16.hpp"
#include "nvfp4/formats/e2m1.hpp"
#include "nvfp4/formats/e4m3.hpp"
#include "nvfp4/formats/e5m2.hpp"
#include "nvfp4/formats/e8m0.hpp"
#include "nvfp4/formats/packed_fp4.hpp"
