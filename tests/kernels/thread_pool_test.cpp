// The kernels' thread pool: every task runs exactly once, nesting runs inline,
// and the pool can be reused many times.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/thread_pool.hpp"

namespace stepmix {
namespace {

TEST(ThreadPool, RunsEveryTaskOnce) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    pool.parallel_for(n, [&](int64_t i) { hits[size_t(i)].fetch_add(1); });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(2);
  std::atomic<int> total{0};
  pool.parallel_for(4, [&](int64_t) { pool.parallel_for(5, [&](int64_t) { total.fetch_add(1); }); });
  EXPECT_EQ(total.load(), 20);
}

TEST(ThreadPool, ManyShortJobs) {
  ThreadPool pool(4);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 2000; ++rep) pool.parallel_for(3, [&](int64_t i) { sum.fetch_add(i); });
  EXPECT_EQ(sum.load(), 2000 * 3);
}

TEST(ThreadPool, SingleThreadPoolHasNoWorkers) {
  ThreadPool pool(1);
  int count = 0;
  pool.parallel_for(10, [&](int64_t) { ++count; });  // inline, so no data race
  EXPECT_EQ(count, 10);
  EXPECT_GE(ThreadPool::global().size(), 1);
}

}  // namespace
}  // namespace stepmix
