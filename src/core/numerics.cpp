#include "core/numerics.hpp"

namespace stepmix {

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0) {
    // Zero or subnormal: man * 2^-24, exact in float.
    const float mag = float(man) * 0x1p-24f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | sign);
  }
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t float_to_f16_rne(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  if (std::isnan(f)) return uint16_t(sign | 0x7E00u | ((bits >> 13) & 0x3FFu));
  const float a = std::fabs(f);
  if (a >= 65520.0f) return uint16_t(sign | 0x7C00u);  // rounds past the largest finite
  if (a < 0x1p-14f) {
    // Subnormal half: m * 2^-24 with m rounded to nearest even.
    return uint16_t(sign | uint16_t(std::nearbyint(a * 0x1p24f)));
  }
  const uint32_t abits = bits & 0x7FFFFFFFu;
  uint32_t code = (((abits >> 23) - 127 + 15) << 10) | ((abits >> 13) & 0x3FFu);
  const uint32_t rest = abits & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (code & 1u))) ++code;
  return uint16_t(sign | code);
}

uint16_t e4m3_to_f16(uint8_t code) { return float_to_f16_rne(e4m3_to_float(code)); }

uint8_t float_to_e5m2_rne(float v) {
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint8_t sign = uint8_t((bits >> 24) & 0x80u);
  if (std::isnan(v)) return uint8_t(sign | 0x7E);
  const float a = std::fabs(v);
  if (a >= 61440.0f) return uint8_t(sign | 0x7C);  // halfway past 57344 rounds to inf
  if (a < 0x1p-14f) return uint8_t(sign | uint8_t(std::nearbyint(a * 0x1p16f)));  // m * 2^-16
  const uint32_t abits = bits & 0x7FFFFFFFu;
  uint32_t code = (((abits >> 23) - 127 + 15) << 2) | ((abits >> 21) & 0x3u);
  const uint32_t rest = abits & 0x1FFFFFu;
  if (rest > 0x100000u || (rest == 0x100000u && (code & 1u))) ++code;
  return uint8_t(sign | code);
}

}  // namespace stepmix
