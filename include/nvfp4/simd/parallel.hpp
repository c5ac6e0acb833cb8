// nvfp4/simd/parallel.hpp: the one place the library touches OpenMP. Every parallel loop goes
// through these primitives, with one threshold: work is split into contiguous index ranges, one
// per thread (or handed out one item at a time, parallel_dynamic), so every output byte has one
// writer and results do not depend on the thread count.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>

#include "nvfp4/config.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif

namespace nvfp4::simd {

/// The one threshold: a loop runs on several threads when its work is at least this many units,
/// a unit being about a nanosecond of one thread's time (an element of a quantize, amax or
/// transform pass; a 64-element MMA step of one output; ...). Below it starting a team (a few
/// microseconds) costs more than it saves.
inline constexpr index_t parallel_threshold_elements = index_t{1} << 16;

/// Whether `work` units are worth a team of threads.
constexpr bool worth_parallel(index_t work) { return work >= parallel_threshold_elements; }

namespace detail {
/// True when a team should be started here (OpenMP on, more than one thread, not nested).
inline bool team_available([[maybe_unused]] bool parallel, [[maybe_unused]] index_t count) {
#if NVFP4_HAS_OPENMP
  return parallel && count > 1 && omp_get_max_threads() > 1 && !omp_in_parallel();
#else
  return false;
#endif
}
}  // namespace detail

/// Whether a loop over `count` items with this `parallel` flag runs on a team of several threads
/// (for work a caller does once up front only when a team will share it).
inline bool runs_on_a_team(bool parallel, index_t count) { return detail::team_available(parallel, count); }

/// Calls body(begin, end) on disjoint ranges covering [0, count): one contiguous range per OpenMP
/// thread when `parallel` is true (and OpenMP is on), else one call with the whole range. body must
/// not throw.
template <class Body>
void parallel_ranges(index_t count, bool parallel, Body&& body) {
  if (count <= 0) return;
  if (detail::team_available(parallel, count)) {
#if NVFP4_HAS_OPENMP
#pragma omp parallel
    {
      const index_t threads = omp_get_num_threads();
      const index_t thread = omp_get_thread_num();
      const index_t begin = count * thread / threads;
      const index_t end = count * (thread + 1) / threads;
      if (begin < end) body(begin, end);
    }
    return;
#endif
  }
  body(index_t{0}, count);
}

/// combine over ranges of body(begin, end), starting from `identity` (parallel_ranges' split).
/// combine must be associative and commutative (max, min, or): the result then does not depend
/// on the number of threads.
template <class T, class Body, class Combine>
T parallel_reduce(index_t count, bool parallel, T identity, Body&& body, Combine&& combine) {
  T result = identity;
  std::mutex result_mutex;
  parallel_ranges(count, parallel, [&](index_t begin, index_t end) {
    T local = body(begin, end);
    const std::lock_guard<std::mutex> lock(result_mutex);
    result = combine(result, std::move(local));
  });
  return result;
}

/// max over ranges of body(begin, end).
template <class Body>
std::uint32_t parallel_max(index_t count, bool parallel, Body&& body) {
  return parallel_reduce(count, parallel, std::uint32_t{0}, body, [](std::uint32_t a, std::uint32_t b) { return a > b ? a : b; });
}

/// Calls body(item, state) for every item in [0, count), items handed out one at a time to the
/// threads of a team (OpenMP's dynamic schedule) when `parallel`; `state` is per thread, made by
/// make_state() (scratch buffers, what was packed last). For work items of uneven cost whose
/// results do not depend on which thread runs them. body must not throw.
template <class MakeState, class Body>
void parallel_dynamic(index_t count, bool parallel, MakeState&& make_state, Body&& body) {
  if (count <= 0) return;
  if (detail::team_available(parallel, count)) {
#if NVFP4_HAS_OPENMP
#pragma omp parallel
    {
      auto state = make_state();
#pragma omp for schedule(dynamic, 1)
      for (index_t item = 0; item < count; ++item) body(item, state);
    }
    return;
#endif
  }
  auto state = make_state();
  for (index_t item = 0; item < count; ++item) body(item, state);
}

}  // namespace nvfp4::simd
