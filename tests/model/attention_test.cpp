// The blocked online-softmax kernels (portable, AVX-512 where the CPU has it)
// against the scalar reference, and all of them against a float64 evaluation, on ragged sizes (rows that are not
// multiples of the block sizes, GQA groups 1..4, causal and full).
#include "model/attention.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/attention_ref.hpp"
#include "stepmix/error.hpp"

namespace stepmix::test {
namespace {

std::vector<float> random_values(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// Float64 softmax attention, one query at a time.
std::vector<double> attention_float64(const AttentionProblem& p, const std::vector<float>& q,
                                      const std::vector<float>& k, const std::vector<float>& v) {
  const int64_t D = p.head_dim;
  std::vector<double> out(std::size_t(p.q_rows * p.q_heads * D), 0.0);
  for (int64_t i = 0; i < p.q_rows; ++i)
    for (int64_t h = 0; h < p.q_heads; ++h) {
      const int64_t g = h / p.groups(), visible = p.causal ? i + 1 : p.kv_rows;
      std::vector<double> s(static_cast<std::size_t>(visible));
      double max_s = -INFINITY, sum = 0;
      for (int64_t j = 0; j < visible; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += double(q[std::size_t((i * p.q_heads + h) * D + d)]) * k[std::size_t((j * p.kv_heads + g) * D + d)];
        s[std::size_t(j)] = dot / std::sqrt(double(D));
        max_s = std::max(max_s, s[std::size_t(j)]);
      }
      for (double& x : s) sum += (x = std::exp(x - max_s));
      for (int64_t j = 0; j < visible; ++j)
        for (int64_t d = 0; d < D; ++d)
          out[std::size_t((i * p.q_heads + h) * D + d)] +=
              s[std::size_t(j)] / sum * v[std::size_t((j * p.kv_heads + g) * D + d)];
    }
  return out;
}

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
