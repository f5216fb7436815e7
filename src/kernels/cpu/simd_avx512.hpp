// AVX-512 building blocks of the attention and pointwise kernels. Include only
// from files compiled with the AVX-512 flags (top-level CMakeLists.txt gives
// them to every *_avx512.cpp).
#pragma once

// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsic
// headers as (maybe-)uninitialized once inlined; the warning carries no
// information here.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/avx512_helpers.hpp"

namespace stepmix::simd {

// Lanes [0, count) of a 16-lane vector.
inline __mmask16 first_lanes(int64_t count) { return count <= 0 ? __mmask16(0) : kernels::avx512::tail_mask16(count); }

// bf16 bits → float32, exact.
inline __m512 widen_bf16(__m256i h) { return kernels::avx512::bf16_to_f32(h); }
inline __m512 load_bf16(const uint16_t* p) { return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline __m512 load_bf16(const uint16_t* p, __mmask16 lanes) {
  return widen_bf16(_mm256_maskz_loadu_epi16(lanes, p));
}

// float32 → bf16 bits, round to nearest even; NaN stays NaN (quiet, sign
// kept). Bit-identical to core/numerics.hpp float_to_bf16_rne, denormals
// included (vcvtneps2bf16 would flush them).
inline __m256i round_to_bf16(__m512 v) { return kernels::avx512::f32_to_bf16_rne(v); }
inline void store_bf16(uint16_t* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), round_to_bf16(v));
}
inline void store_bf16(uint16_t* p, __m512 v, __mmask16 lanes) { _mm256_mask_storeu_epi16(p, lanes, round_to_bf16(v)); }

// e^x (~2 ulp), shared with the kernels (kernels/cpu/avx512_helpers.hpp).
inline __m512 exp(__m512 x) { return kernels::avx512::exp(x); }

// 2^x for finite x <= 0 (the attention softmax's shifted scores, with the
// scale and log2 e folded into one multiply-subtract): x = n + r with n an
// integer and |r| <= 1/2, 2^r by a degree-5 polynomial (relative error below
// 2e-7, far under the bf16 rounding of the weights), scaled by 2^n. Inputs
// below -127 give ~0 (the clamp keeps -inf from NaN).
inline __m512 exp2_nonpositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-127.0f));
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.3264698209241033e-3f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(9.671509265899658e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.550733953714371e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.4022242426872253e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(6.931470036506653e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// Softmax weights of 32 consecutive keys (w_low: the first 16) rounded to
// bf16 in key order, i.e. as 16 dwords (key 2j, key 2j + 1): the pairs
// vdpbf16ps and tdpbf16ps read. Their values as rounded are added to `sum`
// (the normaliser must sum the weights the value product uses, so the output
// stays a weighted mean of the values): a pair's odd key is its high half,
// its even key the low half shifted up. Round to nearest even; denormal
// weights flush to zero, in the product and in the sum alike.
inline __m512i round_weight_pairs(__m512 w_low, __m512 w_high, __m512& sum) {
  const __m512i rounded = (__m512i)_mm512_cvtne2ps_pbh(w_high, w_low);
  sum = _mm512_add_ps(sum, _mm512_castsi512_ps(_mm512_and_si512(rounded, _mm512_set1_epi32(int32_t(0xFFFF0000u)))));
  sum = _mm512_add_ps(sum, _mm512_castsi512_ps(_mm512_slli_epi32(rounded, 16)));
  return rounded;
}

}  // namespace stepmix::simd
