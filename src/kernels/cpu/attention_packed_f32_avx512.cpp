// AVX-512 float32 attention on packed key/value blocks, the float32 twin of
// the bf16 kernel (attention_bf16_avx512.cpp), for head_dim a multiple of 64
// (Nano's 128); attention_f32 runs it where it applies and the generic
// blocked kernel (attention_avx512.cpp) elsewhere.
//
// Keys and values are first copied, once per call and in parallel, into
// blocks of 64 keys (zero past kv_rows):
//   keys:   [kv_head][block][D][64]   k[key][d] at d · 64 + key: 4 vectors of keys per d
//   values: [kv_head][block][64][D]   as stored, one head's rows back to back
// Then the packed-block driver (attention_packed_avx512.hpp) streams tasks of
// (KV head, 32 query rows) over the blocks, 4 queries at a time, with this
// file's two loops: scores of 4 queries against 64 keys in 16 FMA
// accumulators and their online softmax in registers (float32 weights and
// sums), and the value product, 4 queries × 64 output dims per pass. Agrees
// with attention_reference within float32 rounding (other summation order,
// polynomial exponential), not bit for bit.
#include "kernels/cpu/simd_avx512.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.hpp"
#include "kernels/cpu/attention_packed_avx512.hpp"
#include "kernels/cpu/avx512_kernels.hpp"

namespace stepmix::kernels::avx512 {
namespace {

using packed::kGroup;
using packed::kKeys;
using packed::kRowsPerTask;

struct PackedF32 {
  int64_t blocks = 0;
  int64_t block_floats = 0;  // D · 64, keys and values alike
  float* keys = nullptr;
  float* values = nullptr;

  float* key_block(int64_t head, int64_t block) const { return keys + (head * blocks + block) * block_floats; }
  float* value_block(int64_t head, int64_t block) const { return values + (head * blocks + block) * block_floats; }
  int64_t block_bytes() const { return block_floats * 4; }
};

PackedF32 pack_f32(const AttentionProblem& p, const float* k, const float* v) {
  // Packed K/V of the calling thread, grown as needed and reused by later calls.
  thread_local std::vector<float> storage;
  const int64_t D = p.head_dim;
  PackedF32 kv;
  kv.blocks = (p.kv_rows + kKeys - 1) / kKeys;
  kv.block_floats = D * kKeys;
  const std::size_t floats = std::size_t(p.kv_heads * kv.blocks * kv.block_floats);
  if (storage.size() < 2 * floats) storage.resize(2 * floats);
  kv.keys = storage.data();
  kv.values = storage.data() + floats;
  ThreadPool::global().parallel_for(p.kv_heads * kv.blocks, [&](int64_t task) {
    const int64_t head = task % p.kv_heads, block = task / p.kv_heads, key_begin = block * kKeys;
    const int64_t keys = std::min(kKeys, p.kv_rows - key_begin);
    float* kb = kv.key_block(head, block);
    float* vb = kv.value_block(head, block);
    for (int64_t j = 0; j < kKeys; ++j) {
      const float* key = j < keys ? k + ((key_begin + j) * p.kv_heads + head) * D : nullptr;
      const float* value = j < keys ? v + ((key_begin + j) * p.kv_heads + head) * D : nullptr;
      for (int64_t d = 0; d < D; ++d) kb[d * kKeys + j] = key ? key[d] : 0.0f;
      if (value) {
        std::copy_n(value, D, vb + j * D);
      } else {
        std::fill_n(vb + j * D, D, 0.0f);
      }
    }
  });
  return kv;
}

// The two loops of the float32 kernel (packed::attend_task's K).
struct F32Loops {
  using Element = float;
  using Weight = float;
  static constexpr int64_t kWeights = kKeys;  // weights per query and block
  static int64_t used_weights(int64_t keys) { return keys; }

  // Scores of queries [group, group + 4) against the block's 64 keys and
  // their online-softmax update. Out of line (as is value_group) so that the
  // loop gets all vector registers.
  __attribute__((noinline)) static void score_softmax_group(const float* kb, const float* const (&qp)[kGroup],
                                                            int64_t D, const int64_t (&visible)[kGroup], float c,
                                                            packed::TaskScratch<Weight>& s, int64_t group) {
    __m512 acc[kGroup][4];
    for (auto& row : acc)
      for (__m512& x : row) x = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; ++d) {
      const float* kt = kb + d * kKeys;
      __m512 key[4];
      for (int i = 0; i < 4; ++i) key[i] = _mm512_loadu_ps(kt + 16 * i);
      for (int g = 0; g < kGroup; ++g) {
        const __m512 query = _mm512_set1_ps(qp[g][d]);
        for (int i = 0; i < 4; ++i) acc[g][i] = _mm512_fmadd_ps(query, key[i], acc[g][i]);
      }
    }
    packed::GroupSoftmax sm;
    packed::begin_group_softmax(acc, visible, c, s.running_max.data() + group, sm);
    const __m512 factor = _mm512_set1_ps(c);
    __m512 sums[kGroup];
    for (int g = 0; g < kGroup; ++g) {
      float* weights = s.weights.data() + (group + g) * kKeys;
      sums[g] = _mm512_setzero_ps();
      for (int i = 0; i < 4; ++i) {
        const __m512 w = packed::group_weights(sm, acc, g, i, factor);
        _mm512_storeu_ps(weights + 16 * i, w);
        sums[g] = _mm512_add_ps(sums[g], w);
      }
    }
    packed::end_group_softmax(sm, sums, s.running_max.data() + group, s.running_sum.data() + group,
                              s.correction.data() + group);
  }

  // accumulator[g] (64 dims, row stride `stride`) = accumulator[g] ·
  // correction[g] + Σ_j w[g][j] · v[j] over the block's keys: 16
  // accumulators, each value vector loaded once for the 4 queries. weights:
  // [4][64]; vt: the block's values at the first of the 64 dims, `D` floats
  // per key.
  __attribute__((noinline)) static void value_group(const float* vt, int64_t D, const float* weights, int64_t keys,
                                                    const float* correction, float* accumulator, int64_t stride) {
    __m512 acc[kGroup][4];
    packed::load_corrected_accumulators(acc, accumulator, stride, correction);
    for (int64_t j = 0; j < keys; ++j) {
      __m512 value[4];
      for (int i = 0; i < 4; ++i) value[i] = _mm512_loadu_ps(vt + j * D + 16 * i);
      for (int g = 0; g < kGroup; ++g) {
        const __m512 weight = _mm512_set1_ps(weights[g * kKeys + j]);
        for (int i = 0; i < 4; ++i) acc[g][i] = _mm512_fmadd_ps(weight, value[i], acc[g][i]);
      }
    }
    packed::store_accumulators(acc, accumulator, stride);
  }

  static void store_row(float* out, const float* accumulator, __m512 inverse_sum, int64_t D) {
    for (int64_t d = 0; d < D; d += 16) _mm512_storeu_ps(out + d, _mm512_mul_ps(_mm512_loadu_ps(accumulator + d), inverse_sum));
  }
};

}  // namespace

bool attention_f32_packed_applies(const AttentionProblem& p) { return p.head_dim % 64 == 0 && p.head_dim <= 256; }

void attention_f32_packed(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out) {
  if (p.q_rows == 0) return;
  const PackedF32 kv = pack_f32(p, k, v);
  const int64_t row_blocks = (p.q_rows + kRowsPerTask - 1) / kRowsPerTask;
  ThreadPool::global().parallel_for(p.kv_heads * row_blocks, [&](int64_t task) {
    const int64_t row_begin = (task / p.kv_heads) * kRowsPerTask;
    packed::attend_task<F32Loops>(p, q, kv, out, task % p.kv_heads, row_begin,
                                  std::min(p.q_rows, row_begin + kRowsPerTask));
  });
}

}  // namespace stepmix::kernels::avx512
