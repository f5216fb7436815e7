// Device twins of core/numerics.hpp (E4M3, BF16) and the float32 arithmetic
// helpers the kernels use to round exactly as the CPU code does: every
// operation an explicit IEEE round-to-nearest intrinsic, so nvcc cannot fuse
// a multiply and an add into one rounding (the CPU build never contracts).
#pragma once

#include <cstdint>

namespace stepmix::cuda::detail {

// A static shared array: `__shared__ SharedArray<T, N> name;`. T[N] here; the
// CPU build of the kernels (the tests' SIMT emulator) gives it a type that
// checks every load and store for races between the block's threads.
#if defined(__CUDACC__)
template <class T, int N>
using SharedArray = T[N];
#endif

__device__ __forceinline__ float bf16_to_float(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

// core/numerics.hpp float_to_bf16_rne, NaN payloads included.
__device__ __forceinline__ uint16_t float_to_bf16_rne(float f) {
  uint32_t bits = __float_as_uint(f);
  if (f != f) return uint16_t((bits >> 16) | 0x0040u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

// core/numerics.hpp e4m3_to_float: sign, 4 exponent bits (bias 7), 3
// mantissa bits; 0x7F/0xFF are NaN, both the one positive quiet NaN of the
// CPU's table.
__device__ __forceinline__ float e4m3_to_float(uint8_t code) {
  const uint32_t exp = (code >> 3) & 0xFu;
  const uint32_t man = code & 0x7u;
  if (exp == 0xFu && man == 0x7u) return __uint_as_float(0x7FC00000u);
  float mag;
  if (exp == 0) {
    mag = float(man) * 0.001953125f;  // m · 2^-9, exact
  } else {
    mag = __uint_as_float(((exp + 120u) << 23) | (man << 20));  // 2^(e-7) · (1 + m/8), exact
  }
  return (code & 0x80u) ? -mag : mag;
}

// core/numerics.hpp quantize_e4m3_saturating, statement for statement.
__device__ __forceinline__ uint8_t quantize_e4m3_saturating(float v) {
  const uint32_t bits = __float_as_uint(v);
  const uint8_t sign = uint8_t((bits >> 24) & 0x80u);
  if (v != v) return uint8_t(sign | 0x7F);
  const float a = fabsf(v);
  if (a >= 448.0f) return uint8_t(sign | 0x7E);
  if (a < 0.015625f) {
    // m · 2^-9 with m rounded to nearest even (cvt.rni), as nearbyint.
    return uint8_t(sign | uint8_t(__float2int_rn(__fmul_rn(a, 512.0f))));
  }
  const uint32_t abits = bits & 0x7FFFFFFFu;
  const uint32_t exp = (abits >> 23) - 127 + 7;
  uint32_t code = (exp << 3) | ((abits >> 20) & 0x7u);
  const uint32_t rest = abits & 0xFFFFFu;
  if (rest > 0x80000u || (rest == 0x80000u && (code & 1u))) ++code;
  return uint8_t(sign | code);
}

// exp(x) in float64, rounded once to float32: the correctly rounded expf in
// all but vanishingly rare cases. glibc's expf is not correctly rounded (under
// 0.502 ulp) and returns the other neighbour for about 0.07% of normal inputs.
__device__ __forceinline__ float exp_f32(float x) { return float(exp(double(x))); }

}  // namespace stepmix::cuda::detail
