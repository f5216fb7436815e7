// Every variant's float32 attention (kernel_set.hpp registry) against the
// scalar two-pass oracle and a float64 evaluation, on ragged sizes (rows that
// are not multiples of the block sizes, GQA groups 1..4, causal and full).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attention_test_util.hpp"
#include "core/thread_pool.hpp"
#include "kernels/kernel_set.hpp"
#include "stepmix/error.hpp"

namespace stepmix::test {
namespace {

using kernels::KernelSet;

class AttentionKernels : public ::testing::TestWithParam<AttentionProblem> {};

TEST_P(AttentionKernels, EveryVariantAgreesWithReferenceAndFloat64) {
  const AttentionProblem p = GetParam();
  // Scale 2 gives peaked softmaxes, exercising the running-max rescale.
  const auto q = random_values(p.q_rows * p.q_heads * p.head_dim, 11, 2.0f);
  const auto k = random_values(p.kv_rows * p.kv_heads * p.head_dim, 12, 2.0f);
  const auto v = random_values(p.kv_rows * p.kv_heads * p.head_dim, 13, 1.0f);
  std::vector<float> reference(q.size());
  kernels::ref::attention_reference(p, q.data(), k.data(), v.data(), reference.data());
  const std::vector<double> exact = attention_float64(p, q, k, v);
  std::vector<std::pair<std::string, std::vector<float>>> results{{"oracle", reference}};
  for (const KernelSet& variant : kernels::kernel_variants()) {
    if (!variant.attention.supported()) continue;
    std::vector<float> out(q.size());
    variant.attention.f32(p, q.data(), k.data(), v.data(), out.data());
    results.emplace_back(variant.name, std::move(out));
  }
  std::vector<float> dispatched(q.size());
  kernels::attention(p, q.data(), k.data(), v.data(), dispatched.data());
  results.emplace_back("dispatched", std::move(dispatched));
  for (const auto& [name, result] : results) {
    double worst = 0;
    for (std::size_t i = 0; i < q.size(); ++i) {
      worst = std::max(worst, std::fabs(result[i] - exact[i]));
      ASSERT_NEAR(result[i], reference[i], 2e-5) << name << " element " << i;
    }
    // Outputs are convex combinations of values of magnitude ~1..4.
    EXPECT_LT(worst, 1e-5) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(RaggedShapes, AttentionKernels,
                         ::testing::Values(AttentionProblem{1, 1, 1, 1, 16, true}, AttentionProblem{5, 5, 4, 2, 16, true},
                                           AttentionProblem{17, 17, 4, 2, 16, true}, AttentionProblem{33, 33, 8, 2, 24, true},
                                           AttentionProblem{70, 70, 4, 1, 16, true}, AttentionProblem{8, 13, 4, 2, 16, false},
                                           AttentionProblem{17, 83, 4, 4, 16, false}, AttentionProblem{40, 131, 6, 2, 32, false},
                                           AttentionProblem{3, 200, 8, 2, 128, false}, AttentionProblem{65, 65, 2, 2, 8, false},
                                           AttentionProblem{130, 130, 4, 2, 40, true}, AttentionProblem{9, 300, 2, 1, 256, false},
                                           // head_dim a multiple of 64: the packed kernels (several
                                           // tasks and key blocks, causal, padded groups, G = 3)
                                           AttentionProblem{70, 70, 4, 2, 64, true},
                                           AttentionProblem{130, 130, 8, 2, 128, true},
                                           AttentionProblem{40, 131, 8, 2, 128, false},
                                           AttentionProblem{19, 64, 6, 2, 192, false}));

TEST(AttentionDeterminism, EveryVariantGivesTheSameBitsOnOneThreadAndOnThePool) {
  const AttentionProblem p{150, 214, 8, 2, 128, false};
  const auto q = random_values(p.q_rows * p.q_heads * p.head_dim, 31, 2.0f);
  const auto k = random_values(p.kv_rows * p.kv_heads * p.head_dim, 32, 2.0f);
  const auto v = random_values(p.kv_rows * p.kv_heads * p.head_dim, 33, 1.0f);
  for (const KernelSet& variant : kernels::kernel_variants()) {
    if (!variant.attention.supported()) continue;
    std::vector<float> pooled(q.size()), single(q.size());
    variant.attention.f32(p, q.data(), k.data(), v.data(), pooled.data());
    // Inside a task of another pool, the global pool runs everything inline.
    ThreadPool outer(2);
    outer.parallel_for(2, [&](int64_t task) {
      if (task == 0) variant.attention.f32(p, q.data(), k.data(), v.data(), single.data());
    });
    EXPECT_EQ(pooled, single) << variant.name;
  }
}

TEST(AttentionProblemCheck, EveryVariantRejectsUngroupedHeadsAndImpossibleCausalShapes) {
  std::vector<float> buffer(1024);
  const float* x = buffer.data();
  EXPECT_THROW(kernels::ref::attention_reference({5, 4, 2, 2, 8, true}, x, x, x, buffer.data()), Error);
  for (const KernelSet& variant : kernels::kernel_variants()) {
    if (!variant.attention.supported()) continue;
    EXPECT_THROW(variant.attention.f32({4, 4, 3, 2, 8, false}, x, x, x, buffer.data()), Error) << variant.name;
    EXPECT_THROW(variant.attention.f32({5, 4, 2, 2, 8, true}, x, x, x, buffer.data()), Error) << variant.name;
    EXPECT_THROW(variant.attention.f32({1, 0, 2, 2, 8, false}, x, x, x, buffer.data()), Error) << variant.name;
  }
}

}  // namespace
}  // namespace stepmix::test
