// benchmarks/bench_threads.hpp: the one thread-count setting of every benchmark program.
// NVFP4_BENCH_THREADS is a comma-separated list of counts ("1,2,4,8,16"), or "all" for 1 and the
// machine's thread count; unset, the programs run 1 and 2 threads. Each benchmark takes its count
// as one of its arguments and calls use_threads() with it, which sets OpenMP's (and so the library's),
// Eigen's and OpenBLAS's thread counts, so a baseline and the code it is compared with always run
// with the same number of threads.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "nvfp4/config.hpp"

#if NVFP4_HAS_OPENMP
#include <omp.h>
#endif
#ifdef NVFP4_HAVE_CBLAS
#include <cblas.h>
#endif

namespace nvfp4_bench {

/// The machine's hardware threads as OpenMP sees them (at least 1).
inline int machine_threads() {
#if NVFP4_HAS_OPENMP
  return std::max(1, omp_get_num_procs());
#else
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
#endif
}

/// The thread counts to run, from $NVFP4_BENCH_THREADS (default 1 and 2).
inline std::vector<int> thread_counts() {
  std::vector<int> counts;
  if (const char* env = std::getenv("NVFP4_BENCH_THREADS")) {
    if (std::strcmp(env, "all") == 0) {
      counts = {1, machine_threads()};
    } else {
      for (const char* p = env; *p;) {
        if (const int n = std::atoi(p); n > 0) counts.push_back(n);
        while (*p && *p != ',') ++p;
        if (*p) ++p;
      }
    }
  }
  if (counts.empty()) counts = {1, 2};
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

/// Runs everything that follows with `threads` threads: OpenMP (the library), Eigen, OpenBLAS.
inline void set_threads(int threads) {
#if NVFP4_HAS_OPENMP
  omp_set_num_threads(threads);
#endif
#ifdef EIGEN_WORLD_VERSION  // a program that includes Eigen before this header
  Eigen::setNbThreads(threads);
#endif
#ifdef NVFP4_HAVE_CBLAS
  openblas_set_num_threads(threads);
#endif
}

/// set_threads() from the benchmark's argument at `position` (0 for the thread_args() programs),
/// and a "threads" counter in its output.
inline void use_threads(benchmark::State& state, std::size_t position = 0) {
  const int threads = static_cast<int>(state.range(position));
  set_threads(threads);
  state.counters["threads"] = threads;
}

/// Registers one run per thread count (the only argument), timed in real time.
inline void thread_args(benchmark::internal::Benchmark* b) {
  for (int threads : thread_counts()) b->Arg(threads);
  b->ArgName("threads")->UseRealTime()->Unit(benchmark::kMillisecond);
}

/// For code without a parallel path (the scalar references): one thread only.
inline void one_thread_args(benchmark::internal::Benchmark* b) {
  b->Arg(1)->ArgName("threads")->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace nvfp4_bench
