// AVX-512 building blocks of the attention and pointwise kernels. Include only
// from files compiled with the AVX-512 flags (top-level CMakeLists.txt gives
// them to every *_avx512.cpp).
#pragma once

// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsic
// headers as maybe-uninitialized; the warning carries no information here.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

}  // namespace stepmix::simd
