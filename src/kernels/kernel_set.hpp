// The kernel layer's one registry: every operation with ISA variants, grouped
// in families, one KernelSet per ISA.
//
// Each family says on its own whether this CPU and OS can run it, so the set
// used at run time is chosen family by family: on a CPU with AVX-512F but no
// AVX512_BF16 the GEMMs run the reference variant while attention and the
// pointwise kernels keep their AVX-512F code. STEPMIX_ISA=<name> forces every
// family of one variant (an error if the CPU cannot run all of them).
//
// The tests iterate over kernel_variants() and check every supported family
// of every variant against the "ref" one; the benchmarks time each of them.
// Adding a variant (or a family to a variant) therefore adds its tests and
// benchmark rows.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/channel_norm_kernels.hpp"
#include "kernels/conv_kernels.hpp"
#include "kernels/linear_kernels.hpp"
#include "kernels/pointwise.hpp"

namespace stepmix::kernels {

// Linears: activation quantization, weight dequantization, the GEMM
// (linear_kernels.hpp says what each computes).
struct LinearFamily {
  bool (*supported)();
  void (*quantize_e4m3_f32)(const float* x, int64_t count, float input_scale, uint8_t* codes);
  void (*quantize_e4m3_bf16)(const uint16_t* x, int64_t count, float input_scale, uint8_t* codes);
  void (*dequantize_e4m3_to_bf16)(const uint8_t* codes, int64_t count, float scale, uint16_t* out);
  // The whole GEMM, multithreaded on the global pool where the variant is.
  void (*gemm)(const GemmArgs& args);
};

// Attention (attention.hpp): whole problems, multithreaded by the variant.
struct AttentionFamily {
  bool (*supported)();
  void (*f32)(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out);
  void (*bf16)(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out);
};

// Row-wise and element-wise pieces between the Linears (pointwise.hpp). Each
// processes a contiguous range on the calling thread; the functions of
// pointwise.hpp split the work over the pool.
struct PointwiseFamily {
  bool (*supported)();
  void (*rms_norm_f32)(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                       float* out);
  void (*rms_norm_bf16)(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                        uint16_t* out);
  void (*head_norm_rotary_f32)(float* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                               float eps, NormKind kind, const float* cos, const float* sin);
  void (*head_norm_rotary_bf16)(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim,
                                const float* norm_weight, float eps, NormKind kind, const float* cos,
                                const float* sin);
  void (*silu_gate_f32)(const float* gate, const float* up, int64_t count, float* out);
  void (*silu_gate_bf16)(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out);
  void (*relu_squared_f32)(float* x, int64_t count);
  void (*relu_squared_bf16)(uint16_t* x, int64_t count);
  void (*add_f32)(float* residual, const float* y, int64_t count);
  void (*add_bf16)(float* residual, const uint16_t* y, int64_t count);
  void (*widen_bf16)(const uint16_t* x, int64_t count, float* out);
  void (*round_bf16)(const float* x, int64_t count, uint16_t* out);
};

// The video VAE's operations on channels-last frames: the causal 3-D
// convolution (conv_kernels.hpp) and the channel RMS norm (+ SiLU) between
// the convolutions (channel_norm_kernels.hpp). Whole problems, multithreaded
// by the variant.
struct ConvolutionFamily {
  bool (*supported)();
  void (*conv3d)(const Conv3dArgs& args);
  void (*channel_rms_norm)(const ChannelNormArgs& args);
};

struct KernelSet {
  const char* name;  // "ref", "avx512", "amx": what STEPMIX_ISA selects
  LinearFamily linear;
  AttentionFamily attention;
  PointwiseFamily pointwise;
  ConvolutionFamily convolution;

  // Every family can run here (what forcing this variant needs).
  bool supported() const {
    return linear.supported() && attention.supported() && pointwise.supported() && convolution.supported();
  }
};

// Every variant compiled into this binary, "ref" first, then in increasing
// order of preference.
std::span<const KernelSet> kernel_variants();
// The variant named `name`; throws stepmix::Error if unknown or if this CPU
// cannot run every one of its families.
const KernelSet& kernel_variant(const std::string& name);

// What runs, chosen once at start-up: with STEPMIX_ISA every family of that
// variant, else per family the most preferred variant this CPU supports.
struct ActiveKernels {
  LinearFamily linear;
  AttentionFamily attention;
  PointwiseFamily pointwise;
  ConvolutionFamily convolution;
  // The variant each family came from, e.g. "amx" / "avx512" / "avx512" / "amx".
  const char* linear_variant;
  const char* attention_variant;
  const char* pointwise_variant;
  const char* convolution_variant;

  // "amx" when one variant provides every family, else
  // "linear=ref attention=avx512 pointwise=avx512 convolution=ref".
  std::string describe() const;
};
const ActiveKernels& active_kernels();

// The rule behind active_kernels(), on any list of variants (preference
// increasing along the list): `forced` (a name; null or empty for none) takes
// every family of that variant, else each family comes from the last
// variant that supports it. Throws stepmix::Error for an unknown or
// unsupported forced name.
ActiveKernels choose_kernels(std::span<const KernelSet> variants, const char* forced);

// The reference variant (scalar oracles and portable blocked code).
const KernelSet& reference_kernels();

// The convolution family the VAE runs: active_kernels().convolution, unless
// a test or benchmark replaced it with override_convolution (the VAE on the
// reference kernels, a counting wrapper). Null restores the start-up choice.
const ConvolutionFamily& active_convolution();
void override_convolution(const ConvolutionFamily* family);

}  // namespace stepmix::kernels
