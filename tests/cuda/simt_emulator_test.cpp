// The SIMT emulator (simt_emulator.hpp) that runs CUDA kernel sources on the
// CPU: thread and block coordinates, barriers, shuffles, the ldmatrix and mma
// fragment layouts (through the lane addressing CUTLASS and FlashAttention use
// to compute A·Bᵀ and A·B from row-major tiles), cp.async landing only at its
// wait, and the errors a broken kernel gets.
#include "on_cpu/simt_emulator.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "common/error_of.hpp"
#include "core/numerics.hpp"
#include "cuda_test_util.hpp"
#include "on_cpu/static_shared.hpp"

namespace stepmix::test {
namespace {

simt::LaunchConfig config(simt::Dim3 grid, simt::Dim3 block, std::size_t shared = 0) {
  simt::LaunchConfig c;
  c.grid = grid;
  c.block = block;
  c.dynamic_shared_bytes = shared;
  return c;
}

TEST(SimtEmulator, EveryThreadOfEveryBlockRunsOnceWithItsCoordinates) {
  const simt::LaunchConfig c = config({3, 2, 2}, {5, 3, 2});
  std::vector<int> seen(3 * 2 * 2 * 5 * 3 * 2, 0);
  simt::launch(c, [&] {
    const simt::Dim3 &t = simt::thread_index(), &b = simt::block_index();
    const unsigned block = (b.z * 2 + b.y) * 3 + b.x, thread = (t.z * 3 + t.y) * 5 + t.x;
    ++seen[block * 30 + thread];
    EXPECT_EQ(simt::block_dimensions().y, 3u);
    EXPECT_EQ(simt::grid_dimensions().z, 2u);
  });
  for (int s : seen) EXPECT_EQ(s, 1);
  EXPECT_EQ(simt::last_launch_counters().threads, seen.size());
}

TEST(SimtEmulator, SyncThreadsOrdersWritesBeforeReadsAcrossWarps) {
  // Each thread writes its slot, waits, then reads its neighbour's from
  // another warp: every read sees the write.
  std::vector<int> slots(96, -1), read(96, -2);
  simt::launch(config({1, 1, 1}, {96, 1, 1}), [&] {
    const unsigned t = simt::thread_index().x;
    slots[t] = int(t) * 7;
    simt::sync_threads();
    read[t] = slots[(t + 40) % 96];
  });
  for (int t = 0; t < 96; ++t) EXPECT_EQ(read[std::size_t(t)], (t + 40) % 96 * 7);
}

TEST(SimtEmulator, ShuffleXorGivesEachLaneItsPartnersValue) {
  std::vector<double> got(64);
  simt::launch(config({1, 1, 1}, {64, 1, 1}), [&] {
    const unsigned t = simt::thread_index().x;
    got[t] = simt::shuffle_xor(0xFFFFFFFFu, double(t) + 0.5, 5);
  });
  for (unsigned t = 0; t < 64; ++t) EXPECT_EQ(got[t], double((t & ~31u) | ((t % 32) ^ 5)) + 0.5);
}

// Writes `values` (bf16) row-major into shared memory at `offset`, as one
// thread's plain stores (through the emulator's copy, for its bounds check).
void stage_rows(uint32_t offset, const std::vector<uint16_t>& values) {
  for (std::size_t i = 0; i < values.size(); i += 8) simt::async_copy_16(offset + uint32_t(2 * i), &values[i], true);
  simt::async_copy_commit();
  simt::async_copy_wait(0);
}

// One warp computes D = A·B + C (16×16, float32) with two mma.m16n8k16: A
// 16×16 row-major through ldmatrix; B either row-major n × k (as the flash
// kernel holds K, so D = A·Bᵀ) through ldmatrix, or row-major k × n (as it
// holds V) through ldmatrix.trans.
std::vector<float> warp_product(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b,
                                const std::vector<float>& c, bool b_k_by_n) {
  std::vector<float> d(256);
  simt::LaunchConfig cfg = config({1, 1, 1}, {32, 1, 1}, 1024);
  cfg.readable = {{a.data(), 512}, {b.data(), 512}};
  simt::launch(cfg, [&] {
    const int lane = int(simt::thread_index().x), g = lane / 4, t = lane % 4;
    if (lane == 0) {
      stage_rows(0, a);
      stage_rows(512, b);
    }
    simt::sync_threads();
    uint32_t af[4], bf[4];
    simt::ldmatrix_x4(af, uint32_t((lane % 16) * 32 + (lane / 16) * 16), false);
    if (b_k_by_n)
      simt::ldmatrix_x4(bf, uint32_t(512 + ((lane % 8) + ((lane / 8) % 2) * 8) * 32 + (lane / 16) * 16), true);
    else
      simt::ldmatrix_x4(bf, uint32_t(512 + ((lane % 8) + (lane / 16) * 8) * 32 + ((lane / 8) % 2) * 16), false);
    for (int n8 = 0; n8 < 2; ++n8) {
      const int r0 = g * 16 + n8 * 8 + 2 * t, r1 = (g + 8) * 16 + n8 * 8 + 2 * t;  // C/D fragment elements
      float acc[4] = {c[r0], c[r0 + 1], c[r1], c[r1 + 1]};
      simt::mma_m16n8k16_bf16(acc, af, bf[2 * n8], bf[2 * n8 + 1]);
      d[r0] = acc[0], d[r0 + 1] = acc[1], d[r1] = acc[2], d[r1 + 1] = acc[3];
    }
  });
  return d;
}

TEST(SimtEmulator, LdmatrixAndMmaComputeProductsOfRowMajorTiles) {
  const std::vector<uint16_t> a = normal_bf16(256, 1, 1.0f), b = normal_bf16(256, 2, 1.0f);
  const std::vector<float> c = normal_floats(256, 3, 1.0f);
  for (bool b_k_by_n : {false, true}) {
    const std::vector<float> d = warp_product(a, b, c, b_k_by_n);
    EXPECT_EQ(simt::last_launch_counters().mma, 2u);  // per warp
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        double want = c[std::size_t(m * 16 + n)];
        for (int k = 0; k < 16; ++k)
          want += double(bf16_to_float(a[std::size_t(m * 16 + k)])) *
                  bf16_to_float(b[std::size_t(b_k_by_n ? k * 16 + n : n * 16 + k)]);
        ASSERT_EQ(d[std::size_t(m * 16 + n)], float(want)) << m << "," << n << (b_k_by_n ? " (.trans)" : "");
      }
  }
}

TEST(SimtEmulator, AsyncCopiesLandAtTheirWaitAndInvalidOnesZeroFill) {
  // Lane 0 copies three groups (16 bytes at offsets 0 and 16, a zero fill at
  // 32) and waits for them in two steps; the warp reads row 0 of each
  // through ldmatrix (matrix i's rows at offset 16·(i % 3)).
  std::vector<uint16_t> source(8, 0x1234);
  std::vector<std::array<uint32_t, 3>> seen(3);
  simt::LaunchConfig c = config({1, 1, 1}, {32, 1, 1}, 64);
  c.readable = {{source.data(), 16}};
  c.check_races = false;  // the warp reads what has not landed, on purpose
  simt::launch(c, [&] {
    const int lane = int(simt::thread_index().x);
    auto look = [&](int when) {
      simt::sync_threads();
      uint32_t r[4];
      simt::ldmatrix_x4(r, uint32_t(lane / 8 % 3) * 16, false);
      if (lane == 0) seen[std::size_t(when)] = {r[0], r[1], r[2]};
    };
    if (lane == 0) {
      simt::async_copy_16(0, source.data(), true);
      simt::async_copy_commit();
      simt::async_copy_16(16, source.data(), true);
      simt::async_copy_commit();
      simt::async_copy_16(32, nullptr, false);
      simt::async_copy_commit();
    }
    look(0);  // nothing waited for: the launch's garbage
    if (lane == 0) simt::async_copy_wait(2);
    look(1);  // the first group only
    if (lane == 0) simt::async_copy_wait(0);
    look(2);
  });
  const uint32_t garbage = 0xA5A5A5A5u, data = 0x12341234u;
  EXPECT_EQ(seen[0], (std::array<uint32_t, 3>{garbage, garbage, garbage}));
  EXPECT_EQ(seen[1], (std::array<uint32_t, 3>{data, garbage, garbage}));
  EXPECT_EQ(seen[2], (std::array<uint32_t, 3>{data, data, 0u}));
}

TEST(SimtEmulator, SharedBankConflictsAreCounted) {
  // Eight 16-byte rows 128 bytes apart all start on bank 0: each ldmatrix
  // phase (matrix) takes 8 wavefronts, 7 more than needed; XOR-swizzling the
  // chunk with the row, as the flash kernel does, spreads them over the 8
  // bank groups. The same for a warp of 16-byte cp.async writes.
  std::vector<uint16_t> source(8);
  for (bool swizzled : {false, true}) {
    simt::LaunchConfig c = config({1, 1, 1}, {32, 1, 1}, 8192);
    c.readable = {{source.data(), 16}};
    c.check_races = false;  // only the addresses matter: the rows read were never written
    simt::launch(c, [&] {
      const uint32_t lane = simt::thread_index().x, row = lane % 8 + 8 * (lane / 8);
      const uint32_t chunk = swizzled ? (lane % 8) : 0;
      uint32_t r[4];
      simt::ldmatrix_x4(r, row * 128 + chunk * 16, false);
      simt::async_copy_16(row * 256 + chunk * 16, source.data(), true);
    });
    EXPECT_EQ(simt::last_launch_counters().shared_bank_conflicts, swizzled ? 0u : 4u * 7 + 4u * 7);
  }
}

std::string launch_error(const simt::LaunchConfig& c, const std::function<void()>& body) {
  return error_of([&] { simt::launch(c, body); });
}

TEST(SimtEmulatorErrors, SharedMemoryOutsideTheLaunchOrMisalignedIsRefused) {
  std::vector<uint16_t> source(8);
  simt::LaunchConfig c = config({1, 1, 1}, {32, 1, 1}, 256);
  c.readable = {{source.data(), 16}};
  c.check_races = false;  // the rows inside are never written
  EXPECT_TRUE(contains(launch_error(c, [&] { simt::async_copy_16(256, source.data(), true); }),
                       "cp.async destination at shared offset 256 (16 bytes): outside the 256 bytes"));
  EXPECT_TRUE(contains(launch_error(c,
                                    [&] {
                                      uint32_t r[4];
                                      simt::ldmatrix_x4(r, simt::thread_index().x == 7 ? 248 : 0, false);
                                    }),
                       "thread (7,0,0) warp 0 lane 7: ldmatrix.x4 row at shared offset 248"));
}

TEST(SimtEmulatorErrors, AsyncCopiesFromOutsideTheReadableRangesAreRefused) {
  std::vector<uint16_t> source(16);
  simt::LaunchConfig c = config({1, 1, 1}, {1, 1, 1}, 64);
  c.readable = {{source.data(), 16}};
  EXPECT_TRUE(contains(launch_error(c, [&] { simt::async_copy_16(0, source.data() + 8, true); }),
                       "not in the launch's readable ranges"));
  // Invalid (zero-fill) copies read nothing, whatever their source.
  EXPECT_EQ(launch_error(c, [&] { simt::async_copy_16(0, nullptr, false); }), "");
}

TEST(SimtEmulatorErrors, DivergentWarpsAndLanesThatLeaveTheirWarpAreRefused) {
  simt::LaunchConfig c = config({1, 1, 1}, {32, 1, 1}, 64);
  c.check_races = false;  // the row read is never written
  EXPECT_TRUE(contains(launch_error(c,
                                    [&] {
                                      uint32_t r[4];
                                      if (simt::thread_index().x < 16)
                                        simt::shuffle_xor(0xFFFFFFFFu, 1.0f, 1);
                                      else
                                        simt::ldmatrix_x4(r, 0, false);
                                    }),
                       "divergent warp"));
  EXPECT_TRUE(contains(launch_error(c,
                                    [&] {
                                      if (simt::thread_index().x != 3) simt::shuffle_xor(0xFFFFFFFFu, 1, 1);
                                    }),
                       "exited while its warp waits in __shfl_xor_sync"));
  EXPECT_TRUE(contains(launch_error(config({1, 1, 1}, {16, 1, 1}), [&] { simt::shuffle_xor(0xFFFFFFFFu, 1, 1); }),
                       "in a warp of fewer than 32 live lanes (16)"));
}

TEST(SimtEmulatorErrors, ADeadlockIsReportedWithWhatEachThreadWaitsIn) {
  // Half of warp 1 waits at the block barrier, the other half in a shuffle
  // that needs them: nobody can move.
  const std::string error = launch_error(config({1, 1, 1}, {64, 1, 1}), [&] {
    const unsigned t = simt::thread_index().x;
    if (t >= 48)
      simt::sync_threads();
    else if (t >= 32)
      simt::shuffle_xor(0xFFFFFFFFu, 1, 1);
    else
      simt::sync_threads();
  });
  EXPECT_TRUE(contains(error, "[simt] deadlock in block (0,0,0):"));
  EXPECT_TRUE(contains(error, "thread 32 waits in __shfl_xor_sync"));
  EXPECT_TRUE(contains(error, "thread 48 waits in __syncthreads"));
}

// The double-buffered pipeline of the flash kernel in miniature: 64 threads
// (two warps) stream `tiles` tiles of 32 rows of 16 bytes through two shared
// buffers with cp.async (the next tile loads while this one is read), each
// warp reading a tile's 32 rows with one ldmatrix.x4. `trailing_barrier`
// false leaves out the barrier after the reads, so the next iteration's
// copies into the buffer just read race with the other warp's reads; the
// emulator's late landing hides that from the data, and the race check sees
// it. Adds lane 0's four words of each tile to sums[warp]; returns the
// launch's error, or "".
std::string run_pipeline(bool trailing_barrier, bool check_races, const std::vector<uint16_t>& rows, int tiles,
                         uint64_t* sums) {
  simt::LaunchConfig c = config({1, 1, 1}, {64, 1, 1}, 2 * 32 * 16);
  c.readable = {{rows.data(), rows.size() * 2}};
  c.check_races = check_races;
  return launch_error(c, [&] {
    const int t = int(simt::thread_index().x), lane = t % 32;
    auto load = [&](int tile) {
      if (t < 32)
        simt::async_copy_16(uint32_t((tile % 2) * 512 + t * 16), &rows[std::size_t((tile * 32 + t) * 8)], true);
      simt::async_copy_commit();
    };
    load(0);
    for (int tile = 0; tile < tiles; ++tile) {
      if (tile + 1 < tiles) {
        load(tile + 1);
        simt::async_copy_wait(1);
      } else {
        simt::async_copy_wait(0);
      }
      simt::sync_threads();
      uint32_t r[4];
      simt::ldmatrix_x4(r, uint32_t((tile % 2) * 512 + lane * 16), false);
      if (lane == 0) sums[t / 32] += uint64_t(r[0]) + r[1] + r[2] + r[3];
      if (trailing_barrier) simt::sync_threads();
    }
  });
}

TEST(SimtEmulatorErrors, SharedMemoryRacesAreRefusedWhateverTheDataShows) {
  const int tiles = 4;
  std::vector<uint16_t> rows(std::size_t(tiles) * 32 * 8);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = uint16_t(i * 2654435761u >> 7);
  uint64_t want = 0;  // lane 0's ldmatrix words: elements 0 and 1 of row 0 of each matrix
  for (int tile = 0; tile < tiles; ++tile)
    for (int m = 0; m < 4; ++m) {
      const std::size_t at = std::size_t((tile * 32 + 8 * m) * 8);
      want += uint64_t(rows[at]) | uint64_t(rows[at + 1]) << 16;
    }
  uint64_t sums[2] = {};
  EXPECT_EQ(run_pipeline(true, true, rows, tiles, sums), "");
  EXPECT_EQ(sums[0], want);
  EXPECT_EQ(sums[1], want);
  // Without the trailing barrier the data still comes out right here...
  uint64_t racy[2] = {};
  EXPECT_EQ(run_pipeline(false, false, rows, tiles, racy), "");
  EXPECT_EQ(racy[0], want);
  EXPECT_EQ(racy[1], want);
  // ...but on a GPU the next tile's copies may land while the other warp reads.
  const std::string race = run_pipeline(false, true, rows, tiles, racy);
  // (Which side reports it depends on the order the threads run in.)
  EXPECT_TRUE(contains(race, "race: ") && contains(race, "shared offset 496")) << race;
}

TEST(SimtEmulatorErrors, ReadsOfUnlandedOrUnwrittenSharedMemoryAreRefused) {
  std::vector<uint16_t> source(8, 7);
  simt::LaunchConfig c = config({1, 1, 1}, {64, 1, 1}, 64);
  c.readable = {{source.data(), 16}};
  auto copy_row0 = [&](bool wait) {
    simt::async_copy_16(0, source.data(), true);
    simt::async_copy_commit();
    if (wait) simt::async_copy_wait(0);
  };
  auto read_row0 = [] {
    uint32_t r[4];
    simt::ldmatrix_x4(r, 0, false);
  };
  // Thread 0 copies and waits; the block reads with no barrier after the wait.
  EXPECT_TRUE(contains(launch_error(c,
                                    [&] {
                                      if (simt::thread_index().x == 0) copy_row0(true);
                                      read_row0();
                                    }),
                       "thread (1,0,0) warp 0 lane 1: race: reads shared offset 0, which thread (0,0,0)'s "
                       "cp.async filled in this barrier interval"));
  // Thread 32 never waits for its copy; the block reads after a barrier.
  EXPECT_TRUE(contains(launch_error(c,
                                    [&] {
                                      if (simt::thread_index().x == 32) copy_row0(false);
                                      simt::sync_threads();
                                      read_row0();
                                    }),
                       "race: reads shared offset 0 while thread (32,0,0)'s cp.async into it, issued 1 "
                       "barrier(s) ago, has not landed"));
  // A thread reads its own copy before waiting for it.
  EXPECT_TRUE(contains(launch_error(c,
                                    [&] {
                                      if (simt::thread_index().x == 0) copy_row0(false);
                                      read_row0();
                                    }),
                       "lane 0: reads shared offset 0 before waiting for its own cp.async into it"));
  // Two threads copy into one chunk in one interval.
  EXPECT_TRUE(contains(launch_error(c,
                                    [&] {
                                      const unsigned t = simt::thread_index().x;
                                      if (t == 0 || t == 33) copy_row0(true);
                                    }),
                       "thread (33,0,0) warp 1 lane 1: race: cp.async into shared offset 0 in the barrier "
                       "interval in which thread (0,0,0)'s cp.async into it landed"));
  // Nothing was ever written.
  EXPECT_TRUE(
      contains(launch_error(c, read_row0), "lane 0: reads shared offset 0, which no thread of the block has written"));
  // A wait and a barrier make the same reads right, in every block.
  c.grid = {2, 1, 1};
  EXPECT_EQ(launch_error(c,
                         [&] {
                           if (simt::thread_index().x == 32) copy_row0(true);
                           simt::sync_threads();
                           read_row0();
                         }),
            "");
}

TEST(SimtEmulatorErrors, AFailedLaunchStartsNoFurtherThreadAndTheNextLaunchRuns) {
  // Thread 0 fails before any other thread has started: the others never
  // run the kernel (they used to, while the launch unwound), and the next
  // launch on the same fiber stacks runs whole (under AddressSanitizer, on
  // stacks the failed threads left).
  std::vector<uint16_t> source(8);
  simt::LaunchConfig c = config({1, 1, 1}, {64, 1, 1}, 64);
  c.readable = {{source.data(), 16}};
  int started = 0;
  EXPECT_TRUE(contains(launch_error(c,
                                    [&] {
                                      ++started;
                                      simt::async_copy_16(64, source.data(), true);
                                    }),
                       "thread (0,0,0) warp 0 lane 0: cp.async destination at shared offset 64"));
  EXPECT_EQ(started, 1);
  std::vector<float> got(64);
  EXPECT_EQ(launch_error(c,
                         [&] {
                           const unsigned t = simt::thread_index().x;
                           got[t] = simt::shuffle_xor(0xFFFFFFFFu, float(t), 1);
                         }),
            "");
  for (unsigned t = 0; t < 64; ++t) EXPECT_EQ(got[t], float(t ^ 1));
}

TEST(SimtEmulator, StaticSharedArraysStartEveryBlockAfreshAndKeepStoresInIt) {
  // Each block stores one value per warp, waits, and every thread adds them.
  simt::SharedArray<int, 2> partial;
  std::vector<int> sums(3 * 64, -1);
  simt::launch(config({3, 1, 1}, {64, 1, 1}), [&] {
    const unsigned t = simt::thread_index().x, b = simt::block_index().x;
    if (t % 32 == 0) partial[t / 32] = int(100 * b + t);
    simt::sync_threads();
    sums[b * 64 + t] = partial[0] + partial[1];
  });
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 64; ++t) EXPECT_EQ(sums[std::size_t(b * 64 + t)], 200 * b + 32);
}

TEST(SimtEmulatorErrors, StaticSharedArrayRacesAndUnstoredLoadsAreRefused) {
  simt::SharedArray<float, 4> a;
  const simt::LaunchConfig c = config({1, 1, 1}, {64, 1, 1});
  // A store, then another thread's load in the same interval.
  EXPECT_TRUE(contains(launch_error(c,
                                    [&] {
                                      if (simt::thread_index().x == 0) a[0] = 1.0f;
                                      const float x = a[0];
                                      (void)x;
                                    }),
                       "thread (1,0,0) warp 0 lane 1: race: loads element 0 of a static __shared__ array of 4 "
                       "elements of 4 bytes, which thread (0,0,0) stored in this barrier interval"));
  // Loads after a barrier, then a store with no barrier after them (the
  // reuse of a reduction's array). Which side reports the race depends on
  // the order the threads run in.
  const std::string reuse = launch_error(c, [&] {
    const unsigned t = simt::thread_index().x;
    if (t == 0) a[0] = 1.0f;
    simt::sync_threads();
    const float x = a[0];
    if (t == 63) a[0] = x + 1.0f;
  });
  EXPECT_TRUE(contains(reuse, "race: ") && contains(reuse, "element 0 of a static __shared__ array") &&
              contains(reuse, "thread (63,0,0)") && contains(reuse, "in this barrier interval"))
      << reuse;
  // Two threads store one element in one interval.
  EXPECT_TRUE(contains(launch_error(c,
                                    [&] {
                                      const unsigned t = simt::thread_index().x;
                                      if (t == 5 || t == 40) a[1] = float(t);
                                    }),
                       "thread (40,0,0) warp 1 lane 8: race: stores element 1 of a static __shared__ array of 4 "
                       "elements of 4 bytes, which thread (5,0,0) also stored in this barrier interval"));
  // A load of what no thread of this block stored: block 1 would see block
  // 0's value in a plain static, garbage on a GPU.
  const std::string unstored = launch_error(config({2, 1, 1}, {64, 1, 1}), [&] {
    if (simt::block_index().x == 0 && simt::thread_index().x == 0) a[2] = 1.0f;
    simt::sync_threads();
    const float x = a[2];
    (void)x;
  });
  EXPECT_TRUE(contains(unstored, "[simt] block (1,0,0) thread (") &&
              contains(unstored,
                       "loads element 2 of a static __shared__ array of 4 elements of 4 bytes, which no "
                       "thread of the block has stored"))
      << unstored;
  // An index outside the array, whatever the race check.
  simt::LaunchConfig unchecked = c;
  unchecked.check_races = false;
  EXPECT_TRUE(contains(launch_error(unchecked, [&] { a[int(simt::thread_index().x)] = 0.0f; }),
                       "thread (4,0,0) warp 0 lane 4: stores index 4 outside a static __shared__ array of 4 elements"));
  // A thread may store and load its own element as it likes, and loads by
  // many threads of one stored value are fine.
  EXPECT_EQ(launch_error(c,
                         [&] {
                           const unsigned t = simt::thread_index().x;
                           if (t < 4) {
                             a[t] = float(t);
                             a[t] = a[t] + 1.0f;
                           }
                           simt::sync_threads();
                           const float x = a[0] + a[3];
                           EXPECT_EQ(x, 5.0f);
                         }),
            "");
}

TEST(SimtEmulatorErrors, LaunchesAGpuWouldRefuseAreRefused) {
  const auto body = [] {};
  EXPECT_TRUE(contains(launch_error(config({1, 1, 1}, {1025, 1, 1}), body),
                       "launch refused: block (1025,1,1): 1 to 1024 threads per block"));
  EXPECT_TRUE(contains(launch_error(config({1, 1, 1}, {1, 1, 65}), body), "z at most 64"));
  EXPECT_TRUE(contains(launch_error(config({1, 65536, 1}, {32, 1, 1}), body),
                       "grid (1,65536,1): x from 1 to 2^31-1 blocks, y and z from 1 to 65535"));
  EXPECT_TRUE(contains(launch_error(config({0, 1, 1}, {32, 1, 1}), body), "grid (0,1,1)"));
  // Dynamic shared memory: 48 KiB unless the kernel raised its limit, which
  // goes up to 227 KiB.
  simt::LaunchConfig c = config({1, 1, 1}, {32, 1, 1}, (48 << 10) + 16);
  EXPECT_TRUE(contains(launch_error(c, body),
                       "49168 bytes of dynamic shared memory, over the kernel's 49152 (above 48 KiB a kernel must "
                       "raise cudaFuncAttributeMaxDynamicSharedMemorySize first)"));
  c.max_dynamic_shared_bytes = 96 << 10;
  EXPECT_EQ(launch_error(c, body), "");
  c.max_dynamic_shared_bytes = (227 << 10) + 1;
  EXPECT_TRUE(contains(launch_error(c, body), "a block can have at most 232448"));
  EXPECT_EQ(simt::launch_refusal(config({65535, 65535, 65535}, {32, 32, 1}, 1024)), "");
}

TEST(SimtEmulatorErrors, DeviceFunctionsOutsideALaunchAreALogicError) {
  EXPECT_THROW(simt::sync_threads(), std::logic_error);
}

}  // namespace
}  // namespace stepmix::test
