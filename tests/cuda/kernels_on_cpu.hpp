// The CUDA pointwise and Linear kernels (src/kernels/cuda/pointwise_kernels.cuh,
// linear_kernels.cuh) run on the CPU by the SIMT emulator: the entry points of
// cuda_kernels.hpp with the same names and arguments (less the stream), on
// host memory, with their launchers' kernels, block sizes and 16-byte-path
// decisions. Grid-stride launches get at most 8 blocks, so their loops go
// round. Argument checks are the launchers' own business and are not
// repeated here. Throws stepmix::Error ("[simt] ...") for anything the
// emulator refuses.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/pointwise.hpp"

namespace stepmix::test::on_cpu {

void rms_norm_to_bf16(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                      uint16_t* out);
void head_norm_rotary_bf16(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                           float eps, NormKind kind, const float* cos, const float* sin);
void silu_gate_bf16(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out);
void silu_f32(float* x, int64_t count);
void relu_squared_bf16(uint16_t* x, int64_t count);
void add_bf16_to_f32(float* residual, const uint16_t* y, int64_t count);
void add_row_f32(float* x, int64_t rows, int64_t n, const float* row);
void widen_bf16(const uint16_t* x, int64_t count, float* out);
void round_to_bf16(const float* x, int64_t count, uint16_t* out);

void quantize_e4m3_f32(const float* x, int64_t count, float input_scale, uint8_t* codes);
void quantize_e4m3_bf16(const uint16_t* x, int64_t count, float input_scale, uint8_t* codes);
void dequantize_e4m3_to_bf16(const uint8_t* codes, int64_t count, float weight_scale, uint16_t* out);
void linear_rows_f32(const float* x, const void* w, bool w_is_bf16, int64_t M, int64_t N, int64_t K,
                     cuda::GemmBias bias, float* y);

}  // namespace stepmix::test::on_cpu
