// The GEMM engine on cuBLASLt: y[M, N] = x[M, K] · W[N, K]ᵀ (+ bias) row-major.
//
// cuBLASLt is column-major, so the row-major product is computed as its
// transpose: yᵀ[N, M] = W · xᵀ, with A = W seen as a K×N column-major matrix
// (ld K) used transposed, B = x as K×M (ld K) used as is, and D = y as N×M
// (ld N). That is the "TN" layout FP8 tensor-core kernels require, and the
// bias (one value per output feature) is per row of D, as cuBLASLt wants it.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <unordered_map>

#include "kernels/cuda/cublaslt_library.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/gemm_engine.hpp"

namespace stepmix::cuda::detail {
namespace {

void check_cublas(const CublasLtLibrary& lt, cublasStatus_t status, const std::string& operation) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error("cuda",
                operation + ": " + lt.cublasLtGetStatusName(status) + ": " + lt.cublasLtGetStatusString(status));
}

// Descriptors and the chosen algorithm of one key. Pointers (bias, scales)
// are set per call on the descriptor.
struct Plan {
  const CublasLtLibrary& lt;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  explicit Plan(const CublasLtLibrary& library) : lt(library) {}
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (d) lt.cublasLtMatrixLayoutDestroy(d);
    if (b) lt.cublasLtMatrixLayoutDestroy(b);
    if (a) lt.cublasLtMatrixLayoutDestroy(a);
    if (desc) lt.cublasLtMatmulDescDestroy(desc);
  }
};

// Runs at every matmul (the pointers): the message is built only on failure.
template <class T>
void set_desc(const Plan& plan, cublasLtMatmulDescAttributes_t attribute, const T& value, const char* what) {
  const cublasStatus_t status = plan.lt.cublasLtMatmulDescSetAttribute(plan.desc, attribute, &value, sizeof value);
  if (status != CUBLAS_STATUS_SUCCESS)
    check_cublas(plan.lt, status, std::string("cublasLtMatmulDescSetAttribute(") + what + ")");
}

class CublasLtEngine final : public GemmEngine {
 public:
  explicit CublasLtEngine(const CublasLtLibrary& library) : lt(library) {}
  const CublasLtLibrary& lt;
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;

  ~CublasLtEngine() override {
    if (handle) lt.cublasLtDestroy(handle);
  }

  Plan& plan_for(const PlanKey& key, const Pointers& p) {
    auto found = plans.find(key);
    if (found != plans.end()) return *found->second;
    const std::string what = describe(key);
    auto plan = std::make_unique<Plan>(lt);
    const cudaDataType_t operand = key.operands == Operands::E4M3  ? CUDA_R_8F_E4M3
                                   : key.operands == Operands::F32 ? CUDA_R_32F
                                                                   : CUDA_R_16BF;
    const cudaDataType_t output = key.f32_output ? CUDA_R_32F : CUDA_R_16BF;
    check_cublas(lt, lt.cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                 "cublasLtMatmulDescCreate (" + what + ")");
    set_desc(*plan, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(CUBLAS_OP_T), "TRANSA");
    set_desc(*plan, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(CUBLAS_OP_N), "TRANSB");
    if (key.bias_bf16) {
      set_desc(*plan, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_BIAS), "EPILOGUE");
      set_desc(*plan, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(CUDA_R_16BF), "BIAS_DATA_TYPE");
    }
    check_cublas(
        lt,
        lt.cublasLtMatrixLayoutCreate(&plan->a, operand, uint64_t(key.K), uint64_t(key.N), key.ld_w ? key.ld_w : key.K),
        "cublasLtMatrixLayoutCreate(W, " + what + ")");
    check_cublas(lt, lt.cublasLtMatrixLayoutCreate(&plan->b, operand, uint64_t(key.K), uint64_t(key.M), key.K),
                 "cublasLtMatrixLayoutCreate(x, " + what + ")");
    check_cublas(lt, lt.cublasLtMatrixLayoutCreate(&plan->d, output, uint64_t(key.N), uint64_t(key.M), key.N),
                 "cublasLtMatrixLayoutCreate(y, " + what + ")");
    set_pointers(*plan, key, p);

    cublasLtMatmulPreference_t preference = nullptr;
    check_cublas(lt, lt.cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    struct PreferenceGuard {
      const CublasLtLibrary& lt;
      cublasLtMatmulPreference_t p;
      ~PreferenceGuard() { lt.cublasLtMatmulPreferenceDestroy(p); }
    } guard{lt, preference};
    const uint64_t workspace_bytes = workspace.bytes();
    check_cublas(lt,
                 lt.cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspace_bytes, sizeof workspace_bytes),
                 "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_w},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_x},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_y},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_y}};
    for (const auto& [attribute, bytes] : alignments)
      check_cublas(lt, lt.cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof bytes),
                   "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");
    // Split-K partial sums stay float32: the in-place and output-type
    // schemes would add them in the (bf16) output type.
    const uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    check_cublas(lt,
                 lt.cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                         &reductions, sizeof reductions),
                 "cublasLtMatmulPreferenceSetAttribute(REDUCTION_SCHEME_MASK)");

    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    const cublasStatus_t searched = lt.cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->d,
                                                                      plan->d, preference, 1, &result, &returned);
    // No algorithm is NOT_SUPPORTED from the call itself, or none returned.
    if (searched != CUBLAS_STATUS_NOT_SUPPORTED)
      check_cublas(lt, searched, "cublasLtMatmulAlgoGetHeuristic (" + what + ")");
    if (searched == CUBLAS_STATUS_NOT_SUPPORTED || returned == 0)
      throw Error("cuda", "cublasLtMatmulAlgoGetHeuristic (" + what +
                              "): CUBLAS_STATUS_NOT_SUPPORTED: no cuBLASLt algorithm for this shape and alignment (" +
                              lt.cublasLtGetStatusString(searched) + ")");
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

  void matmul(const PlanKey& key, const Pointers& p, StreamHandle stream, float alpha) override {
    Plan& plan = plan_for(key, p);
    set_pointers(plan, key, p);
    const float beta = 0.0f;
    const cublasStatus_t status =
        lt.cublasLtMatmul(handle, plan.desc, &alpha, p.w, plan.a, p.x, plan.b, &beta, p.y, plan.d, p.y, plan.d,
                          &plan.algo, workspace.data(), workspace.bytes(), stream);
    if (status != CUBLAS_STATUS_SUCCESS) check_cublas(lt, status, "cublasLtMatmul (" + describe(key) + ")");
  }

  std::size_t cached_plans() const override { return plans.size(); }
};

}  // namespace

std::unique_ptr<GemmEngine> make_gemm_engine(std::size_t workspace_bytes) {
  // The workspace first: without a usable device its cudaMalloc says why,
  // where cublasLtCreate would only say NOT_INITIALIZED (and leak). Then
  // the library, opened at this first use (cublaslt_library.hpp).
  DeviceBuffer workspace(workspace_bytes);
  auto engine = std::make_unique<CublasLtEngine>(cublaslt());
  engine->workspace = std::move(workspace);
  check_cublas(engine->lt, engine->lt.cublasLtCreate(&engine->handle), "cublasLtCreate");
  return engine;
}

}  // namespace stepmix::cuda::detail
