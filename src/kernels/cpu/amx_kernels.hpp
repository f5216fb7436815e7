// Entry points of the AMX-BF16 variant ("amx"); see linear_kernels.hpp for
// what the GEMM computes. Plain declarations: safe to include anywhere.
//
// Only the GEMM with BF16 arithmetic runs on AMX tiles; quantization,
// dequantization and FP32 arithmetic are the AVX-512 variant's functions.
#pragma once

#include <cstdint>

#include "kernels/linear_kernels.hpp"

namespace stepmix::kernels::amx {

// CPU has AMX-TILE + AMX-BF16 (and what the AVX-512 variant needs) and Linux
// granted this process the tile-data state.
bool supported();

void gemm(const GemmArgs& args);

// Cache blocking of the GEMM. Results do not depend on it (bit for bit): the
// summation order over k is the same for every blocking and thread count.
struct Blocking {
  int64_t x_rows = 256;   // rows of x per work unit (rounded up to 32)
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

}  // namespace stepmix::kernels::amx
