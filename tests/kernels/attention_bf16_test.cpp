// Every variant's bf16 attention (kernel_set.hpp registry) against its scalar
// twin (widen, two-pass oracle, round once) and a float64 evaluation. The
// reference variant is the twin's arithmetic up to summation order; the
// AVX-512 one rounds the softmax weights to bf16 before the value product
// (head_dim a multiple of 64), so it agrees within about 2^-8 of max|v|.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attention_test_util.hpp"
#include "core/numerics.hpp"
#include "core/thread_pool.hpp"
#include "kernels/kernel_set.hpp"
#include "stepmix/error.hpp"

namespace stepmix::test {
namespace {

using kernels::KernelSet;

// Seeded normal values rounded to bf16, and their exact float32 widening.
std::vector<uint16_t> random_bf16(int64_t n, uint32_t seed, float scale) {
  std::vector<uint16_t> v;
  for (float x : random_values(n, seed, scale)) v.push_back(float_to_bf16_rne(x));
  return v;
}

std::vector<float> widened(const std::vector<uint16_t>& x) {
  std::vector<float> out;
  for (uint16_t b : x) out.push_back(bf16_to_float(b));
  return out;
}

class AttentionBf16 : public ::testing::TestWithParam<AttentionProblem> {};

TEST_P(AttentionBf16, EveryVariantAgreesWithTheTwinAndFloat64) {
  const AttentionProblem p = GetParam();
  // Scale 2 on q and k gives peaked softmaxes (running-max rescales).
  const auto q = random_bf16(p.q_rows * p.q_heads * p.head_dim, 21, 2.0f);
  const auto k = random_bf16(p.kv_rows * p.kv_heads * p.head_dim, 22, 2.0f);
  const auto v = random_bf16(p.kv_rows * p.kv_heads * p.head_dim, 23, 1.0f);
  std::vector<uint16_t> twin(q.size());
  kernels::ref::attention_bf16_reference(p, q.data(), k.data(), v.data(), twin.data());
  const std::vector<double> exact = attention_float64(p, widened(q), widened(k), widened(v));
  double max_v = 0;
  for (uint16_t x : v) max_v = std::max(max_v, double(std::fabs(bf16_to_float(x))));

  for (const KernelSet& variant : kernels::kernel_variants()) {
    if (!variant.attention.supported()) continue;
    std::vector<uint16_t> out(q.size());
    variant.attention.bf16(p, q.data(), k.data(), v.data(), out.data());
    const bool reference_arithmetic = std::string(variant.name) == "ref";
    double worst_twin = 0, worst_exact = 0, mean_exact = 0;
    for (std::size_t i = 0; i < q.size(); ++i) {
      const double f = bf16_to_float(out[i]);
      worst_twin = std::max(worst_twin, std::fabs(f - bf16_to_float(twin[i])));
      worst_exact = std::max(worst_exact, std::fabs(f - exact[i]));
      mean_exact += std::fabs(f - exact[i]) / double(q.size());
    }
    // The reference variant is the twin's arithmetic up to summation order:
    // at most one bf16 rounding step apart.
    EXPECT_LE(worst_twin, std::ldexp(max_v, reference_arithmetic ? -8 : -7)) << variant.name;
    EXPECT_LE(worst_exact, std::ldexp(max_v, -7)) << variant.name;
    EXPECT_LE(mean_exact, std::ldexp(max_v, -10)) << variant.name;
  }
}

// head_dim 48 and 192 reach the AVX-512 variant's float32 path and its packed
// path with three 64-dim chunks.
INSTANTIATE_TEST_SUITE_P(RaggedShapes, AttentionBf16,
                         ::testing::Values(AttentionProblem{1, 1, 1, 1, 64, true}, AttentionProblem{5, 5, 4, 2, 64, true},
                                           AttentionProblem{70, 70, 4, 1, 128, true}, AttentionProblem{130, 130, 8, 2, 128, true},
                                           AttentionProblem{8, 13, 4, 2, 64, false}, AttentionProblem{17, 83, 4, 4, 128, false},
                                           AttentionProblem{40, 131, 8, 2, 128, false}, AttentionProblem{33, 200, 16, 4, 128, false},
                                           AttentionProblem{3, 300, 2, 1, 256, false}, AttentionProblem{19, 64, 6, 2, 192, false},
                                           AttentionProblem{21, 50, 4, 2, 48, true}, AttentionProblem{6, 77, 4, 1, 32, false}));

TEST(AttentionBf16Determinism, EveryVariantGivesTheSameBitsOnOneThreadAndOnThePool) {
  const AttentionProblem p{150, 214, 8, 2, 128, false};
  const auto q = random_bf16(p.q_rows * p.q_heads * p.head_dim, 31, 2.0f);
  const auto k = random_bf16(p.kv_rows * p.kv_heads * p.head_dim, 32, 2.0f);
  const auto v = random_bf16(p.kv_rows * p.kv_heads * p.head_dim, 33, 1.0f);
  for (const KernelSet& variant : kernels::kernel_variants()) {
    if (!variant.attention.supported()) continue;
    std::vector<uint16_t> pooled(q.size()), single(q.size());
    variant.attention.bf16(p, q.data(), k.data(), v.data(), pooled.data());
    // Inside a task of another pool, the global pool runs everything inline.
    ThreadPool outer(2);
    outer.parallel_for(2, [&](int64_t task) {
      if (task == 0) variant.attention.bf16(p, q.data(), k.data(), v.data(), single.data());
    });
    EXPECT_EQ(pooled, single) << variant.name;
  }
}

TEST(AttentionBf16Check, EveryVariantRejectsUngroupedHeads) {
  std::vector<uint16_t> x(4 * 3 * 64);
  for (const KernelSet& variant : kernels::kernel_variants()) {
    if (!variant.attention.supported()) continue;
    EXPECT_THROW(variant.attention.bf16({4, 4, 3, 2, 64, false}, x.data(), x.data(), x.data(), x.data()), Error)
        << variant.name;
  }
}

}  // namespace
}  // namespace stepmix::test
