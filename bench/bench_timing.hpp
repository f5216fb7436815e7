// CPU-time measurement shared by the kernel benchmarks (bench_conv,
// bench_attention).
#pragma once

#include <time.h>

#include <algorithm>

#include "core/thread_pool.hpp"

namespace stepmix::bench {

// CPU time of this thread (one thread: STEPMIX_THREADS=1), or of the whole
// process when the pool has workers (then GFLOP/s are per CPU second, to be
// compared with the one-thread peak).
inline double cpu_seconds() {
  timespec t{};
  clock_gettime(ThreadPool::global().size() == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Best call of `fn` over at least `min_seconds` of CPU time (and 2 calls):
// on a shared machine the shortest call is the least disturbed one.
template <class Fn>
double best_seconds(const Fn& fn, double min_seconds) {
  double best = 1e30, total = 0;
  for (int calls = 0; calls < 2 || total < min_seconds; ++calls) {
    const double t0 = cpu_seconds();
    fn();
    const double dt = cpu_seconds() - t0;
    best = std::min(best, dt);
    total += dt;
  }
  return best;
}

}  // namespace stepmix::bench
