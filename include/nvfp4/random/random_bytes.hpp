// nvfp4/random/random_bytes.hpp: fill_random_bytes, the random bytes of a run of consecutive
// element indices, exactly random_byte(seed, i) for each: Philox4x32-10 written once over an
// ISA's lane operations, one block per 32-bit lane, a vector of blocks at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "nvfp4/random/philox.hpp"
#include "nvfp4/simd/dispatch.hpp"

namespace nvfp4::detail {

/// Philox4x32-10 (philox.hpp) on `Ops::width` blocks at once, lane l computing block
/// first_block + l: the same multiplies, xors and key schedule as philox4x32_10, lane-wise.
template <class Ops>
struct philox_kernels {
  static constexpr int blocks = Ops::width;
  static constexpr int bytes = 16 * blocks;

  /// Writes the 16 * blocks bytes of the Philox blocks with counters (first_block + l, 0) under
  /// `seed`, block l at out + 16 l in random_byte's order (word w, byte k -> 4 w + k).
  static NVFP4_ALWAYS_INLINE void block_bytes(std::uint64_t seed, std::uint64_t first_block, std::uint8_t* out) {
    using vi = typename Ops::vi;
    const auto base_low = static_cast<std::uint32_t>(first_block);
    const vi lane = Ops::lane_index();
    vi c0 = Ops::add(Ops::set_int(base_low), lane);
    // The high word of the 64-bit block index carries in the lanes where the low word wraps.
    vi c1 = Ops::set_int(static_cast<std::uint32_t>(first_block >> 32));
    const std::uint64_t room = (std::uint64_t{1} << 32) - base_low;  // lanes before the wrap
    if (room < static_cast<std::uint64_t>(blocks))
      c1 = Ops::add(c1,
                    Ops::select(Ops::greater(lane, Ops::set_int(static_cast<std::uint32_t>(room - 1))), Ops::set_int(1), Ops::set_int(0)));
    vi c2 = Ops::set_int(0), c3 = Ops::set_int(0);
    using constants = philox4x32_constants;
    const vi multiplier0 = Ops::set_int(constants::multiplier0), multiplier1 = Ops::set_int(constants::multiplier1);
    auto k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      vi high0, low0, high1, low1;
      Ops::mul_wide(c0, multiplier0, high0, low0);
      Ops::mul_wide(c2, multiplier1, high1, low1);
      const vi next0 = Ops::bit_xor(Ops::bit_xor(high1, c1), Ops::set_int(k0));
      const vi next2 = Ops::bit_xor(Ops::bit_xor(high0, c3), Ops::set_int(k1));
      c0 = next0;
      c1 = low1;
      c2 = next2;
      c3 = low0;
      k0 += constants::weyl0;
      k1 += constants::weyl1;
    }
    Ops::store_lanes4(out, 16, c0, c1, c2, c3);
  }
};

}  // namespace nvfp4::detail

namespace nvfp4 {

/// out[k] = random_byte(seed, first_index + k) for k in [0, count). Depends only on (seed, index):
/// the same bytes whatever the split of a range into calls, threads or SIMD width.
inline void fill_random_bytes(std::uint64_t seed, std::uint64_t first_index, std::size_t count, std::uint8_t* out) {
  using kernels = detail::philox_kernels<simd::ops>;
  constexpr std::uint64_t batch_bytes = kernels::bytes;
  std::uint64_t index = first_index;
  const std::uint64_t end = first_index + count;
  alignas(64) std::uint8_t batch[batch_bytes];
  while (index < end) {
    const std::uint64_t batch_start = index - index % 16;  // first byte of the block holding `index`
    const std::uint64_t take = std::min<std::uint64_t>(end - index, batch_start + batch_bytes - index);
    if (index == batch_start && take == batch_bytes) {
      kernels::block_bytes(seed, batch_start / 16, out + (index - first_index));
    } else {
      kernels::block_bytes(seed, batch_start / 16, batch);
      std::memcpy(out + (index - first_index), batch + (index - batch_start), static_cast<std::size_t>(take));
    }
    index += take;
  }
}

}  // namespace nvfp4
