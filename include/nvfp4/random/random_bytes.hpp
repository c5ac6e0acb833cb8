// nvfp4/random/random_bytes.hpp: fill_random_bytes, the random bytes of a run of consecutive
// element indices, exactly random_byte(seed, i) for each, generated 16 Philox blocks at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "nvfp4/random/philox.hpp"
#include "nvfp4/random/simd/philox_avx512.hpp"

namespace nvfp4 {

namespace detail {
/// The 16 bytes of Philox block `block` under `seed` (what random_byte reads from).
inline void philox_block_bytes(std::uint64_t seed, std::uint64_t block, std::uint8_t* out) {
  const auto words = philox4x32_10({static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0u, 0u},
                                   {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
  for (int w = 0; w < 4; ++w)
    for (int k = 0; k < 4; ++k) out[4 * w + k] = static_cast<std::uint8_t>(words[w] >> (8 * k));
}

/// 16 consecutive blocks starting at `first_block`: 256 bytes.
inline void philox_16_blocks(std::uint64_t seed, std::uint64_t first_block, std::uint8_t* out) {
#if NVFP4_HAS_AVX512
  simd::avx512::philox16_blocks(first_block, static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32), out);
#else
  for (std::uint64_t i = 0; i < 16; ++i) philox_block_bytes(seed, first_block + i, out + 16 * i);
#endif
}
}  // namespace detail

/// out[k] = random_byte(seed, first_index + k) for k in [0, count). Depends only on (seed, index):
/// the same bytes whatever the split of a range into calls, threads or SIMD width.
inline void fill_random_bytes(std::uint64_t seed, std::uint64_t first_index, std::size_t count, std::uint8_t* out) {
  constexpr std::uint64_t batch_bytes = 256;  // 16 blocks of 16 bytes
  std::uint64_t index = first_index;
  const std::uint64_t end = first_index + count;
  alignas(64) std::uint8_t batch[batch_bytes];
  while (index < end) {
    const std::uint64_t batch_start = index - index % 16;  // first byte of the block holding `index`
    const std::uint64_t take = std::min<std::uint64_t>(end - index, batch_start + batch_bytes - index);
    if (index == batch_start && take == batch_bytes) {
      detail::philox_16_blocks(seed, batch_start / 16, out + (index - first_index));
    } else {
      detail::philox_16_blocks(seed, batch_start / 16, batch);
      std::memcpy(out + (index - first_index), batch + (index - batch_start), static_cast<std::size_t>(take));
    }
    index += take;
  }
}

}  // namespace nvfp4
