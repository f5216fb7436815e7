// Private to the SIMT emulator (simt_emulator.cpp runs the threads,
// simt_warp.cpp the warp collectives and shared memory): the state of a
// launch, and the few functions the two share.
#pragma once

#include <array>
#include <boost/context/fiber.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shared_hazards.hpp"
#include "simt_emulator.hpp"

namespace stepmix::simt::detail {

constexpr int kWarpSize = 32;
constexpr uint32_t kFullMask = 0xFFFFFFFFu;

enum class Op : uint8_t { Shuffle, Ldmatrix, LdmatrixTransposed, Mma };

inline const char* op_name(Op op) {
  switch (op) {
    case Op::Shuffle: return "__shfl_xor_sync";
    case Op::Ldmatrix: return "ldmatrix.x4";
    case Op::LdmatrixTransposed: return "ldmatrix.x4.trans";
    case Op::Mma: return "mma.m16n8k16";
  }
  return "?";
}

// One lane's operands and results of a collective.
struct LaneSlot {
  uint64_t in[10] = {};
  uint64_t out[4] = {};
};

struct Warp {
  int live = 0;  // threads of the block in this warp not yet exited
  int arrived = 0;
  unsigned generation = 0;
  // Collective n uses slot set n % 2: a lane can get at most one collective
  // ahead of the slowest (the next one waits for it), so results survive
  // until every lane has read them.
  Op op[2] = {};
  uint64_t argument[2] = {};  // mask and lane mask, which every lane must agree on
  LaneSlot slot[2][kWarpSize];
  // The shared-memory destinations of the warp's cp.async instructions not
  // yet seen from every lane: the n-th copy of each lane is taken as one
  // instruction (the kernels issue them from convergent code).
  uint64_t first_open_copy = 0;
  std::vector<std::array<int64_t, kWarpSize>> open_copies;  // -1: lane not yet there
};

struct AsyncCopy {
  uint32_t dst;
  const void* src;
  bool valid;
};

struct Fiber {
  boost::context::fiber context;    // resumes this thread; empty once it has finished
  boost::context::fiber scheduler;  // resumes the scheduler, while this thread runs
  const char* stack_bottom = nullptr;
  uint64_t copies_issued = 0;
  Dim3 thread;
  int warp = 0, lane = 0;
  bool done = false;
  const char* waiting_in = "";  // what the fiber waits in, for deadlock reports
  std::vector<AsyncCopy> uncommitted;
  std::vector<std::vector<AsyncCopy>> in_flight;  // oldest first
};

struct Emulator {
  const LaunchConfig* config = nullptr;
  const std::function<void()>* body = nullptr;
  Dim3 block;
  std::vector<unsigned char> shared;
  SharedHazards hazards;  // when config->check_races
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  int current = -1;
  unsigned block_generation = 0;
  int block_arrived = 0, block_live = 0;
  uint64_t progress = 0;    // arrivals, releases and exits: a pass without any is a deadlock
  uint64_t waits = 0;       // block barriers and warp collectives reached
  bool direct = false;      // threads run as plain calls (see launch)
  bool abandoning = false;  // the launch failed: suspended threads end as they resume
  // Where the scheduler's stack is, for AddressSanitizer's fiber switches.
  const void* scheduler_stack_bottom = nullptr;
  std::size_t scheduler_stack_size = 0;
  void* scheduler_fake_stack = nullptr;
  std::string error;
  LaunchCounters counters;
  uint64_t block_serial = 0;
};

// The running launch (a logic error outside one) and its running thread.
Emulator& emulator();
Fiber& fiber();

// Records the first error of the launch, at the running thread.
void set_error(const std::string& what);
// Leaves the failing thread's fiber: the scheduler ends the launch and
// resumes this thread only to abandon it.
[[noreturn]] void fail_in_fiber();
// Back to the scheduler while waiting in `what` (deadlock reports name it).
void yield_waiting(const char* what);
// Where a thread reaches a barrier or a collective: fibers only.
void note_wait(const char* what);
// The bank conflicts of one cp.async instruction of a warp (simt_warp.cpp).
void count_copy_conflicts(LaunchCounters& counters, const std::array<int64_t, kWarpSize>& dst);

}  // namespace stepmix::simt::detail

#define SIMT_FAIL(message)                       \
  do {                                           \
    ::stepmix::simt::detail::set_error(message); \
    ::stepmix::simt::detail::fail_in_fiber();    \
  } while (0)
