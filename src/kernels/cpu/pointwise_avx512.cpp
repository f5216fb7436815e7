// AVX-512 variants of the bf16 pointwise kernels. Same arithmetic as the
// scalar twins in ref/pointwise_ref.cpp, operation for operation (no FMA
// contraction), so results are bit-identical except:
//  - RMSNorm sums the (exact, float64) squares in a different order, which
//    can move the float32 mean square by an ulp in rare rows;
//  - SiLU uses a polynomial e^x (~2 ulp) instead of std::exp.
// Tests allow one bf16 ulp for those two and expect equality elsewhere.
#include "kernels/cpu/simd_avx512.hpp"

#include <cmath>

#include "kernels/cpu/avx512_kernels.hpp"

namespace stepmix::kernels::avx512 {
namespace {

using simd::first_lanes;

// Σ x² in float64 over n floats (products exact, as in rms_norm).
inline double sum_of_squares(const float* x, int64_t n) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(first_lanes(n - i), x + i);
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    acc0 = _mm512_fmadd_pd(lo, lo, acc0);
    acc1 = _mm512_fmadd_pd(hi, hi, acc1);
  }
  return _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
}

inline float inverse_rms(const float* x, int64_t n, float eps) {
  const float mean_square = float(sum_of_squares(x, n) / double(n));
  return 1.0f / std::sqrt(mean_square + eps);
}

// (x · r) · w (Standard) or (w · x) · r (Nemotron), as rms_norm evaluates it.
inline __m512 scale_row(__m512 x, __m512 r, __m512 w, NormKind kind) {
  return kind == NormKind::Standard ? _mm512_mul_ps(_mm512_mul_ps(x, r), w) : _mm512_mul_ps(_mm512_mul_ps(w, x), r);
}

// Heads up to this size take the vector path (Cosmos3 uses 128).
constexpr int64_t kMaxHeadDim = 1024;

}  // namespace

void rms_norm_bf16(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                   uint16_t* out) {
  for (int64_t row = 0; row < rows; ++row) {
    const float* in = x + row * n;
    uint16_t* y = out + row * n;
    const __m512 r = _mm512_set1_ps(inverse_rms(in, n, eps));
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 lanes = first_lanes(n - i);
      const __m512 v = _mm512_maskz_loadu_ps(lanes, in + i);
      const __m512 w = _mm512_maskz_loadu_ps(lanes, weight + i);
      simd::store_bf16(y + i, scale_row(v, r, w, kind), lanes);
    }
  }
}

void head_norm_rotary_bf16(uint16_t* x, int64_t rows, int64_t heads, int64_t D, const float* norm_weight, float eps,
                           NormKind kind, const float* cos, const float* sin) {
  alignas(64) float head[kMaxHeadDim];
  if (D > kMaxHeadDim) {
    ref::head_norm_rotary_bf16(x, rows, heads, D, norm_weight, eps, kind, cos, sin);
    return;
  }
  const int64_t half = D / 2;
  for (int64_t row = 0; row < rows; ++row) {
    const float* c = cos + row * D;
    const float* s = sin + row * D;
    for (int64_t h = 0; h < heads; ++h) {
      uint16_t* v = x + (row * heads + h) * D;
      for (int64_t d = 0; d < D; d += 16) _mm512_store_ps(head + d, simd::load_bf16(v + d, first_lanes(D - d)));
      if (norm_weight) {
        const __m512 r = _mm512_set1_ps(inverse_rms(head, D, eps));
        for (int64_t d = 0; d < D; d += 16) {
          const __mmask16 lanes = first_lanes(D - d);
          _mm512_store_ps(head + d, scale_row(_mm512_load_ps(head + d), r, _mm512_maskz_loadu_ps(lanes, norm_weight + d),
                                              kind));
        }
      }
      // first·c + (−second)·s and second·c' + first·s', each product rounded.
      for (int64_t j = 0; j < half; j += 16) {
        const __mmask16 lanes = first_lanes(half - j);
        const __m512 first = _mm512_maskz_loadu_ps(lanes, head + j);
        const __m512 second = _mm512_maskz_loadu_ps(lanes, head + half + j);
        const __m512 low = _mm512_sub_ps(_mm512_mul_ps(first, _mm512_maskz_loadu_ps(lanes, c + j)),
                                         _mm512_mul_ps(second, _mm512_maskz_loadu_ps(lanes, s + j)));
        const __m512 high = _mm512_add_ps(_mm512_mul_ps(second, _mm512_maskz_loadu_ps(lanes, c + half + j)),
                                          _mm512_mul_ps(first, _mm512_maskz_loadu_ps(lanes, s + half + j)));
        simd::store_bf16(v + j, low, lanes);
        simd::store_bf16(v + half + j, high, lanes);
      }
    }
  }
}

void silu_gate_bf16(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 lanes = first_lanes(count - i);
    const __m512 g = simd::load_bf16(gate + i, lanes);
    const __m512 u = simd::load_bf16(up + i, lanes);
    const __m512 e = simd::exp(_mm512_sub_ps(_mm512_setzero_ps(), g));
    simd::store_bf16(out + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), u), lanes);
  }
}

void relu_squared_bf16(uint16_t* x, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 lanes = first_lanes(count - i);
    const __m512 r = _mm512_max_ps(simd::load_bf16(x + i, lanes), _mm512_setzero_ps());
    simd::store_bf16(x + i, _mm512_mul_ps(r, r), lanes);
  }
}

void add_bf16(float* residual, const uint16_t* y, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 lanes = first_lanes(count - i);
    const __m512 sum = _mm512_add_ps(_mm512_maskz_loadu_ps(lanes, residual + i), simd::load_bf16(y + i, lanes));
    _mm512_mask_storeu_ps(residual + i, lanes, sum);
  }
}

void widen_bf16(const uint16_t* x, int64_t count, float* out) {
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 lanes = first_lanes(count - i);
    _mm512_mask_storeu_ps(out + i, lanes, simd::load_bf16(x + i, lanes));
  }
}

void round_bf16(const float* x, int64_t count, uint16_t* out) {
  for (int64_t i = 0; i < count; i += 16) {
    const __mmask16 lanes = first_lanes(count - i);
    simd::store_bf16(out + i, _mm512_maskz_loadu_ps(lanes, x + i), lanes);
  }
}

}  // namespace stepmix::kernels::avx512
