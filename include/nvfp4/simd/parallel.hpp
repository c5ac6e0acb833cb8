// nvfp4/simd/parallel.hpp: the one place the scaling layer's fast paths touch OpenMP. Work is
// split into contiguous index ranges, one per thread, so every output byte has one writer.
#pragma once

#include <atomic>
#include <cstdint>

#include "nvfp4/config.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

namespace nvfp4::simd {

/// Below this many elements a kernel runs on the calling thread: starting a team costs more than
/// it saves (a few microseconds against ~1 ns per element).
inline constexpr index_t parallel_threshold_elements = index_t{1} << 16;

/// Calls body(begin, end) on disjoint ranges covering [0, count): one range per OpenMP thread when
/// `parallel` is true (and OpenMP is on), else one call with the whole range. body must not throw.
template <class Body>
void parallel_ranges(index_t count, bool parallel, Body&& body) {
  if (count <= 0) return;
#if NVFP4_HAS_OPENMP
  if (parallel && count > 1 && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel
    {
      const index_t threads = omp_get_num_threads();
      const index_t thread = omp_get_thread_num();
      const index_t begin = count * thread / threads;
      const index_t end = count * (thread + 1) / threads;
      if (begin < end) body(begin, end);
    }
    return;
  }
#endif
  (void)parallel;
  body(index_t{0}, count);
}

/// max over ranges of body(begin, end) (a max is order-free, so the result does not depend on the
/// number of threads).
template <class Body>
std::uint32_t parallel_max(index_t count, bool parallel, Body&& body) {
  std::atomic<std::uint32_t> result{0};
  parallel_ranges(count, parallel, [&](index_t begin, index_t end) {
    const std::uint32_t local = body(begin, end);
    std::uint32_t seen = result.load(std::memory_order_relaxed);
    while (local > seen && !result.compare_exchange_weak(seen, local, std::memory_order_relaxed)) {
    }
  });
  return result.load();
}

}  // namespace nvfp4::simd
