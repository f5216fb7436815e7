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

}  // namespace stepmix::kernels::avx512
