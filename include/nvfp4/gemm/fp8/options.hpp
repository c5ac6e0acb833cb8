// nvfp4/gemm/fp8/options.hpp: how the FP8 and MXFP8 GEMMs accumulate and finish: the tensor core
// whose step they follow, exact or relaxed, the split accumulator's promotion interval, the bias,
// and the order of roundings of FP8 block scaling's per-block epilogue.
#pragma once

#include <span>

#include "nvfp4/gemm/fp8/mma_model.hpp"
#include "nvfp4/gemm/operands.hpp"

namespace nvfp4 {

/// How a block-scaled FP8 GEMM adds each 128-element K block's partial P into the fp32 output y
/// (docs/numerics.md, "FP8 block scaling: the GPU and TE's reference").
enum class fp8_block_epilogue {
  /// What an H100 computes (cuBLASLt's blockwise scaling, measured bit for bit): y = fma(P,
  /// fl(s_A * s_B), y) when either operand has 128x128 blocks, y = fma(fl(P * s_A), s_B, y) when
  /// both have 1x128 blocks, except for K = 128 (one block): fl(fl(P * s_B) * s_A). The default.
  hardware,
  /// TE's Python reference GEMM (the one TE's block-scaling tests compare against): y = fma(fl(P *
  /// s_1D), s_other, y) with s_1D the scale of the 1x128 operand (A's when both are). Differs from
  /// the GPU for 1x128 x 128x128 and 128x128 x 1x128 unless the scales are powers of two.
  te_reference
};

/// How an FP8 GEMM accumulates (docs/numerics_spec.md §9 steps 7-8).
struct fp8_gemm_options {
  /// Which tensor core's step (Hopper wgmma: 13 bits; Blackwell f8f6f4: 25 bits). Read by the
  /// FP8 GEMMs only: MXFP8 exists on Blackwell alone, so mxfp8_gemm / mxfp8_mma always run
  /// kind::mxf8f6f4's step and ignore it.
  fp8::mma::tensor_core core = fp8::mma::tensor_core::hopper;
  /// exact: the tensor core's step, bit for bit; relaxed: fp32 FMA per element (not bit-exact).
  gemm_mode mode = gemm_mode::exact;
  /// Elements of K after which the tensor core's partial sum is added (one fp32 addition, round to
  /// nearest) into an fp32 accumulator and restarted from zero: TE's split accumulator
  /// (use_split_accumulator = True). 0 keeps the whole K chain inside the tensor core (fast
  /// accumulation, use_split_accumulator = False). A multiple of 32. Which interval cuBLAS uses is
  /// not public; 128 (four K=32 instructions) is DeepSeek-V3's and our default, a documented choice.
  index_t promotion_interval = 128;
  /// Added to every output row (per column, length N) before the output is rounded, as cuBLAS's
  /// bias epilogue does; empty for none.
  std::span<const float> bias = {};
  /// Block-scaled operands only: the GPU's order of roundings or TE's reference's.
  fp8_block_epilogue block_epilogue = fp8_block_epilogue::hardware;
};

}  // namespace nvfp4
