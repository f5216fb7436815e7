// The kernels and elementwise functors of vae.cu (the convolution's tap
// gather and epilogue, the channel RMS norm, the index maps, the attention's
// qkv split and softmax): device code only, so the tests also run them on the
// CPU (tests/cuda/on_cpu/cuda_on_cpu.hpp); vae.cu checks arguments and launches them.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/device_numerics.cuh"

namespace stepmix::cuda {
namespace {

using namespace detail;

// ---------------------------------------------------------------- convolution taps
// frames[t] for t < 4 through constant indices: an array parameter indexed
// at run time would be copied into every thread's local memory first.
template <class T>
__device__ __forceinline__ const T* frame_at(const T* const (&frames)[4], int t) {
  switch (t) {
    case 0: return frames[0];
    case 1: return frames[1];
    case 2: return frames[2];
    default: return frames[3];
  }
}

// One thread per (row, tap, group of V channels); V = 8 moves 16 bytes.
template <int V>
struct GatherTaps {
  ConvFrames frames;
  int kh, kw;
  int64_t c_in, h_in, w_in, w_out;
  int stride, pad_top, pad_left;
  int64_t row0, groups;  // groups = c_in / V
  int taps;
  uint16_t* a;

  // 32-bit division: a chunk holds fewer than 2^31 elements and a frame
  // fewer than 2^31 positions (checked by the caller); offsets stay 64-bit.
  __device__ void one(int64_t index) const {
    const uint32_t i = uint32_t(index), G = uint32_t(groups), T = uint32_t(taps);
    const uint32_t g = i % G, rest = i / G;
    const int tap = int(rest % T);
    const int64_t r = rest / T;
    const uint32_t p = uint32_t(row0 + r), W = uint32_t(w_out);
    const int64_t oy = p / W, ox = p % W;
    const int t = tap / (kh * kw), b = (tap / kw) % kh, c = tap % kw;
    const int64_t iy = oy * stride + b - pad_top, ix = ox * stride + c - pad_left;
    const uint16_t* frame = frame_at(frames.frame, t);
    uint16_t* out = a + (r * taps + tap) * c_in + g * V;
    const bool inside = frame && iy >= 0 && iy < h_in && ix >= 0 && ix < w_in;
    if constexpr (V == 8) {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (inside) v = *reinterpret_cast<const uint4*>(frame + (iy * w_in + ix) * c_in + g * V);
      *reinterpret_cast<uint4*>(out) = v;
    } else {
      out[0] = inside ? frame[(iy * w_in + ix) * c_in + g] : uint16_t(0);
    }
  }
};

// y[r][o] = (y[r][o] + bias[o]) + residual[r][o], two roundings, in place.
struct ConvEpilogue {
  float* y;
  const float* bias;
  const float* residual;
  int64_t c_out;
  __device__ void one(int64_t i) const {
    float v = __fadd_rn(y[i], bias[i % c_out]);
    if (residual) v = __fadd_rn(v, residual[i]);
    y[i] = v;
  }
};

// ---------------------------------------------------------------- channel RMS norm
// One warp per position: kernels/ref/channel_norm_ref.cpp with the sum of
// squares in float64 (exact squares) rounded once.
__global__ void channel_rms_norm_kernel(const float* __restrict__ x, int64_t positions, int64_t channels,
                                        const float* __restrict__ gamma, float scale, bool silu, bool bf16_out,
                                        void* __restrict__ y) {
  const int64_t p = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (p >= positions) return;  // whole warps leave together
  const int lane = threadIdx.x % 32;
  const float* in = x + p * channels;
  double s = 0.0;
  for (int64_t c = lane; c < channels; c += 32) s = __dadd_rn(s, __dmul_rn(double(in[c]), double(in[c])));
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) s = __dadd_rn(s, __shfl_xor_sync(0xFFFFFFFFu, s, offset));
  const float root = __fsqrt_rn(float(s));
  const float norm = root < 1e-12f ? 1e-12f : root;  // std::max's rule: NaN stays NaN (fmaxf would drop it)
  for (int64_t c = lane; c < channels; c += 32) {
    float v = __fdiv_rn(in[c], norm);
    v = __fmul_rn(v, scale);
    v = __fmul_rn(v, gamma[c]);
    if (silu) v = __fdiv_rn(v, __fadd_rn(1.0f, exp_f32(-v)));
    if (bf16_out) {
      static_cast<uint16_t*>(y)[p * channels + c] = float_to_bf16_rne(v);
    } else {
      static_cast<float*>(y)[p * channels + c] = v;
    }
  }
}

// ---------------------------------------------------------------- index maps
struct UpsampleNearest2 {
  const float* x;
  int64_t w, c;  // input width and channels
  bool bf16_out;
  void* y;
  __device__ void one(int64_t i) const {
    const int64_t ch = i % c, pos = i / c;
    const int64_t ox = pos % (2 * w), oy = pos / (2 * w);
    const float v = x[((oy / 2) * w + ox / 2) * c + ch];
    if (bf16_out) {
      static_cast<uint16_t*>(y)[i] = float_to_bf16_rne(v);
    } else {
      static_cast<float*>(y)[i] = v;
    }
  }
};

// vae/layers.hpp duplicate_up: out[y·fs + dy, x·fs + dx, o] = x[y, x, (o·f + dt·fs² + dy·fs + dx) div r].
struct DuplicateUp {
  const float* x;
  int64_t w, c_in, c_out, f, r;
  int fs, dt;
  float* y;
  __device__ void one(int64_t i) const {
    const int64_t o = i % c_out, pos = i / c_out;
    const int64_t ox = pos % (w * fs), oy = pos / (w * fs);
    const int64_t dy = oy % fs, dx = ox % fs;
    const int64_t source = (o * f + int64_t(dt) * fs * fs + dy * fs + dx) / r;
    y[i] = x[((oy / fs) * w + ox / fs) * c_in + source];
  }
};

// vae/layers.hpp patchify: pixel (p·y + dy, p·x + dx) channel c to channel
// c·p² + dx·p + dy of position (y, x).
struct PatchifyPixels {
  const float* x;
  int64_t w_out, c, yc;  // output width, input channels, output channels c·p²
  int p;
  float* y;
  __device__ void one(int64_t i) const {
    const int64_t ch = i % yc, pos = i / yc;
    const int64_t colour = ch / (p * p), rest = ch % (p * p), dx = rest / p, dy = rest % p;
    const int64_t oy = pos / w_out, ox = pos % w_out;
    y[i] = x[((oy * p + dy) * (w_out * p) + ox * p + dx) * c + colour];
  }
};

// vae/layers.hpp average_down, summing the g values of each output in the
// CPU's order (bit-exact): E[c·f + dt·fs² + dy·fs + dx] = frames[dt][y·fs + dy,
// x·fs + dx, c] (null = zeros), out[o] = (1/g)·Σ_j E[o·g + j].
struct AverageDown {
  ConvFloatFrames frames;
  int64_t w_in, c_in, c_out, w_out, f, g;
  int fs;
  float inv_g;
  float* y;
  __device__ void one(int64_t i) const {
    const int64_t o = i % c_out, pos = i / c_out;
    const int64_t oy = pos / w_out, ox = pos % w_out;
    float sum = 0.0f;
    for (int64_t j = 0; j < g; ++j) {
      const int64_t e = o * g + j, c = e / f, sub = e % f;
      const int64_t dt = sub / (fs * fs), dy = (sub / fs) % fs, dx = sub % fs;
      const float* frame = frame_at(frames.frame, int(dt));
      sum = __fadd_rn(sum, frame ? frame[((oy * fs + dy) * w_in + ox * fs + dx) * c_in + c] : 0.0f);
    }
    y[i] = g == 1 ? sum : __fmul_rn(sum, inv_g);
  }
};

struct ChannelSlice {
  const float* x;
  int64_t channels, c0, c;
  float* y;
  __device__ void one(int64_t i) const { y[i] = x[(i / c) * channels + c0 + i % c]; }
};

// vae/layers.hpp unpatchify_clamped: channel c·p² + dx·p + dy of position (y, x)
// to pixel (p·y + dy, p·x + dx), clamped to [-1, 1] (NaN stays NaN).
struct UnpatchifyClamped {
  const float* x;
  int64_t w, xc, colours;
  int p;
  float* y;
  __device__ void one(int64_t i) const {
    const int64_t c = i % colours, pixel = i / colours;
    const int64_t px = pixel % (w * p), py = pixel / (w * p);
    const int64_t dy = py % p, dx = px % p;
    const float v = x[((py / p) * w + px / p) * xc + c * p * p + dx * p + dy];
    y[i] = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
  }
};

// qkv [P][3C] -> q, k [P][C] and vᵀ [C][P].
struct SplitQkv {
  const float* qkv;
  int64_t P, C;
  float *q, *k, *vt;
  __device__ void one(int64_t i) const {
    const int64_t c = i % C, p = i / C;
    const float* row = qkv + p * 3 * C;
    q[i] = row[c];
    k[i] = row[C + c];
    vt[c * P + p] = row[2 * C + c];
  }
};

// ---------------------------------------------------------------- softmax
constexpr int kSoftmaxThreads = 256;

__device__ float block_reduce(float v, bool take_max, SharedArray<float, kSoftmaxThreads / 32>& shared) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    const float o = __shfl_xor_sync(0xFFFFFFFFu, v, offset);
    v = take_max ? fmaxf(v, o) : __fadd_rn(v, o);
  }
  if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    float t = threadIdx.x < blockDim.x / 32 ? shared[threadIdx.x] : (take_max ? -INFINITY : 0.0f);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      const float o = __shfl_xor_sync(0xFFFFFFFFu, t, offset);
      t = take_max ? fmaxf(t, o) : __fadd_rn(t, o);
    }
    if (threadIdx.x == 0) shared[0] = t;
  }
  __syncthreads();
  const float result = shared[0];
  __syncthreads();  // shared is reused by the next reduction
  return result;
}

// One block per row: s = exp(s − max) / Σ exp(s − max), as vae/layers.cpp.
__global__ void softmax_rows_kernel(float* __restrict__ s, int64_t n) {
  __shared__ SharedArray<float, kSoftmaxThreads / 32> shared;
  float* row = s + int64_t(blockIdx.x) * n;
  float top = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) top = fmaxf(top, row[j]);
  top = block_reduce(top, true, shared);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float e = exp_f32(__fsub_rn(row[j], top));
    row[j] = e;
    sum = __fadd_rn(sum, e);
  }
  sum = block_reduce(sum, false, shared);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) row[j] = __fdiv_rn(row[j], sum);
}

}  // namespace
}  // namespace stepmix::cuda
