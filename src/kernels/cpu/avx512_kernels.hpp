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
// FP32 arithmetic with float32 activations (W8A16 and dense Linears on
// float32 activations) in the columns layout (gemm_columns_f32_avx512.cpp):
// taken for M <= kColumnsF32MaxRows and K <= kColumnsMaxK, where the rows
// layout's lanes are partly padding and its transposes cost most relative to
// the products. Bit-identical to gemm_rows (the same FMA chain per output).
constexpr int64_t kColumnsF32MaxRows = 512;
bool columns_f32_kernel_applies(const GemmArgs& args);
void gemm_columns_f32(const GemmArgs& args);


// Attention family (AVX-512F + FMA; the packed bf16 kernel also AVX512_BF16).
void attention_f32(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out);
// The float32 kernel on packed 64-key blocks (attention_packed_f32_avx512.cpp),
// which attention_f32 runs where it applies (head_dim a multiple of 64, at
// most 256); p must have been checked.
bool attention_f32_packed_applies(const AttentionProblem& p);
void attention_f32_packed(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out);
void attention_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    uint16_t* out);

// Keys and values of a bf16 problem repacked for dot products of bf16 pairs
// (attention_bf16_avx512.cpp; the AMX attention reads the same layout), in
// blocks of kAttentionKeys keys, zero past kv_rows, into storage of the
// calling thread that the next call reuses:
//   keys:   [kv_head][block][D/2][64]   dword = (k[key][2p], k[key][2p+1])
//   values: [kv_head][block][32][D]     dword = (v[2i][d], v[2i+1][d])
constexpr int64_t kAttentionKeys = 64;
struct PackedKV {
  int64_t blocks = 0;
  int64_t block_dwords = 0;  // D/2 · 64 for keys, 32 · D for values: the same
  uint32_t* keys = nullptr;
  uint32_t* values = nullptr;

  uint32_t* key_block(int64_t head, int64_t block) const { return keys + (head * blocks + block) * block_dwords; }
  uint32_t* value_block(int64_t head, int64_t block) const { return values + (head * blocks + block) * block_dwords; }
  int64_t block_bytes() const { return block_dwords * 4; }
};
PackedKV pack_attention_kv(const AttentionProblem& p, const uint16_t* k, const uint16_t* v);

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
