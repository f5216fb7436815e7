// The reference variant's attention: blocked online softmax in portable C++
// (kernels/attention.hpp). Scratch per thread, reused across tasks.
#include "kernels/attention_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/thread_pool.hpp"
#include "kernels/pointwise.hpp"

namespace stepmix::kernels {
namespace {

constexpr int64_t kQueryRowsPerTask = 16;
constexpr int64_t kKeysPerBlock = 64;

// Scratch of one task, reused across the tasks a thread runs.
struct BlockScratch {
  std::vector<float> keys_transposed;  // [D, kKeysPerBlock]
  std::vector<float> scores;           // [kKeysPerBlock]
  std::vector<float> running_max;      // [queries]
  std::vector<float> running_sum;      // [queries]
  std::vector<float> accumulator;      // [queries, D]
};

// Queries of rows [row_begin, row_end) on the G heads of `kv_head`.
void attend_block(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out,
                  int64_t kv_head, int64_t row_begin, int64_t row_end) {
  thread_local BlockScratch s;
  const int64_t D = p.head_dim, G = p.groups();
  const int64_t queries = (row_end - row_begin) * G;
  const float scale = 1.0f / std::sqrt(float(D));
  s.keys_transposed.resize(std::size_t(D * kKeysPerBlock));
  s.scores.resize(std::size_t(kKeysPerBlock));
  s.running_max.assign(std::size_t(queries), -INFINITY);
  s.running_sum.assign(std::size_t(queries), 0.0f);
  s.accumulator.assign(std::size_t(queries * D), 0.0f);

  // The last query row of a causal block sees keys 0..row_end-1.
  const int64_t key_end = p.causal ? row_end : p.kv_rows;
  for (int64_t key_begin = 0; key_begin < key_end; key_begin += kKeysPerBlock) {
    const int64_t keys = std::min(kKeysPerBlock, key_end - key_begin);
    // [keys, D] → [D, keys]: the score loop then runs over independent keys.
    for (int64_t j = 0; j < keys; ++j) {
      const float* key = k + ((key_begin + j) * p.kv_heads + kv_head) * D;
      for (int64_t d = 0; d < D; ++d) s.keys_transposed[std::size_t(d * kKeysPerBlock + j)] = key[d];
    }
    for (int64_t qi = 0; qi < queries; ++qi) {
      const int64_t row = row_begin + qi / G;
      const int64_t head = kv_head * G + qi % G;
      const int64_t visible = p.causal ? std::min(keys, row + 1 - key_begin) : keys;
      if (visible <= 0) continue;

      const float* query = q + (row * p.q_heads + head) * D;
      float* scores = s.scores.data();
      std::fill(scores, scores + visible, 0.0f);
      for (int64_t d = 0; d < D; ++d) {
        const float qd = query[d];
        const float* kt = s.keys_transposed.data() + d * kKeysPerBlock;
        for (int64_t j = 0; j < visible; ++j) scores[j] += qd * kt[j];
      }
      float block_max = -INFINITY;
      for (int64_t j = 0; j < visible; ++j) {
        scores[j] *= scale;
        block_max = std::max(block_max, scores[j]);
      }

      float& running_max = s.running_max[std::size_t(qi)];
      float& running_sum = s.running_sum[std::size_t(qi)];
      float* acc = s.accumulator.data() + qi * D;
      const float new_max = std::max(running_max, block_max);
      // Rescale what was accumulated under the old max (exp(-inf) = 0 at the start).
      const float correction = std::exp(running_max - new_max);
      running_sum *= correction;
      for (int64_t d = 0; d < D; ++d) acc[d] *= correction;
      for (int64_t j = 0; j < visible; ++j) {
        const float weight = std::exp(scores[j] - new_max);
        running_sum += weight;
        const float* value = v + ((key_begin + j) * p.kv_heads + kv_head) * D;
        for (int64_t d = 0; d < D; ++d) acc[d] += weight * value[d];
      }
      running_max = new_max;
    }
  }

  for (int64_t qi = 0; qi < queries; ++qi) {
    const int64_t row = row_begin + qi / G;
    const int64_t head = kv_head * G + qi % G;
    const float inv_sum = 1.0f / s.running_sum[std::size_t(qi)];
    const float* acc = s.accumulator.data() + qi * D;
    float* o = out + (row * p.q_heads + head) * D;
    for (int64_t d = 0; d < D; ++d) o[d] = acc[d] * inv_sum;
  }
}

}  // namespace

namespace detail {

void run_attention_blocks(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out,
                          AttentionBlockKernel kernel) {
  check_attention_problem(p);
  const int64_t row_blocks = (p.q_rows + kQueryRowsPerTask - 1) / kQueryRowsPerTask;
  ThreadPool::global().parallel_for(p.kv_heads * row_blocks, [&](int64_t task) {
    const int64_t kv_head = task % p.kv_heads;
    const int64_t row_begin = (task / p.kv_heads) * kQueryRowsPerTask;
    kernel(p, q, k, v, out, kv_head, row_begin, std::min(p.q_rows, row_begin + kQueryRowsPerTask));
  });
}

void attention_bf16_via_f32(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                            uint16_t* out, AttentionF32 f32_kernel) {
  check_attention_problem(p);
  const int64_t q_count = p.q_rows * p.q_heads * p.head_dim, kv_count = p.kv_rows * p.kv_heads * p.head_dim;
  std::vector<float> qf(static_cast<std::size_t>(q_count)), of(static_cast<std::size_t>(q_count));
  std::vector<float> kf(static_cast<std::size_t>(kv_count)), vf(static_cast<std::size_t>(kv_count));
  widen_bf16(q, q_count, qf.data());
  widen_bf16(k, kv_count, kf.data());
  widen_bf16(v, kv_count, vf.data());
  f32_kernel(p, qf.data(), kf.data(), vf.data(), of.data());
  round_to_bf16(of.data(), q_count, out);
}

}  // namespace detail

namespace ref {

void attention_blocked(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out) {
  detail::run_attention_blocks(p, q, k, v, out, attend_block);
}

void attention_blocked_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                            uint16_t* out) {
  detail::attention_bf16_via_f32(p, q, k, v, out, attention_blocked);
}

}  // namespace ref
}  // namespace stepmix::kernels
