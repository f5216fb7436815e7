// The attention oracles every variant is tested against.
#include "kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/numerics.hpp"
#include "stepmix/error.hpp"

namespace stepmix {

void check_attention_problem(const AttentionProblem& p) {
  if (p.q_heads <= 0 || p.kv_heads <= 0 || p.head_dim <= 0 || p.q_heads % p.kv_heads != 0)
    throw Error("attention", "q_heads " + std::to_string(p.q_heads) + " is not a positive multiple of kv_heads " +
                                 std::to_string(p.kv_heads));
  if (p.q_rows < 0 || p.kv_rows < 0 || (p.q_rows > 0 && p.kv_rows == 0) || (p.causal && p.q_rows > p.kv_rows))
    throw Error("attention", "cannot attend " + std::to_string(p.q_rows) + " query rows to " +
                                 std::to_string(p.kv_rows) + (p.causal ? " causal" : "") + " key rows");
}

namespace kernels::ref {

void attention_reference(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out) {
  check_attention_problem(p);
  const int64_t D = p.head_dim;
  const float scale = 1.0f / std::sqrt(float(D));
  std::vector<float> weights(std::size_t(p.kv_rows));
  for (int64_t i = 0; i < p.q_rows; ++i) {
    const int64_t visible = p.causal ? i + 1 : p.kv_rows;
    for (int64_t h = 0; h < p.q_heads; ++h) {
      const int64_t kv_head = h / p.groups();
      const float* query = q + (i * p.q_heads + h) * D;
      float max_score = -INFINITY;
      for (int64_t j = 0; j < visible; ++j) {
        const float* key = k + (j * p.kv_heads + kv_head) * D;
        float dot = 0.0f;
        for (int64_t d = 0; d < D; ++d) dot += query[d] * key[d];
        weights[std::size_t(j)] = dot * scale;
        max_score = std::max(max_score, weights[std::size_t(j)]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < visible; ++j) {
        weights[std::size_t(j)] = std::exp(weights[std::size_t(j)] - max_score);
        sum += weights[std::size_t(j)];
      }
      float* o = out + (i * p.q_heads + h) * D;
      std::fill(o, o + D, 0.0f);
      for (int64_t j = 0; j < visible; ++j) {
        const float w = weights[std::size_t(j)] / sum;
        const float* value = v + (j * p.kv_heads + kv_head) * D;
        for (int64_t d = 0; d < D; ++d) o[d] += w * value[d];
      }
    }
  }
}

void attention_bf16_reference(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                              uint16_t* out) {
  check_attention_problem(p);
  const std::size_t q_count = std::size_t(p.q_rows * p.q_heads * p.head_dim);
  const std::size_t kv_count = std::size_t(p.kv_rows * p.kv_heads * p.head_dim);
  std::vector<float> qf(q_count), kf(kv_count), vf(kv_count), of(q_count);
  for (std::size_t i = 0; i < q_count; ++i) qf[i] = bf16_to_float(q[i]);
  for (std::size_t i = 0; i < kv_count; ++i) kf[i] = bf16_to_float(k[i]);
  for (std::size_t i = 0; i < kv_count; ++i) vf[i] = bf16_to_float(v[i]);
  attention_reference(p, qf.data(), kf.data(), vf.data(), of.data());
  for (std::size_t i = 0; i < q_count; ++i) out[i] = float_to_bf16_rne(of[i]);
}

}  // namespace kernels::ref
}  // namespace stepmix
