// linear_rows_f32 (the timestep MLP's float32 product, one warp per output;
// like every GPU test, also run on the CPU's SIMT emulator by test_cuda_on_cpu):
// bf16 and float32 weights, no / float32 / bf16 bias, output counts that
// leave part of the last block's warps idle, against float64 within the
// bound of float32 sums of K products (fused lane sums, then 32 added
// pairwise): 2·(K+1)·2^-24·(Σ|x·w| + |b|).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_test_util.hpp"
#include "kernels/cuda/cuda_kernels.hpp"

namespace stepmix::test {
namespace {

class CudaLinearRows : public CudaTest {};

TEST_F(CudaLinearRows, RowsAgreeWithFloat64ForEveryWeightAndBiasType) {
  for (const auto& [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{3, 100, 256}, {1, 13, 37}, {2, 64, 1000}}) {
    const std::vector<float> x = normal_floats(std::size_t(M * K), 81, 0.7f);
    const std::vector<float> w32 = normal_floats(std::size_t(N * K), 82, 0.1f);
    std::vector<uint16_t> w16;
    for (float v : w32) w16.push_back(float_to_bf16_rne(v));
    const std::vector<float> b32 = normal_floats(std::size_t(N), 83, 1.0f);
    std::vector<uint16_t> b16;
    for (float v : b32) b16.push_back(float_to_bf16_rne(v));
    for (bool w_is_bf16 : {true, false}) {
      for (kernels::BiasType bias_type : {kernels::BiasType::None, kernels::BiasType::F32, kernels::BiasType::BF16}) {
        cuda::DeviceBuffer dx = to_device(x), dw = w_is_bf16 ? to_device(w16) : to_device(w32);
        cuda::DeviceBuffer db = bias_type == kernels::BiasType::BF16 ? to_device(b16) : to_device(b32);
        cuda::DeviceBuffer dy = poisoned<float>(std::size_t(M * N));
        const cuda::GemmBias bias{bias_type, bias_type == kernels::BiasType::None ? nullptr : db.as<void>()};
        cuda::linear_rows_f32(dx.as<float>(), dw.as<void>(), w_is_bf16, M, N, K, bias, dy.as<float>(), nullptr);
        const std::vector<float> y = to_host<float>(dy, std::size_t(M * N));
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double exact = 0, magnitude = 0;
            for (int64_t k = 0; k < K; ++k) {
              const double w = w_is_bf16 ? bf16_to_float(w16[std::size_t(n * K + k)]) : w32[std::size_t(n * K + k)];
              exact += double(x[std::size_t(m * K + k)]) * w;
              magnitude += std::fabs(double(x[std::size_t(m * K + k)]) * w);
            }
            const double b = bias_type == kernels::BiasType::F32    ? b32[std::size_t(n)]
                             : bias_type == kernels::BiasType::BF16 ? bf16_to_float(b16[std::size_t(n)])
                                                                    : 0.0;
            exact += b;
            magnitude += std::fabs(b);
            ASSERT_LE(std::fabs(double(y[std::size_t(m * N + n)]) - exact),
                      std::ldexp(2.0 * double(K + 1) * magnitude, -24))
                << "M " << M << " N " << N << " K " << K << " row " << m << " output " << n << " bf16 weights "
                << w_is_bf16 << " bias " << int(bias_type);
          }
      }
    }
  }
}

}  // namespace
}  // namespace stepmix::test
