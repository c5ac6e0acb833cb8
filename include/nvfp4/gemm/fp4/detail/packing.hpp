// nvfp4/gemm/fp4/detail/packing.hpp: the GEMM operand packers, written once over an ISA's lane operations
// (simd/<isa>/ops.hpp): packed E2M1 nibbles to doubled int8 values by a 16-byte table lookup, the
// group sums of the broadcast operand, and a tile's lanes by the one in-register transpose. They
// build the layouts of gemm/fp4/detail/mma_layout.hpp; every kernel set packs with its ISA's Ops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "nvfp4/gemm/fp4/detail/mma_layout.hpp"
#include "nvfp4/gemm/fp4/mma_model.hpp"

namespace nvfp4::detail {

/// The 16 doubled E2M1 values plus `Offset`, as bytes, indexed by code.
template <int Offset>
struct doubled_value_table {
  std::uint8_t values[16];
  constexpr doubled_value_table() : values{} {
    for (int code = 0; code < 16; ++code)
      values[code] = static_cast<std::uint8_t>(fp4::mma::e2m1_doubled(static_cast<std::uint8_t>(code)) + Offset);
  }
};
template <int Offset>
inline constexpr doubled_value_table<Offset> doubled_values{};

template <class Ops>
struct operand_packers {
  using vi = typename Ops::vi;
  static constexpr int width = Ops::width;
  /// Vectors of 32-bit words per 64-element step of one row (4 elements per word).
  static constexpr int step_vectors = fp4::mma::step_k / 4 / width;
  static_assert(tile_lanes % width == 0 && step_vectors * width * 4 == fp4::mma::step_k);

  /// The doubled values (plus the table's offset) of step s of a row of `row_bytes` packed bytes,
  /// as `step_vectors` vectors of 4 values per lane; zero codes past the row's end.
  static NVFP4_ALWAYS_INLINE void decode_step(const std::uint8_t* row, index_t row_bytes, index_t s, const std::uint8_t* table,
                                              vi (&out)[step_vectors]) {
    constexpr index_t step_bytes = fp4::mma::step_k / 2;
    const index_t available = row_bytes - s * step_bytes;
    if (available >= step_bytes) {
      for (int v = 0; v < step_vectors; ++v) out[v] = Ops::decode_nibbles(row + s * step_bytes + 2 * width * v, table);
    } else {  // the row's last, partial step
      std::uint8_t padded[step_bytes] = {};
      std::memcpy(padded, row + s * step_bytes, static_cast<std::size_t>(available));
      for (int v = 0; v < step_vectors; ++v) out[v] = Ops::decode_nibbles(padded + 2 * width * v, table);
    }
  }

  /// The broadcast operand (A): each step's 64 doubled values and its group sums' correction.
  template <class Format>
  static broadcast_rows make_broadcast_rows(const quantized_tensor<Format>& q) {
    return build_broadcast_rows(q, [](const quantized_tensor<Format>& source, index_t r, index_t s, row_step& rs) {
      const auto* data = reinterpret_cast<const std::uint8_t*>(source.data().data());
      vi values[step_vectors];
      decode_step(data + r * source.data_row_stride(), source.data_row_stride(), s, doubled_values<0>.values, values);
      std::uint32_t lane_sums[fp4::mma::step_k / 4];
      for (int v = 0; v < step_vectors; ++v) {
        Ops::store_bits(reinterpret_cast<std::uint32_t*>(rs.values + 4 * width * v), values[v]);
        Ops::store_bits(lane_sums + width * v, Ops::sum_bytes(values[v]));
      }
      // Group g is words 4g .. 4g + 3.
      for (int g = 0; g < 4; ++g) {
        std::int32_t sum = 0;
        for (int w = 4 * g; w < 4 * g + 4; ++w) sum += static_cast<std::int32_t>(lane_sums[w]);
        rs.correction[g] = -element_offset * sum;
      }
    });
  }

  /// One tile of the other operand (B): rows [j0, j0 + 16) of q (rows past the end are zero with
  /// no scale) into out[steps], each step's quads moved to lanes by the in-register transpose.
  template <class Format>
  static void pack_tile(const quantized_tensor<Format>& q, index_t j0, tile_step* out) {
    const index_t steps = (q.cols() + fp4::mma::step_k - 1) / fp4::mma::step_k;
    const index_t stride = q.data_row_stride();
    const index_t valid = std::min<index_t>(tile_lanes, q.rows() - j0);
    const auto* data = reinterpret_cast<const std::uint8_t*>(q.data().data());
    constexpr std::uint32_t offset_word = 0x01010101u * element_offset;  // a zero code, four times
    for (index_t s = 0; s < steps; ++s) {
      vi rows[tile_lanes][step_vectors];  // rows[l][v]: quads v * width .. of lane l
      for (int l = 0; l < tile_lanes; ++l) {
        if (l < valid) {
          decode_step(data + (j0 + l) * stride, stride, s, doubled_values<element_offset>.values, rows[l]);
        } else {
          for (int v = 0; v < step_vectors; ++v) rows[l][v] = Ops::set_int(offset_word);
        }
      }
      // bytes[quad][lane * 4 ..]: blocks of width lanes x width quads, each transposed in registers.
      for (int lane_block = 0; lane_block < tile_lanes / width; ++lane_block)
        for (int v = 0; v < step_vectors; ++v) {
          vi block[width];
          for (int i = 0; i < width; ++i) block[i] = rows[lane_block * width + i][v];
          Ops::transpose(block);
          for (int i = 0; i < width; ++i)
            Ops::store_bits(reinterpret_cast<std::uint32_t*>(out[s].bytes[v * width + i] + lane_block * width * 4), block[i]);
        }
      set_tile_step_scales(q, j0, valid, s, out[s]);
    }
  }
};

}  // namespace nvfp4::detail
