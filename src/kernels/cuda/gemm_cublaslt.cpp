// GEMMs through cuBLASLt: y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias) row-major.
//
// cuBLASLt is column-major, so the row-major product is computed as its
// transpose: yᵀ[N, M] = W · xᵀ, with A = W seen as a K×N column-major matrix
// (ld K) used transposed, B = x as K×M (ld K) used as is, and D = y as N×M
// (ld N). That is the "TN" layout FP8 tensor-core kernels require, and the
// bias (one value per output feature) is per row of D, as cuBLASLt wants it.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <unordered_map>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/gemm_epilogue.hpp"

namespace stepmix::cuda {
namespace {

using detail::require;
using kernels::BiasType;

void check_cublas(cublasStatus_t status, const std::string& operation) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error("cuda", operation + ": " + cublasLtGetStatusName(status) + ": " + cublasLtGetStatusString(status));
}

enum class Operands : uint8_t { BF16, E4M3, F32 };

// The largest power of two (up to 256) dividing the address: cuBLASLt picks
// kernels by alignment, so it is part of a plan's identity.
uint32_t alignment_of(const void* p) {
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

std::string describe(const PlanKey& k) {
  const char* operands = k.operands == Operands::E4M3 ? "W8A8" : k.operands == Operands::F32 ? "F32" : "BF16";
  return std::string(operands) + " M=" + std::to_string(k.M) +
         " N=" + std::to_string(k.N) + " K=" + std::to_string(k.K) +
         (k.ld_w ? " ldw=" + std::to_string(k.ld_w) : std::string()) + (k.f32_output ? " float32 output" : "") +
         (k.bias_bf16 ? " bf16 bias" : "");
}

// Descriptors and the chosen algorithm of one key. Pointers (bias, scales)
// are set per call on the descriptor.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

template <class T>
void set_desc(const Plan& plan, cublasLtMatmulDescAttributes_t attribute, const T& value, const std::string& what) {
  check_cublas(cublasLtMatmulDescSetAttribute(plan.desc, attribute, &value, sizeof value),
               "cublasLtMatmulDescSetAttribute(" + what + ")");
}

struct Pointers {
  const void* x;
  const void* w;
  void* y;
  const void* bias;  // bf16 epilogue bias or null
  const float* x_scale;
  const float* w_scale;
};

}  // namespace

struct GemmRunner::Impl {
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  DeviceBuffer f32_scratch;  // [rows, N] float32 partial outputs of the float32-bias path
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;

  ~Impl() {
    if (handle) cublasLtDestroy(handle);
  }

  Plan& plan_for(const PlanKey& key, const Pointers& p) {
    auto found = plans.find(key);
    if (found != plans.end()) return *found->second;
    const std::string what = describe(key);
    auto plan = std::make_unique<Plan>();
    const cudaDataType_t operand = key.operands == Operands::E4M3 ? CUDA_R_8F_E4M3
                                   : key.operands == Operands::F32  ? CUDA_R_32F
                                                                    : CUDA_R_16BF;
    const cudaDataType_t output = key.f32_output ? CUDA_R_32F : CUDA_R_16BF;
    check_cublas(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                 "cublasLtMatmulDescCreate (" + what + ")");
    set_desc(*plan, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(CUBLAS_OP_T), "TRANSA");
    set_desc(*plan, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(CUBLAS_OP_N), "TRANSB");
    if (key.bias_bf16) {
      set_desc(*plan, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_BIAS), "EPILOGUE");
      set_desc(*plan, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(CUDA_R_16BF), "BIAS_DATA_TYPE");
    }
    check_cublas(cublasLtMatrixLayoutCreate(&plan->a, operand, uint64_t(key.K), uint64_t(key.N),
                                            key.ld_w ? key.ld_w : key.K),
                 "cublasLtMatrixLayoutCreate(W, " + what + ")");
    check_cublas(cublasLtMatrixLayoutCreate(&plan->b, operand, uint64_t(key.K), uint64_t(key.M), key.K),
                 "cublasLtMatrixLayoutCreate(x, " + what + ")");
    check_cublas(cublasLtMatrixLayoutCreate(&plan->d, output, uint64_t(key.N), uint64_t(key.M), key.N),
                 "cublasLtMatrixLayoutCreate(y, " + what + ")");
    set_pointers(*plan, key, p);

    cublasLtMatmulPreference_t preference = nullptr;
    check_cublas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    struct PreferenceGuard {
      cublasLtMatmulPreference_t p;
      ~PreferenceGuard() { cublasLtMatmulPreferenceDestroy(p); }
    } guard{preference};
    const uint64_t workspace_bytes = workspace.bytes();
    check_cublas(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace_bytes, sizeof workspace_bytes),
                 "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_w},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_x},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_y},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_y}};
    for (const auto& [attribute, bytes] : alignments)
      check_cublas(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof bytes),
                   "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");
    // Split-K partial sums stay float32: the in-place and output-type
    // schemes would add them in the (bf16) output type.
    const uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    check_cublas(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                      &reductions, sizeof reductions),
                 "cublasLtMatmulPreferenceSetAttribute(REDUCTION_SCHEME_MASK)");

    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    check_cublas(cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->d, plan->d, preference, 1,
                                                &result, &returned),
                 "cublasLtMatmulAlgoGetHeuristic (" + what + ")");
    if (returned == 0)
      throw Error("cuda", "cublasLtMatmulAlgoGetHeuristic (" + what +
                              "): CUBLAS_STATUS_NOT_SUPPORTED: no cuBLASLt algorithm for this shape and alignment");
    plan->algo = result.algo;
    return *plans.emplace(key, std::move(plan)).first->second;
  }

  static void set_pointers(const Plan& plan, const PlanKey& key, const Pointers& p) {
    if (key.bias_bf16) set_desc(plan, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias, "BIAS_POINTER");
    if (key.operands == Operands::E4M3) {
      set_desc(plan, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(p.w_scale), "A_SCALE_POINTER");
      set_desc(plan, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(p.x_scale), "B_SCALE_POINTER");
    }
  }

  void matmul(const PlanKey& key, const Pointers& p, StreamHandle stream, float alpha = 1.0f) {
    Plan& plan = plan_for(key, p);
    set_pointers(plan, key, p);
    const float beta = 0.0f;
    check_cublas(cublasLtMatmul(handle, plan.desc, &alpha, p.w, plan.a, p.x, plan.b, &beta, p.y, plan.d, p.y, plan.d,
                                &plan.algo, workspace.data(), workspace.bytes(), stream),
                 "cublasLtMatmul (" + describe(key) + ")");
  }

  // float32 y = alpha · x · Wᵀ, no bias (the VAE's products); W's rows
  // ld_w apart (0: K).
  void run_f32_output(Operands operands, const void* x, const void* w, int64_t M, int64_t N, int64_t K, float alpha,
                      float* y, StreamHandle stream, int64_t ld_w = 0) {
    const PlanKey key{operands, true, false, M, N, K, alignment_of(x), alignment_of(w), alignment_of(y), 0,
                      ld_w == K ? 0 : ld_w};
    matmul(key, {x, w, y, nullptr, nullptr, nullptr}, stream, alpha);
  }

  // The product with a bias of type `bias.type`; x and w are `operands`.
  void run(Operands operands, const void* x, const void* w, int64_t M, int64_t N, int64_t K, const float* x_scale,
           const float* w_scale, GemmBias bias, uint16_t* y, StreamHandle stream) {
    const std::size_t operand_bytes = operands == Operands::E4M3 ? 1 : 2;
    if (bias.type != BiasType::F32) {
      const bool bf16_bias = bias.type == BiasType::BF16;
      const PlanKey key{operands,         false,           bf16_bias,    M, N, K, alignment_of(x), alignment_of(w),
                        alignment_of(y), bf16_bias ? alignment_of(bias.data) : 0};
      matmul(key, {x, w, y, bias.data, x_scale, w_scale}, stream);
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
      matmul(key, {xm, w, f32_scratch.data(), nullptr, x_scale, w_scale}, stream);
      detail::add_bias_round_bf16(f32_scratch.as<float>(), static_cast<const float*>(bias.data), rows, N,
                                  y + std::size_t(m0) * std::size_t(N), stream);
    }
  }
};

GemmRunner::GemmRunner(std::size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
  // The workspace first: without a usable device its cudaMalloc says why,
  // where cublasLtCreate would only say NOT_INITIALIZED (and leak).
  impl_->workspace = DeviceBuffer(workspace_bytes);
  check_cublas(cublasLtCreate(&impl_->handle), "cublasLtCreate");
}

GemmRunner::~GemmRunner() = default;
GemmRunner::GemmRunner(GemmRunner&&) noexcept = default;
GemmRunner& GemmRunner::operator=(GemmRunner&&) noexcept = default;

std::size_t GemmRunner::cached_plans() const { return impl_->plans.size(); }

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
