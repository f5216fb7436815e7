// Entry points of the AVX-512 variant; linear_kernels.hpp, attention.hpp and
// pointwise.hpp say what each computes. Plain declarations: safe to include
// anywhere (avx512_table.cpp registers them).
#pragma once

#include <cstdint>

#include "kernels/attention.hpp"
#include "kernels/linear_kernels.hpp"
#include "kernels/pointwise.hpp"

namespace stepmix::kernels::avx512 {

// Linear family (AVX-512F/BW/VL/DQ + AVX512_BF16 + FMA + F16C).

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


// Attention family (AVX-512F + FMA; the packed bf16 kernel also AVX512_BF16).
void attention_f32(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out);
void attention_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    uint16_t* out);

// Pointwise family, bf16 members (AVX-512F/BW/VL + FMA); the float32 members
// of the avx512 set are the reference ones.
void rms_norm_bf16(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                   uint16_t* out);
void head_norm_rotary_bf16(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                           float eps, NormKind kind, const float* cos, const float* sin);
void silu_gate_bf16(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out);
void relu_squared_bf16(uint16_t* x, int64_t count);
void add_bf16(float* residual, const uint16_t* y, int64_t count);
void widen_bf16(const uint16_t* x, int64_t count, float* out);
void round_bf16(const float* x, int64_t count, uint16_t* out);

}  // namespace stepmix::kernels::avx512
