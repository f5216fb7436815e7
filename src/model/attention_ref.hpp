// Scaled dot-product attention on the CPU: the problem description and the
// scalar reference every faster kernel is tested against.
//
// Layouts (row-major, float32):
//   q:   [q_rows, q_heads, D]
//   k,v: [kv_rows, kv_heads, D]
//   out: [q_rows, q_heads, D]
// Grouped-query attention: query head h reads KV head h / (q_heads / kv_heads);
// K/V are never repeated in memory. Scale 1/sqrt(D), softmax in float32.
#pragma once

#include <cstdint>

namespace stepmix {

struct AttentionProblem {
  int64_t q_rows = 0;
  int64_t kv_rows = 0;
  int64_t q_heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  // Top-left aligned lower triangle: query i sees keys 0..i.
  bool causal = false;

  int64_t groups() const { return q_heads / kv_heads; }
};

// Throws stepmix::Error when the heads do not group or a causal problem has
// more queries than keys (a query row would see no key).
void check_attention_problem(const AttentionProblem& problem);

// Two passes per query (scores, then softmax-weighted sum), no blocking.
void attention_reference(const AttentionProblem& problem, const float* q, const float* k, const float* v, float* out);

}  // namespace stepmix
