// Entry points of the AVX-512 (+AVX512_BF16) variant; see linear_kernels.hpp
// for what each computes. Plain declarations: safe to include anywhere.
#pragma once

#include <cstdint>

#include "kernels/linear_kernels.hpp"

namespace stepmix::kernels::avx512 {

void quantize_e4m3_f32(const float* x, int64_t count, float input_scale, uint8_t* codes);
void quantize_e4m3_bf16(const uint16_t* x, int64_t count, float input_scale, uint8_t* codes);
void dequantize_e4m3_to_bf16(const uint8_t* codes, int64_t count, float scale, uint16_t* out);
void gemm(const GemmArgs& args);

// The two GEMM layouts gemm() chooses between (exposed for the tests, which
// check they agree bit for bit, and for the benchmark):
//  gemm_rows     lanes over rows of x, weights broadcast from row-major
//                storage (gemm_avx512.cpp); any operands, any K;
//  gemm_columns  lanes over output columns, x broadcast, W packed into VNNI
//                pairs a 192-column panel at a time (gemm_columns_avx512.cpp);
//                BF16 arithmetic only, any shape.
// gemm() takes gemm_columns where columns_kernel_applies: BF16 arithmetic,
// K <= kColumnsMaxK, and M·(N + K) >= N·K. The rows layout pays two
// transposes per 16×16 block of y (x in, sums out: a cost ~ M·K + M·N), the
// columns layout packs W (~ N·K); measured on Zen 4 the break-even sits where
// those two are equal. Longer K makes the 8 rows of x a micro-kernel streams
// (16·K bytes) too long for L1/L2: at K = 12288 the rows layout was faster.
constexpr int64_t kColumnsMaxK = 4096;
bool columns_kernel_applies(const GemmArgs& args);
void gemm_rows(const GemmArgs& args);
void gemm_columns(const GemmArgs& args);

}  // namespace stepmix::kernels::avx512
