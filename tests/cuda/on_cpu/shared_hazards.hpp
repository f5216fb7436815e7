// The shared-memory race check of the SIMT emulator (simt_emulator.hpp): the
// hazards that compute-sanitizer's racecheck finds on a GPU, found here in
// the order the emulator happens to run the threads.
//
// Why the emulator needs it: its threads run one after another between
// barriers and its cp.async copies land at their wait, so a kernel with a
// missing __syncthreads often computes the right numbers here and races on a
// GPU (remove the flash kernel's barrier at the end of a key tile: its next
// copies land only at the next wait, after every warp has read the tile).
//
// The rules, per 16-byte chunk of the dynamic shared memory (every access
// the emulator sees, cp.async destinations and ldmatrix rows, is one aligned
// chunk). An interval is the time between two __syncthreads of the block.
// A cp.async may land at any moment from its issue to its thread's wait, so
// it counts as writing the chunk over every interval from the one it was
// issued in to the one its wait is in. Then:
// - a read by another thread during those intervals races with it (the
//   reader needs a __syncthreads after the wait);
// - a read by the copying thread itself before its wait sees stale data;
// - a cp.async into a chunk another thread read in the same interval races
//   with that read (a __syncthreads must come between);
// - two cp.async into one chunk, neither waited for before the other's
//   issue (or by different threads in one interval), land in either order;
// - a read of a chunk no thread has written in the block reads garbage.
//
// ElementHazards holds the same rules for plain loads and stores, per
// element of a kernel's static __shared__ array (static_shared.hpp): within
// one interval, a store and any other thread's load or store of the element
// race; a load of an element the block has not stored reads garbage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace stepmix::simt {

// "thread (x,y,z)" for the thread of index `thread` in a block of
// `block_x` × `block_y` × ... threads.
std::string thread_name(int thread, unsigned block_x, unsigned block_y);

// Who read a piece of shared memory in one barrier interval: the first two
// distinct threads, enough to name a thread other than any given one.
struct IntervalReaders {
  static constexpr unsigned kNone = ~0u;
  unsigned interval = kNone;
  int threads[2] = {-1, -1};

  void add(int thread, unsigned in_interval);
  // A reader in `in_interval` other than `thread`, or -1.
  int other_than(int thread, unsigned in_interval) const;
};

class SharedHazards {
 public:
  // A new block: `bytes` of unwritten shared memory; threads are named by
  // their index in the block (x fastest) and shown as (x,y,z) of a block of
  // `block_x` × `block_y` threads.
  void reset(std::size_t bytes, unsigned block_x, unsigned block_y);

  // Each returns "" or the hazard in words, naming the other thread.
  std::string copy_issued(uint32_t offset, int thread, unsigned interval);
  void copy_landed(uint32_t offset, unsigned interval);
  std::string read(uint32_t offset, int thread, unsigned interval);

 private:
  static constexpr unsigned kPending = ~0u;
  struct Chunk {
    int writer = -1;  // the thread of the last cp.async into it; -1: never written
    unsigned issued = 0, landed = 0;
    IntervalReaders readers;
  };
  std::string thread_name(int thread) const { return simt::thread_name(thread, block_x_, block_y_); }

  std::vector<Chunk> chunks_;
  unsigned block_x_ = 1, block_y_ = 1;
};

class ElementHazards {
 public:
  // A new block; `array` names the array in messages.
  void reset(std::size_t elements, unsigned block_x, unsigned block_y, std::string array);
  // Each returns "" or the hazard in words, naming the other thread.
  std::string load(std::size_t i, int thread, unsigned interval);
  std::string store(std::size_t i, int thread, unsigned interval);

 private:
  static constexpr unsigned kNever = ~0u;
  struct Element {
    int writer = -1;  // the last thread that stored it; -1: never stored in the block
    unsigned stored_in = kNever;
    IntervalReaders loaders;
  };
  std::string element_name(std::size_t i) const { return "element " + std::to_string(i) + " of " + array_; }
  std::vector<Element> elements_;
  unsigned block_x_ = 1, block_y_ = 1;
  std::string array_;
};

}  // namespace stepmix::simt
