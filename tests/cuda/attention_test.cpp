// CUDA attention: the plain reference kernel against the CPU reference
// (attention_bf16_reference), and both flash variants against the reference
// kernel and float64, on ragged sizes, GQA, causal (understanding stream) and
// non-causal over [understanding; generation] keys (generation stream).
//
// Bounds. The reference kernel performs the CPU reference's operations in
// its order; only exp can differ (float64 rounded to float32 against glibc's
// expf, which agree but for rare last-bit cases), so at least 99% of outputs
// are identical and none is more than one bf16 step away. The flash kernel
// rounds each softmax weight to bf16 (relative error <= 2^-9), sums in
// another order and rounds its output once: as for the CPU's AVX-512 kernel
// (tests/kernels/attention_bf16_test.cpp) we allow 2^-7·max|v| against the
// reference and float64, and 2^-10·max|v| for the mean error (the weight
// roundings are unbiased).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error_of.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/attention.hpp"
#include "kernels/attention_test_util.hpp"

namespace stepmix::test {
namespace {

struct Case {
  int64_t q_rows, kv_rows, q_heads, kv_heads, head_dim;
  bool causal;
};

struct Operands {
  std::vector<uint16_t> q, k, v;
  double max_v = 0;
};

Operands make_operands(const AttentionProblem& p) {
  Operands o;
  // Scale 2 on q and k: peaked softmaxes, so the running max moves.
  o.q = normal_bf16(size_t(p.q_rows * p.q_heads * p.head_dim), 21, 2.0f);
  o.k = normal_bf16(size_t(p.kv_rows * p.kv_heads * p.head_dim), 22, 2.0f);
  o.v = normal_bf16(size_t(p.kv_rows * p.kv_heads * p.head_dim), 23, 1.0f);
  for (uint16_t x : o.v) o.max_v = std::max(o.max_v, double(std::fabs(bf16_to_float(x))));
  return o;
}

std::vector<float> widened(const std::vector<uint16_t>& x) {
  std::vector<float> out;
  for (uint16_t b : x) out.push_back(bf16_to_float(b));
  return out;
}

// Runs `kernel` on the device and returns its output.
template <class Kernel>
std::vector<uint16_t> run_on_device(const AttentionProblem& p, const Operands& o, Kernel kernel) {
  cuda::DeviceBuffer q = to_device(o.q), k = to_device(o.k), v = to_device(o.v);
  cuda::DeviceBuffer out = poisoned<uint16_t>(o.q.size());
  kernel(p, q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(), out.as<uint16_t>());
  return to_host<uint16_t>(out, o.q.size());
}

class CudaAttention : public CudaTest, public ::testing::WithParamInterface<Case> {
 protected:
  AttentionProblem problem() const {
    const Case c = GetParam();
    return {c.q_rows, c.kv_rows, c.q_heads, c.kv_heads, c.head_dim, c.causal};
  }
};

std::vector<uint16_t> reference_kernel(const AttentionProblem& p, const Operands& o) {
  return run_on_device(p, o, [](const AttentionProblem& p, auto q, auto k, auto v, auto out) {
    cuda::attention_reference_bf16(p, q, k, v, out, nullptr);
  });
}

TEST_P(CudaAttention, ReferenceKernelIsTheCpuReference) {
  const AttentionProblem p = problem();
  const Operands o = make_operands(p);
  std::vector<uint16_t> cpu(o.q.size());
  kernels::ref::attention_bf16_reference(p, o.q.data(), o.k.data(), o.v.data(), cpu.data());
  const Bf16Agreement a = compare_bf16(reference_kernel(p, o), cpu);
  EXPECT_LE(a.worst_ulps, 1);
  EXPECT_GE(a.exact_fraction(), 0.99);
}

TEST_P(CudaAttention, FlashVariantsAgreeWithTheReferenceAndFloat64) {
  const AttentionProblem p = problem();
  if (!cuda::attention_flash_supported(p)) GTEST_SKIP() << "flash kernel: head_dim 64 or 128 only";
  const Operands o = make_operands(p);
  const std::vector<uint16_t> reference = reference_kernel(p, o);
  const std::vector<double> exact = attention_float64(p, widened(o.q), widened(o.k), widened(o.v));
  for (cuda::FlashVariant variant : {cuda::FlashVariant::Rows16PerWarp, cuda::FlashVariant::Rows32PerWarp}) {
    const std::vector<uint16_t> flash =
        run_on_device(p, o, [variant](const AttentionProblem& p, auto q, auto k, auto v, auto out) {
          cuda::attention_flash_bf16(p, q, k, v, out, nullptr, variant);
        });
    double worst_reference = 0, worst_exact = 0, mean_exact = 0;
    for (size_t i = 0; i < flash.size(); ++i) {
      const double f = bf16_to_float(flash[i]);
      ASSERT_TRUE(std::isfinite(f)) << i;
      worst_reference = std::max(worst_reference, std::fabs(f - bf16_to_float(reference[i])));
      worst_exact = std::max(worst_exact, std::fabs(f - exact[i]));
      mean_exact += std::fabs(f - exact[i]) / double(flash.size());
    }
    const int rows = variant == cuda::FlashVariant::Rows16PerWarp ? 16 : 32;
    EXPECT_LE(worst_reference, std::ldexp(o.max_v, -7)) << rows << " rows per warp";
    EXPECT_LE(worst_exact, std::ldexp(o.max_v, -7)) << rows << " rows per warp";
    EXPECT_LE(mean_exact, std::ldexp(o.max_v, -10)) << rows << " rows per warp";
  }
}

TEST_P(CudaAttention, DispatchUsesFlashWhereSupportedAndTheReferenceElsewhere) {
  const AttentionProblem p = problem();
  const Operands o = make_operands(p);
  const std::vector<uint16_t> chosen = run_on_device(p, o, [](const AttentionProblem& p, auto q, auto k, auto v,
                                                               auto out) { cuda::attention_bf16(p, q, k, v, out, nullptr); });
  if (!cuda::attention_flash_supported(p)) {
    EXPECT_EQ(chosen, reference_kernel(p, o));
    return;
  }
  const std::vector<uint16_t> flash = run_on_device(p, o, [](const AttentionProblem& p, auto q, auto k, auto v,
                                                              auto out) {
    cuda::attention_flash_bf16(p, q, k, v, out, nullptr, cuda::FlashVariant::Auto);
  });
  EXPECT_EQ(chosen, flash);
}

INSTANTIATE_TEST_SUITE_P(
    RaggedShapes, CudaAttention,
    ::testing::Values(Case{1, 1, 1, 1, 64, true}, Case{5, 5, 4, 2, 64, true}, Case{70, 70, 4, 1, 128, true},
                      Case{130, 130, 8, 2, 128, true}, Case{257, 257, 4, 1, 128, true},
                      Case{8, 13, 4, 2, 64, false}, Case{17, 83, 4, 4, 128, false}, Case{40, 131, 8, 2, 128, false},
                      Case{33, 200, 16, 4, 128, false},
                      // generation stream: 200 vision rows over [64 text rows; 200 vision rows]
                      Case{200, 264, 8, 2, 128, false},
                      // the tiny golden model's head sizes (reference kernel only)
                      Case{19, 40, 4, 2, 32, true}, Case{12, 30, 2, 1, 16, false}),
    [](const ::testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      return "q" + std::to_string(c.q_rows) + "_kv" + std::to_string(c.kv_rows) + "_heads" +
             std::to_string(c.q_heads) + "x" + std::to_string(c.kv_heads) + "_d" + std::to_string(c.head_dim) +
             (c.causal ? "_causal" : "");
    });

class CudaAttentionArguments : public CudaTest {};

TEST_F(CudaAttentionArguments, FlashRefusesHeadDimsItHasNoKernelFor) {
  const AttentionProblem p{4, 4, 2, 1, 32, false};
  cuda::DeviceBuffer buffer(4096);
  const std::string error = error_of([&] {
    cuda::attention_flash_bf16(p, buffer.as<uint16_t>(), buffer.as<uint16_t>(), buffer.as<uint16_t>(),
                               buffer.as<uint16_t>(), nullptr);
  });
  EXPECT_TRUE(contains(error, "[cuda] attention_flash_bf16: head_dim must be 64 or 128, got 32"));
}

}  // namespace
}  // namespace stepmix::test
