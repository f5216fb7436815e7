// Splitting element-wise and row-wise work over the global thread pool.
// Every item is computed by exactly one task with the same arithmetic, so
// results do not depend on the number of threads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/thread_pool.hpp"

namespace stepmix {

// Items per task below which the pool's wake-up costs more than it saves.
inline constexpr int64_t kParallelGrainElements = 32768;

// fn(begin, end) over pieces of [0, count) of at least `grain` items (a few
// pieces per thread, so that uneven progress balances out).
template <class Fn>
void parallel_ranges(int64_t count, int64_t grain, const Fn& fn) {
  if (count <= 0) return;
  const int64_t threads = ThreadPool::global().size();
  const int64_t pieces = std::clamp<int64_t>(count / std::max<int64_t>(grain, 1), 1, 4 * threads);
  const int64_t step = (count + pieces - 1) / pieces;
  ThreadPool::global().parallel_for((count + step - 1) / step, [&](int64_t piece) {
    const int64_t begin = piece * step;
    fn(begin, std::min(count, begin + step));
  });
}

// Rows of `row_elements` items each, grouped to about kParallelGrainElements per piece.
template <class Fn>
void parallel_rows(int64_t rows, int64_t row_elements, const Fn& fn) {
  parallel_ranges(rows, std::max<int64_t>(1, kParallelGrainElements / std::max<int64_t>(row_elements, 1)), fn);
}

}  // namespace stepmix
