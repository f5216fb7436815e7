// Linear with BF16 activations, and the weight cache: WeightCache::All must
// give exactly the bits of WeightCache::None in every mode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "linear_test_util.hpp"

namespace stepmix {
namespace {

using test::make_fp8_linear;
using test::random_activations;
using test::to_bf16;

struct Shape { int64_t M, N, K; };
const Shape kShapes[] = {{1, 7, 16}, {3, 33, 48}, {17, 64, 200}, {64, 1, 37}, {40, 130, 530}};

TEST(LinearCache, AllAndNoneAreBitIdentical) {
  for (const Shape& s : kShapes) {
    for (bool bias : {false, true}) {
      auto o = make_fp8_linear("cache", s.N, s.K, uint32_t(s.K + s.N), bias);
      const Linear uncached(o.weights, WeightCache::None), cached(o.weights, WeightCache::All);
      EXPECT_EQ(cached.resident_bytes(), size_t(s.N * s.K * 2));
      const auto xf = random_activations(s.M * s.K, uint32_t(s.M));
      const auto xh = to_bf16(xf);
      for (Precision mode : {Precision::W8A16, Precision::W8A8}) {
        std::vector<uint16_t> yh_none(size_t(s.M * s.N)), yh_all(size_t(s.M * s.N));
        uncached.forward(xh.data(), s.M, yh_none.data(), mode);
        cached.forward(xh.data(), s.M, yh_all.data(), mode);
        EXPECT_EQ(yh_none, yh_all) << "bf16 mode " << int(mode) << " K=" << s.K;
        std::vector<float> yf_none(size_t(s.M * s.N)), yf_all(size_t(s.M * s.N));
        uncached.forward(xf.data(), s.M, yf_none.data(), mode);
        cached.forward(xf.data(), s.M, yf_all.data(), mode);
        EXPECT_EQ(0, std::memcmp(yf_none.data(), yf_all.data(), yf_none.size() * 4)) << "f32 mode " << int(mode);
      }
    }
  }
}

// W8A16Rounding::Diffusers: Ŵ = bf16(bf16(code) · bf16(s_w)). Its W8A16
// bf16 outputs are those of the same layer whose scale is bf16(s_w), cached
// or not; float32 activations and W8A8 (alpha = s_x · s_w) are unchanged.
TEST(LinearBf16, DiffusersRoundingMultipliesByTheBf16Scale) {
  for (const Shape& s : kShapes) {
    auto o = make_fp8_linear("rounding", s.N, s.K, uint32_t(3 * s.K + s.N), true);
    o.weights.weight_scale = 0.0123456f;  // far from a bf16 value: the roundings differ
    LinearWeights rounded_scale = o.weights;
    rounded_scale.weight_scale = bf16_to_float(float_to_bf16_rne(*o.weights.weight_scale));
    ASSERT_NE(*rounded_scale.weight_scale, *o.weights.weight_scale);
    const Linear single(o.weights), expected(rounded_scale);
    const Linear diffusers(o.weights, WeightCache::None, W8A16Rounding::Diffusers);
    const Linear diffusers_cached(o.weights, WeightCache::All, W8A16Rounding::Diffusers);
    EXPECT_EQ(diffusers.w8a16_bf16_scale(), *rounded_scale.weight_scale);
    EXPECT_EQ(diffusers.weight_scale(), *o.weights.weight_scale);
    const auto xf = random_activations(s.M * s.K, uint32_t(s.M + 5));
    const auto xh = to_bf16(xf);
    const auto run_bf16 = [&](const Linear& l, Precision mode) {
      std::vector<uint16_t> y(size_t(s.M * s.N));
      l.forward(xh.data(), s.M, y.data(), mode);
      return y;
    };
    const auto run_f32 = [&](const Linear& l, Precision mode) {
      std::vector<float> y(size_t(s.M * s.N));
      l.forward(xf.data(), s.M, y.data(), mode);
      return y;
    };
    EXPECT_EQ(run_bf16(diffusers, Precision::W8A16), run_bf16(expected, Precision::W8A16)) << "K=" << s.K;
    EXPECT_EQ(run_bf16(diffusers_cached, Precision::W8A16), run_bf16(expected, Precision::W8A16)) << "K=" << s.K;
    EXPECT_EQ(run_bf16(diffusers, Precision::W8A8), run_bf16(single, Precision::W8A8));
    EXPECT_EQ(run_f32(diffusers, Precision::W8A16), run_f32(single, Precision::W8A16));
    if (s.N * s.K >= 1000)  // enough weights for the two roundings to part somewhere
      EXPECT_NE(run_bf16(diffusers, Precision::W8A16), run_bf16(single, Precision::W8A16)) << "K=" << s.K;
  }
}

TEST(LinearBf16, W8A8CodesComeFromWidenedActivations) {
  const Shape s{5, 9, 45};
  auto o = make_fp8_linear("bf16.w8a8", s.N, s.K, 11, true);
  Linear linear(o.weights);
  const auto xh = to_bf16(random_activations(s.M * s.K, 12, 3.0f));
  std::vector<uint8_t> codes;
  linear.set_code_hook([&](const std::string&, uint8_t* c, int64_t rows, int64_t cols) { codes.assign(c, c + rows * cols); });
  std::vector<uint16_t> y(size_t(s.M * s.N));
  linear.forward(xh.data(), s.M, y.data(), Precision::W8A8);
  const float s_x = *o.weights.input_scale, s_w = *o.weights.weight_scale;
  ASSERT_EQ(codes.size(), xh.size());
  for (size_t i = 0; i < xh.size(); ++i) ASSERT_EQ(codes[i], quantize_e4m3_saturating(bf16_to_float(xh[i]) / s_x));
  const auto* w = o.weights.weight.as<uint8_t>();
  const auto* b = o.weights.bias->as<uint16_t>();
  for (int64_t m = 0; m < s.M; ++m)
    for (int64_t n = 0; n < s.N; ++n) {
      double exact = 0, sum_abs = 0;
      for (int64_t k = 0; k < s.K; ++k) {
        const double p = double(e4m3_to_float(codes[m * s.K + k])) * e4m3_to_float(w[n * s.K + k]);
        exact += p;
        sum_abs += std::fabs(p);
      }
      const double want = exact * double(s_x * s_w) + bf16_to_float(b[n]);
      const double tol = 0x1p-8 * std::fabs(want) + double(s.K + 2) * 0x1p-23 * sum_abs * double(s_x * s_w) + 1e-7;
      EXPECT_NEAR(bf16_to_float(y[m * s.N + n]), want, tol) << m << "," << n;
    }
}

// Ŵ = bf16(float32(decode · s_w)), FP32 sums, one bf16 rounding of the output.
TEST(LinearBf16, W8A16WithinOutputRounding) {
  const Shape s{17, 33, 200};
  auto o = make_fp8_linear("bf16.w8a16", s.N, s.K, 13, true);
  Linear linear(o.weights);
  const auto xh = to_bf16(random_activations(s.M * s.K, 14));
  std::vector<uint16_t> y(size_t(s.M * s.N));
  linear.forward(xh.data(), s.M, y.data(), Precision::W8A16);
  const float s_w = *o.weights.weight_scale;
  const auto* w = o.weights.weight.as<uint8_t>();
  const auto* b = o.weights.bias->as<uint16_t>();
  for (int64_t m = 0; m < s.M; ++m)
    for (int64_t n = 0; n < s.N; ++n) {
      double exact = bf16_to_float(b[n]), sum_abs = 0;
      for (int64_t k = 0; k < s.K; ++k) {
        const float w_hat = bf16_to_float(float_to_bf16_rne(e4m3_to_float(w[n * s.K + k]) * s_w));
        const double p = double(bf16_to_float(xh[m * s.K + k])) * w_hat;
        exact += p;
        sum_abs += std::fabs(p);
      }
      const double tol = 0x1p-8 * std::fabs(exact) + double(s.K + 2) * 0x1p-23 * sum_abs + 1e-30;
      EXPECT_NEAR(bf16_to_float(y[m * s.N + n]), exact, tol) << m << "," << n;
    }
}

}  // namespace
}  // namespace stepmix
