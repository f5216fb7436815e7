// The GEMM engine of the CPU build of the CUDA kernels (gemm_engine.hpp): the
// product a cuBLASLt plan computes, on the CPU. Operands widened exactly (E4M3
// codes, bf16, float32), float32 sums, then alpha and the E4M3 scales, the
// bf16 bias, one rounding to the output type: what the GPU tests' bounds
// allow any float32 summation order.
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/numerics.hpp"
#include "kernels/cuda/gemm_engine.hpp"
#include "stepmix/error.hpp"

namespace stepmix::cuda::detail {

bool in_device_memory(const void* p, std::size_t bytes);  // device_on_cpu.cpp

namespace {

void require_device_operand(const void* p, std::size_t bytes, const PlanKey& key, const char* what) {
  if (bytes > 0 && !in_device_memory(p, bytes))
    throw Error("cuda", "cublasLtMatmul (" + describe(key) + "): " + what + " is not device memory");
}

float operand(Operands operands, const void* base, int64_t index) {
  switch (operands) {
    case Operands::E4M3: return e4m3_to_float(static_cast<const uint8_t*>(base)[index]);
    case Operands::BF16: return bf16_to_float(static_cast<const uint16_t*>(base)[index]);
    case Operands::F32: return static_cast<const float*>(base)[index];
  }
  return 0.0f;
}

class CpuEngine final : public GemmEngine {
 public:
  void matmul(const PlanKey& key, const Pointers& p, StreamHandle, float alpha) override {
    plans_.insert(key);
    const int64_t ld_w = key.ld_w ? key.ld_w : key.K;
    const std::size_t operand_bytes = key.operands == Operands::E4M3 ? 1 : key.operands == Operands::BF16 ? 2 : 4;
    require_device_operand(p.x, std::size_t(key.M * key.K) * operand_bytes, key, "x");
    require_device_operand(p.w, std::size_t((key.N - 1) * ld_w + key.K) * operand_bytes, key, "W");
    require_device_operand(p.y, std::size_t(key.M * key.N) * (key.f32_output ? 4 : 2), key, "y");
    if (key.bias_bf16) require_device_operand(p.bias, std::size_t(key.N) * 2, key, "the bias");
    if (key.operands == Operands::E4M3) {
      require_device_operand(p.x_scale, 4, key, "input_scale");
      require_device_operand(p.w_scale, 4, key, "weight_scale");
    }
    float scale = alpha;
    if (key.operands == Operands::E4M3) scale = alpha * (*p.x_scale * *p.w_scale);  // device floats: host memory here
    // Operands widened once; each dot product in 8 interleaved float32 partial
    // sums (cuBLASLt's order is its own too), added pairwise.
    std::vector<float> x(std::size_t(key.M * key.K)), w(std::size_t(key.N * key.K));
    for (int64_t m = 0; m < key.M; ++m)
      for (int64_t k = 0; k < key.K; ++k) x[std::size_t(m * key.K + k)] = operand(key.operands, p.x, m * key.K + k);
    for (int64_t n = 0; n < key.N; ++n)
      for (int64_t k = 0; k < key.K; ++k) w[std::size_t(n * key.K + k)] = operand(key.operands, p.w, n * ld_w + k);
    for (int64_t m = 0; m < key.M; ++m)
      for (int64_t n = 0; n < key.N; ++n) {
        const float* xr = &x[std::size_t(m * key.K)];
        const float* wr = &w[std::size_t(n * key.K)];
        float partial[8] = {};
        int64_t k = 0;
        for (; k + 8 <= key.K; k += 8)
          for (int j = 0; j < 8; ++j) partial[j] += xr[k + j] * wr[k + j];
        for (; k < key.K; ++k) partial[k % 8] += xr[k] * wr[k];
        const float acc = ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
                          ((partial[4] + partial[5]) + (partial[6] + partial[7]));
        float v = acc * scale;
        if (key.bias_bf16) v += bf16_to_float(static_cast<const uint16_t*>(p.bias)[n]);
        if (key.f32_output)
          static_cast<float*>(p.y)[m * key.N + n] = v;
        else
          static_cast<uint16_t*>(p.y)[m * key.N + n] = float_to_bf16_rne(v);
      }
  }
  std::size_t cached_plans() const override { return plans_.size(); }

 private:
  std::unordered_set<PlanKey, PlanKeyHash> plans_;
};

}  // namespace

std::unique_ptr<GemmEngine> make_gemm_engine(std::size_t workspace_bytes) {
  (void)workspace_bytes;
  return std::make_unique<CpuEngine>();
}

}  // namespace stepmix::cuda::detail
