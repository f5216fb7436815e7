// The kernels and elementwise functors of linear.cu (the E4M3 activation
// quantizer, the FP8 weight decode, the float32-bias epilogue, the float32
// rows of the timestep MLP): device code only, so the tests also run them on
// the CPU (tests/cuda/on_cpu/cuda_on_cpu.hpp); linear.cu checks arguments and
// launches them.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/device_numerics.cuh"

namespace stepmix::cuda {
namespace {

using namespace detail;

// A NaN is answered before the division: the GPU's float32 arithmetic
// returns one canonical, positive NaN, while the CPU's division keeps the
// operand's sign, and the sign is the code's (0x7F or 0xFF).
__device__ __forceinline__ uint8_t quantize_one(float x, float input_scale) {
  if (x != x) return uint8_t(((__float_as_uint(x) >> 24) & 0x80u) | 0x7Fu);
  return quantize_e4m3_saturating(__fdiv_rn(x, input_scale));
}

__device__ __forceinline__ uint32_t pack4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return uint32_t(a) | (uint32_t(b) << 8) | (uint32_t(c) << 16) | (uint32_t(d) << 24);
}

struct QuantizeF32 {
  const float* x;
  float scale;
  uint8_t* codes;
  __device__ void one(int64_t i) const { codes[i] = quantize_one(x[i], scale); }
  __device__ void eight(int64_t g) const {
    const float4 a = reinterpret_cast<const float4*>(x)[2 * g];
    const float4 b = reinterpret_cast<const float4*>(x)[2 * g + 1];
    reinterpret_cast<uint2*>(codes)[g] = make_uint2(
        pack4(quantize_one(a.x, scale), quantize_one(a.y, scale), quantize_one(a.z, scale), quantize_one(a.w, scale)),
        pack4(quantize_one(b.x, scale), quantize_one(b.y, scale), quantize_one(b.z, scale), quantize_one(b.w, scale)));
  }
};

struct QuantizeBf16 {
  const uint16_t* x;
  float scale;
  uint8_t* codes;
  // Two bf16 (low half first) → two codes in the low 16 bits.
  __device__ uint32_t pair(uint32_t two) const {
    return uint32_t(quantize_one(bf16_to_float(uint16_t(two & 0xFFFFu)), scale)) |
           (uint32_t(quantize_one(bf16_to_float(uint16_t(two >> 16)), scale)) << 8);
  }
  __device__ void one(int64_t i) const { codes[i] = quantize_one(bf16_to_float(x[i]), scale); }
  __device__ void eight(int64_t g) const {
    const uint4 in = reinterpret_cast<const uint4*>(x)[g];
    reinterpret_cast<uint2*>(codes)[g] = make_uint2(pair(in.x) | (pair(in.y) << 16), pair(in.z) | (pair(in.w) << 16));
  }
};

__device__ __forceinline__ uint16_t decode_one(uint8_t code, float scale) {
  // A NaN code gives the CPU's bf16 NaN, 0x7FC0 for both: the CPU's table
  // holds one positive quiet NaN for 0x7F and 0xFF (core/numerics.hpp) and
  // x86 multiplies keep that operand; the GPU would return its canonical
  // 0x7FFFFFFF instead.
  if ((code & 0x7Fu) == 0x7Fu) return uint16_t(0x7FC0u);
  return float_to_bf16_rne(__fmul_rn(e4m3_to_float(code), scale));
}

struct Decode {
  const uint8_t* codes;
  float scale;
  uint16_t* out;
  // Codes 2h and 2h+1 of four → two bf16, the first in the low half.
  __device__ uint32_t pair(uint32_t four, int h) const {
    return uint32_t(decode_one(uint8_t(four >> (16 * h)), scale)) |
           (uint32_t(decode_one(uint8_t(four >> (16 * h + 8)), scale)) << 16);
  }
  __device__ void one(int64_t i) const { out[i] = decode_one(codes[i], scale); }
  __device__ void eight(int64_t g) const {
    const uint2 in = reinterpret_cast<const uint2*>(codes)[g];
    reinterpret_cast<uint4*>(out)[g] = make_uint4(pair(in.x, 0), pair(in.x, 1), pair(in.y, 0), pair(in.y, 1));
  }
};

struct AddBiasRound {
  const float* acc;
  const float* bias;
  int64_t N;
  uint16_t* y;
  __device__ void one(int64_t i) const { y[i] = float_to_bf16_rne(__fadd_rn(acc[i], bias[i % N])); }
};

// ---------------------------------------------------------------- float32 rows (the timestep MLP)
constexpr int kRowsWarpsPerBlock = 8;

__device__ __forceinline__ float widen(float v) { return v; }
__device__ __forceinline__ float widen(uint16_t v) { return bf16_to_float(v); }

// One warp per output y[row, n]: lane L sums x[k]·w[k] for k ≡ L (mod 32)
// with fused multiply-adds, then the 32 partial sums are added pairwise
// across the warp, then the bias. blockIdx.y = row.
template <class W>
__global__ void linear_rows_f32_kernel(const float* __restrict__ x, const W* __restrict__ w,
                                       const void* __restrict__ bias, kernels::BiasType bias_type, int64_t N,
                                       int64_t K, float* __restrict__ y) {
  const int64_t n = int64_t(blockIdx.x) * kRowsWarpsPerBlock + threadIdx.x / 32;
  if (n >= N) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  const float* x_row = x + int64_t(blockIdx.y) * K;
  const W* w_row = w + n * K;
  float s = 0.0f;
  for (int64_t k = lane; k < K; k += 32) s = __fmaf_rn(x_row[k], widen(w_row[k]), s);
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) s = __fadd_rn(s, __shfl_xor_sync(0xFFFFFFFFu, s, offset));
  if (lane != 0) return;
  if (bias_type == kernels::BiasType::F32) s = __fadd_rn(s, static_cast<const float*>(bias)[n]);
  if (bias_type == kernels::BiasType::BF16) s = __fadd_rn(s, bf16_to_float(static_cast<const uint16_t*>(bias)[n]));
  y[int64_t(blockIdx.y) * N + n] = s;
}

}  // namespace
}  // namespace stepmix::cuda
