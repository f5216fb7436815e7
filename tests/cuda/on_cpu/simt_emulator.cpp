// The SIMT emulator (simt_emulator.hpp): one fiber (Boost.Context) per thread
// of the running block, and the warp collectives computed from all lanes'
// inputs with the PTX ISA's fragment layouts.
#include "simt_emulator.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <boost/context/fiber.hpp>
#include <boost/context/preallocated.hpp>
#include <boost/context/stack_context.hpp>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "core/numerics.hpp"
#include "shared_hazards.hpp"
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
namespace {

constexpr std::size_t kStackBytes = std::size_t(256) << 10;
constexpr int kWarpSize = 32;
constexpr uint32_t kFullMask = 0xFFFFFFFFu;

enum class Op : uint8_t { Shuffle, Ldmatrix, LdmatrixTransposed, Mma };

const char* op_name(Op op) {
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

thread_local Emulator* active = nullptr;
LaunchCounters last_counters;

Emulator& emulator() {
  if (!active) throw std::logic_error("simt: a device function was called outside simt::launch");
  return *active;
}
Fiber& fiber() { return emulator().fibers[std::size_t(emulator().current)]; }

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

#define SIMT_FAIL(message) \
  do {                     \
    set_error(message);    \
    fail_in_fiber();       \
  } while (0)

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

void yield_waiting(const char* what) {
  fiber().waiting_in = what;
  switch_to_scheduler();
  fiber().waiting_in = "";
}

// ---- shared memory checks

void check_shared(uint32_t address, uint32_t bytes, const char* what) {
  Emulator& e = emulator();
  if (address % 16 != 0 || uint64_t(address) + bytes > e.shared.size()) {
    {
      std::ostringstream s;
      s << what << " at shared offset " << address << " (" << bytes << " bytes): outside the " << e.shared.size()
        << " bytes of dynamic shared memory or not 16-byte aligned";
      set_error(s.str());
    }
    fail_in_fiber();
  }
}

bool readable(const void* src, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (const auto& [base, size] : emulator().config->readable) {
    const auto* b = static_cast<const unsigned char*>(base);
    if (p >= b && p + bytes <= b + size) return true;
  }
  return false;
}

void land(const std::vector<AsyncCopy>& group) {
  Emulator& e = emulator();
  for (const AsyncCopy& c : group) {
    if (e.config->check_races) e.hazards.copy_landed(c.dst, e.block_generation);
    if (c.valid)
      std::memcpy(&e.shared[c.dst], c.src, 16);
    else
      std::memset(&e.shared[c.dst], 0, 16);
  }
}

// ---- shared-memory banks
// 32 banks of 4 bytes: a 16-byte row or access covers the 4 banks of group
// (address / 16) % 8. The hardware serves 16-byte accesses 8 lanes (or 8
// ldmatrix rows) at a time; a phase takes as many wavefronts as the most
// distinct addresses that fall in one bank group (equal addresses are one).
// Returns the wavefronts beyond one.
uint64_t extra_wavefronts(const int64_t* addresses, int count) {
  int64_t distinct[8][8];
  int in_group[8] = {};
  int worst = 0;
  for (int i = 0; i < count; ++i) {
    if (addresses[i] < 0) continue;
    const int group = int((addresses[i] / 16) % 8);
    bool seen = false;
    for (int j = 0; j < in_group[group]; ++j) seen = seen || distinct[group][j] == addresses[i];
    if (!seen) distinct[group][in_group[group]++] = addresses[i];
    worst = std::max(worst, in_group[group]);
  }
  return worst > 1 ? uint64_t(worst - 1) : 0;
}

void count_copy_conflicts(LaunchCounters& counters, const std::array<int64_t, kWarpSize>& dst) {
  for (int phase = 0; phase < kWarpSize / 8; ++phase)
    counters.shared_bank_conflicts += extra_wavefronts(dst.data() + 8 * phase, 8);
}

// Where a thread reaches a barrier or a collective: fibers only.
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

// ---- warp collectives

void count_warp_instruction(LaunchCounters& counters, Op op) {
  switch (op) {
    case Op::Shuffle: ++counters.shuffles; break;
    case Op::Ldmatrix:
    case Op::LdmatrixTransposed: ++counters.ldmatrix; break;
    case Op::Mma: ++counters.mma; break;
  }
}

// Deposits this lane's inputs for `op`, waits for the whole warp, and returns
// this lane's slot once the last lane to arrive has run `compute` on all of
// them. `argument` must be the same on every lane.
template <class Compute>
const LaneSlot& collective(Op op, uint64_t argument, const uint64_t* in, int count, Compute compute) {
  note_wait(op_name(op));
  Emulator& e = emulator();
  Fiber& f = fiber();
  Warp& w = e.warps[std::size_t(f.warp)];
  if (w.live != kWarpSize)
    SIMT_FAIL(std::string(op_name(op)) + " in a warp of fewer than 32 live lanes (" + std::to_string(w.live) + ")");
  const int parity = int(w.generation & 1);
  if (w.arrived == 0) {
    w.op[parity] = op;
    w.argument[parity] = argument;
  } else if (w.op[parity] != op || w.argument[parity] != argument) {
    SIMT_FAIL(std::string("divergent warp: this lane is in ") + op_name(op) + ", lanes before it in " +
              op_name(w.op[parity]) + " (or with another mask)");
  }
  LaneSlot& slot = w.slot[parity][f.lane];
  for (int i = 0; i < count; ++i) slot.in[i] = in[i];
  const unsigned generation = w.generation;
  ++e.progress;
  if (++w.arrived == kWarpSize) {
    count_warp_instruction(e.counters, op);
    compute(w.slot[parity]);
    w.arrived = 0;
    ++w.generation;
  } else {
    while (w.generation == generation) yield_waiting(op_name(op));
  }
  return slot;
}

uint16_t shared_b16(uint32_t address) {
  uint16_t v;
  std::memcpy(&v, &emulator().shared[address], 2);
  return v;
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
        static thread_local uint64_t blocks_run = 0;
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

uint64_t shuffle_xor_bits(uint32_t mask, uint64_t bits, int lane_mask) {
  if (mask != kFullMask) SIMT_FAIL("__shfl_xor_sync with a partial mask (only full warps are emulated)");
  if (lane_mask < 0 || lane_mask >= kWarpSize) SIMT_FAIL("__shfl_xor_sync lane mask outside 0..31");
  const uint64_t in[1] = {bits};
  const LaneSlot& s =
      collective(Op::Shuffle, (uint64_t(mask) << 32) | uint32_t(lane_mask), in, 1, [lane_mask](LaneSlot* lanes) {
        for (int l = 0; l < kWarpSize; ++l) lanes[l].out[0] = lanes[l ^ lane_mask].in[0];
      });
  return s.out[0];
}

uint32_t dynamic_shared_base() { return 0; }

void async_copy_16(uint32_t dst, const void* src, bool valid) {
  check_shared(dst, 16, "cp.async destination");
  if (valid && (reinterpret_cast<uintptr_t>(src) % 16 != 0 || !readable(src, 16))) {
    {
      std::ostringstream s;
      s << "cp.async source " << src << " (16 bytes): not in the launch's readable ranges or not 16-byte aligned";
      set_error(s.str());
    }
    fail_in_fiber();
  }
  Emulator& e = emulator();
  if (e.config->check_races) {
    const std::string race = e.hazards.copy_issued(dst, e.current, e.block_generation);
    if (!race.empty()) SIMT_FAIL(race);
  }
  Fiber& f = fiber();
  ++e.counters.async_copies;
  f.uncommitted.push_back({dst, src, valid});
  // Bank conflicts of this instruction once every live lane of the warp has
  // issued it.
  Warp& w = e.warps[std::size_t(f.warp)];
  const uint64_t n = f.copies_issued++ - w.first_open_copy;
  while (w.open_copies.size() <= n) {
    w.open_copies.emplace_back();
    w.open_copies.back().fill(-1);
  }
  w.open_copies[n][std::size_t(f.lane)] = dst;
  while (!w.open_copies.empty() && std::count_if(w.open_copies.front().begin(), w.open_copies.front().end(),
                                                 [](int64_t a) { return a >= 0; }) == w.live) {
    count_copy_conflicts(e.counters, w.open_copies.front());
    w.open_copies.erase(w.open_copies.begin());
    ++w.first_open_copy;
  }
}

void async_copy_commit() {
  Fiber& f = fiber();
  f.in_flight.push_back(std::move(f.uncommitted));
  f.uncommitted.clear();
}

void async_copy_wait(int groups_in_flight) {
  Fiber& f = fiber();
  while (f.in_flight.size() > std::size_t(groups_in_flight)) {
    land(f.in_flight.front());
    f.in_flight.erase(f.in_flight.begin());
  }
}

void ldmatrix_x4(uint32_t (&r)[4], uint32_t address, bool transposed) {
  // Lanes 8i..8i+7 address the rows of matrix i; every row is 16 bytes.
  check_shared(address, 16, transposed ? "ldmatrix.x4.trans row" : "ldmatrix.x4 row");
  // The row is read as the lane arrives: the block cannot pass a barrier, nor
  // can the other lanes of the warp move, before the warp's last lane does.
  if (Emulator& e = emulator(); e.config->check_races) {
    const std::string race = e.hazards.read(address, e.current, e.block_generation);
    if (!race.empty()) SIMT_FAIL(race);
  }
  const uint64_t in[1] = {address};
  const LaneSlot& s =
      collective(transposed ? Op::LdmatrixTransposed : Op::Ldmatrix, 0, in, 1, [transposed](LaneSlot* lanes) {
        for (int i = 0; i < 4; ++i) {  // one phase per matrix
          int64_t rows[8];
          for (int r = 0; r < 8; ++r) rows[r] = int64_t(lanes[8 * i + r].in[0]);
          emulator().counters.shared_bank_conflicts += extra_wavefronts(rows, 8);
        }
        // element (row, column) of matrix i
        auto element = [lanes](int i, int row, int column) {
          return uint32_t(shared_b16(uint32_t(lanes[8 * i + row].in[0]) + 2 * column));
        };
        for (int l = 0; l < kWarpSize; ++l)
          for (int i = 0; i < 4; ++i) {
            const int a = l / 4, b = 2 * (l % 4);
            lanes[l].out[i] = transposed ? element(i, b, a) | element(i, b + 1, a) << 16
                                         : element(i, a, b) | element(i, a, b + 1) << 16;
          }
      });
  for (int i = 0; i < 4; ++i) r[i] = uint32_t(s.out[i]);
}

void mma_m16n8k16_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  uint64_t in[10];
  for (int i = 0; i < 4; ++i) in[i] = a[i];
  in[4] = b0;
  in[5] = b1;
  for (int i = 0; i < 4; ++i) in[6 + i] = std::bit_cast<uint32_t>(c[i]);
  const LaneSlot& s = collective(Op::Mma, 0, in, 10, [](LaneSlot* lanes) {
    // The fragment tables of mma.m16n8k16 (.bf16 A row-major, B column-major,
    // .f32 C/D): lane l, g = l / 4, t = l % 4.
    float A[16][16], B[16][8], C[16][8];
    auto low = [](uint64_t r) { return bf16_to_float(uint16_t(r)); };
    auto high = [](uint64_t r) { return bf16_to_float(uint16_t(r >> 16)); };
    for (int l = 0; l < kWarpSize; ++l) {
      const int g = l / 4, t = l % 4;
      const uint64_t* in = lanes[l].in;
      A[g][2 * t] = low(in[0]), A[g][2 * t + 1] = high(in[0]);
      A[g + 8][2 * t] = low(in[1]), A[g + 8][2 * t + 1] = high(in[1]);
      A[g][2 * t + 8] = low(in[2]), A[g][2 * t + 9] = high(in[2]);
      A[g + 8][2 * t + 8] = low(in[3]), A[g + 8][2 * t + 9] = high(in[3]);
      B[2 * t][g] = low(in[4]), B[2 * t + 1][g] = high(in[4]);
      B[2 * t + 8][g] = low(in[5]), B[2 * t + 9][g] = high(in[5]);
      C[g][2 * t] = std::bit_cast<float>(uint32_t(in[6])), C[g][2 * t + 1] = std::bit_cast<float>(uint32_t(in[7]));
      C[g + 8][2 * t] = std::bit_cast<float>(uint32_t(in[8]));
      C[g + 8][2 * t + 1] = std::bit_cast<float>(uint32_t(in[9]));
    }
    float D[16][8];
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        double sum = C[m][n];
        for (int k = 0; k < 16; ++k) sum += double(A[m][k]) * double(B[k][n]);
        D[m][n] = float(sum);
      }
    for (int l = 0; l < kWarpSize; ++l) {
      const int g = l / 4, t = l % 4;
      const float d[4] = {D[g][2 * t], D[g][2 * t + 1], D[g + 8][2 * t], D[g + 8][2 * t + 1]};
      for (int i = 0; i < 4; ++i) lanes[l].out[i] = std::bit_cast<uint32_t>(d[i]);
    }
  });
  for (int i = 0; i < 4; ++i) c[i] = std::bit_cast<float>(uint32_t(s.out[i]));
}

SharedAccessPoint shared_access_point() {
  const Emulator& e = emulator();
  return {e.block_serial, e.current, e.block_generation, e.config->block, e.config->check_races};
}

void fail(const std::string& what) { SIMT_FAIL(what); }

uint32_t pack_bf16(float lo, float hi) {
  return uint32_t(float_to_bf16_rne(lo)) | uint32_t(float_to_bf16_rne(hi)) << 16;
}

}  // namespace stepmix::simt
