// The rules of cuBLASLt the GEMM engine (src/kernels/cuda/gemm_cublaslt.cpp)
// is written against, asked of the library itself: on a GPU the real
// cuBLASLt (test_cuda), on the CPU the model the CPU build runs the engine
// on (tests/cuda/on_cpu/cublaslt_on_cpu.cpp, test_cuda_on_cpu). The first
// GPU run so also says whether the model, and every CPU run of the engine
// with it, holds:
// - matrices are column-major, D = op(A) · op(B), for each transpose pair;
// - FP8 E4M3 runs in the "TN" format with per-tensor scales from device
//   pointers (D = scaleA · scaleB · A·B) and a bf16 bias added per row of D;
//   on Hopper no algorithm runs it in another format;
// - an attribute set with the wrong size is CUBLAS_STATUS_INVALID_VALUE.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/numerics.hpp"
#include "cuda/cuda_test_util.hpp"
#include "kernels/cuda/cublaslt_library.hpp"

namespace stepmix::test {
namespace {

class CublasLtRules : public CudaTest {
 protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped()) return;
    workspace = cuda::DeviceBuffer(std::size_t(4) << 20);
    lt = &cuda::detail::cublaslt();
    ASSERT_EQ(lt->cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    if (handle) lt->cublasLtDestroy(handle);
  }

  // One product: A and B with their types, shapes as stored (column-major)
  // and transposes; D float32 or bf16, m × n. Returns the status of the
  // first failing call (the heuristic's NOT_SUPPORTED included).
  struct Product {
    cudaDataType_t operands = CUDA_R_16BF, output = CUDA_R_32F;
    int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
    int64_t m = 0, n = 0, k = 0;
    const void *a = nullptr, *b = nullptr, *a_scale = nullptr, *b_scale = nullptr, *bias = nullptr;
    void* d = nullptr;
  };
  cublasStatus_t run(const Product& p) {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulPreference_t preference = nullptr;
    cublasStatus_t s = lt->cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    // Each call only while all before it succeeded.
    auto step = [&](auto call) {
      if (s == CUBLAS_STATUS_SUCCESS) s = call();
    };
    auto set = [&](cublasLtMatmulDescAttributes_t attribute, const auto& value) {
      step([&] { return lt->cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value); });
    };
    set(CUBLASLT_MATMUL_DESC_TRANSA, p.transa);
    set(CUBLASLT_MATMUL_DESC_TRANSB, p.transb);
    if (p.a_scale) {
      set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, p.a_scale);
      set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, p.b_scale);
    }
    if (p.bias) {
      set(CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_BIAS));
      set(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(CUDA_R_16BF));
      set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
    }
    // Stored shapes: op(A) is m × k, op(B) k × n.
    const bool ta = p.transa == CUBLAS_OP_T, tb = p.transb == CUBLAS_OP_T;
    const uint64_t a_rows = ta ? p.k : p.m, a_cols = ta ? p.m : p.k, b_rows = tb ? p.n : p.k, b_cols = tb ? p.k : p.n;
    step([&] { return lt->cublasLtMatrixLayoutCreate(&la, p.operands, a_rows, a_cols, int64_t(a_rows)); });
    step([&] { return lt->cublasLtMatrixLayoutCreate(&lb, p.operands, b_rows, b_cols, int64_t(b_rows)); });
    step([&] { return lt->cublasLtMatrixLayoutCreate(&ld, p.output, p.m, p.n, p.m); });
    step([&] { return lt->cublasLtMatmulPreferenceCreate(&preference); });
    const uint64_t workspace_bytes = workspace.bytes();
    step([&] {
      return lt->cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &workspace_bytes, sizeof workspace_bytes);
    });
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    step([&] {
      return lt->cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, ld, ld, preference, 1, &result, &returned);
    });
    if (s == CUBLAS_STATUS_SUCCESS && returned == 0) s = CUBLAS_STATUS_NOT_SUPPORTED;
    const float alpha = 1.0f, beta = 0.0f;
    step([&] {
      return lt->cublasLtMatmul(handle, desc, &alpha, p.a, la, p.b, lb, &beta, p.d, ld, p.d, ld, &result.algo,
                                workspace.data(), workspace.bytes(), nullptr);
    });
    cuda::synchronize(nullptr);
    if (preference) lt->cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t l : {la, lb, ld})
      if (l) lt->cublasLtMatrixLayoutDestroy(l);
    if (desc) lt->cublasLtMatmulDescDestroy(desc);
    return s;
  }

  const cuda::detail::CublasLtLibrary* lt = nullptr;  // opened as the backend opens it
  cublasLtHandle_t handle = nullptr;
  cuda::DeviceBuffer workspace;
};

TEST_F(CublasLtRules, MatricesAreColumnMajorForEveryTransposePair) {
  const int64_t m = 24, n = 16, k = 32;
  const std::vector<uint16_t> a = normal_bf16(std::size_t(m * k), 1, 1.0f),
                              b = normal_bf16(std::size_t(k * n), 2, 1.0f);
  cuda::DeviceBuffer da = to_device(a), db = to_device(b), dd = poisoned<float>(std::size_t(m * n));
  for (int32_t transa : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (int32_t transb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      Product p;
      p.transa = transa, p.transb = transb, p.m = m, p.n = n, p.k = k;
      p.a = da.data(), p.b = db.data(), p.d = dd.data();
      ASSERT_EQ(run(p), CUBLAS_STATUS_SUCCESS) << "transa " << transa << " transb " << transb;
      const std::vector<float> d = to_host<float>(dd, std::size_t(m * n));
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double want = 0, size = 0;
          for (int64_t q = 0; q < k; ++q) {
            const double x = bf16_to_float(a[std::size_t(transa == CUBLAS_OP_N ? i + q * m : q + i * k)]);
            const double y = bf16_to_float(b[std::size_t(transb == CUBLAS_OP_N ? q + j * k : j + q * n)]);
            want += x * y, size += std::fabs(x * y);
          }
          // float32 sums in the tensor cores' order and rounding: 2^-13 of
          // Σ|x·y|, the bound of the GEMM tests (gemm_test.cpp).
          ASSERT_NEAR(d[std::size_t(i + j * m)], want, std::ldexp(size, -13) + 1e-30)
              << "D(" << i << "," << j << ") transa " << transa << " transb " << transb;
        }
    }
}

TEST_F(CublasLtRules, Fp8RunsInTheTnFormatWithDeviceScalesAndARowBias) {
  const int64_t m = 32, n = 16, k = 64;
  std::vector<uint8_t> a, b;
  for (float x : normal_floats(std::size_t(k * m), 4, 4.0f)) a.push_back(quantize_e4m3_saturating(x));
  for (float x : normal_floats(std::size_t(k * n), 5, 4.0f)) b.push_back(quantize_e4m3_saturating(x));
  const std::vector<uint16_t> bias = normal_bf16(std::size_t(m), 3, 1.0f);
  const float scale_a = 0.0125f, scale_b = 0.5f;
  cuda::DeviceBuffer da = to_device(a), db = to_device(b), dbias = to_device(bias);
  cuda::DeviceBuffer scales = to_device(std::vector<float>{scale_a, scale_b});
  cuda::DeviceBuffer dd = poisoned<uint16_t>(std::size_t(m * n));
  Product p;
  p.operands = CUDA_R_8F_E4M3, p.output = CUDA_R_16BF, p.transa = CUBLAS_OP_T, p.transb = CUBLAS_OP_N;
  p.m = m, p.n = n, p.k = k, p.a = da.data(), p.b = db.data(), p.d = dd.data(), p.bias = dbias.data();
  p.a_scale = scales.as<float>(), p.b_scale = scales.as<float>() + 1;
  ASSERT_EQ(run(p), CUBLAS_STATUS_SUCCESS);
  const std::vector<uint16_t> d = to_host<uint16_t>(dd, std::size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, size = 0;
      for (int64_t q = 0; q < k; ++q) {  // A stored k × m (op(A) = Aᵀ), B k × n
        const double x = e4m3_to_float(a[std::size_t(q + i * k)]), y = e4m3_to_float(b[std::size_t(q + j * k)]);
        sum += x * y, size += std::fabs(x * y);
      }
      const double want = double(scale_a) * scale_b * sum + bf16_to_float(bias[std::size_t(i)]);
      // One bf16 rounding, and partial sums that Hopper's FP8 tensor cores
      // keep to about 14 bits before cuBLASLt promotes them to float32:
      // 2^-11 of Σ|x·y|, as the GEMM tests allow.
      const double bound = std::ldexp(std::fabs(want), -8) + std::ldexp(double(scale_a) * scale_b * size, -11);
      ASSERT_NEAR(bf16_to_float(d[std::size_t(i + j * m)]), want, bound) << "D(" << i << "," << j << ")";
    }
  // Hopper runs FP8 only as TN: no algorithm for A not transposed.
  if (cuda::probe_device(0).compute_major == 9) {
    Product nn = p;
    nn.transa = CUBLAS_OP_N;
    EXPECT_NE(run(nn), CUBLAS_STATUS_SUCCESS);
  }
}

TEST_F(CublasLtRules, AnAttributeOfTheWrongSizeIsAnInvalidValue) {
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(lt->cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const int64_t wide = CUBLAS_OP_T;
  EXPECT_EQ(lt->cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof wide),
            CUBLAS_STATUS_INVALID_VALUE);
  const int32_t op = CUBLAS_OP_T;
  EXPECT_EQ(lt->cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof op),
            CUBLAS_STATUS_SUCCESS);
  lt->cublasLtMatmulDescDestroy(desc);
  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(lt->cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  const uint32_t narrow = 1024;
  EXPECT_EQ(lt->cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &narrow,
                                                     sizeof narrow),
            CUBLAS_STATUS_INVALID_VALUE);
  lt->cublasLtMatmulPreferenceDestroy(preference);
}

}  // namespace
}  // namespace stepmix::test
