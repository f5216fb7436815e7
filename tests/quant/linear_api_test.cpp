// Linear: construction checks and the arithmetic of every mode against an
// independent scalar model written from step-policy.md §12 (double sums, so
// the bound only has to cover the layer's own float32 accumulation order).
#include <gtest/gtest.h>

#include <cmath>

#include "linear_test_util.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

using test::make_dense_linear;
using test::make_fp8_linear;
using test::random_activations;

// |y - exact| <= K·2^-23·Σ|terms| covers any float32 summation order.
double accumulation_bound(int64_t K, double sum_abs) { return double(K + 2) * 0x1p-23 * sum_abs + 1e-30; }

float bias_value(const LinearWeights& w, int64_t n) {
  if (!w.bias) return 0.0f;
  return w.bias->dtype == DType::F32 ? w.bias->as<float>()[n] : bf16_to_float(w.bias->as<uint16_t>()[n]);
}

TEST(LinearApi, RejectsBadWeights) {
  auto o = make_fp8_linear("layers.0.mlp.up_proj", 4, 8, 1, false);
  auto missing_scale = o.weights;
  missing_scale.input_scale.reset();
  try {
    Linear bad(missing_scale);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.0.mlp.up_proj"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("input_scale"), std::string::npos) << e.what();
  }
  auto zero_scale = o.weights;
  zero_scale.weight_scale = 0.0f;
  EXPECT_THROW(Linear{zero_scale}, Error);
  auto nan_scale = o.weights;
  nan_scale.weight_scale = std::nanf("");
  EXPECT_THROW(Linear{nan_scale}, Error);
  auto wrong_rank = o.weights;
  wrong_rank.weight.shape = {32};
  EXPECT_THROW(Linear{wrong_rank}, Error);
  auto short_bytes = o.weights;
  short_bytes.weight.nbytes -= 1;
  EXPECT_THROW(Linear{short_bytes}, Error);
  auto wrong_bias = make_fp8_linear("b", 4, 8, 1, true).weights;
  wrong_bias.bias->shape = {5};
  EXPECT_THROW(Linear{wrong_bias}, Error);
  auto dense_with_scale = make_dense_linear("d", DType::BF16, 4, 8, 1, false);
  dense_with_scale.weights.weight_scale = 1.0f;
  EXPECT_THROW(Linear{dense_with_scale.weights}, Error);
}

TEST(LinearApi, Fp8LayerRejectsDenseMode) {
  auto o = make_fp8_linear("l", 4, 8, 2, false);
  Linear linear(o.weights);
  std::vector<float> x(8), y(4);
  EXPECT_THROW(linear.forward(x.data(), 1, y.data(), Precision::BF16), Error);
  EXPECT_TRUE(linear.is_fp8());
  EXPECT_EQ(linear.in_features(), 8);
  EXPECT_EQ(linear.out_features(), 4);
  EXPECT_EQ(linear.resident_bytes(), 0u);
  Linear cached(o.weights, WeightCache::All);
  EXPECT_EQ(cached.resident_bytes(), 4u * 8u * 2u);
}

TEST(LinearApi, W8A16Fp32MatchesSpec) {
  const int64_t M = 5, N = 9, K = 37;
  auto o = make_fp8_linear("w8a16", N, K, 3, true);
  Linear linear(o.weights);
  auto x = random_activations(M * K, 4);
  std::vector<float> y(static_cast<size_t>(M * N));
  linear.forward(x.data(), M, y.data(), Precision::W8A16);
  const float s_w = *o.weights.weight_scale;
  const auto* codes = o.weights.weight.as<uint8_t>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double exact = 0, sum_abs = 0;
      for (int64_t k = 0; k < K; ++k) {
        const float w_deq = e4m3_to_float(codes[n * K + k]) * s_w;  // one float32 rounding
        exact += double(x[m * K + k]) * double(w_deq);
        sum_abs += std::fabs(double(x[m * K + k]) * double(w_deq));
      }
      exact += bias_value(o.weights, n);
      EXPECT_NEAR(y[m * N + n], exact, accumulation_bound(K, sum_abs) + 1e-7 * std::fabs(exact)) << m << "," << n;
    }
}

TEST(LinearApi, W8A8Fp32MatchesSpec) {
  const int64_t M = 4, N = 7, K = 48;
  auto o = make_fp8_linear("w8a8", N, K, 5, true);
  Linear linear(o.weights);
  auto x = random_activations(M * K, 6);
  std::vector<uint8_t> seen_codes;
  linear.set_code_hook([&](const std::string& name, uint8_t* codes, int64_t rows, int64_t cols) {
    EXPECT_EQ(name, "w8a8");
    seen_codes.assign(codes, codes + rows * cols);
  });
  std::vector<float> y(static_cast<size_t>(M * N));
  linear.forward(x.data(), M, y.data(), Precision::W8A8);
  const float s_x = *o.weights.input_scale, s_w = *o.weights.weight_scale;
  ASSERT_EQ(seen_codes.size(), size_t(M * K));
  for (int64_t i = 0; i < M * K; ++i) ASSERT_EQ(seen_codes[i], quantize_e4m3_saturating(x[i] / s_x)) << i;
  const auto* w = o.weights.weight.as<uint8_t>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double exact = 0, sum_abs = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(e4m3_to_float(seen_codes[m * K + k])) * e4m3_to_float(w[n * K + k]);
        exact += p;
        sum_abs += std::fabs(p);
      }
      const float alpha = s_x * s_w;
      const double expected = double(float(exact) * alpha) + bias_value(o.weights, n);
      EXPECT_NEAR(y[m * N + n], expected, accumulation_bound(K, sum_abs) * alpha + 1e-6 * std::fabs(expected));
    }
}

TEST(LinearApi, W8A8HookCanForceCodes) {
  const int64_t M = 2, N = 3, K = 16;
  auto o = make_fp8_linear("forced", N, K, 7, false);
  Linear linear(o.weights);
  auto x = random_activations(M * K, 8);
  linear.set_code_hook([](const std::string&, uint8_t* codes, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows * cols; ++i) codes[i] = 0x38;  // 1.0
  });
  std::vector<float> y(static_cast<size_t>(M * N));
  linear.forward(x.data(), M, y.data(), Precision::W8A8);
  const auto* w = o.weights.weight.as<uint8_t>();
  const float alpha = *o.weights.input_scale * *o.weights.weight_scale;
  for (int64_t n = 0; n < N; ++n) {
    double exact = 0;
    for (int64_t k = 0; k < K; ++k) exact += e4m3_to_float(w[n * K + k]);
    EXPECT_EQ(y[n], float(exact) * alpha);  // sums of E4M3 values this small are exact
    EXPECT_EQ(y[N + n], y[n]);
  }
}

TEST(LinearApi, DenseBf16WeightsWithBf16Activations) {
  const int64_t M = 3, N = 5, K = 19;
  auto o = make_dense_linear("dense", DType::BF16, N, K, 9, true);
  Linear linear(o.weights);
  auto xf = random_activations(M * K, 10);
  std::vector<uint16_t> x(xf.size()), y(static_cast<size_t>(M * N));
  for (size_t i = 0; i < xf.size(); ++i) x[i] = float_to_bf16_rne(xf[i]);
  linear.forward(x.data(), M, y.data(), Precision::W8A8);  // ignored by a dense layer
  const auto* w = o.weights.weight.as<uint16_t>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double exact = 0, sum_abs = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(bf16_to_float(x[m * K + k])) * bf16_to_float(w[n * K + k]);
        exact += p;
        sum_abs += std::fabs(p);
      }
      exact += bias_value(o.weights, n);
      // One bf16 output rounding (2^-9 relative) on top of the sum's error.
      EXPECT_NEAR(bf16_to_float(y[m * N + n]), exact,
                  std::fabs(exact) * 0x1p-8 + accumulation_bound(K, sum_abs) * 1.01);
    }
}

TEST(LinearApi, ZeroRowsIsANoOp) {
  auto o = make_fp8_linear("l", 4, 8, 2, false);
  Linear linear(o.weights);
  linear.forward(static_cast<const float*>(nullptr), 0, static_cast<float*>(nullptr), Precision::W8A8);
}

}  // namespace
}  // namespace stepmix
