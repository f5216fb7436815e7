// Kernels behind stepmix::Linear: activation quantization to E4M3, weight
// dequantization, and one GEMM entry point y[M,N] = x[M,K] · W[N,K]ᵀ whose
// operands and arithmetic are described by GemmArgs.
//
// The variants (scalar reference, AVX-512, AMX) fill the linear family of
// their KernelSet (kernel_set.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace stepmix::kernels {

// How the two GEMM operands are multiplied and summed.
//  F32:  a and b widened to float32, float32 sums; ref rounds each product,
//        the AVX-512 variants fuse it (FMA), so they agree within float32
//        rounding.
//  BF16: a and b are (exactly representable as) bf16, so every product is
//        exact in float32; float32 sums. This is what vdpbf16ps computes.
enum class GemmArithmetic { F32, BF16 };

// Element type of the activation operand A [M, K] (row-major, row stride K).
enum class ActivationOperand {
  F32,       // float
  BF16,      // uint16_t bf16 bits
  E4M3Codes  // uint8_t E4M3 codes (W8A8: already quantized), decoded exactly
};

// Element type of the weight operand W [N, K] (row-major, row stride K).
enum class WeightOperand {
  F32,                   // float
  BF16,                  // uint16_t bf16 bits
  E4M3,                  // uint8_t codes, decoded exactly (W8A8)
  E4M3TimesScaleF32,     // float32(decode(code) · weight_scale) (W8A16, FP32 activations)
  E4M3TimesScaleBF16     // bf16(float32(decode(code) · weight_scale)) (W8A16, BF16 activations)
};

enum class OutputType { F32, BF16 };
enum class BiasType { None, F32, BF16 };

struct GemmArgs {
  int64_t M = 0, N = 0, K = 0;
  GemmArithmetic arithmetic = GemmArithmetic::F32;
  ActivationOperand a_type = ActivationOperand::F32;
  const void* a = nullptr;  // [M, K]
  WeightOperand w_type = WeightOperand::F32;
  const void* w = nullptr;  // [N, K]
  float weight_scale = 1.0f;  // used by the E4M3TimesScale* operands
  // Epilogue, per output element: y = float32(acc · alpha) + bias (two
  // roundings, never fused, so every variant rounds identically), then
  // converted to the output type (bf16: round to nearest even).
  float alpha = 1.0f;
  BiasType bias_type = BiasType::None;
  const void* bias = nullptr;  // [N]
  OutputType y_type = OutputType::F32;
  void* y = nullptr;  // [M, N]
};

// The reference variant's functions, also used directly by other variants for
// cases they do not specialise.
namespace ref {
void quantize_e4m3_f32(const float* x, int64_t count, float input_scale, uint8_t* codes);
void quantize_e4m3_bf16(const uint16_t* x, int64_t count, float input_scale, uint8_t* codes);
void dequantize_e4m3_to_bf16(const uint8_t* codes, int64_t count, float scale, uint16_t* out);
void gemm(const GemmArgs& args);
}  // namespace ref

}  // namespace stepmix::kernels
