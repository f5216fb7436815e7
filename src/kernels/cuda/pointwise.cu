// Pointwise and row-wise pieces of the decoder layer with bf16 activations;
// twins of the portable kernels in kernels/ref/pointwise_ref.cpp (see
// cuda_kernels.hpp for what is bit-exact). Elementwise kernels move 8
// elements per thread with 16-byte accesses when every pointer allows it
// (elementwise.cuh).
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/device_numerics.cuh"
#include "kernels/cuda/pointwise_kernels.cuh"
#include "kernels/cuda/elementwise.cuh"

namespace stepmix::cuda {

void rms_norm_to_bf16(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                      uint16_t* out, StreamHandle stream) {
  require(rows >= 0 && n > 0, "rms_norm_to_bf16", "expected rows >= 0 and n > 0");
  require(rows <= 0x7FFFFFFF, "rms_norm_to_bf16", "too many rows: " + std::to_string(rows));
  require(rows == 0 || (x && weight && out), "rms_norm_to_bf16", "null device pointer");
  if (rows == 0) return;
  launch_kernel("rms_norm_to_bf16", rms_norm_kernel, unsigned(rows), kThreads, 0, stream, x, n, weight, eps,
                kind == NormKind::Nemotron, out);
}

void head_norm_rotary_bf16(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                           float eps, NormKind kind, const float* cos, const float* sin, StreamHandle stream) {
  require(rows >= 0 && heads > 0, "head_norm_rotary_bf16", "expected rows >= 0 and heads > 0");
  require(head_dim > 0 && head_dim % 2 == 0 && head_dim <= 64 * kMaxPairsPerLane, "head_norm_rotary_bf16",
          "head_dim must be even and at most 256, got " + std::to_string(head_dim));
  require(rows == 0 || (x && cos && sin), "head_norm_rotary_bf16", "null device pointer");
  const int64_t vectors = rows * heads;
  if (vectors == 0) return;
  constexpr int kWarpsPerBlock = kThreads / 32;
  const int64_t blocks = (vectors + kWarpsPerBlock - 1) / kWarpsPerBlock;
  require(blocks <= 0x7FFFFFFF, "head_norm_rotary_bf16", "too many rows");
  launch_kernel("head_norm_rotary_bf16", head_norm_rotary_kernel, unsigned(blocks), kThreads, 0, stream, x, vectors,
                int(heads), int(head_dim), norm_weight, eps, kind == NormKind::Nemotron, cos, sin);
}

void silu_gate_bf16(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out, StreamHandle stream) {
  require(count == 0 || (gate && up && out), "silu_gate_bf16", "null device pointer");
  launch_each_by_eight("silu_gate_bf16", SiluGate{gate, up, out}, count,
                     aligned(gate, 16) && aligned(up, 16) && aligned(out, 16), stream);
}

void silu_f32(float* x, int64_t count, StreamHandle stream) {
  require(count == 0 || x, "silu_f32", "null device pointer");
  launch_each("silu_f32", SiluF32{x}, count, stream);
}

void relu_squared_bf16(uint16_t* x, int64_t count, StreamHandle stream) {
  require(count == 0 || x, "relu_squared_bf16", "null device pointer");
  launch_each_by_eight("relu_squared_bf16", ReluSquared{x}, count, aligned(x, 16), stream);
}

void add_bf16_to_f32(float* residual, const uint16_t* y, int64_t count, StreamHandle stream) {
  require(count == 0 || (residual && y), "add_bf16_to_f32", "null device pointer");
  launch_each_by_eight("add_bf16_to_f32", AddToF32{residual, y}, count, aligned(residual, 16) && aligned(y, 16),
                     stream);
}

void add_row_f32(float* x, int64_t rows, int64_t n, const float* row, StreamHandle stream) {
  require(rows >= 0 && n > 0, "add_row_f32", "expected rows >= 0 and n > 0, got rows=" + std::to_string(rows) +
                                                 " n=" + std::to_string(n));
  require(rows == 0 || (x && row), "add_row_f32", "null device pointer");
  launch_each("add_row_f32", AddRow{x, row, n}, rows * n, stream);
}

void widen_bf16(const uint16_t* x, int64_t count, float* out, StreamHandle stream) {
  require(count == 0 || (x && out), "widen_bf16", "null device pointer");
  launch_each_by_eight("widen_bf16", Widen{x, out}, count, aligned(x, 16) && aligned(out, 16), stream);
}

void round_to_bf16(const float* x, int64_t count, uint16_t* out, StreamHandle stream) {
  require(count == 0 || (x && out), "round_to_bf16", "null device pointer");
  launch_each_by_eight("round_to_bf16", Round{x, out}, count, aligned(x, 16) && aligned(out, 16), stream);
}

}  // namespace stepmix::cuda
