// Shared by the attention tests: seeded random inputs and a float64
// evaluation of softmax attention (the oracle every kernel is held to).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/attention.hpp"

namespace stepmix::test {

inline std::vector<float> random_values(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

// Float64 softmax attention, one query at a time. q: [q_rows, q_heads, D],
// k and v: [kv_rows, kv_heads, D] → [q_rows, q_heads, D].
inline std::vector<double> attention_float64(const AttentionProblem& p, const std::vector<float>& q,
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

}  // namespace stepmix::test
