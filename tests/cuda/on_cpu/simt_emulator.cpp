// The SIMT emulator (simt_emulator.hpp): one fiber (Boost.Context) per thread
// of the running block, switched where a thread waits; the launch, its
// limits and its errors. The warp collectives and shared memory are
// simt_warp.cpp's.
#include "simt_emulator.hpp"

#include <algorithm>
#include <atomic>
#include <boost/context/fiber.hpp>
#include <boost/context/preallocated.hpp>
#include <boost/context/stack_context.hpp>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "simt_state.hpp"
#include "stepmix/error.hpp"

// AddressSanitizer is told of every switch between stacks (Boost.Context's
// fcontext switches are plain code it cannot see).
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define STEPMIX_SIMT_ASAN 1
#else
#define STEPMIX_SIMT_ASAN 0
#endif

namespace stepmix::simt {
namespace detail {

thread_local Emulator* active = nullptr;

Emulator& emulator() {
  if (!active) throw std::logic_error("simt: a device function was called outside simt::launch");
  return *active;
}
Fiber& fiber() { return emulator().fibers[std::size_t(emulator().current)]; }

}  // namespace detail

using namespace detail;

namespace {

constexpr std::size_t kStackBytes = std::size_t(256) << 10;
LaunchCounters last_counters;

// ---- switching between the scheduler and the fibers

// Thrown where a thread of a failed launch resumes, so that it unwinds and
// ends in its own fiber (not a std::exception: nothing in between catches it).
struct Abandon {};

// In a fiber: back to the scheduler, until it resumes this thread.
void switch_to_scheduler() {
  Emulator& e = emulator();
  Fiber& f = fiber();
#if STEPMIX_SIMT_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, e.scheduler_stack_bottom, e.scheduler_stack_size);
#endif
  f.scheduler = std::move(f.scheduler).resume();
#if STEPMIX_SIMT_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, &e.scheduler_stack_bottom, &e.scheduler_stack_size);
#endif
  if (e.abandoning) throw Abandon{};
}

void switch_to_fiber(Emulator& e, int index) {
  e.current = index;
  Fiber& f = e.fibers[std::size_t(index)];
#if STEPMIX_SIMT_ASAN
  __sanitizer_start_switch_fiber(&e.scheduler_fake_stack, f.stack_bottom, kStackBytes);
#endif
  f.context = std::move(f.context).resume();
#if STEPMIX_SIMT_ASAN
  __sanitizer_finish_switch_fiber(e.scheduler_fake_stack, nullptr, nullptr);
#endif
}

// The stacks are the emulator's (cached across launches): Boost.Context only
// places its record at the top of one and has nothing to free.
struct BorrowedStack {
  boost::context::stack_context allocate() { throw std::logic_error("simt: stacks are preallocated"); }
  void deallocate(boost::context::stack_context&) noexcept {}
};

std::string where(const Emulator& e, const Fiber& f) {
  std::ostringstream s;
  s << "block (" << e.block.x << "," << e.block.y << "," << e.block.z << ") thread (" << f.thread.x << "," << f.thread.y
    << "," << f.thread.z << ") warp " << f.warp << " lane " << f.lane;
  return s.str();
}

}  // namespace

namespace detail {

// Records the first error and leaves the fiber: the scheduler ends the launch
// and resumes this thread only to abandon it (switch_to_scheduler throws).
[[noreturn]] void fail_in_fiber() {
  if (emulator().direct) throw Error("simt", emulator().error);
  fiber().done = true;
  switch_to_scheduler();
  std::abort();  // not reached: the scheduler resumes a failed thread only to abandon it
}

void set_error(const std::string& what) {
  Emulator& e = emulator();
  if (e.error.empty()) e.error = where(e, fiber()) + ": " + what;
}

void yield_waiting(const char* what) {
  fiber().waiting_in = what;
  switch_to_scheduler();
  fiber().waiting_in = "";
}

void note_wait(const char* what) {
  Emulator& e = emulator();
  ++e.waits;
  if (e.direct) {
    set_error(std::string("reaches ") + what +
              ", but no thread of the launch's first block waited anywhere, so the other blocks run without "
              "fibers: a kernel must wait in every block or in none");
    throw Error("simt", e.error);
  }
}

}  // namespace detail

namespace {

// A thread's whole life in its fiber; on return the fiber resumes the
// scheduler and ends.
void fiber_main() {
  Emulator& e = emulator();
#if STEPMIX_SIMT_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &e.scheduler_stack_bottom, &e.scheduler_stack_size);
#endif
  if (e.abandoning) {  // a thread that had not started when its launch failed does not start now
    fiber().done = true;
    return;
  }
  try {
    (*e.body)();
  } catch (const Abandon&) {
    fiber().done = true;
    return;
  } catch (const std::exception& error) {
    set_error(std::string("exception: ") + error.what());
  }
  Fiber& f = fiber();
  Warp& w = e.warps[std::size_t(f.warp)];
  --w.live;
  if (w.arrived > 0 && e.error.empty())
    set_error(std::string("exited while its warp waits in ") + op_name(w.op[w.generation & 1]));
  --e.block_live;
  if (e.block_arrived > 0 && e.block_arrived == e.block_live) {  // exited threads do not hold a barrier
    e.block_arrived = 0;
    ++e.block_generation;
  }
  ++e.progress;
  f.done = true;
}

// A failed launch: every thread still suspended resumes, unwinds (Abandon)
// and ends in its own fiber.
void abandon_suspended(Emulator& e) {
  e.abandoning = true;
  for (std::size_t t = 0; t < e.fibers.size(); ++t)
    if (e.fibers[t].context) switch_to_fiber(e, int(t));
#if STEPMIX_SIMT_ASAN
  // A thread that failed left its frames on its stack, redzones poisoned;
  // the next launch runs on the same stacks.
  for (const Fiber& f : e.fibers)
    if (f.stack_bottom) __asan_unpoison_memory_region(f.stack_bottom, kStackBytes);
#endif
}

}  // namespace

// ---- launch

std::string launch_refusal(const LaunchConfig& config) {
  const Dim3 &g = config.grid, &b = config.block;
  auto dims = [](const Dim3& d) {
    std::ostringstream s;
    s << "(" << d.x << "," << d.y << "," << d.z << ")";
    return s.str();
  };
  const uint64_t threads = uint64_t(b.x) * b.y * b.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || b.z > kMaxBlockZ)
    return "block " + dims(b) + ": 1 to 1024 threads per block, z at most 64";
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > kMaxGridX || g.y > kMaxGridYZ || g.z > kMaxGridYZ)
    return "grid " + dims(g) + ": x from 1 to 2^31-1 blocks, y and z from 1 to 65535";
  if (config.max_dynamic_shared_bytes > kOptInMaxDynamicSharedBytes)
    return "a dynamic shared memory limit of " + std::to_string(config.max_dynamic_shared_bytes) +
           " bytes: a block can have at most " + std::to_string(kOptInMaxDynamicSharedBytes);
  if (config.dynamic_shared_bytes > config.max_dynamic_shared_bytes)
    return std::to_string(config.dynamic_shared_bytes) + " bytes of dynamic shared memory, over the kernel's " +
           std::to_string(config.max_dynamic_shared_bytes) +
           " (above 48 KiB a kernel must raise cudaFuncAttributeMaxDynamicSharedMemorySize first)";
  return "";
}

void launch(const LaunchConfig& config, const std::function<void()>& thread_body) {
  if (active) throw std::logic_error("simt::launch: launches do not nest");
  if (const std::string refusal = launch_refusal(config); !refusal.empty())
    throw Error("simt", "launch refused: " + refusal);
  const uint64_t threads = uint64_t(config.block.x) * config.block.y * config.block.z;
  Emulator e;
  e.config = &config;
  e.body = &thread_body;
  e.fibers.resize(threads);
  // The fiber stacks stay allocated for the next launch: their pages are
  // touched once, not at every launch.
  static thread_local std::unique_ptr<char[]> stacks;
  static thread_local std::size_t stack_count = 0;
  if (stack_count < threads) {
    stacks.reset(new char[threads * kStackBytes]);
    stack_count = threads;
  }
  e.warps.resize((threads + kWarpSize - 1) / kWarpSize);
  active = &e;
  struct Deactivate {
    ~Deactivate() { active = nullptr; }
  } deactivate;

  for (unsigned bz = 0; bz < config.grid.z; ++bz)
    for (unsigned by = 0; by < config.grid.y; ++by)
      for (unsigned bx = 0; bx < config.grid.x; ++bx) {
        e.block = {bx, by, bz};
        // Numbered across launches and host threads: a static __shared__
        // array is one object for all of them (static_shared.hpp).
        static std::atomic<uint64_t> blocks_run{0};
        e.block_serial = ++blocks_run;
        // Shared memory starts as garbage on a GPU: a kernel must not rely on it.
        e.shared.assign(config.dynamic_shared_bytes, 0xA5);
        if (config.check_races) e.hazards.reset(config.dynamic_shared_bytes, config.block.x, config.block.y);
        e.block_generation = 0;
        e.block_arrived = 0;
        e.block_live = int(threads);
        for (std::size_t w = 0; w < e.warps.size(); ++w) {
          e.warps[w] = Warp{};
          e.warps[w].live = int(std::min<uint64_t>(kWarpSize, threads - w * kWarpSize));
        }
        for (std::size_t t = 0; t < threads; ++t) {
          Fiber& f = e.fibers[t];
          f = Fiber{};
          f.thread = {unsigned(t % config.block.x), unsigned(t / config.block.x % config.block.y),
                      unsigned(t / (uint64_t(config.block.x) * config.block.y))};
          f.warp = int(t / kWarpSize);
          f.lane = int(t % kWarpSize);
          if (e.direct) continue;
          boost::context::stack_context stack;
          stack.size = kStackBytes;
          stack.sp = stacks.get() + (t + 1) * kStackBytes;  // stacks grow down
          f.stack_bottom = stacks.get() + t * kStackBytes;
          f.context = boost::context::fiber(
              std::allocator_arg, boost::context::preallocated(stack.sp, stack.size, stack), BorrowedStack{},
              [&e, t](boost::context::fiber&& scheduler) {
                e.fibers[t].scheduler = std::move(scheduler);
                fiber_main();
#if STEPMIX_SIMT_ASAN
                // This fiber ends: no fake stack to keep.
                __sanitizer_start_switch_fiber(nullptr, e.scheduler_stack_bottom, e.scheduler_stack_size);
#endif
                return std::move(e.fibers[t].scheduler);
              });
        }
        e.counters.threads += threads;
        if (e.direct) {
          for (std::size_t t = 0; t < threads; ++t) {
            e.current = int(t);
            (*e.body)();
          }
          continue;
        }
        for (;;) {
          const uint64_t before = e.progress;
          bool any = false;
          for (std::size_t t = 0; t < threads && e.error.empty(); ++t) {
            if (e.fibers[t].done) continue;
            any = true;
            switch_to_fiber(e, int(t));
          }
          if (!e.error.empty()) {
            abandon_suspended(e);
            throw Error("simt", e.error);
          }
          if (!any) {
            for (const Warp& w : e.warps)  // copies some lanes never issued (divergent code)
              for (const auto& dst : w.open_copies) count_copy_conflicts(e.counters, dst);
            break;
          }
          if (e.progress == before) {
            std::ostringstream s;
            s << "deadlock in block (" << bx << "," << by << "," << bz << "):";
            for (const Fiber& f : e.fibers)
              if (!f.done) s << " thread " << f.thread.x << " waits in " << f.waiting_in << ";";
            abandon_suspended(e);
            throw Error("simt", s.str());
          }
        }
        // A kernel none of whose threads waited in the first block (the
        // elementwise ones) runs its other blocks' threads one after another
        // as plain calls, without fibers.
        if (e.waits == 0) e.direct = true;
      }
  last_counters = e.counters;
}

LaunchCounters last_launch_counters() { return last_counters; }

const Dim3& thread_index() { return fiber().thread; }
const Dim3& block_index() { return emulator().block; }
const Dim3& block_dimensions() { return emulator().config->block; }
const Dim3& grid_dimensions() { return emulator().config->grid; }

void sync_threads() {
  note_wait("__syncthreads");
  Emulator& e = emulator();
  ++e.counters.block_syncs;
  const unsigned generation = e.block_generation;
  ++e.progress;
  if (++e.block_arrived == e.block_live) {
    e.block_arrived = 0;
    ++e.block_generation;
  } else {
    while (e.block_generation == generation) yield_waiting("__syncthreads");
  }
}

SharedAccessPoint shared_access_point() {
  const Emulator& e = emulator();
  return {e.block_serial, e.current, e.block_generation, e.config->block, e.config->check_races};
}

void fail(const std::string& what) { SIMT_FAIL(what); }

}  // namespace stepmix::simt
