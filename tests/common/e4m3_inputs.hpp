// Inputs that pin an E4M3 quantizer to quantize_e4m3_saturating(x / s) bit
// for bit (core/numerics.hpp), shared by the CPU variant tests and the CUDA
// tests.
#pragma once

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/numerics.hpp"

namespace stepmix::test {

// Every E4M3 value, the midpoints between neighbours, ±1 float ulp around
// each, saturation and special values, and random values over many octaves.
inline std::vector<float> e4m3_tricky_inputs() {
  std::vector<float> v;
  std::vector<float> values;
  for (int c = 0; c < 0x7F; ++c) values.push_back(e4m3_to_float(uint8_t(c)));
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<float> around = {values[i]};
    if (i + 1 < values.size()) around.push_back(0.5f * (values[i] + values[i + 1]));  // exact midpoint
    for (float x : around) {
      for (float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, 1e9f)}) {
        v.push_back(y);
        v.push_back(-y);
      }
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {448.0f, 460.0f, 464.0f, 465.0f, 480.0f, 1e6f, 3e38f, inf, 0.0f, 1e-45f, 1e-40f, 0x1p-10f,
                  1.5f * 0x1p-10f, 3 * 0x1p-10f, 0.0146484375f, 0.015625f}) {
    v.push_back(x);
    v.push_back(-x);
  }
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  v.push_back(-std::numeric_limits<float>::quiet_NaN());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-14.0f, 10.0f);
  std::uniform_int_distribution<int> sign(0, 1);
  for (int i = 0; i < 20000; ++i) v.push_back((sign(rng) ? -1.0f : 1.0f) * std::exp2(exponent(rng)));
  return v;
}

// Scales that are not powers of two, and scales whose reciprocal is not a
// normal float: where a shortcut for the division (a multiplication by 1/s,
// even one guarded at the midpoints with too small a margin) rounds
// differently.
inline std::vector<float> e4m3_awkward_scales() {
  return {0.0217f, 3.0f, 1e-3f, 0.1f, 7.3e-5f, 123.4f, 0.3333333f, 1e-39f, 3e38f};
}

// Activations x whose quotient x / scale lies within a few float32 ulps of
// every E4M3 value and of every rounding midpoint, both signs.
inline std::vector<float> quotients_next_to_e4m3_midpoints(float scale) {
  std::vector<float> targets;
  for (int c = 0; c < 0x7E; ++c) {
    const float value = e4m3_to_float(uint8_t(c)), next = e4m3_to_float(uint8_t(c + 1));
    targets.push_back(value);
    targets.push_back(0.5f * (value + next));
  }
  targets.push_back(448.0f);
  targets.push_back(464.0f);
  std::vector<float> x;
  for (float t : targets) {
    float center = t * scale;
    for (int k = 0; k < 6; ++k) center = std::nextafter(center, 0.0f);
    for (int k = 0; k < 13; ++k, center = std::nextafter(center, 1e38f)) {
      x.push_back(center);
      x.push_back(-center);
    }
  }
  return x;
}

}  // namespace stepmix::test
