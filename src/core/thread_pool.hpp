// A small fixed pool of std::threads for data-parallel loops in kernels.
//
// parallel_for(n, fn) runs fn(i) for i in [0, n) on the workers and the
// calling thread, and returns when all are done. Tasks are claimed from an
// atomic counter, so uneven tasks balance themselves. Calls from inside a task
// (nesting) and concurrent calls from other threads run inline rather than
// deadlock or oversubscribe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace stepmix {

class ThreadPool {
 public:
  // `threads` counts the calling thread: 1 means no workers at all.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  void parallel_for(int64_t task_count, const std::function<void(int64_t task)>& task);

  // Shared pool: set_thread_count() if called, else STEPMIX_THREADS if set
  // (>= 1), else the hardware thread count.
  static ThreadPool& global();
  // The size global() has or will have, without starting it: a GPU run
  // starts no pool, and still refuses a malformed STEPMIX_THREADS.
  static int configured_size();

 private:
  void worker_loop();
  void run_tasks(const std::function<void(int64_t)>& task, int64_t task_count);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::mutex call_mutex_;  // one parallel_for at a time
  const std::function<void(int64_t)>* job_ = nullptr;
  int64_t job_tasks_ = 0;
  uint64_t generation_ = 0;
  int checked_in_workers_ = 0;
  bool stopping_ = false;
  std::atomic<int64_t> next_task_{0};
};

}  // namespace stepmix
