// A CPU emulator for the SIMT execution of CUDA kernels, so the tests can run
// the kernels' own source where there is no GPU (CI, the build machines) and
// check it against the CPU kernels.
//
// launch() runs a function once per thread of a grid. The blocks run one
// after another (CUDA blocks never wait for each other); the threads of a
// block run as cooperative fibers that switch only where a thread waits: at
// sync_threads() and at the warp collectives (shuffles, ldmatrix, mma). A
// collective gathers the inputs of its warp's 32 lanes and computes every
// lane's result with the data layouts of the PTX ISA, written here from the
// ISA's fragment tables, independently of the kernels, so a kernel whose
// lane arithmetic disagrees with the hardware's layouts fails its test here.
//
// Everything a kernel does wrong that the emulator can see is an error, thrown
// by launch() as stepmix::Error ("[simt] block (x,y,z) thread (x,y,z) warp W
// lane L: <what>"):
// - shared-memory accesses (cp.async destinations, ldmatrix rows) outside
//   the launch's dynamic shared memory or misaligned;
// - cp.async sources outside the ranges the launch declared readable;
// - a warp collective that not all 32 lanes of the warp reach together, or
//   that lanes reach with different operations or masks (divergence);
// - a lane that exits while its warp waits for it in a collective;
// - a deadlock (every live thread waiting on something that cannot happen);
// - a shared-memory race between cp.async writes and ldmatrix reads of
//   different threads with no __syncthreads between them, or a read of
//   shared memory nothing wrote (shared_hazards.hpp has the rules), unless
//   the launch turns the check off; the same for the loads and stores of
//   static __shared__ arrays (static_shared.hpp);
// - a launch a GPU would refuse (launch_refusal: block and grid sizes, the
//   dynamic shared memory above the kernel's limit; static shared memory,
//   which a GPU counts too, is left out: the kernels' static arrays are a few
//   dozen bytes, and the one kernel above 48 KiB, flash attention, has none).
// cp.async copies land only when the thread waits for their group
// (cp_async_wait), the latest a GPU may complete them, so a kernel that reads
// a tile before waiting for it sees stale data here.
//
// Arithmetic: mma sums the 16 exact products and the accumulator in float64
// and rounds once to float32; the tensor cores' internal order and rounding
// differ within what the kernels' tests allow for float32 accumulation.
// tests/cuda/cuda_on_cpu.hpp maps the CUDA spellings onto these functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace stepmix::simt {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

// Hopper's (sm_90) launch limits: a GPU refuses a launch beyond them.
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr unsigned kMaxBlockZ = 64;
constexpr unsigned kMaxGridX = 0x7FFFFFFFu, kMaxGridYZ = 65535;
// Dynamic shared memory a kernel may launch with unless it raised its
// cudaFuncAttributeMaxDynamicSharedMemorySize, and the most it may raise it
// to (sharedMemPerBlockOptin, 227 KiB).
constexpr std::size_t kDefaultMaxDynamicSharedBytes = std::size_t(48) << 10;
constexpr std::size_t kOptInMaxDynamicSharedBytes = std::size_t(227) << 10;

struct LaunchConfig {
  Dim3 grid, block;
  std::size_t dynamic_shared_bytes = 0;
  // The kernel's cudaFuncAttributeMaxDynamicSharedMemorySize.
  std::size_t max_dynamic_shared_bytes = kDefaultMaxDynamicSharedBytes;
  // Global memory cp.async may read, as (address, bytes) ranges.
  std::vector<std::pair<const void*, std::size_t>> readable;
  // The race check of shared_hazards.hpp; off only in the emulator's own
  // tests that read unwritten or unlanded data to show something else.
  bool check_races = true;
};

// What the last launch did, for tests that check a kernel took the path they
// meant to exercise: warp instructions (shuffles, ldmatrix, mma) count once
// per warp, block_syncs and async_copies once per thread.
// shared_bank_conflicts: the wavefronts beyond the conflict-free minimum of
// the ldmatrix reads and cp.async writes (32 banks of 4 bytes; 16-byte
// accesses served 8 lanes or 8 rows at a time; the n-th cp.async of each lane
// of a warp taken as one instruction).
struct LaunchCounters {
  uint64_t threads = 0, block_syncs = 0, shuffles = 0, ldmatrix = 0, mma = 0, async_copies = 0;
  uint64_t shared_bank_conflicts = 0;
};

// "" or why a GPU would refuse to start the launch (cudaErrorInvalidConfiguration
// or cudaErrorInvalidValue there); launch() throws it as an error.
std::string launch_refusal(const LaunchConfig& config);
void launch(const LaunchConfig& config, const std::function<void()>& thread_body);
LaunchCounters last_launch_counters();

// ---- what a thread may call inside launch()
const Dim3& thread_index();
const Dim3& block_index();
const Dim3& block_dimensions();
const Dim3& grid_dimensions();
void sync_threads();

// __shfl_xor_sync on 4 or 8 bytes.
uint64_t shuffle_xor_bits(uint32_t mask, uint64_t bits, int lane_mask);
template <class T>
T shuffle_xor(uint32_t mask, T value, int lane_mask) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "shuffles move 4 or 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = shuffle_xor_bits(mask, bits, lane_mask);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

// Shared memory is addressed by 32-bit offsets, as in the shared window; the
// dynamic shared memory starts at offset 0.
uint32_t dynamic_shared_base();
// cp.async.cg.shared.global of 16 bytes (zero-filled, `src` unread, when
// !valid), commit_group, wait_group N.
void async_copy_16(uint32_t dst, const void* src, bool valid);
void async_copy_commit();
void async_copy_wait(int groups_in_flight);
// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16
void ldmatrix_x4(uint32_t (&r)[4], uint32_t address, bool transposed);
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, c += a·b
void mma_m16n8k16_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
// Two floats to bf16 (nearest even), `lo` in the low half (__floats2bfloat162_rn).
uint32_t pack_bf16(float lo, float hi);

// ---- for the static __shared__ arrays (static_shared.hpp)
struct SharedAccessPoint {
  uint64_t block_serial;  // the running block, numbered across launches
  int thread;             // the calling thread's index in its block (x fastest)
  unsigned interval;      // the block's barrier interval: __syncthreads it has passed
  Dim3 block_dimensions;
  bool check_races;
};
SharedAccessPoint shared_access_point();
// Ends the launch with `what` as the calling thread's error.
[[noreturn]] void fail(const std::string& what);

}  // namespace stepmix::simt
