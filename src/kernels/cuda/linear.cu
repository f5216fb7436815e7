// The Linears' own kernels: E4M3 activation quantization (W8A8), FP8 weight
// decode to bf16 (W8A16), the float32-bias epilogue of the GEMMs, and the
// float32 product of a few rows (the timestep MLP).
// Memory-bound: 8 consecutive elements per thread with 16-byte (activation,
// bf16) and 8-byte (code) accesses when the pointers allow it.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/device_numerics.cuh"
#include "kernels/cuda/linear_kernels.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gemm_epilogue.hpp"

namespace stepmix::cuda {
namespace {

using namespace detail;

void check_pointers(const char* function, int64_t count, const void* in, const void* out) {
  require(count == 0 || (in && out), function, "null device pointer");
}

}  // namespace

void quantize_e4m3_f32(const float* x, int64_t count, float input_scale, uint8_t* codes, StreamHandle stream) {
  check_pointers("quantize_e4m3_f32", count, x, codes);
  launch_each_by_eight("quantize_e4m3_f32", QuantizeF32{x, input_scale, codes}, count,
                       aligned(x, 16) && aligned(codes, 8), stream);
}

void quantize_e4m3_bf16(const uint16_t* x, int64_t count, float input_scale, uint8_t* codes, StreamHandle stream) {
  check_pointers("quantize_e4m3_bf16", count, x, codes);
  launch_each_by_eight("quantize_e4m3_bf16", QuantizeBf16{x, input_scale, codes}, count,
                       aligned(x, 16) && aligned(codes, 8), stream);
}

void dequantize_e4m3_to_bf16(const uint8_t* codes, int64_t count, float weight_scale, uint16_t* out,
                             StreamHandle stream) {
  check_pointers("dequantize_e4m3_to_bf16", count, codes, out);
  launch_each_by_eight("dequantize_e4m3_to_bf16", Decode{codes, weight_scale, out}, count,
                       aligned(codes, 8) && aligned(out, 16), stream);
}

void linear_rows_f32(const float* x, const void* w, bool w_is_bf16, int64_t M, int64_t N, int64_t K, GemmBias bias,
                     float* y, StreamHandle stream) {
  require(M >= 0 && N > 0 && K > 0, "linear_rows_f32",
          "expected M >= 0, N > 0 and K > 0, got M " + std::to_string(M) + ", N " + std::to_string(N) + ", K " +
              std::to_string(K));
  require(M <= 65535, "linear_rows_f32", std::to_string(M) + " rows (at most 65535: one grid row each)");
  require(bias.type == kernels::BiasType::None || bias.data, "linear_rows_f32", "null bias pointer");
  if (M == 0) return;
  check_pointers("linear_rows_f32", M, x, y);
  require(w != nullptr, "linear_rows_f32", "null weight pointer");
  const dim3 grid(unsigned((N + kRowsWarpsPerBlock - 1) / kRowsWarpsPerBlock), unsigned(M));
  const int threads = 32 * kRowsWarpsPerBlock;
  if (w_is_bf16) {
    launch_kernel("linear_rows_f32", linear_rows_f32_kernel<uint16_t>, grid, threads, 0, stream, x,
                  static_cast<const uint16_t*>(w), bias.data, bias.type, N, K, y);
  } else {
    launch_kernel("linear_rows_f32", linear_rows_f32_kernel<float>, grid, threads, 0, stream, x,
                  static_cast<const float*>(w), bias.data, bias.type, N, K, y);
  }
}

namespace detail {

void add_bias_round_bf16(const float* acc, const float* bias, int64_t rows, int64_t N, uint16_t* y,
                         StreamHandle stream) {
  launch_each("add_bias_round_bf16", AddBiasRound{acc, bias, N, y}, rows * N, stream);
}

}  // namespace detail

}  // namespace stepmix::cuda
