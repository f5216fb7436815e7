// The blocked online-softmax kernels (portable, AVX-512 where the CPU has it)
// against the scalar reference, and all of them against a float64 evaluation, on ragged sizes (rows that are not
// multiples of the block sizes, GQA groups 1..4, causal and full).
#include "model/attention.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/attention_ref.hpp"
#include "attention_test_util.hpp"
#include "stepmix/error.hpp"

namespace stepmix::test {
namespace {

struct Case {
  int64_t q_rows, kv_rows, q_heads, kv_heads, head_dim;
  bool causal;
};

class AttentionKernels : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionKernels, EveryVariantAgreesWithReferenceAndFloat64) {
  const Case c = GetParam();
  const AttentionProblem p{c.q_rows, c.kv_rows, c.q_heads, c.kv_heads, c.head_dim, c.causal};
  // Scale 2 gives peaked softmaxes, exercising the running-max rescale.
  const auto q = random_values(p.q_rows * p.q_heads * p.head_dim, 11, 2.0f);
  const auto k = random_values(p.kv_rows * p.kv_heads * p.head_dim, 12, 2.0f);
  const auto v = random_values(p.kv_rows * p.kv_heads * p.head_dim, 13, 1.0f);
  std::vector<float> reference(q.size()), portable(q.size()), fast(q.size());
  attention_reference(p, q.data(), k.data(), v.data(), reference.data());
  attention_blocked_portable(p, q.data(), k.data(), v.data(), portable.data());
  attention_blocked(p, q.data(), k.data(), v.data(), fast.data());
  const std::vector<double> exact = attention_float64(p, q, k, v);
  std::vector<std::pair<const char*, const std::vector<float>*>> kernels = {
      {"reference", &reference}, {"portable", &portable}, {"dispatched", &fast}};
  std::vector<float> avx512(q.size());
  if (attention_avx512_supported()) {
    attention_blocked_avx512(p, q.data(), k.data(), v.data(), avx512.data());
    kernels.emplace_back("avx512", &avx512);
  }
  for (const auto& [name, result] : kernels) {
    double worst = 0;
    for (std::size_t i = 0; i < q.size(); ++i) {
      worst = std::max(worst, std::fabs((*result)[i] - exact[i]));
      ASSERT_NEAR((*result)[i], reference[i], 2e-5) << name << " element " << i;
    }
    // Outputs are convex combinations of values of magnitude ~1..4.
    EXPECT_LT(worst, 1e-5) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(RaggedShapes, AttentionKernels,
                         ::testing::Values(Case{1, 1, 1, 1, 16, true}, Case{5, 5, 4, 2, 16, true},
                                           Case{17, 17, 4, 2, 16, true}, Case{33, 33, 8, 2, 24, true},
                                           Case{70, 70, 4, 1, 16, true}, Case{8, 13, 4, 2, 16, false},
                                           Case{17, 83, 4, 4, 16, false}, Case{40, 131, 6, 2, 32, false},
                                           Case{3, 200, 8, 2, 128, false}, Case{65, 65, 2, 2, 8, false},
                                           Case{130, 130, 4, 2, 40, true}, Case{9, 300, 2, 1, 256, false}));

TEST(AttentionProblemCheck, RejectsUngroupedHeadsAndImpossibleCausalShapes) {
  std::vector<float> buffer(1024);
  const float* x = buffer.data();
  EXPECT_THROW(attention_blocked({4, 4, 3, 2, 8, false}, x, x, x, buffer.data()), Error);
  EXPECT_THROW(attention_reference({5, 4, 2, 2, 8, true}, x, x, x, buffer.data()), Error);
  EXPECT_THROW(attention_blocked({1, 0, 2, 2, 8, false}, x, x, x, buffer.data()), Error);
}

}  // namespace
}  // namespace stepmix::test
