// The kernels and elementwise functors of denoise_loop.cu (the timestep
// sinusoid, the CFG combination, the Euler and UniPC updates, the non-finite
// flag, patchify/unpatchify, the seeded fills): device code only, so the
// tests also run them on the CPU (tests/cuda/on_cpu/cuda_on_cpu.hpp);
// denoise_loop.cu checks arguments and launches them.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/device_numerics.cuh"

namespace stepmix::cuda {
namespace {

using namespace detail;

// As the CPU: -ln(10000) in float64, rounded to float32 once.
inline float sinusoid_log_max_period() { return float(-std::log(10000.0)); }

// model/embedding.cpp timestep_sinusoid for one timestep.
__global__ void timestep_sinusoid_kernel(float tau, float log_max_period, float* __restrict__ out) {
  constexpr int half = int(kTimestepChannels / 2);
  const int j = threadIdx.x;
  if (j >= half) return;
  const float frequency = exp_f32(__fdiv_rn(__fmul_rn(log_max_period, float(j)), float(half)));
  const double angle = __fmul_rn(tau, frequency);
  out[j] = float(cos(angle));
  out[j + half] = float(sin(angle));
}

struct Cfg {
  const float* v_uncond;
  const float* v_cond;
  float guidance;
  float* guided;
  __device__ void one(int64_t i) const {
    const float u = v_uncond[i];
    guided[i] = __fadd_rn(u, __fmul_rn(guidance, __fsub_rn(v_cond[i], u)));
  }
};

struct Euler {
  float* x;
  const float* v;
  float dt;
  __device__ void one(int64_t i) const { x[i] = __fadd_rn(x[i], __fmul_rn(dt, v[i])); }
};

// apply_latent_step's UniPC element (sched/unipc.cpp), operation by operation.
struct UniPC {
  sched::UniPCStep s;
  float* x;
  const float* v;
  const float* x0_prev2;
  const float* x0_prev;
  float* x0_now;
  float* last_sample;
  // base(a, x, b, m) = a·x − b·m
  __device__ static float base(float a, float xv, float b, float m) {
    return __fsub_rn(__fmul_rn(a, xv), __fmul_rn(b, m));
  }
  __device__ void one(int64_t i) const {
    float xi = x[i];
    const float m = __fsub_rn(xi, __fmul_rn(s.sigma, v[i]));
    x0_now[i] = m;
    if (s.corrector_order != 0) {
      const float b = base(s.c_ratio, last_sample[i], s.c_m, x0_prev[i]);
      const float dt = __fsub_rn(m, x0_prev[i]);
      float inner;
      if (s.corrector_order == 1) {
        inner = __fmul_rn(0.5f, dt);
      } else {
        const float d = __fdiv_rn(__fsub_rn(x0_prev2[i], x0_prev[i]), s.c_r);
        inner = __fadd_rn(__fmul_rn(s.c_rho1, d), __fmul_rn(s.c_rho2, dt));
      }
      xi = __fsub_rn(b, __fmul_rn(s.c_d, inner));
    }
    last_sample[i] = xi;
    if (s.predictor_order == 0) {
      x[i] = m;
    } else if (s.predictor_order == 1) {
      x[i] = base(s.p_ratio, xi, s.p_m, m);
    } else {
      const float b = base(s.p_ratio, xi, s.p_m, m);
      const float d = __fdiv_rn(__fsub_rn(x0_prev[i], m), s.p_r);
      x[i] = __fsub_rn(b, __fmul_rn(s.p_d, __fmul_rn(0.5f, d)));
    }
  }
};

struct NonFinite {
  const float* x;
  uint32_t* flag;
  __device__ void one(int64_t i) const {
    if ((__float_as_uint(x[i]) & 0x7F800000u) == 0x7F800000u) *flag = 1;  // every writer stores the same 1
  }
};

struct Grid {
  int64_t C, T, H, W, p, Hp, Wp, F;
};

Grid grid_of(const PatchGrid& g) {
  return {g.channels, g.frames, g.height, g.width, g.patch, g.patches_h(), g.patches_w(), g.features()};
}

// Element i of the patches: ((t·Hp + hp)·Wp + wp)·F + (ph·p + pw)·C + c.
struct Patchify {
  const float* latent;
  Grid g;
  float* patches;
  __device__ void one(int64_t i) const {
    const int64_t token = i / g.F, f = i % g.F;
    const int64_t t = token / (g.Hp * g.Wp), hp = (token / g.Wp) % g.Hp, wp = token % g.Wp;
    const int64_t c = f % g.C, pw = (f / g.C) % g.p, ph = f / (g.C * g.p);
    const int64_t h = hp * g.p + ph, w = wp * g.p + pw;
    patches[i] = (h < g.H && w < g.W) ? latent[((c * g.T + t) * g.H + h) * g.W + w] : 0.0f;
  }
};

// Element i of the tokens of one noisy frame (index n of the list) into frame t of out.
struct UnpatchifyFrame {
  const float* patches;
  Grid g;
  int64_t n, t;
  float* out;
  __device__ void one(int64_t i) const {
    const int64_t token = i / g.F, f = i % g.F;
    const int64_t hp = token / g.Wp, wp = token % g.Wp;
    const int64_t c = f % g.C, pw = (f / g.C) % g.p, ph = f / (g.C * g.p);
    const int64_t h = hp * g.p + ph, w = wp * g.p + pw;
    if (h < g.H && w < g.W) out[((c * g.T + t) * g.H + h) * g.W + w] = patches[n * g.Hp * g.Wp * g.F + i];
  }
};

// ---------------------------------------------------------------- seeded fills
__device__ __forceinline__ uint64_t mix64(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ uint64_t hash_index(uint64_t seed, int64_t i) {
  return mix64(seed * 0x9E3779B97F4A7C15ull + uint64_t(i) + 0x632BE59BD9B4E019ull);
}
__device__ __forceinline__ float uniform(uint64_t seed, int64_t i, float low, float high) {
  const float u = float(hash_index(seed, i) >> 40) * 0x1p-24f;  // [0, 1)
  return low + (high - low) * u;
}

struct FillF32 {
  float* x;
  uint64_t seed;
  float low, high;
  __device__ void one(int64_t i) const { x[i] = uniform(seed, i, low, high); }
};

struct FillBf16 {
  uint16_t* x;
  uint64_t seed;
  float low, high;
  __device__ void one(int64_t i) const { x[i] = float_to_bf16_rne(uniform(seed, i, low, high)); }
};

struct FillE4m3 {
  uint8_t* codes;
  uint64_t seed;
  __device__ void one(int64_t i) const {
    const uint32_t r = uint32_t(hash_index(seed, i) % 254u);  // 0..253 → 0x00..0x7E, 0x80..0xFE
    codes[i] = uint8_t(r < 0x7Fu ? r : r + 1u);
  }
};

}  // namespace
}  // namespace stepmix::cuda
