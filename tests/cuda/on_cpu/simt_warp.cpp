// The SIMT emulator's warp collectives (shuffles, ldmatrix, mma) computed
// from all 32 lanes' operands with the PTX ISA's fragment layouts, and its
// shared memory: cp.async copies that land at their wait, the checks of every
// access, the race check's calls and the bank-conflict count.
#include "simt_emulator.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <sstream>

#include "core/numerics.hpp"
#include "simt_state.hpp"
#include "stepmix/error.hpp"

namespace stepmix::simt {

using namespace detail;

namespace {

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

}  // namespace

namespace detail {

void count_copy_conflicts(LaunchCounters& counters, const std::array<int64_t, kWarpSize>& dst) {
  for (int phase = 0; phase < kWarpSize / 8; ++phase)
    counters.shared_bank_conflicts += extra_wavefronts(dst.data() + 8 * phase, 8);
}

}  // namespace detail

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

uint32_t pack_bf16(float lo, float hi) {
  return uint32_t(float_to_bf16_rne(lo)) | uint32_t(float_to_bf16_rne(hi)) << 16;
}

}  // namespace stepmix::simt
