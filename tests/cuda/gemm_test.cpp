// The cuBLASLt GEMMs against the CPU reference kernel (kernels::ref::gemm,
// the same GemmArgs arithmetic) and a float64 evaluation.
//
// Bounds, per output element with exact value e and S = Σ_k |x_k·w_k| (both
// scaled as the output): bf16 output rounding moves a value by at most
// 2^-9·|e|, allowed as 2^-8·|e|. BF16 operands: products are exact and
// tensor cores sum in float32, at most K·2^-24·S, allowed as 2^-13·S for
// K <= 1024. FP8 operands: Hopper's FP8 tensor cores keep partial sums
// with about 14 significant bits before cuBLASLt promotes them to float32,
// allowed as 2^-11·S. The CPU reference must meet the same bounds (a check
// of the bounds themselves).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error_of.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/linear_kernels.hpp"

namespace stepmix::test {
namespace {

using kernels::BiasType;

struct Shape {
  int64_t M, N, K;
};

class CudaGemm : public CudaTest, public ::testing::WithParamInterface<Shape> {};

std::vector<uint8_t> codes_of(const std::vector<float>& values, float scale) {
  std::vector<uint8_t> codes(values.size());
  kernels::ref::quantize_e4m3_f32(values.data(), int64_t(values.size()), scale, codes.data());
  return codes;
}

// a[m·K + k], w[n·K + k] as the exact float values the product multiplies.
struct Exact {
  std::vector<double> value, magnitude;  // e and S of the bounds above
};

Exact exact_product(const std::vector<float>& a, const std::vector<float>& w, const Shape& s, double alpha,
                    const std::vector<float>& bias) {
  Exact r;
  r.value.resize(size_t(s.M * s.N));
  r.magnitude.resize(r.value.size());
  for (int64_t m = 0; m < s.M; ++m)
    for (int64_t n = 0; n < s.N; ++n) {
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < s.K; ++k) {
        const double p = double(a[size_t(m * s.K + k)]) * double(w[size_t(n * s.K + k)]);
        sum += p;
        mag += std::fabs(p);
      }
      r.value[size_t(m * s.N + n)] = sum * alpha + (bias.empty() ? 0.0 : bias[size_t(n)]);
      r.magnitude[size_t(m * s.N + n)] = mag * std::fabs(alpha);
    }
  return r;
}

void expect_within(const std::vector<uint16_t>& y, const Exact& e, double sum_bound, const char* who) {
  for (size_t i = 0; i < y.size(); ++i) {
    const double got = bf16_to_float(y[i]);
    const double allowed = std::ldexp(std::fabs(e.value[i]), -8) + sum_bound * e.magnitude[i] + 1e-30;
    ASSERT_LE(std::fabs(got - e.value[i]), allowed) << who << " element " << i << " exact " << e.value[i];
  }
}

std::vector<uint16_t> cpu_gemm(kernels::GemmArgs args, const Shape& s) {
  std::vector<uint16_t> y(size_t(s.M * s.N));
  args.M = s.M, args.N = s.N, args.K = s.K;
  args.arithmetic = kernels::GemmArithmetic::BF16;
  args.y_type = kernels::OutputType::BF16;
  args.y = y.data();
  kernels::ref::gemm(args);
  return y;
}

std::vector<float> widen_all(const std::vector<uint16_t>& v) {
  std::vector<float> out;
  for (uint16_t h : v) out.push_back(bf16_to_float(h));
  return out;
}

std::vector<float> decode_all(const std::vector<uint8_t>& codes, float scale_then_bf16 = 0) {
  std::vector<float> out;
  for (uint8_t c : codes)
    out.push_back(scale_then_bf16 ? bf16_to_float(float_to_bf16_rne(e4m3_to_float(c) * scale_then_bf16))
                                  : e4m3_to_float(c));
  return out;
}

TEST_P(CudaGemm, W8A8MatchesTheCpuReferenceWithinFp8AccumulationBounds) {
  const Shape s = GetParam();
  const float s_x = 0.05f, s_w = 0.003f;
  const auto x_codes = codes_of(normal_floats(size_t(s.M * s.K), 1, 4.0f), s_x);
  const auto w_codes = codes_of(normal_floats(size_t(s.N * s.K), 2, 0.2f), s_w);
  const auto bias_bf16 = normal_bf16(size_t(s.N), 3, 1.0f);
  const std::vector<float> bias = widen_all(bias_bf16);
  const Exact e = exact_product(decode_all(x_codes), decode_all(w_codes), s, double(s_x * s_w), bias);

  kernels::GemmArgs args;
  args.a_type = kernels::ActivationOperand::E4M3Codes, args.a = x_codes.data();
  args.w_type = kernels::WeightOperand::E4M3, args.w = w_codes.data();
  args.alpha = s_x * s_w;
  args.bias_type = BiasType::BF16, args.bias = bias_bf16.data();
  expect_within(cpu_gemm(args, s), e, std::ldexp(1.0, -13), "cpu");

  cuda::GemmRunner runner;
  cuda::DeviceBuffer dx = to_device(x_codes), dw = to_device(w_codes), db = to_device(bias_bf16);
  cuda::DeviceBuffer scales = to_device(std::vector<float>{s_x, s_w});
  cuda::DeviceBuffer dy = poisoned<uint16_t>(size_t(s.M * s.N));
  cuda::gemm_w8a8(runner, dx.as<uint8_t>(), dw.as<uint8_t>(), s.M, s.N, s.K, scales.as<float>(),
                  scales.as<float>() + 1, {BiasType::BF16, db.data()}, dy.as<uint16_t>(), nullptr);
  const auto y = to_host<uint16_t>(dy, size_t(s.M * s.N));
  expect_within(y, e, std::ldexp(1.0, -11), "cuda W8A8");

  // The same call again: same plan, same bits.
  cuda::gemm_w8a8(runner, dx.as<uint8_t>(), dw.as<uint8_t>(), s.M, s.N, s.K, scales.as<float>(),
                  scales.as<float>() + 1, {BiasType::BF16, db.data()}, dy.as<uint16_t>(), nullptr);
  EXPECT_EQ(to_host<uint16_t>(dy, y.size()), y);
  EXPECT_EQ(runner.cached_plans(), 1u);
}

TEST_P(CudaGemm, W8A16TransientAndCachedDecodeAreBitIdenticalAndMatchTheCpu) {
  const Shape s = GetParam();
  const float s_w = 0.0021f;
  const auto x = normal_bf16(size_t(s.M * s.K), 4, 1.0f);
  const auto w_codes = codes_of(normal_floats(size_t(s.N * s.K), 5, 0.1f), s_w);
  const Exact e = exact_product(widen_all(x), decode_all(w_codes, s_w), s, 1.0, {});

  kernels::GemmArgs args;
  args.a_type = kernels::ActivationOperand::BF16, args.a = x.data();
  args.w_type = kernels::WeightOperand::E4M3TimesScaleBF16, args.w = w_codes.data(), args.weight_scale = s_w;
  expect_within(cpu_gemm(args, s), e, std::ldexp(1.0, -13), "cpu");

  cuda::GemmRunner runner;
  cuda::DeviceBuffer dx = to_device(x), dw = to_device(w_codes);
  cuda::DeviceBuffer transient(size_t(s.N * s.K) * 2), cached(size_t(s.N * s.K) * 2);
  cuda::DeviceBuffer y1 = poisoned<uint16_t>(size_t(s.M * s.N)), y2 = poisoned<uint16_t>(size_t(s.M * s.N));
  cuda::gemm_w8a16(runner, dx.as<uint16_t>(), dw.as<uint8_t>(), s_w, s.M, s.N, s.K, {}, transient.as<uint16_t>(),
                   y1.as<uint16_t>(), nullptr);
  // --weight-cache all: decoded once, then the dense product.
  cuda::dequantize_e4m3_to_bf16(dw.as<uint8_t>(), s.N * s.K, s_w, cached.as<uint16_t>(), nullptr);
  cuda::gemm_bf16(runner, dx.as<uint16_t>(), cached.as<uint16_t>(), s.M, s.N, s.K, {}, y2.as<uint16_t>(), nullptr);
  const auto a = to_host<uint16_t>(y1, size_t(s.M * s.N));
  EXPECT_EQ(a, to_host<uint16_t>(y2, a.size()));
  expect_within(a, e, std::ldexp(1.0, -13), "cuda W8A16");
}

TEST_P(CudaGemm, DenseBf16WithEitherBiasTypeMatchesTheCpu) {
  const Shape s = GetParam();
  const auto x = normal_bf16(size_t(s.M * s.K), 6, 1.0f);
  const auto w = normal_bf16(size_t(s.N * s.K), 7, 0.05f);
  const auto bias_bf16 = normal_bf16(size_t(s.N), 8, 0.5f);
  const std::vector<float> bias_f32 = normal_floats(size_t(s.N), 9, 0.5f);  // not bf16-representable
  cuda::GemmRunner runner;
  cuda::DeviceBuffer dx = to_device(x), dw = to_device(w), dbb = to_device(bias_bf16), dbf = to_device(bias_f32);
  for (BiasType type : {BiasType::None, BiasType::BF16, BiasType::F32}) {
    std::vector<float> bias;
    const void* host_bias = nullptr;
    const void* device_bias = nullptr;
    if (type == BiasType::BF16) bias = widen_all(bias_bf16), host_bias = bias_bf16.data(), device_bias = dbb.data();
    if (type == BiasType::F32) bias = bias_f32, host_bias = bias_f32.data(), device_bias = dbf.data();
    const Exact e = exact_product(widen_all(x), widen_all(w), s, 1.0, bias);
    kernels::GemmArgs args;
    args.a_type = kernels::ActivationOperand::BF16, args.a = x.data();
    args.w_type = kernels::WeightOperand::BF16, args.w = w.data();
    args.bias_type = type, args.bias = host_bias;
    expect_within(cpu_gemm(args, s), e, std::ldexp(1.0, -13), "cpu");
    cuda::DeviceBuffer dy = poisoned<uint16_t>(size_t(s.M * s.N));
    cuda::gemm_bf16(runner, dx.as<uint16_t>(), dw.as<uint16_t>(), s.M, s.N, s.K, {type, device_bias},
                    dy.as<uint16_t>(), nullptr);
    expect_within(to_host<uint16_t>(dy, size_t(s.M * s.N)), e, std::ldexp(1.0, -13), "cuda BF16");
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaGemm,
                         ::testing::Values(Shape{1, 64, 64}, Shape{37, 96, 128}, Shape{130, 256, 512},
                                           Shape{64, 1024, 1024}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return "M" + std::to_string(info.param.M) + "_N" + std::to_string(info.param.N) + "_K" +
                                  std::to_string(info.param.K);
                         });

class CudaGemmEdges : public CudaTest {};

TEST_F(CudaGemmEdges, MisalignedBf16OperandsStillComputeTheProduct) {
  const Shape s{9, 24, 40};
  const auto x = normal_bf16(size_t(s.M * s.K) + 1, 10, 1.0f);
  const auto w = normal_bf16(size_t(s.N * s.K), 11, 0.1f);
  const std::vector<uint16_t> x_view(x.begin() + 1, x.end());
  const Exact e = exact_product(widen_all(x_view), widen_all(w), s, 1.0, {});
  cuda::GemmRunner runner;
  cuda::DeviceBuffer dx = to_device(x), dw = to_device(w), dy = poisoned<uint16_t>(size_t(s.M * s.N));
  cuda::gemm_bf16(runner, dx.as<uint16_t>() + 1, dw.as<uint16_t>(), s.M, s.N, s.K, {}, dy.as<uint16_t>(), nullptr);
  expect_within(to_host<uint16_t>(dy, size_t(s.M * s.N)), e, std::ldexp(1.0, -13), "cuda BF16 misaligned");
}

// The VAE's float32-output product, whole and over the last K' columns of a
// wider weight matrix (a causal convolution without its missing frames'
// taps): y = x[M, K'] · W[:, K - K':]ᵀ with W's rows K apart. float32 output,
// so only the float32 sums' bound applies.
TEST_F(CudaGemmEdges, Bf16ToFloatProductTakesAWindowOfTheWeightColumns) {
  const int64_t M = 70, N = 48, K = 3 * 9 * 16;
  const auto w = normal_bf16(size_t(N * K), 12, 0.1f);
  cuda::GemmRunner runner;
  cuda::DeviceBuffer dw = to_device(w);
  for (const int64_t used : {K, K / 3, 2 * K / 3}) {
    const auto x = normal_bf16(size_t(M * used), 13, 1.0f);
    std::vector<float> window(size_t(N * used));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < used; ++k) window[size_t(n * used + k)] = bf16_to_float(w[size_t(n * K + K - used + k)]);
    const Exact e = exact_product(widen_all(x), window, {M, N, used}, 1.0, {});
    cuda::DeviceBuffer dx = to_device(x), dy = poisoned<float>(size_t(M * N));
    cuda::gemm_bf16_to_f32(runner, dx.as<uint16_t>(), dw.as<uint16_t>() + (K - used), M, N, used, dy.as<float>(),
                           nullptr, K);
    const std::vector<float> y = to_host<float>(dy, size_t(M * N));
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_LE(std::fabs(double(y[i]) - e.value[i]), std::ldexp(e.magnitude[i], -13) + 1e-30)
          << "K'=" << used << " element " << i;
  }
  cuda::DeviceBuffer row = poisoned<float>(size_t(N));
  const std::string error = error_of([&] {
    cuda::gemm_bf16_to_f32(runner, dw.as<uint16_t>(), dw.as<uint16_t>(), 1, N, K, row.as<float>(), nullptr, K - 1);
  });
  EXPECT_TRUE(contains(error, "ld_w must be 0 or at least K")) << error;
}

TEST_F(CudaGemmEdges, MisalignedFp8OperandsAreRefusedAndEmptyProductsAreNoOps) {
  cuda::GemmRunner runner;
  cuda::DeviceBuffer codes(64 * 64 + 16), y(64 * 64 * 2), scales = to_device(std::vector<float>{1.0f, 1.0f});
  const std::string error = error_of([&] {
    cuda::gemm_w8a8(runner, codes.as<uint8_t>() + 1, codes.as<uint8_t>(), 64, 64, 64, scales.as<float>(),
                    scales.as<float>(), {}, y.as<uint16_t>(), nullptr);
  });
  EXPECT_TRUE(contains(error, "[cuda] gemm_w8a8: FP8 operands and output must be 16-byte aligned"));
  cuda::gemm_bf16(runner, nullptr, nullptr, 0, 64, 64, {}, nullptr, nullptr);
  EXPECT_EQ(runner.cached_plans(), 0u);
}

}  // namespace
}  // namespace stepmix::test
