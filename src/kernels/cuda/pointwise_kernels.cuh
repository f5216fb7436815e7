// The kernels and elementwise functors of pointwise.cu (RMSNorm, the
// per-head norm with rotary, SiLU·gate, float32 SiLU, relu², residual add,
// add_row, widen, round): device code only, so the tests also run them on the
// CPU (tests/cuda/on_cpu/cuda_on_cpu.hpp); pointwise.cu checks arguments and
// launches them.
#pragma once

#include <cstdint>

#include "kernels/cuda/device_numerics.cuh"

namespace stepmix::cuda {
namespace {

using namespace detail;

constexpr int kThreads = 256;

// ---------------------------------------------------------------- RMSNorm
__device__ __forceinline__ double warp_sum(double s) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) s = __dadd_rn(s, __shfl_xor_sync(0xFFFFFFFFu, s, offset));
  return s;
}

// kernels/ref/pointwise_ref.cpp rms_norm: r = 1/sqrt(float(Σx² / n) + eps) with the sum
// of squares in float64 (squares of floats are exact in float64).
__device__ __forceinline__ float inverse_rms(double sum_squares, int64_t n, float eps) {
  const float mean_square = float(__ddiv_rn(sum_squares, double(n)));
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean_square, eps)));
}

// Standard (x · r) · w, Nemotron (w · x) · r, each product rounded.
__device__ __forceinline__ float normed(float x, float inv_rms, float w, bool nemotron) {
  return nemotron ? __fmul_rn(__fmul_rn(w, x), inv_rms) : __fmul_rn(__fmul_rn(x, inv_rms), w);
}

// One block per row.
__global__ void rms_norm_kernel(const float* __restrict__ x, int64_t n, const float* __restrict__ weight, float eps,
                                bool nemotron, uint16_t* __restrict__ out) {
  __shared__ SharedArray<double, kThreads / 32> partial;
  const float* in = x + int64_t(blockIdx.x) * n;
  uint16_t* y = out + int64_t(blockIdx.x) * n;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double v = in[i];
    s = __dadd_rn(s, __dmul_rn(v, v));
  }
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    double t = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0;
    t = warp_sum(t);
    if (threadIdx.x == 0) partial[0] = t;
  }
  __syncthreads();
  const float inv_rms = inverse_rms(partial[0], n, eps);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) y[i] = float_to_bf16_rne(normed(in[i], inv_rms, weight[i], nemotron));
}

// ---------------------------------------------------------------- per-head norm + rotary
constexpr int kMaxPairsPerLane = 4;  // head_dim <= 256

// One warp per (row, head); lane L holds the pairs (j, j + D/2), j = L + 32t.
__global__ void head_norm_rotary_kernel(uint16_t* __restrict__ x, int64_t vectors, int heads, int D,
                                        const float* __restrict__ norm_weight, float eps, bool nemotron,
                                        const float* __restrict__ cos, const float* __restrict__ sin) {
  const int64_t vector = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (vector >= vectors) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  const int half = D / 2;
  const int64_t row = vector / heads;
  uint16_t* head = x + vector * D;
  const float* c = cos + row * D;
  const float* s = sin + row * D;
  float first[kMaxPairsPerLane], second[kMaxPairsPerLane];
  double squares = 0.0;
#pragma unroll
  for (int t = 0; t < kMaxPairsPerLane; ++t) {
    const int j = lane + 32 * t;
    first[t] = second[t] = 0.0f;
    if (j < half) {
      first[t] = bf16_to_float(head[j]);
      second[t] = bf16_to_float(head[j + half]);
      squares = __dadd_rn(squares, __dadd_rn(__dmul_rn(first[t], first[t]), __dmul_rn(second[t], second[t])));
    }
  }
  if (norm_weight) {
    const float inv_rms = inverse_rms(warp_sum(squares), D, eps);
#pragma unroll
    for (int t = 0; t < kMaxPairsPerLane; ++t) {
      const int j = lane + 32 * t;
      if (j < half) {
        first[t] = normed(first[t], inv_rms, norm_weight[j], nemotron);
        second[t] = normed(second[t], inv_rms, norm_weight[j + half], nemotron);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kMaxPairsPerLane; ++t) {
    const int j = lane + 32 * t;
    if (j < half) {
      // kernels/ref/pointwise_ref.cpp rotate_heads: x·cos + rotate_half(x)·sin, two products
      // and one sum, each rounded.
      const float a = __fadd_rn(__fmul_rn(first[t], c[j]), __fmul_rn(-second[t], s[j]));
      const float b = __fadd_rn(__fmul_rn(second[t], c[j + half]), __fmul_rn(first[t], s[j + half]));
      head[j] = float_to_bf16_rne(a);
      head[j + half] = float_to_bf16_rne(b);
    }
  }
}

// ---------------------------------------------------------------- elementwise
__device__ __forceinline__ void unpack8(const uint4& u, float (&f)[8]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = bf16_to_float(uint16_t(w[i] & 0xFFFFu));
    f[2 * i + 1] = bf16_to_float(uint16_t(w[i] >> 16));
  }
}

__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = uint32_t(float_to_bf16_rne(f[2 * i])) | (uint32_t(float_to_bf16_rne(f[2 * i + 1])) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__device__ __forceinline__ float silu_times(float g, float u) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, exp_f32(-g))), u);
}

__device__ __forceinline__ float relu_squared(float v) {
  const float r = v > 0.0f ? v : 0.0f;
  return __fmul_rn(r, r);
}

// Each functor applies to element i (scalar) or to the group of 8 at 8g.
struct SiluGate {
  const uint16_t* gate;
  const uint16_t* up;
  uint16_t* out;
  __device__ void one(int64_t i) const {
    out[i] = float_to_bf16_rne(silu_times(bf16_to_float(gate[i]), bf16_to_float(up[i])));
  }
  __device__ void eight(int64_t g) const {
    float a[8], b[8];
    unpack8(reinterpret_cast<const uint4*>(gate)[g], a);
    unpack8(reinterpret_cast<const uint4*>(up)[g], b);
#pragma unroll
    for (int e = 0; e < 8; ++e) a[e] = silu_times(a[e], b[e]);
    reinterpret_cast<uint4*>(out)[g] = pack8(a);
  }
};

struct SiluF32 {
  float* x;
  __device__ void one(int64_t i) const {
    const float v = x[i];
    x[i] = __fdiv_rn(v, __fadd_rn(1.0f, exp_f32(-v)));
  }
};

struct ReluSquared {
  uint16_t* x;
  __device__ void one(int64_t i) const { x[i] = float_to_bf16_rne(relu_squared(bf16_to_float(x[i]))); }
  __device__ void eight(int64_t g) const {
    float a[8];
    unpack8(reinterpret_cast<const uint4*>(x)[g], a);
#pragma unroll
    for (int e = 0; e < 8; ++e) a[e] = relu_squared(a[e]);
    reinterpret_cast<uint4*>(x)[g] = pack8(a);
  }
};

struct AddToF32 {
  float* residual;
  const uint16_t* y;
  __device__ void one(int64_t i) const { residual[i] = __fadd_rn(residual[i], bf16_to_float(y[i])); }
  __device__ void eight(int64_t g) const {
    float a[8];
    unpack8(reinterpret_cast<const uint4*>(y)[g], a);
    float4* r = reinterpret_cast<float4*>(residual) + 2 * g;
    float4 lo = r[0], hi = r[1];
    lo.x = __fadd_rn(lo.x, a[0]), lo.y = __fadd_rn(lo.y, a[1]), lo.z = __fadd_rn(lo.z, a[2]), lo.w = __fadd_rn(lo.w, a[3]);
    hi.x = __fadd_rn(hi.x, a[4]), hi.y = __fadd_rn(hi.y, a[5]), hi.z = __fadd_rn(hi.z, a[6]), hi.w = __fadd_rn(hi.w, a[7]);
    r[0] = lo;
    r[1] = hi;
  }
};

struct AddRow {
  float* x;
  const float* row;
  int64_t n;
  __device__ void one(int64_t i) const { x[i] = __fadd_rn(x[i], row[i % n]); }
};

struct Widen {
  const uint16_t* x;
  float* out;
  __device__ void one(int64_t i) const { out[i] = bf16_to_float(x[i]); }
  __device__ void eight(int64_t g) const {
    float a[8];
    unpack8(reinterpret_cast<const uint4*>(x)[g], a);
    float4* o = reinterpret_cast<float4*>(out) + 2 * g;
    o[0] = make_float4(a[0], a[1], a[2], a[3]);
    o[1] = make_float4(a[4], a[5], a[6], a[7]);
  }
};

struct Round {
  const float* x;
  uint16_t* out;
  __device__ void one(int64_t i) const { out[i] = float_to_bf16_rne(x[i]); }
  __device__ void eight(int64_t g) const {
    const float4* in = reinterpret_cast<const float4*>(x) + 2 * g;
    const float4 lo = in[0], hi = in[1];
    const float a[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    reinterpret_cast<uint4*>(out)[g] = pack8(a);
  }
};

}  // namespace
}  // namespace stepmix::cuda
