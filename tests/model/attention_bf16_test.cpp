// BF16 attention: the AVX-512 kernel against the scalar twin (widen, float32
// reference, round) and a float64 evaluation, on ragged sizes, GQA, causal.
//
// Bound: the kernel rounds each softmax weight to bf16 (relative error
// <= 2^-9) and its output once more (2^-9), and sums in another order. The
// output is a weighted mean of values, so both roundings move it by at most
// ~2^-9 · max|v| each: we allow 2^-7 · max|v| against the twin (which itself
// sits within 2^-9 · max|v| of float64) and check that the mean error is far
// smaller (the weight roundings are unbiased).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/numerics.hpp"
#include "core/thread_pool.hpp"
#include "model/attention_bf16.hpp"
#include "attention_test_util.hpp"
#include "stepmix/error.hpp"

namespace stepmix::test {
namespace {

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

struct Case {
  int64_t q_rows, kv_rows, q_heads, kv_heads, head_dim;
  bool causal;
};

class AttentionBf16 : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionBf16, KernelsAgreeWithTheTwinAndFloat64) {
  const Case c = GetParam();
  const AttentionProblem p{c.q_rows, c.kv_rows, c.q_heads, c.kv_heads, c.head_dim, c.causal};
  if (!attention_bf16_avx512_supported(p)) GTEST_SKIP() << "no AVX512_BF16 or head_dim unsupported";
  // Scale 2 on q and k gives peaked softmaxes (running-max rescales).
  const auto q = random_bf16(p.q_rows * p.q_heads * p.head_dim, 21, 2.0f);
  const auto k = random_bf16(p.kv_rows * p.kv_heads * p.head_dim, 22, 2.0f);
  const auto v = random_bf16(p.kv_rows * p.kv_heads * p.head_dim, 23, 1.0f);
  std::vector<uint16_t> twin(q.size()), portable(q.size()), fast(q.size());
  attention_bf16_reference(p, q.data(), k.data(), v.data(), twin.data());
  attention_bf16_portable(p, q.data(), k.data(), v.data(), portable.data());
  attention_bf16_avx512(p, q.data(), k.data(), v.data(), fast.data());
  const std::vector<double> exact = attention_float64(p, widened(q), widened(k), widened(v));

  double max_v = 0;
  for (uint16_t x : v) max_v = std::max(max_v, double(std::fabs(bf16_to_float(x))));
  double worst_twin = 0, worst_exact = 0, mean_exact = 0;
  for (std::size_t i = 0; i < q.size(); ++i) {
    const double f = bf16_to_float(fast[i]);
    worst_twin = std::max(worst_twin, std::fabs(f - bf16_to_float(twin[i])));
    worst_exact = std::max(worst_exact, std::fabs(f - exact[i]));
    mean_exact += std::fabs(f - exact[i]) / double(q.size());
    // The portable path is the twin's arithmetic up to summation order.
    ASSERT_NEAR(bf16_to_float(portable[i]), bf16_to_float(twin[i]), std::ldexp(max_v, -8)) << i;
  }
  EXPECT_LE(worst_twin, std::ldexp(max_v, -7));
  EXPECT_LE(worst_exact, std::ldexp(max_v, -7));
  EXPECT_LE(mean_exact, std::ldexp(max_v, -10));
}

INSTANTIATE_TEST_SUITE_P(RaggedShapes, AttentionBf16,
                         ::testing::Values(Case{1, 1, 1, 1, 64, true}, Case{5, 5, 4, 2, 64, true},
                                           Case{70, 70, 4, 1, 128, true}, Case{130, 130, 8, 2, 128, true},
                                           Case{8, 13, 4, 2, 64, false}, Case{17, 83, 4, 4, 128, false},
                                           Case{40, 131, 8, 2, 128, false}, Case{33, 200, 16, 4, 128, false},
                                           Case{3, 300, 2, 1, 256, false}, Case{19, 64, 6, 2, 192, false}));

TEST(AttentionBf16Determinism, SameBitsOnOneThreadAndOnThePool) {
  const AttentionProblem p{150, 214, 8, 2, 128, false};
  if (!attention_bf16_avx512_supported(p)) GTEST_SKIP() << "no AVX512_BF16";
  const auto q = random_bf16(p.q_rows * p.q_heads * p.head_dim, 31, 2.0f);
  const auto k = random_bf16(p.kv_rows * p.kv_heads * p.head_dim, 32, 2.0f);
  const auto v = random_bf16(p.kv_rows * p.kv_heads * p.head_dim, 33, 1.0f);
  std::vector<uint16_t> pooled(q.size()), single(q.size());
  attention_bf16_avx512(p, q.data(), k.data(), v.data(), pooled.data());
  // Inside a task of another pool, the global pool runs everything inline.
  ThreadPool outer(2);
  outer.parallel_for(2, [&](int64_t task) {
    if (task == 0) attention_bf16_avx512(p, q.data(), k.data(), v.data(), single.data());
  });
  EXPECT_EQ(pooled, single);
}

TEST(AttentionBf16Check, RejectsUnsupportedHeadDim) {
  const AttentionProblem p{4, 4, 2, 2, 48, false};
  EXPECT_FALSE(attention_bf16_avx512_supported(p));
  std::vector<uint16_t> x(4 * 2 * 48);
  EXPECT_THROW(attention_bf16_avx512(p, x.data(), x.data(), x.data(), x.data()), Error);
}

}  // namespace
}  // namespace stepmix::test
