// The GEMMs' entry points (cuda_kernels.hpp): argument checks, the W8A16
// decode, and the float32-bias path (float32 products in row chunks, then
// bf16(acc + bias), the CPU's epilogue); the products themselves are the
// engine's (gemm_engine.hpp: cuBLASLt, gemm_cublaslt.cpp).
#include <algorithm>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/gemm_engine.hpp"
#include "kernels/cuda/gemm_epilogue.hpp"

namespace stepmix::cuda {

using detail::Operands;
using detail::PlanKey;
using detail::alignment_of;
using detail::require;
using kernels::BiasType;

struct GemmRunner::Impl {
  std::unique_ptr<detail::GemmEngine> engine;
  DeviceBuffer f32_scratch;  // [rows, N] float32 partial outputs of the float32-bias path

  // float32 y = alpha · x · Wᵀ, no bias (the VAE's products); W's rows
  // ld_w apart (0: K).
  void run_f32_output(Operands operands, const void* x, const void* w, int64_t M, int64_t N, int64_t K, float alpha,
                      float* y, StreamHandle stream, int64_t ld_w = 0) {
    const PlanKey key{operands, true, false, M, N, K, alignment_of(x), alignment_of(w), alignment_of(y), 0,
                      ld_w == K ? 0 : ld_w};
    engine->matmul(key, {x, w, y, nullptr, nullptr, nullptr}, stream, alpha);
  }

  // The product with a bias of type `bias.type`; x and w are `operands`.
  void run(Operands operands, const void* x, const void* w, int64_t M, int64_t N, int64_t K, const float* x_scale,
           const float* w_scale, GemmBias bias, uint16_t* y, StreamHandle stream) {
    const std::size_t operand_bytes = operands == Operands::E4M3 ? 1 : 2;
    if (bias.type != BiasType::F32) {
      const bool bf16_bias = bias.type == BiasType::BF16;
      const PlanKey key{operands,         false,           bf16_bias,    M, N, K, alignment_of(x), alignment_of(w),
                        alignment_of(y), bf16_bias ? alignment_of(bias.data) : 0};
      engine->matmul(key, {x, w, y, bias.data, x_scale, w_scale}, stream, 1.0f);
      return;
    }
    // float32 bias: float32 products in row chunks that fit the scratch
    // (multiples of 16 rows keep x's alignment), then bf16(acc + bias).
    const std::size_t needed = GemmRunner::f32_bias_scratch_bytes(M, N);
    const int64_t chunk = int64_t(needed / (std::size_t(N) * sizeof(float)));
    if (f32_scratch.bytes() < needed) {
      f32_scratch = DeviceBuffer();  // free first: never both at once
      f32_scratch = DeviceBuffer(needed);
    }
    for (int64_t m0 = 0; m0 < M; m0 += chunk) {
      const int64_t rows = std::min(chunk, M - m0);
      const void* xm = static_cast<const uint8_t*>(x) + std::size_t(m0) * std::size_t(K) * operand_bytes;
      const PlanKey key{operands,           true, false, rows, N, K, alignment_of(xm), alignment_of(w),
                        alignment_of(f32_scratch.data()), 0};
      engine->matmul(key, {xm, w, f32_scratch.data(), nullptr, x_scale, w_scale}, stream, 1.0f);
      detail::add_bias_round_bf16(f32_scratch.as<float>(), static_cast<const float*>(bias.data), rows, N,
                                  y + std::size_t(m0) * std::size_t(N), stream);
    }
  }
};

GemmRunner::GemmRunner(std::size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  impl_->engine = detail::make_gemm_engine(workspace_bytes);
}

GemmRunner::~GemmRunner() = default;
GemmRunner::GemmRunner(GemmRunner&&) noexcept = default;
GemmRunner& GemmRunner::operator=(GemmRunner&&) noexcept = default;

std::size_t GemmRunner::cached_plans() const { return impl_->engine->cached_plans(); }

namespace {

void check_gemm(const char* function, int64_t M, int64_t N, int64_t K, const void* x, const void* w, const void* y,
                GemmBias bias) {
  require(M >= 0 && N > 0 && K > 0, function,
          "expected M >= 0, N > 0, K > 0, got M=" + std::to_string(M) + " N=" + std::to_string(N) +
              " K=" + std::to_string(K));
  require(M == 0 || (x && w && y), function, "null device pointer");
  require(bias.type == BiasType::None || bias.data, function, "bias type set but no bias pointer");
}

}  // namespace

void gemm_bf16(GemmRunner& runner, const uint16_t* x, const uint16_t* w, int64_t M, int64_t N, int64_t K,
               GemmBias bias, uint16_t* y, StreamHandle stream) {
  check_gemm("gemm_bf16", M, N, K, x, w, y, bias);
  if (M == 0) return;
  runner.impl().run(Operands::BF16, x, w, M, N, K, nullptr, nullptr, bias, y, stream);
}

void gemm_w8a8(GemmRunner& runner, const uint8_t* x_codes, const uint8_t* w_codes, int64_t M, int64_t N, int64_t K,
               const float* input_scale_device, const float* weight_scale_device, GemmBias bias, uint16_t* y,
               StreamHandle stream) {
  check_gemm("gemm_w8a8", M, N, K, x_codes, w_codes, y, bias);
  require(K % 16 == 0 && N % 8 == 0, "gemm_w8a8",
          "FP8 tensor-core GEMMs need K % 16 == 0 and N % 8 == 0, got N=" + std::to_string(N) +
              " K=" + std::to_string(K));
  require(input_scale_device && weight_scale_device, "gemm_w8a8", "null scale pointer");
  if (M == 0) return;
  require(detail::aligned(x_codes, 16) && detail::aligned(w_codes, 16) && detail::aligned(y, 16), "gemm_w8a8",
          "FP8 operands and output must be 16-byte aligned");
  runner.impl().run(Operands::E4M3, x_codes, w_codes, M, N, K, input_scale_device, weight_scale_device, bias, y,
                    stream);
}

void gemm_w8a16(GemmRunner& runner, const uint16_t* x, const uint8_t* w_codes, float weight_scale, int64_t M,
                int64_t N, int64_t K, GemmBias bias, uint16_t* decoded, uint16_t* y, StreamHandle stream) {
  check_gemm("gemm_w8a16", M, N, K, x, w_codes, y, bias);
  require(decoded != nullptr, "gemm_w8a16", "null decode buffer");
  if (M == 0) return;
  dequantize_e4m3_to_bf16(w_codes, N * K, weight_scale, decoded, stream);
  runner.impl().run(Operands::BF16, x, decoded, M, N, K, nullptr, nullptr, bias, y, stream);
}

void gemm_bf16_to_f32(GemmRunner& runner, const uint16_t* x, const uint16_t* w, int64_t M, int64_t N, int64_t K,
                      float* y, StreamHandle stream, int64_t ld_w) {
  check_gemm("gemm_bf16_to_f32", M, N, K, x, w, y, {});
  require(ld_w == 0 || ld_w >= K, "gemm_bf16_to_f32",
          "ld_w must be 0 or at least K, got ld_w=" + std::to_string(ld_w) + " K=" + std::to_string(K));
  if (M == 0) return;
  runner.impl().run_f32_output(Operands::BF16, x, w, M, N, K, 1.0f, y, stream, ld_w);
}

void gemm_f32(GemmRunner& runner, const float* x, const float* w, int64_t M, int64_t N, int64_t K, float alpha,
              float* y, StreamHandle stream) {
  check_gemm("gemm_f32", M, N, K, x, w, y, {});
  if (M == 0) return;
  runner.impl().run_f32_output(Operands::F32, x, w, M, N, K, alpha, y, stream);
}

}  // namespace stepmix::cuda
