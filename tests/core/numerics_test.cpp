#include "core/numerics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/golden.hpp"
#include "io/safetensors.hpp"

namespace stepmix {
namespace {

uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

// Brute force: the nearest E4M3 value to clamp(v), ties to the even code.
uint8_t nearest_e4m3_brute_force(float v) {
  if (std::isnan(v)) return std::signbit(v) ? 0xFF : 0x7F;
  const double c = std::clamp(double(v), -448.0, 448.0);
  int best = -1;
  double best_err = 0;
  for (int code = 0; code < 256; ++code) {
    const float d = e4m3_to_float(uint8_t(code));
    if (std::isnan(d)) continue;
    if (std::signbit(d) != std::signbit(v)) continue;  // keeps the sign of zero
    const double err = std::fabs(double(d) - c);
    if (best < 0 || err < best_err || (err == best_err && (code & 1) == 0 && (best & 1) == 1)) {
      best = code;
      best_err = err;
    }
  }
  return uint8_t(best);
}

TEST(E4M3, DecodeFormulaForAll256Codes) {
  int finite = 0;
  for (int code = 0; code < 256; ++code) {
    const float v = e4m3_to_float(uint8_t(code));
    const int exp = (code >> 3) & 0xF, man = code & 7;
    const double sign = (code & 0x80) ? -1 : 1;
    if (exp == 15 && man == 7) {
      EXPECT_TRUE(std::isnan(v)) << code;
      continue;
    }
    ++finite;
    const double expected = exp == 0 ? sign * man * std::ldexp(1.0, -9) : sign * std::ldexp(1.0 + man / 8.0, exp - 7);
    EXPECT_EQ(double(v), expected) << "code " << code;
  }
  EXPECT_EQ(finite, 254);
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0xFE), -448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), 0.001953125f);
  EXPECT_EQ(e4m3_to_float(0x07), 0.013671875f);
  EXPECT_EQ(e4m3_to_float(0x08), 0.015625f);
  EXPECT_TRUE(std::signbit(e4m3_to_float(0x80)));
}

TEST(E4M3, EveryCodeRoundTripsThroughEncode) {
  for (int code = 0; code < 256; ++code) {
    const float v = e4m3_to_float(uint8_t(code));
    const uint8_t back = quantize_e4m3_saturating(v);
    if (std::isnan(v))
      EXPECT_EQ(back & 0x7F, 0x7F) << code;
    else
      EXPECT_EQ(back, code) << code;
  }
}

TEST(E4M3, DecodesExactlyToBf16AndF16) {
  for (int code = 0; code < 256; ++code) {
    const float v = e4m3_to_float(uint8_t(code));
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(e4m3_to_bf16(uint8_t(code)))));
      EXPECT_TRUE(std::isnan(f16_to_float(e4m3_to_f16(uint8_t(code)))));
      continue;
    }
    EXPECT_EQ(bits_of(bf16_to_float(e4m3_to_bf16(uint8_t(code)))), bits_of(v)) << code;
    EXPECT_EQ(bits_of(f16_to_float(e4m3_to_f16(uint8_t(code)))), bits_of(v)) << code;
  }
}

TEST(E4M3, SpecTestVectors) {
  const struct { float in; uint8_t code; } cases[] = {
      {0.0f, 0x00},    {-0.0f, 0x80},    {1.0f, 0x38},      {1.0625f, 0x38},       {1.1875f, 0x3A},
      {0.3f, 0x2A},    {-0.3f, 0xAA},    {240.0f, 0x77},    {248.0f, 0x78},        {448.0f, 0x7E},
      {460.0f, 0x7E},  {1e6f, 0x7E},     {-500.0f, 0xFE},   {0x1p-9f, 0x01},       {0x1p-10f, 0x00},
      {1.5f * 0x1p-10f, 0x01},           {3 * 0x1p-10f, 0x02}, {0.0146484375f, 0x08},
      {std::numeric_limits<float>::infinity(), 0x7E}, {-std::numeric_limits<float>::infinity(), 0xFE},
      {464.0f, 0x7E},  {448.0001f, 0x7E}, {-0x1p-11f, 0x80},
  };
  for (const auto& c : cases) EXPECT_EQ(quantize_e4m3_saturating(c.in), c.code) << c.in;
  EXPECT_EQ(quantize_e4m3_saturating(std::numeric_limits<float>::quiet_NaN()), 0x7F);
  EXPECT_EQ(quantize_e4m3_saturating(-std::numeric_limits<float>::quiet_NaN()), 0xFF);
}

TEST(E4M3, TiesAndBoundariesMatchBruteForce) {
  // Every midpoint between neighbouring codes, and one float ulp either side.
  for (int code = 0; code < 0x7E; ++code) {
    const float lo = e4m3_to_float(uint8_t(code)), hi = e4m3_to_float(uint8_t(code + 1));
    const float mid = (lo + hi) / 2;  // exact in float
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), lo, hi}) {
      EXPECT_EQ(quantize_e4m3_saturating(v), nearest_e4m3_brute_force(v)) << v;
      EXPECT_EQ(quantize_e4m3_saturating(-v), nearest_e4m3_brute_force(-v)) << -v;
    }
  }
}

TEST(E4M3, GoldenEncoderVectors) {
  auto file = SafetensorsFile::open(test::golden_path("fp8/e4m3_vectors.safetensors"));
  const auto& table = file->get("decode_table");
  const auto& all_codes = file->get("all_codes");
  ASSERT_EQ(table.numel(), 256);
  for (int i = 0; i < 256; ++i) {
    const uint8_t code = all_codes.as<uint8_t>()[i];
    const float want = table.as<float>()[i];
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(e4m3_to_float(code)));
    else
      EXPECT_EQ(bits_of(e4m3_to_float(code)), bits_of(want)) << i;
  }
  const auto& inputs = file->get("encode_inputs");
  const auto& codes = file->get("encode_codes");
  ASSERT_EQ(inputs.numel(), codes.numel());
  ASSERT_GT(inputs.numel(), 5000);
  int mismatches = 0;
  for (int64_t i = 0; i < inputs.numel(); ++i)
    if (quantize_e4m3_saturating(inputs.as<float>()[i]) != codes.as<uint8_t>()[i]) ++mismatches;
  EXPECT_EQ(mismatches, 0);
}

TEST(BF16, RoundToNearestEven) {
  EXPECT_EQ(float_to_bf16_rne(1.0f), 0x3F80);
  // 1 + 2^-8 is exactly half way between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(float_to_bf16_rne(1.0f + 0x1p-8f), 0x3F80);
  // 1 + 3*2^-8 is half way between 1+2^-7 (odd) and 1+2^-6: rounds up to even.
  EXPECT_EQ(float_to_bf16_rne(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(float_to_bf16_rne(std::nextafter(1.0f + 0x1p-8f, 2.0f)), 0x3F81);
  EXPECT_EQ(float_to_bf16_rne(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16_rne(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(float_to_bf16_rne(3.4e38f), 0x7F80);  // rounds past the largest finite
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16_rne(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the low bits must not become infinity.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16_rne(std::bit_cast<float>(0x7F800001u)))));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_float(uint16_t(h));
    if (!std::isnan(f)) EXPECT_EQ(float_to_bf16_rne(f), h);
  }
}

TEST(F16, RoundTripAndRounding) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_float(uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_f16_rne(f), h) << h;
  }
  EXPECT_EQ(float_to_f16_rne(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16_rne(65520.0f), 0x7C00);  // tie at the top rounds to infinity
  EXPECT_EQ(float_to_f16_rne(0x1p-25f), 0x0000);  // half the smallest subnormal: tie to even
  EXPECT_EQ(float_to_f16_rne(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(float_to_f16_rne(1.0f + 0x1p-11f), 0x3C00);
}

TEST(E5M2, DecodeAndEncode) {
  EXPECT_EQ(e5m2_to_float(0x3C), 1.0f);
  EXPECT_EQ(e5m2_to_float(0x7B), 57344.0f);
  EXPECT_TRUE(std::isinf(e5m2_to_float(0x7C)));
  EXPECT_TRUE(std::isnan(e5m2_to_float(0x7F)));
  EXPECT_EQ(e5m2_to_float(0x01), 0x1p-16f);
  for (int code = 0; code < 256; ++code) {
    const float v = e5m2_to_float(uint8_t(code));
    if (std::isnan(v)) continue;
    EXPECT_EQ(float_to_e5m2_rne(v), code) << code;
  }
  EXPECT_EQ(float_to_e5m2_rne(61440.0f), 0x7C);
  EXPECT_EQ(float_to_e5m2_rne(1.125f), 0x3C);  // tie to even (1.0)
  EXPECT_EQ(float_to_e5m2_rne(1.375f), 0x3E);  // tie to even (1.5)
}

}  // namespace
}  // namespace stepmix
