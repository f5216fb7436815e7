// kernels_on_cpu.hpp: the launches of pointwise.cu and linear.cu, replayed on
// the SIMT emulator. This file defines CUDA's spellings as macros
// (cuda_on_cpu.hpp), so CMake keeps it out of the unity batches.
#include "kernels_on_cpu.hpp"

// clang-format off
#include "cuda_on_cpu.hpp"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"  // #pragma unroll
#include "kernels/cuda/elementwise_kernels.cuh"
#include "kernels/cuda/pointwise_kernels.cuh"
#include "kernels/cuda/linear_kernels.cuh"
#pragma GCC diagnostic pop
// clang-format on

#include <algorithm>

namespace stepmix::test::on_cpu {
namespace {

constexpr int kElementwiseThreads = 256;  // elementwise.cuh's block
constexpr int64_t kMaxBlocks = 8;

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

unsigned blocks_for(int64_t work, int threads) {
  return unsigned(std::clamp<int64_t>((work + threads - 1) / threads, 1, kMaxBlocks));
}

void launch(simt::Dim3 grid, int threads, const std::function<void()>& body) {
  simt::LaunchConfig config;
  config.grid = grid;
  config.block = {unsigned(threads), 1, 1};
  simt::launch(config, body);
}

// elementwise.cuh launch_each / launch_each_by_eight.
template <class Op>
void each(const Op& op, int64_t count) {
  if (count == 0) return;
  launch({blocks_for(count, kElementwiseThreads), 1, 1}, kElementwiseThreads,
         [&] { cuda::detail::elementwise_kernel(op, count); });
}
template <class Op>
void each_by_eight(const Op& op, int64_t count, bool vectorizable) {
  if (!vectorizable) return each(op, count);
  if (count == 0) return;
  launch({blocks_for(count / 8 + 1, kElementwiseThreads), 1, 1}, kElementwiseThreads,
         [&] { cuda::detail::elementwise_vec8_kernel(op, count); });
}

}  // namespace

void rms_norm_to_bf16(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                      uint16_t* out) {
  if (rows == 0) return;
  launch({unsigned(rows), 1, 1}, cuda::kThreads,
         [&] { cuda::rms_norm_kernel(x, n, weight, eps, kind == NormKind::Nemotron, out); });
}

void head_norm_rotary_bf16(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                           float eps, NormKind kind, const float* cos, const float* sin) {
  const int64_t vectors = rows * heads;
  if (vectors == 0) return;
  constexpr int kWarpsPerBlock = cuda::kThreads / 32;
  launch({unsigned((vectors + kWarpsPerBlock - 1) / kWarpsPerBlock), 1, 1}, cuda::kThreads, [&] {
    cuda::head_norm_rotary_kernel(x, vectors, int(heads), int(head_dim), norm_weight, eps, kind == NormKind::Nemotron,
                                  cos, sin);
  });
}

void silu_gate_bf16(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out) {
  each_by_eight(cuda::SiluGate{gate, up, out}, count, aligned(gate, 16) && aligned(up, 16) && aligned(out, 16));
}

void silu_f32(float* x, int64_t count) { each(cuda::SiluF32{x}, count); }

void relu_squared_bf16(uint16_t* x, int64_t count) { each_by_eight(cuda::ReluSquared{x}, count, aligned(x, 16)); }

void add_bf16_to_f32(float* residual, const uint16_t* y, int64_t count) {
  each_by_eight(cuda::AddToF32{residual, y}, count, aligned(residual, 16) && aligned(y, 16));
}

void add_row_f32(float* x, int64_t rows, int64_t n, const float* row) { each(cuda::AddRow{x, row, n}, rows * n); }

void widen_bf16(const uint16_t* x, int64_t count, float* out) {
  each_by_eight(cuda::Widen{x, out}, count, aligned(x, 16) && aligned(out, 16));
}

void round_to_bf16(const float* x, int64_t count, uint16_t* out) {
  each_by_eight(cuda::Round{x, out}, count, aligned(x, 16) && aligned(out, 16));
}

void quantize_e4m3_f32(const float* x, int64_t count, float input_scale, uint8_t* codes) {
  each_by_eight(cuda::QuantizeF32{x, input_scale, codes}, count, aligned(x, 16) && aligned(codes, 8));
}

void quantize_e4m3_bf16(const uint16_t* x, int64_t count, float input_scale, uint8_t* codes) {
  each_by_eight(cuda::QuantizeBf16{x, input_scale, codes}, count, aligned(x, 16) && aligned(codes, 8));
}

void dequantize_e4m3_to_bf16(const uint8_t* codes, int64_t count, float weight_scale, uint16_t* out) {
  each_by_eight(cuda::Decode{codes, weight_scale, out}, count, aligned(codes, 8) && aligned(out, 16));
}

void linear_rows_f32(const float* x, const void* w, bool w_is_bf16, int64_t M, int64_t N, int64_t K,
                     cuda::GemmBias bias, float* y) {
  if (M == 0) return;
  const simt::Dim3 grid{unsigned((N + cuda::kRowsWarpsPerBlock - 1) / cuda::kRowsWarpsPerBlock), unsigned(M), 1};
  launch(grid, 32 * cuda::kRowsWarpsPerBlock, [&] {
    if (w_is_bf16)
      cuda::linear_rows_f32_kernel(x, static_cast<const uint16_t*>(w), bias.data, bias.type, N, K, y);
    else
      cuda::linear_rows_f32_kernel(x, static_cast<const float*>(w), bias.data, bias.type, N, K, y);
  });
}

}  // namespace stepmix::test::on_cpu
