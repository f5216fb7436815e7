// Scalar FP8 (E4M3FN, E5M2), BF16 and F16 conversions.
//
// These are the reference definitions every optimised kernel is tested
// against. All rounding is round-to-nearest, ties to even.
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>

namespace stepmix {

// ---------------------------------------------------------------- BF16
inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t float_to_bf16_rne(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return uint16_t((bits >> 16) | 0x0040u);  // keep sign, force quiet
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

// ---------------------------------------------------------------- F16
float f16_to_float(uint16_t h);
uint16_t float_to_f16_rne(float f);

// ---------------------------------------------------------------- E4M3FN
// Layout: sign bit 7, exponent bits 6..3 (bias 7), mantissa bits 2..0.
// No infinities; NaN only at 0x7F/0xFF; largest finite ±448 (0x7E/0xFE).
inline constexpr float kE4M3Max = 448.0f;

namespace detail {
constexpr float e4m3_value(uint8_t code) {
  const int exp = (code >> 3) & 0xF;
  const int man = code & 0x7;
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  if (exp == 0xF && man == 0x7) return __builtin_nanf("");
  float mag;
  if (exp == 0) {
    mag = float(man) / 512.0f;  // m * 2^-9
  } else {
    float p = 1.0f;
    for (int i = 7; i < exp; ++i) p *= 2.0f;
    for (int i = exp; i < 7; ++i) p /= 2.0f;
    mag = p * (1.0f + float(man) / 8.0f);
  }
  return sign * mag;
}
constexpr std::array<float, 256> make_e4m3_table() {
  std::array<float, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = e4m3_value(uint8_t(c));
  return t;
}
inline constexpr std::array<float, 256> kE4M3ToFloat = make_e4m3_table();
}  // namespace detail

inline float e4m3_to_float(uint8_t code) { return detail::kE4M3ToFloat[code]; }
// Exact: every E4M3 value is representable in BF16 and F16.
inline uint16_t e4m3_to_bf16(uint8_t code) {
  return uint16_t(std::bit_cast<uint32_t>(e4m3_to_float(code)) >> 16);
}
uint16_t e4m3_to_f16(uint8_t code);

// The conversion of the W8A8 path: clamp to [-448, 448], then round to the
// nearest E4M3 value, ties to even mantissa (subnormals included). NaN stays
// NaN with its sign (0x7F / 0xFF); ±inf saturates to ±448; zero keeps its sign.
inline uint8_t quantize_e4m3_saturating(float v) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint8_t sign = uint8_t((bits >> 24) & 0x80u);
  if (std::isnan(v)) return uint8_t(sign | 0x7F);
  const float a = std::fabs(v);
  if (a >= kE4M3Max) return uint8_t(sign | 0x7E);
  if (a < 0.015625f) {
    // Subnormal range: value = m * 2^-9. Scaling by 2^9 is exact; the default
    // rounding mode of nearbyint is ties-to-even. m == 8 is the smallest
    // normal, whose code is 0x08 as well.
    return uint8_t(sign | uint8_t(std::nearbyint(a * 512.0f)));
  }
  const uint32_t abits = bits & 0x7FFFFFFFu;
  const uint32_t exp = (abits >> 23) - 127 + 7;  // 1..15
  uint32_t code = (exp << 3) | ((abits >> 20) & 0x7u);
  const uint32_t rest = abits & 0xFFFFFu;  // the 20 mantissa bits dropped
  if (rest > 0x80000u || (rest == 0x80000u && (code & 1u))) ++code;  // carry may bump the exponent
  return uint8_t(sign | code);  // a < 448 keeps code <= 0x7E
}

// ---------------------------------------------------------------- E5M2
// Layout: sign, 5 exponent bits (bias 15), 2 mantissa bits: the top byte of an
// IEEE half. Has infinities (0x7C) and NaNs.
inline float e5m2_to_float(uint8_t code) { return f16_to_float(uint16_t(code) << 8); }
// Round to nearest even; overflow goes to ±inf as in IEEE; NaN stays NaN.
uint8_t float_to_e5m2_rne(float v);

}  // namespace stepmix
