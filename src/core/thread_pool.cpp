#include "core/thread_pool.hpp"

#include <pthread.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include "stepmix/error.hpp"
#include "stepmix/runtime.hpp"

namespace stepmix {

namespace {
// Set while a thread executes pool tasks, so nested parallel_for runs inline.
thread_local bool t_inside_pool_task = false;

std::atomic<int> g_requested_threads{0};
std::atomic<bool> g_global_created{false};

int threads_from_environment() {
  if (const int requested = g_requested_threads.load()) return requested;
  if (const char* env = std::getenv("STEPMIX_THREADS"); env && *env) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 1 || n > 1024)
      throw Error("threads", std::string("STEPMIX_THREADS must be an integer in [1, 1024], got '") + env + "'");
    return int(n);
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : int(hw);
}
}  // namespace

ThreadPool::ThreadPool(int threads) {
  // Workers inherit this signal mask: they never take the process's
  // termination signals, so the handlers (Ctrl-C cancelling a run, removal of
  // temporary outputs) run on an application thread, never beside it.
  sigset_t termination, previous;
  sigemptyset(&termination);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&termination, s);
  pthread_sigmask(SIG_BLOCK, &termination, &previous);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(threads_from_environment());
  g_global_created = true;
  return pool;
}

int ThreadPool::configured_size() { return g_global_created ? global().size() : threads_from_environment(); }

void set_thread_count(int threads) {
  if (threads < 1 || threads > 1024)
    throw Error("threads", "--threads: expected an integer in [1, 1024], got " + std::to_string(threads));
  if (g_global_created && ThreadPool::global().size() != threads)
    throw Error("threads", "the thread count is set before any work starts");
  g_requested_threads = threads;
}

void ThreadPool::run_tasks(const std::function<void(int64_t)>& task, int64_t task_count) {
  const bool was_inside = t_inside_pool_task;
  t_inside_pool_task = true;
  for (int64_t i = next_task_.fetch_add(1); i < task_count; i = next_task_.fetch_add(1)) task(i);
  t_inside_pool_task = was_inside;
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const auto* task = job_;
    const int64_t task_count = job_tasks_;
    lock.unlock();
    run_tasks(*task, task_count);
    lock.lock();
    // Every worker checks in for every job, so none can still hold a stale
    // job when the next one is published.
    if (++checked_in_workers_ == int(workers_.size())) done_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t task_count, const std::function<void(int64_t)>& task) {
  if (task_count <= 0) return;
  std::unique_lock call_lock(call_mutex_, std::defer_lock);
  if (task_count == 1 || workers_.empty() || t_inside_pool_task || !call_lock.try_lock()) {
    for (int64_t i = 0; i < task_count; ++i) task(i);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &task;
    job_tasks_ = task_count;
    next_task_.store(0);
    checked_in_workers_ = 0;
    ++generation_;
  }
  wake_.notify_all();
  run_tasks(task, task_count);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return checked_in_workers_ == int(workers_.size()); });
  job_ = nullptr;
}

}  // namespace stepmix
