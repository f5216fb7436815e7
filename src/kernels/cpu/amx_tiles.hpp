// The AMX tile instructions as the amx kernels (gemm_amx.cpp,
// attention_amx.cpp, conv_amx.cpp) use them: STEPMIX_TILE_* macros over the intrinsics, or,
// built with -DSTEPMIX_AMX_EMULATE, over a scalar model of them (for testing
// packing, blocking and epilogues on a CPU without AMX; never for production
// builds). Include only from *_amx.cpp files (compiled with the AMX flags).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/numerics.hpp"
#include "kernels/cpu/amx_kernels.hpp"

namespace stepmix::kernels::amx {

// GCC's tile-load intrinsics are asm statements that do not tell the compiler
// they read memory; this barrier keeps the plain stores that fill a buffer on
// the right side of the tile loads that read it.
inline void compiler_barrier() { __asm__ __volatile__("" ::: "memory"); }

#ifdef STEPMIX_AMX_EMULATE
// ---------------------------------------------------------------- emulation
// Scalar model of the AMX instructions used here, per the Intel SDM
// pseudo-code, with the same per-thread state rules: using a tile before this
// thread's LDTILECFG (or after TILERELEASE) aborts.
namespace emu {
// One state per thread, as the hardware's tile state.
struct State {
  bool configured = false;
  uint8_t rows[8] = {};
  uint16_t colsb[8] = {};
  alignas(64) uint8_t data[8][1024] = {};
};
inline thread_local State t_state;

[[noreturn]] inline void fail(const char* what, int t) {
  std::fprintf(stderr, "amx emulation: %s (tile %d)\n", what, t);
  std::abort();
}
inline void check(int t) {
  if (!t_state.configured) fail("tile used without LDTILECFG on this thread", t);
  if (t < 0 || t > 7 || t_state.rows[t] == 0) fail("tile not configured", t);
}
inline void loadconfig(const void* config) {
  TileConfig c;
  std::memcpy(&c, config, sizeof c);
  if (c.palette_id != 1 || c.start_row != 0) fail("bad palette or start_row", -1);
  for (int t = 0; t < 16; ++t) {
    const bool used = c.rows[t] != 0 || c.colsb[t] != 0;
    if (t >= 8 && used) fail("tile beyond palette 1", t);
    if (used && (c.rows[t] == 0 || c.colsb[t] == 0 || c.rows[t] > 16 || c.colsb[t] > 64)) fail("bad tile shape", t);
  }
  t_state = State{};
  t_state.configured = true;
  for (int t = 0; t < 8; ++t) {
    t_state.rows[t] = c.rows[t];
    t_state.colsb[t] = c.colsb[t];
  }
}
inline void release() { t_state = State{}; }
inline void load(int t, const void* base, long stride) {
  check(t);
  std::memset(t_state.data[t], 0, sizeof t_state.data[t]);
  for (int r = 0; r < t_state.rows[t]; ++r)
    std::memcpy(t_state.data[t] + 64 * r, static_cast<const uint8_t*>(base) + r * stride, t_state.colsb[t]);
}
inline void store(int t, void* base, long stride) {
  check(t);
  for (int r = 0; r < t_state.rows[t]; ++r)
    std::memcpy(static_cast<uint8_t*>(base) + r * stride, t_state.data[t] + 64 * r, t_state.colsb[t]);
}
inline void zero(int t) {
  check(t);
  std::memset(t_state.data[t], 0, sizeof t_state.data[t]);
}
inline float bf16_at(int t, int row, int index) {
  uint16_t h;
  std::memcpy(&h, t_state.data[t] + 64 * row + 2 * index, 2);
  return bf16_to_float(h);
}
inline void dpbf16ps(int c, int a, int b) {
  check(c), check(a), check(b);
  if (t_state.rows[c] != t_state.rows[a] || t_state.colsb[c] != t_state.colsb[b] ||
      t_state.colsb[a] != 4 * t_state.rows[b])
    fail("tdpbf16ps shape mismatch", c);
  for (int m = 0; m < t_state.rows[c]; ++m)
    for (int k = 0; k < t_state.colsb[a] / 4; ++k)
      for (int n = 0; n < t_state.colsb[c] / 4; ++n) {
        float acc;
        std::memcpy(&acc, t_state.data[c] + 64 * m + 4 * n, 4);
        acc += bf16_at(a, m, 2 * k) * bf16_at(b, k, 2 * n);
        acc += bf16_at(a, m, 2 * k + 1) * bf16_at(b, k, 2 * n + 1);
        std::memcpy(t_state.data[c] + 64 * m + 4 * n, &acc, 4);
      }
}
}  // namespace emu
#define STEPMIX_TILE_LOADCONFIG(config) emu::loadconfig(config)
#define STEPMIX_TILE_RELEASE() emu::release()
#define STEPMIX_TILE_LOAD(t, base, stride) emu::load(t, base, stride)
#define STEPMIX_TILE_STORE(t, base, stride) emu::store(t, base, stride)
#define STEPMIX_TILE_ZERO(t) emu::zero(t)
#define STEPMIX_TILE_DPBF16PS(c, a, b) emu::dpbf16ps(c, a, b)
#else
#define STEPMIX_TILE_LOADCONFIG(config) _tile_loadconfig(config)
#define STEPMIX_TILE_RELEASE() _tile_release()
#define STEPMIX_TILE_LOAD(t, base, stride) _tile_loadd(t, base, stride)
#define STEPMIX_TILE_STORE(t, base, stride) _tile_stored(t, base, stride)
#define STEPMIX_TILE_ZERO(t) _tile_zero(t)
#define STEPMIX_TILE_DPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)
#endif


}  // namespace stepmix::kernels::amx
