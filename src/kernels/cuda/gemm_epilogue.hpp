// Private to the CUDA backend: the float32-bias epilogue of gemm_bf16 /
// gemm_w8a8, for the bias type cuBLASLt's bf16-output epilogue cannot take
// (defined in linear.cu).
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_device.hpp"

namespace stepmix::cuda::detail {

// y[m, n] = bf16(acc[m, n] + bias[n]): the CPU epilogue, float32 add, one
// rounding. acc, y: [rows, N] row-major.
void add_bias_round_bf16(const float* acc, const float* bias, int64_t rows, int64_t N, uint16_t* y,
                         StreamHandle stream);

}  // namespace stepmix::cuda::detail
