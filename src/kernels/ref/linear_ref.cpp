// Scalar reference kernels: the oracle every optimised variant is tested
// against. Plain loops, one element at a time, in the order the arithmetic is
// written in docs/guide.md ("1. The two arithmetics").
#include <vector>

#include "core/numerics.hpp"
#include "kernels/linear_kernels.hpp"

namespace stepmix::kernels::ref {

void quantize_e4m3_f32(const float* x, int64_t count, float input_scale, uint8_t* codes) {
  for (int64_t i = 0; i < count; ++i) codes[i] = quantize_e4m3_saturating(x[i] / input_scale);
}

void quantize_e4m3_bf16(const uint16_t* x, int64_t count, float input_scale, uint8_t* codes) {
  for (int64_t i = 0; i < count; ++i) codes[i] = quantize_e4m3_saturating(bf16_to_float(x[i]) / input_scale);
}

void dequantize_e4m3_to_bf16(const uint8_t* codes, int64_t count, float scale, uint16_t* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = float_to_bf16_rne(e4m3_to_float(codes[i]) * scale);
}

namespace {

float activation_value(const GemmArgs& args, int64_t index) {
  switch (args.a_type) {
    case ActivationOperand::F32: return static_cast<const float*>(args.a)[index];
    case ActivationOperand::BF16: return bf16_to_float(static_cast<const uint16_t*>(args.a)[index]);
    case ActivationOperand::E4M3Codes: return e4m3_to_float(static_cast<const uint8_t*>(args.a)[index]);
  }
  return 0.0f;
}

float weight_value(const GemmArgs& args, int64_t index) {
  switch (args.w_type) {
    case WeightOperand::F32: return static_cast<const float*>(args.w)[index];
    case WeightOperand::BF16: return bf16_to_float(static_cast<const uint16_t*>(args.w)[index]);
    case WeightOperand::E4M3: return e4m3_to_float(static_cast<const uint8_t*>(args.w)[index]);
    case WeightOperand::E4M3TimesScaleF32:
      return e4m3_to_float(static_cast<const uint8_t*>(args.w)[index]) * args.weight_scale;
    case WeightOperand::E4M3TimesScaleBF16:
      return bf16_to_float(
          float_to_bf16_rne(e4m3_to_float(static_cast<const uint8_t*>(args.w)[index]) * args.weight_scale));
  }
  return 0.0f;
}

}  // namespace

// The two arithmetics differ only in whether products can round; with bf16
// operands they cannot, so one loop serves both.
void gemm(const GemmArgs& args) {
  const int64_t M = args.M, N = args.N, K = args.K;
  // Dequantize W once (row n, all k) rather than per (m, n) pair.
  std::vector<float> weight_row(size_t(K > 0 ? K : 1));
  std::vector<float> activation_row(size_t(K > 0 ? K : 1));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) weight_row[size_t(k)] = weight_value(args, n * K + k);
    float bias = 0.0f;
    if (args.bias_type == BiasType::F32) bias = static_cast<const float*>(args.bias)[n];
    if (args.bias_type == BiasType::BF16) bias = bf16_to_float(static_cast<const uint16_t*>(args.bias)[n]);
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t k = 0; k < K; ++k) activation_row[size_t(k)] = activation_value(args, m * K + k);
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        const float product = activation_row[size_t(k)] * weight_row[size_t(k)];
        acc += product;
      }
      float value = acc * args.alpha;
      if (args.bias_type != BiasType::None) value += bias;
      if (args.y_type == OutputType::F32) {
        static_cast<float*>(args.y)[m * N + n] = value;
      } else {
        static_cast<uint16_t*>(args.y)[m * N + n] = float_to_bf16_rne(value);
      }
    }
  }
}

}  // namespace stepmix::kernels::ref
