// The range a tensorwise FP8 scale (weight_scale s_w, input_scale s_x) must
// lie in, checked wherever a checkpoint's scales are read.
//
// Why [2^-64, 2^32]: an E4M3 code is at most 448 (~2^8.8) and at least 2^-9
// in magnitude, and a scale multiplies it back to the real value. Calibrated
// scales are amax / 448, so real checkpoints hold values between ~1e-9 and
// ~1e3; the bounds sit many orders of magnitude outside that. Inside them
// the arithmetic stays finite and non-zero in float32: a W8A8 dot product of
// K <= 2^24 terms (the largest config size) is at most
// 448·448·K·s_w·s_x <= 2^17.6 · 2^24 · 2^64 = 2^105.6 < FLT_MAX (2^128), and
// the smallest non-zero term 2^-9 · 2^-9 · s_w · s_x >= 2^-146 is still a
// float32 subnormal (>= 2^-149). A scale of 3e38 passes "finite and > 0" but
// turns the first such product into infinity, then every latent into NaN.
#pragma once

#include <cmath>
#include <optional>
#include <string>

#include "stepmix/error.hpp"

namespace stepmix {

inline constexpr float kMinFp8Scale = 0x1p-64f;
inline constexpr float kMaxFp8Scale = 0x1p32f;

// nullopt for an acceptable scale; else the problem, e.g. "must be finite
// and > 0, got nan" or "3e+38 is outside [2^-64, 2^32] (...)".
inline std::optional<std::string> fp8_scale_problem(float v) {
  const std::string text = Error::number(v);
  if (!std::isfinite(v) || !(v > 0)) return "must be finite and > 0, got " + text;
  if (v < kMinFp8Scale || v > kMaxFp8Scale)
    return text + " is outside [2^-64, 2^32], the range in which FP8 products stay finite in float32";
  return std::nullopt;
}

}  // namespace stepmix
