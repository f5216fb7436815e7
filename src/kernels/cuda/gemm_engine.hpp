// Private to the GEMMs: what a product is (PlanKey: operands, shape,
// alignments, bias, output type), and the engine that computes it. The
// runner (gemm_runner.cpp: argument checks, the float32-bias path) is
// separate from gemm_cublaslt.cpp's engine, which plans and runs cuBLASLt
// matmuls (in the tests' CPU build of the kernels, tests/cuda/on_cpu/, on
// a model of cuBLASLt).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/cuda/cuda_device.hpp"

namespace stepmix::cuda::detail {

enum class Operands : uint8_t { BF16, E4M3, F32 };

// The largest power of two (up to 256) dividing the address: cuBLASLt picks
// kernels by alignment, so it is part of a plan's identity.
inline uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  uint32_t bytes = 256;
  while (bytes > 1 && a % bytes != 0) bytes /= 2;
  return bytes;
}

struct PlanKey {
  Operands operands;
  bool f32_output;    // D in float32 (the float32-bias path)
  bool bias_bf16;     // bf16 bias in the epilogue
  int64_t M, N, K;
  uint32_t align_x, align_w, align_y, align_bias;
  int64_t ld_w = 0;  // W's row stride when it is a column window of a wider matrix; 0: K
  bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const {
    std::size_t h = std::size_t(k.operands) * 3 + std::size_t(k.f32_output) * 7 + std::size_t(k.bias_bf16) * 11;
    for (uint64_t v : {uint64_t(k.M), uint64_t(k.N), uint64_t(k.K), uint64_t(k.align_x), uint64_t(k.align_w),
                       uint64_t(k.align_y), uint64_t(k.align_bias), uint64_t(k.ld_w)})
      h = h * 1000003u ^ std::size_t(v);
    return h;
  }
};

inline std::string describe(const PlanKey& k) {
  const char* operands = k.operands == Operands::E4M3 ? "W8A8" : k.operands == Operands::F32 ? "F32" : "BF16";
  return std::string(operands) + " M=" + std::to_string(k.M) +
         " N=" + std::to_string(k.N) + " K=" + std::to_string(k.K) +
         (k.ld_w ? " ldw=" + std::to_string(k.ld_w) : std::string()) + (k.f32_output ? " float32 output" : "") +
         (k.bias_bf16 ? " bf16 bias" : "");
}

struct Pointers {
  const void* x;
  const void* w;
  void* y;
  const void* bias;  // bf16 epilogue bias or null
  const float* x_scale;
  const float* w_scale;
};

// The product of one key: y = alpha · x · Wᵀ, times x_scale · w_scale (device
// floats) for E4M3 operands, plus the bf16 bias in the epilogue when the key
// says so, rounded once to the output type. x [M, K], W [N, K] (rows ld_w
// apart when set), y [M, N] row-major.
class GemmEngine {
 public:
  virtual ~GemmEngine() = default;
  virtual void matmul(const PlanKey& key, const Pointers& pointers, StreamHandle stream, float alpha) = 0;
  // Plans made so far (one per distinct key).
  virtual std::size_t cached_plans() const = 0;
};

std::unique_ptr<GemmEngine> make_gemm_engine(std::size_t workspace_bytes);

}  // namespace stepmix::cuda::detail
