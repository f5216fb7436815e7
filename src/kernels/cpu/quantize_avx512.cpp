// AVX-512 activation quantization and weight dequantization (elementwise).
#include "core/cpu_features.hpp"
#include "kernels/cpu/avx512_helpers.hpp"
#include "kernels/cpu/avx512_kernels.hpp"

namespace stepmix::kernels::avx512 {

void quantize_e4m3_f32(const float* x, int64_t count, float input_scale, uint8_t* codes) {
  const __m512 scale = _mm512_set1_ps(input_scale);
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), quantize_e4m3(_mm512_loadu_ps(x + i), scale));
  if (i < count) {
    const __mmask16 tail = tail_mask16(count - i);
    // Masked-off lanes load 1.0 so the division cannot raise anything odd.
    const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), tail, x + i);
    _mm_mask_storeu_epi8(codes + i, tail, quantize_e4m3(v, scale));
  }
}

void quantize_e4m3_bf16(const uint16_t* x, int64_t count, float input_scale, uint8_t* codes) {
  const __m512 scale = _mm512_set1_ps(input_scale);
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512 v = bf16_to_f32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), quantize_e4m3(v, scale));
  }
  if (i < count) {
    const __mmask16 tail = tail_mask16(count - i);
    const __m512 v = bf16_to_f32(_mm256_maskz_loadu_epi16(tail, x + i));
    _mm_mask_storeu_epi8(codes + i, tail, quantize_e4m3(v, scale));
  }
}

void dequantize_e4m3_to_bf16(const uint8_t* codes, int64_t count, float scale, uint16_t* out) {
  const E4M3ToBf16Table table = E4M3ToBf16Table::scaled(scale);
  int64_t i = 0;
  if (cpu_features().avx512_vbmi)
    i = convert_e4m3_to_bf16_vbmi(E4M3ToBf16ByteTables::from(table), codes, count, out);
  for (; i + 32 <= count; i += 32) {
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + i));
    _mm512_storeu_si512(out + i, table.convert(c));
  }
  if (i < count) {
    const __mmask32 tail = tail_mask32(count - i);
    _mm512_mask_storeu_epi16(out + i, tail, table.convert(_mm256_maskz_loadu_epi8(tail, codes + i)));
  }
}

}  // namespace stepmix::kernels::avx512
