// nvfp4/scaling.hpp: block scaling (layer 2): formats' descriptors, quantized tensors, the
// quantizers, scale rules and scale layouts.
#pragma once

#include "nvfp4/scaling/block_format.hpp"
#include "nvfp4/scaling/layout.hpp"
#include "nvfp4/scaling/matrix_view.hpp"
#include "nvfp4/scaling/quantize.hpp"
#include "nvfp4/scaling/quantize_options.hpp"
#include "nvfp4/scaling/quantized_tensor.hpp"
#include "nvfp4/scaling/scale_rules.hpp"
