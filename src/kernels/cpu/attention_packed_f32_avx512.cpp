// AVX-512 float32 attention on packed key/value blocks, the float32 twin of
// the bf16 kernel's layout (attention_bf16_avx512.cpp), for head_dim a
// multiple of 64 (Nano's 128); attention_f32 runs it where it applies and the
// generic blocked kernel (attention_avx512.cpp) elsewhere.
//
// Keys and values are first copied, once per call and in parallel, into
// blocks of 64 keys (zero past kv_rows):
//   keys:   [kv_head][block][D][64]   k[key][d] at d · 64 + key: 4 vectors of keys per d
//   values: [kv_head][block][64][D]   as stored, one head's rows back to back
// Then a task takes (KV head, 32 query rows): its G·32 queries stream over the
// key blocks with an online softmax, 4 queries at a time. Scores of 4 queries
// against 64 keys take 16 accumulators, each key vector loaded once for the 4
// queries, and the softmax update runs on them in registers (the 4 maxima
// reduced together, weights 2^(s·c − max·c) with the scale folded into c,
// sums of the float32 weights); the value product runs 4 queries × 64 output
// dims per pass, each value vector loaded once for the 4. While a block
// computes, the next block's keys and values are hinted toward L2. Each
// query's arithmetic depends only on the block layout, never on which thread
// runs it. Agrees with attention_reference within float32 rounding (other
// summation order, polynomial exponential), not bit for bit.
#include "kernels/cpu/simd_avx512.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.hpp"
#include "kernels/cpu/avx512_kernels.hpp"

namespace stepmix::kernels::avx512 {
namespace {

constexpr int64_t kKeys = 64;          // keys per block: 4 vectors of scores
constexpr int64_t kRowsPerTask = 32;   // query rows per task, times G heads
constexpr int kGroup = 4;              // queries sharing each loaded key / value vector
constexpr int64_t kDimsPerPass = 64;   // output dims per value-product pass: 4 vectors

struct PackedF32 {
  int64_t blocks = 0;
  int64_t block_floats = 0;  // D · 64, keys and values alike
  float* keys = nullptr;
  float* values = nullptr;

  const float* key_block(int64_t head, int64_t block) const { return keys + (head * blocks + block) * block_floats; }
  const float* value_block(int64_t head, int64_t block) const {
    return values + (head * blocks + block) * block_floats;
  }
};

PackedF32 pack_f32(const AttentionProblem& p, const float* k, const float* v) {
  // Packed K/V of the calling thread, grown as needed and reused by later calls.
  thread_local std::vector<float> storage;
  const int64_t D = p.head_dim;
  PackedF32 packed;
  packed.blocks = (p.kv_rows + kKeys - 1) / kKeys;
  packed.block_floats = D * kKeys;
  const std::size_t floats = std::size_t(p.kv_heads * packed.blocks * packed.block_floats);
  if (storage.size() < 2 * floats) storage.resize(2 * floats);
  packed.keys = storage.data();
  packed.values = storage.data() + floats;
  ThreadPool::global().parallel_for(p.kv_heads * packed.blocks, [&](int64_t task) {
    const int64_t head = task % p.kv_heads, block = task / p.kv_heads, key_begin = block * kKeys;
    const int64_t keys = std::min(kKeys, p.kv_rows - key_begin);
    float* kb = const_cast<float*>(packed.key_block(head, block));
    float* vb = const_cast<float*>(packed.value_block(head, block));
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
  return packed;
}

// State of one task's queries (qi = row offset · G + head in group), padded
// to whole groups of 4: padding queries repeat the last real one and are
// never written out. Maxima are of the raw scores q·k.
struct TaskScratch {
  std::vector<float> accumulator;  // [queries, D], unnormalised output
  std::vector<float> running_max, running_sum, correction;
  std::vector<float> weights;  // [queries, 64]: this block's softmax weights
};

// Scores of queries [group, group + 4) against the block's 64 keys and their
// online-softmax update: new running maxima, corrections 2^((old − new)·c),
// weights 2^(s·c − max·c) (c = scale · log2 e), running sums. visible[g]:
// keys of the block query g sees. Out of line so that the loop gets all
// vector registers.
__attribute__((noinline)) void score_softmax_group(const float* kb, const float* const (&qp)[kGroup], int64_t D,
                                                   const int64_t (&visible)[kGroup], float c, TaskScratch& s,
                                                   int64_t group) {
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

  __mmask16 lanes[kGroup][4];
  __m512 row_max[kGroup];
  for (int g = 0; g < kGroup; ++g) {
    row_max[g] = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < 4; ++i) {
      lanes[g][i] = simd::first_lanes(visible[g] - 16 * i);
      row_max[g] = _mm512_mask_max_ps(row_max[g], lanes[g][i], row_max[g], acc[g][i]);
    }
  }
  const __m128 old_max = _mm_loadu_ps(s.running_max.data() + group);
  const __m128 new_max = _mm_max_ps(old_max, simd::reduce4_max(row_max));
  // ~0 on a query's first block (old = −inf), exactly 1 where the max did
  // not move, including rows that see no key of this block.
  const __m128 unchanged = _mm_cmpeq_ps(old_max, new_max);
  const __m128 difference = _mm_andnot_ps(unchanged, _mm_sub_ps(old_max, new_max));
  const __m128 correction = _mm512_castps512_ps128(
      simd::exp2_nonpositive(_mm512_mul_ps(_mm512_zextps128_ps512(difference), _mm512_set1_ps(c))));
  alignas(16) float shift_of[kGroup];
  _mm_store_ps(shift_of, _mm_mul_ps(new_max, _mm_set1_ps(c)));

  const __m512 factor = _mm512_set1_ps(c);
  __m512 sums[kGroup];
  for (int g = 0; g < kGroup; ++g) {
    float* weights = s.weights.data() + (group + g) * kKeys;
    const __m512 shift = _mm512_set1_ps(shift_of[g]);
    sums[g] = _mm512_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      const __m512 w =
          _mm512_maskz_mov_ps(lanes[g][i], simd::exp2_nonpositive(_mm512_fmsub_ps(acc[g][i], factor, shift)));
      _mm512_storeu_ps(weights + 16 * i, w);
      sums[g] = _mm512_add_ps(sums[g], w);
    }
  }
  const __m128 old_sum = _mm_loadu_ps(s.running_sum.data() + group);
  _mm_storeu_ps(s.running_sum.data() + group, _mm_add_ps(_mm_mul_ps(old_sum, correction), simd::reduce4_add(sums)));
  _mm_storeu_ps(s.running_max.data() + group, new_max);
  _mm_storeu_ps(s.correction.data() + group, correction);
}

// accumulator[g] (64 dims, row stride `stride`) = accumulator[g] · correction[g]
// + Σ_j w[g][j] · v[j] over the block's keys: 16 accumulators, each value
// vector loaded once for the 4 queries. weights: [4][64]; vt: the block's
// values at the first of the 64 dims, `D` floats per key.
__attribute__((noinline)) void value_group(const float* vt, int64_t D, const float* weights, int64_t keys,
                                           const float* correction, float* accumulator, int64_t stride) {
  __m512 acc[kGroup][4];
  for (int g = 0; g < kGroup; ++g) {
    const __m512 factor = _mm512_set1_ps(correction[g]);
    for (int i = 0; i < 4; ++i) acc[g][i] = _mm512_mul_ps(_mm512_loadu_ps(accumulator + g * stride + 16 * i), factor);
  }
  for (int64_t j = 0; j < keys; ++j) {
    __m512 value[4];
    for (int i = 0; i < 4; ++i) value[i] = _mm512_loadu_ps(vt + j * D + 16 * i);
    for (int g = 0; g < kGroup; ++g) {
      const __m512 weight = _mm512_set1_ps(weights[g * kKeys + j]);
      for (int i = 0; i < 4; ++i) acc[g][i] = _mm512_fmadd_ps(weight, value[i], acc[g][i]);
    }
  }
  for (int g = 0; g < kGroup; ++g)
    for (int i = 0; i < 4; ++i) _mm512_storeu_ps(accumulator + g * stride + 16 * i, acc[g][i]);
}

void attend_task(const AttentionProblem& p, const float* q, const PackedF32& kv, float* out, int64_t kv_head,
                 int64_t row_begin, int64_t row_end) {
  thread_local TaskScratch s;
  const int64_t D = p.head_dim, G = p.groups();
  const int64_t queries = (row_end - row_begin) * G;
  const int64_t padded = (queries + kGroup - 1) / kGroup * kGroup;
  const float c = float(1.4426950408889634 / std::sqrt(double(D)));  // scale · log2 e
  s.accumulator.assign(std::size_t(padded * D), 0.0f);
  s.running_max.assign(std::size_t(padded), -INFINITY);
  s.running_sum.assign(std::size_t(padded), 0.0f);
  s.correction.resize(std::size_t(padded));
  s.weights.resize(std::size_t(padded * kKeys));
  auto query_of = [&](int64_t qi) {
    qi = std::min(qi, queries - 1);
    return q + ((row_begin + qi / G) * p.q_heads + kv_head * G + qi % G) * D;
  };

  // A causal task's last row sees keys 0..row_end-1.
  const int64_t key_end = p.causal ? row_end : p.kv_rows;
  const int64_t blocks = (key_end + kKeys - 1) / kKeys, groups = padded / kGroup;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t key_begin = b * kKeys, keys = std::min(kKeys, key_end - key_begin);
    const float* kb = kv.key_block(kv_head, b);
    const bool prefetch = b + 1 < blocks;
    for (int64_t group = 0; group < padded; group += kGroup) {
      if (prefetch)
        simd::prefetch_slice(kv.key_block(kv_head, b + 1), kv.value_block(kv_head, b + 1), kv.block_floats * 4,
                             group / kGroup, groups);
      const float* qp[kGroup];
      int64_t visible[kGroup];
      for (int g = 0; g < kGroup; ++g) {
        qp[g] = query_of(group + g);
        const int64_t row = row_begin + std::min<int64_t>(group + g, queries - 1) / G;
        visible[g] = p.causal ? std::min(keys, row + 1 - key_begin) : keys;
      }
      score_softmax_group(kb, qp, D, visible, c, s, group);
    }
    // accumulator = accumulator · correction + Σ_keys w · v, 4 queries × 64 dims per pass
    // (weights past a query's visible keys are zero).
    const float* vb = kv.value_block(kv_head, b);
    for (int64_t group = 0; group < padded; group += kGroup)
      for (int64_t d0 = 0; d0 < D; d0 += kDimsPerPass)
        value_group(vb + d0, D, s.weights.data() + group * kKeys, keys, s.correction.data() + group,
                    s.accumulator.data() + group * D + d0, D);
  }

  for (int64_t qi = 0; qi < queries; ++qi) {
    const __m512 inverse_sum = _mm512_set1_ps(1.0f / s.running_sum[std::size_t(qi)]);
    const float* a = s.accumulator.data() + qi * D;
    float* o = out + ((row_begin + qi / G) * p.q_heads + kv_head * G + qi % G) * D;
    for (int64_t d = 0; d < D; d += 16) _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(a + d), inverse_sum));
  }
}

}  // namespace

bool attention_f32_packed_applies(const AttentionProblem& p) { return p.head_dim % 64 == 0 && p.head_dim <= 256; }

void attention_f32_packed(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out) {
  if (p.q_rows == 0) return;
  const PackedF32 packed = pack_f32(p, k, v);
  const int64_t row_blocks = (p.q_rows + kRowsPerTask - 1) / kRowsPerTask;
  ThreadPool::global().parallel_for(p.kv_heads * row_blocks, [&](int64_t task) {
    const int64_t row_begin = (task / p.kv_heads) * kRowsPerTask;
    attend_task(p, q, packed, out, task % p.kv_heads, row_begin, std::min(p.q_rows, row_begin + kRowsPerTask));
  });
}

}  // namespace stepmix::kernels::avx512
