// Entry points of the AMX-BF16 variant ("amx"); see linear_kernels.hpp for
// what the GEMM computes. Plain declarations: safe to include anywhere.
//
// The GEMM and the VAE convolution with BF16 arithmetic, and bf16 attention,
// run on AMX tiles; quantization, dequantization and FP32 arithmetic are the
// AVX-512 variant's functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/attention.hpp"
#include "kernels/linear_kernels.hpp"

namespace stepmix::kernels::amx {

// CPU has AMX-TILE + AMX-BF16 (and what the AVX-512 variant needs) and Linux
// granted this process the tile-data state.
bool supported();

void gemm(const GemmArgs& args);

// bf16 attention (kernels/attention.hpp) with both products on tiles
// (attention_amx.cpp); head_dim not a multiple of 32 or above 256 runs the
// AVX-512 kernel.
void attention_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    uint16_t* out);

// Cache blocking of the GEMM. Results do not depend on it (bit for bit): the
// summation order over k is the same for every blocking and thread count.
struct Blocking {
  int64_t x_rows = 256;   // rows of x per work unit (rounded up to 32); gemm()
                          // uses 512 when M > 1024 (W streams through the
                          // cache once per block of x rows)
  int64_t w_rows = 256;   // rows of W per work unit (rounded up to 32); an upper
                          // bound that gemm() lowers to keep every thread busy
  int64_t k_chunk = 256;  // k per chunk (rounded up to 32): 2 W tiles and 2 x
                          // tiles of one chunk (2 · 16 KiB) fit in L1 together;
                          // gemm() uses 2048 when M <= x_rows (one x block)
  // Weights converted once per call into a packed copy (1), per work unit
  // (0), or packed when more than one block of x rows shares them (-1).
  int prepack_weights = -1;
};

// gemm() with this blocking, used as given (w_rows, k_chunk not adapted): for
// tuning (bench/amx_check.cpp) and tests. BF16 arithmetic only; anything else
// goes to the AVX-512 variant.
void gemm_with_blocking(const GemmArgs& args, const Blocking& blocking);

// The tile configuration every AMX kernel here loads (the GEMM, and the
// tile-only peak in bench/peak_dot_bf16.cpp).
// Palette 1, the 64-byte LDTILECFG operand: tile t has rows[t] rows of
// colsb[t] bytes; tiles not used must be all zero.
struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);
static_assert(offsetof(TileConfig, colsb) == 16 && offsetof(TileConfig, rows) == 48);

// tmm0-3: accumulators C(i,j) = tmm(2i+j), 16 n × 16 m floats (64 bytes/row);
// tmm4-5: W tiles i, 16 n × 32 k bf16; tmm6-7: x tiles j, 16 k pairs × 16 m pairs.
// All eight are 16 rows × 64 bytes; tdpbf16ps needs C.rows = A.rows (16),
// C.colsb = B.colsb (64) and A.colsb = 4 · B.rows (64).
constexpr TileConfig make_tile_config() {
  TileConfig c{};
  c.palette_id = 1;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  return c;
}
alignas(64) inline constexpr TileConfig kTileConfig = make_tile_config();

}  // namespace stepmix::kernels::amx
