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

// Online-softmax rescale factors 2^((old − new)·c) when the running maxima
// move from old_max to new_max (c = scale · log2 e): exactly 1 where the max
// did not move (rows that saw no new key among them), ~0 where old was −inf
// (a row's first keys). `moved` gets the lanes where it moved.
inline __m512 softmax_correction(__m512 old_max, __m512 new_max, __m512 c, __mmask16& moved) {
  moved = _mm512_cmp_ps_mask(old_max, new_max, _CMP_NEQ_UQ);
  return exp2_nonpositive(_mm512_mul_ps(_mm512_maskz_sub_ps(moved, old_max, new_max), c));
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

// Lane g of the result = horizontal max / sum of v[g]. Reducing the four
// queries of an attention group together keeps their reductions side by side
// instead of four serial shuffle chains.
// Op: the lane-wise combination at 256 and 128 bits (MaxOp, AddOp).
template <class Op>
inline __m128 reduce4(const __m512 v[4]) {
  __m256 h[4];
  for (int g = 0; g < 4; ++g) h[g] = Op::f(_mm512_castps512_ps256(v[g]), _mm512_extractf32x8_ps(v[g], 1));
  const __m256 ab = Op::f(_mm256_unpacklo_ps(h[0], h[1]), _mm256_unpackhi_ps(h[0], h[1]));
  const __m256 cd = Op::f(_mm256_unpacklo_ps(h[2], h[3]), _mm256_unpackhi_ps(h[2], h[3]));
  const __m256 w =
      Op::f(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  return Op::f(_mm256_castps256_ps128(w), _mm256_extractf128_ps(w, 1));
}
struct MaxOp {
  static __m256 f(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
  static __m128 f(__m128 a, __m128 b) { return _mm_max_ps(a, b); }
};
struct AddOp {
  static __m256 f(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m128 f(__m128 a, __m128 b) { return _mm_add_ps(a, b); }
};
inline __m128 reduce4_max(const __m512 v[4]) { return reduce4<MaxOp>(v); }
inline __m128 reduce4_add(const __m512 v[4]) { return reduce4<AddOp>(v); }

// Hints slice `slice_index` of `slices` of the next key and value blocks
// (`block_bytes` each) toward L2 while the current block computes: at
// thousands of keys the blocks come from L3.
inline void prefetch_slice(const void* next_keys, const void* next_values, int64_t block_bytes, int64_t slice_index,
                           int64_t slices) {
  const int64_t lines = block_bytes / 64, per_slice = (lines + slices - 1) / slices;
  const int64_t end = lines < (slice_index + 1) * per_slice ? lines : (slice_index + 1) * per_slice;
  const char* k = static_cast<const char*>(next_keys);
  const char* v = static_cast<const char*>(next_values);
  for (int64_t line = slice_index * per_slice; line < end; ++line) {
    _mm_prefetch(k + 64 * line, _MM_HINT_T1);
    _mm_prefetch(v + 64 * line, _MM_HINT_T1);
  }
}

}  // namespace stepmix::simd
