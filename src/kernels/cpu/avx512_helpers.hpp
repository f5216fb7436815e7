// AVX-512 building blocks shared by the *_avx512.cpp kernels. Include only
// from files compiled with the AVX-512 flags (see top-level CMakeLists.txt).
//
// Every conversion here is bit-identical to its scalar definition in
// core/numerics.hpp (tests check each one against the "ref" variant).
#pragma once

// GCC 12 reports its own _mm512_undefined_* placeholders inside the intrinsic
// headers as maybe-uninitialized; the warning carries no information here.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "core/numerics.hpp"
#include "core/thread_pool.hpp"
#include "kernels/linear_kernels.hpp"

namespace stepmix::kernels::avx512 {

// Where a GEMM's tasks run: on the global pool, or inline on the calling
// thread when the product is too small to be worth waking the workers.
class GemmTasks {
 public:
  explicit GemmTasks(const GemmArgs& g)
      : pool_(ThreadPool::global()),
        parallel_(double(g.M) * double(g.N) * double(g.K) >= double(1 << 18) && pool_.size() > 1) {}
  // Threads the tasks may run on (1 when inline).
  int threads() const { return parallel_ ? pool_.size() : 1; }
  // fn(i) for i in [0, count); returns when all are done.
  template <class Fn>
  void run(int64_t count, const Fn& fn) const {
    if (parallel_) {
      pool_.parallel_for(count, fn);
    } else {
      for (int64_t i = 0; i < count; ++i) fn(i);
    }
  }

 private:
  ThreadPool& pool_;
  bool parallel_;
};

// 64-byte aligned, grow-only storage (one per use, usually thread_local):
// keeps steady-state GEMM calls allocation-free.
class AlignedScratch {
 public:
  template <class T>
  T* get(std::size_t count) {
    const std::size_t bytes = std::max<std::size_t>(count * sizeof(T), 64);
    if (bytes > capacity_) {
      data_.reset(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t(64))));
      capacity_ = bytes;
    }
    return reinterpret_cast<T*>(data_.get());
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<std::byte, Free> data_;
  std::size_t capacity_ = 0;
};

// ---------------------------------------------------------------- transpose
// rows[r] holds 16 dwords; afterwards rows[c] holds what was column c.
inline void transpose_16x16_dwords(__m512i rows[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(rows[i], rows[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(rows[i], rows[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    rows[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    rows[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    rows[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    rows[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // Now rows[4q + s] holds, in each 128-bit lane L, column (4L + s) of rows
  // 4q..4q+3. Gather the four 128-bit pieces of each column.
  for (int s = 0; s < 4; ++s) {
    const __m512i a = _mm512_shuffle_i32x4(rows[s], rows[4 + s], 0x88);       // lanes 0,2 | 0,2
    const __m512i b = _mm512_shuffle_i32x4(rows[s], rows[4 + s], 0xDD);       // lanes 1,3 | 1,3
    const __m512i c = _mm512_shuffle_i32x4(rows[8 + s], rows[12 + s], 0x88);
    const __m512i d = _mm512_shuffle_i32x4(rows[8 + s], rows[12 + s], 0xDD);
    t[s] = _mm512_shuffle_i32x4(a, c, 0x88);       // column s      (lane 0 of each row group)
    t[8 + s] = _mm512_shuffle_i32x4(a, c, 0xDD);   // column 8 + s  (lane 2)
    t[4 + s] = _mm512_shuffle_i32x4(b, d, 0x88);   // column 4 + s  (lane 1)
    t[12 + s] = _mm512_shuffle_i32x4(b, d, 0xDD);  // column 12 + s (lane 3)
  }
  for (int i = 0; i < 16; ++i) rows[i] = t[i];
}

// ---------------------------------------------------------------- E4M3 -> BF16
// A 128-entry table of bf16 values indexed by the code's low 7 bits; the sign
// bit is ORed in afterwards. Valid for any odd function of the code, which all
// our conversions are: decode(c) and bf16(decode(c) · s) for s > 0.
struct E4M3ToBf16Table {
  __m512i part[4];  // words 0-31, 32-63, 64-95, 96-127

  // entry(c) for c in [0, 128).
  template <class Entry>
  static E4M3ToBf16Table build(Entry entry) {
    alignas(64) uint16_t words[128];
    for (int c = 0; c < 128; ++c) words[c] = entry(uint8_t(c));
    E4M3ToBf16Table t;
    for (int i = 0; i < 4; ++i) t.part[i] = _mm512_load_si512(words + 32 * i);
    return t;
  }
  // Exact decode: e4m3_to_bf16.
  static E4M3ToBf16Table exact() {
    return build([](uint8_t c) { return e4m3_to_bf16(c); });
  }
  // W8A16 weight: bf16(float32(decode(c) · scale)), one rounding after the product.
  static E4M3ToBf16Table scaled(float scale) {
    return build([scale](uint8_t c) { return float_to_bf16_rne(e4m3_to_float(c) * scale); });
  }

  // 32 codes (zero-extended to words) -> 32 bf16.
  __m512i convert_words(__m512i code_words) const {
    // permutex2var uses index bits 0-5: bit 5 picks the second table register.
    const __m512i low = _mm512_permutex2var_epi16(part[0], code_words, part[1]);
    const __m512i high = _mm512_permutex2var_epi16(part[2], code_words, part[3]);
    const __mmask32 use_high = _mm512_test_epi16_mask(code_words, _mm512_set1_epi16(0x40));
    const __m512i magnitude = _mm512_mask_blend_epi16(use_high, low, high);
    // magnitude | (code << 8 & 0x8000): the sign bit moves to bit 15.
    return _mm512_ternarylogic_epi32(magnitude, _mm512_slli_epi16(code_words, 8), _mm512_set1_epi16(int16_t(0x8000)),
                                     0xF8);
  }
  __m512i convert(__m256i codes) const { return convert_words(_mm512_cvtepu8_epi16(codes)); }
};

// The same conversion, 64 codes per step with byte permutes (AVX512_VBMI,
// checked at run time by the caller): the high and low bytes of each bf16 are
// looked up in two 128-entry byte tables and interleaved. About half the
// instructions of E4M3ToBf16Table::convert, which matters when few rows of x
// share each converted weight.
struct E4M3ToBf16ByteTables {
  __m512i high[2], low[2];

  static E4M3ToBf16ByteTables from(const E4M3ToBf16Table& words_table) {
    alignas(64) uint16_t words[128];
    for (int i = 0; i < 4; ++i) _mm512_store_si512(words + 32 * i, words_table.part[i]);
    alignas(64) uint8_t high_bytes[128], low_bytes[128];
    for (int c = 0; c < 128; ++c) {
      high_bytes[c] = uint8_t(words[c] >> 8);
      low_bytes[c] = uint8_t(words[c]);
    }
    E4M3ToBf16ByteTables t;
    for (int i = 0; i < 2; ++i) {
      t.high[i] = _mm512_load_si512(high_bytes + 64 * i);
      t.low[i] = _mm512_load_si512(low_bytes + 64 * i);
    }
    return t;
  }
};

// 64 codes -> bf16 words: `first` holds codes [0, 32), `second` [32, 64).
// unpacklo/hi_epi8 interleave within 128-bit lanes; pre-permuting the codes
// (lane L gets codes 8L..8L+7 then 32+8L..32+8L+7) puts both results in order.
__attribute__((target("avx512vbmi"))) inline void decode_64_e4m3_to_bf16_vbmi(const E4M3ToBf16ByteTables& t,
                                                                            const uint8_t* codes, __m512i& first,
                                                                            __m512i& second) {
  alignas(64) static constexpr uint8_t kOrder[64] = {
      0,  1,  2,  3,  4,  5,  6,  7,  32, 33, 34, 35, 36, 37, 38, 39, 8,  9,  10, 11, 12, 13,
      14, 15, 40, 41, 42, 43, 44, 45, 46, 47, 16, 17, 18, 19, 20, 21, 22, 23, 48, 49, 50, 51,
      52, 53, 54, 55, 24, 25, 26, 27, 28, 29, 30, 31, 56, 57, 58, 59, 60, 61, 62, 63};
  const __m512i c = _mm512_permutexvar_epi8(_mm512_load_si512(kOrder), _mm512_loadu_si512(codes));
  // permutex2var_epi8 uses index bits 0-6 (bit 6 picks the second register).
  __m512i high = _mm512_permutex2var_epi8(t.high[0], c, t.high[1]);
  const __m512i low = _mm512_permutex2var_epi8(t.low[0], c, t.low[1]);
  high = _mm512_ternarylogic_epi32(high, c, _mm512_set1_epi8(int8_t(0x80)), 0xF8);  // high | (code & 0x80)
  first = _mm512_unpacklo_epi8(low, high);
  second = _mm512_unpackhi_epi8(low, high);
}

// Converts the first floor(count / 64) · 64 codes; returns how many it did.
__attribute__((target("avx512vbmi"))) inline int64_t convert_e4m3_to_bf16_vbmi(const E4M3ToBf16ByteTables& t,
                                                                               const uint8_t* codes, int64_t count,
                                                                               uint16_t* out) {
  const E4M3ToBf16ByteTables tables = t;  // a local copy stays in registers (stores through out cannot alias it)
  int64_t i = 0;
  for (; i + 64 <= count; i += 64) {
    __m512i first, second;
    decode_64_e4m3_to_bf16_vbmi(tables, codes + i, first, second);
    _mm512_storeu_si512(out + i, first);
    _mm512_storeu_si512(out + i + 32, second);
  }
  return i;
}

// ---------------------------------------------------------------- E4M3 -> F32
// float32(decode(code) · scale) for 16 codes, exact to the scalar product.
// Via F16: (code & 0x7F) << 7 is an F16 whose value is decode(code) · 2^-8
// (subnormals included), so one multiply by scale · 2^8 rounds the same real
// number the scalar product rounds. NaN codes (0x7F/0xFF) are patched by
// e4m3_to_f32_scaled; the _finite form is for codes known to hold none.
inline __m512 e4m3_to_f32_scaled_finite(__m128i codes, __m512 scale_times_256) {
  __m256i words = _mm256_cvtepi8_epi16(codes);  // sign-extend: bit 15 = sign
  words = _mm256_and_si256(_mm256_slli_epi16(words, 7), _mm256_set1_epi16(int16_t(0xBFFF)));
  return _mm512_mul_ps(_mm512_cvtph_ps(words), scale_times_256);
}

inline __m512 e4m3_to_f32_scaled(__m128i codes, __m512 scale_times_256) {
  const __m512 v = e4m3_to_f32_scaled_finite(codes, scale_times_256);
  const __mmask16 is_nan =
      _mm_cmpeq_epi8_mask(_mm_and_si128(codes, _mm_set1_epi8(0x7F)), _mm_set1_epi8(0x7F));
  return _mm512_mask_mov_ps(v, is_nan, _mm512_set1_ps(__builtin_nanf("")));
}

// ---------------------------------------------------------------- F32 -> BF16
// float_to_bf16_rne for 16 floats (NaN stays NaN, quiet, sign kept).
inline __m256i f32_to_bf16_rne(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  rounded = _mm512_mask_or_epi32(rounded, is_nan, _mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(rounded);
}

inline __m512 bf16_to_f32(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

// ---------------------------------------------------------------- F32 -> E4M3
// quantize_e4m3_saturating(x / input_scale) for 16 values (float32 division).
inline __m128i quantize_e4m3(__m512 x, __m512 input_scale) {
  const __m512 v = _mm512_div_ps(x, input_scale);
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i abs_bits = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF));
  const __m512 a = _mm512_castsi512_ps(abs_bits);
  // Normal range: keep 3 mantissa bits, round to nearest even on the 20
  // dropped bits (a carry may bump the exponent), rebias 127 -> 7.
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(abs_bits, 20), _mm512_set1_epi32(1));
  const __m512i normal = _mm512_sub_epi32(
      _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(abs_bits, _mm512_set1_epi32(0x7FFFF)), lsb), 20),
      _mm512_set1_epi32(120 << 3));
  // Subnormal range (a < 2^-6): m = a · 2^9 rounded to nearest even (exact scaling).
  const __m512i subnormal = _mm512_cvt_roundps_epi32(_mm512_mul_ps(a, _mm512_set1_ps(512.0f)),
                                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __mmask16 is_subnormal = _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.015625f), _CMP_LT_OQ);
  __m512i code = _mm512_mask_blend_epi32(is_subnormal, normal, subnormal);
  code = _mm512_min_epi32(code, _mm512_set1_epi32(0x7E));  // saturate at 448 (also ±inf)
  const __mmask16 is_nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  code = _mm512_mask_mov_epi32(code, is_nan, _mm512_set1_epi32(0x7F));
  code = _mm512_or_si512(code, _mm512_and_si512(_mm512_srli_epi32(bits, 24), _mm512_set1_epi32(0x80)));
  return _mm512_cvtepi32_epi8(code);
}

// e^x: Cody-Waite reduction to r in [-ln2/2, ln2/2], degree-6 polynomial,
// scale by 2^n. Max error ~2 ulp; below -87.3 the result is ~1e-38 (callers
// only add it to numbers >= 1 or mask it out), above ~88.72 it overflows to
// +inf as std::exp does (the upper clamp only keeps +inf inputs from NaN).
inline __m512 exp(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(89.0f));
  const __m512 scaled = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_roundscale_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

inline __mmask16 tail_mask16(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u); }
inline __mmask32 tail_mask32(int64_t n) { return n >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << n) - 1u); }

// ---------------------------------------------------------------- epilogue
// The bias of columns [n0, n0 + 16) (`cols` of them real) as float32; zero without one.
inline __m512 load_bias16(const GemmArgs& g, int64_t n0, __mmask16 cols) {
  if (g.bias_type == BiasType::F32) return _mm512_maskz_loadu_ps(cols, static_cast<const float*>(g.bias) + n0);
  if (g.bias_type == BiasType::BF16)
    return bf16_to_f32(_mm256_maskz_loadu_epi16(cols, static_cast<const uint16_t*>(g.bias) + n0));
  return _mm512_setzero_ps();
}

// y[m][n0 .. n0 + 16) = float32(acc · alpha) (+ bias), then the output type.
// Explicit rounding intrinsics: never contracted into an FMA, so the two
// roundings match the reference exactly.
inline void store_output16(const GemmArgs& g, __m512 acc, int64_t m, int64_t n0, __mmask16 cols, __m512 alpha,
                           __m512 bias) {
  __m512 y = _mm512_mul_round_ps(acc, alpha, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  if (g.bias_type != BiasType::None) y = _mm512_add_round_ps(y, bias, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const int64_t offset = m * g.N + n0;
  if (g.y_type == OutputType::F32) {
    _mm512_mask_storeu_ps(static_cast<float*>(g.y) + offset, cols, y);
  } else {
    _mm256_mask_storeu_epi16(static_cast<uint16_t*>(g.y) + offset, cols, f32_to_bf16_rne(y));
  }
}

// The sums of a columns-layout micro-kernel (rows [m, m + MR) × 16-column
// blocks [block, block + NV)) through the epilogue into y.
template <int MR, int NV>
inline void store_output_block(const GemmArgs& g, const __m512 (&acc)[MR][NV], int64_t m, int64_t block) {
  const __m512 alpha = _mm512_set1_ps(g.alpha);
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v) {
    const int64_t n0 = (block + v) * 16;
    const __mmask16 cols = tail_mask16(g.N - n0);
    const __m512 bias = load_bias16(g, n0, cols);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) store_output16(g, acc[r][v], m + r, n0, cols, alpha, bias);
  }
}

}  // namespace stepmix::kernels::avx512
