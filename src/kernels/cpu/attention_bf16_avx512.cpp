// AVX-512 BF16 attention (see kernels/attention.hpp for the semantics).
//
// Keys and values are first repacked, once per call and in parallel, into
// blocks of 64 keys laid out for vdpbf16ps, which multiplies pairs of bf16
// held in one dword:
//   keys:   [kv_head][block][D/2][64]   dword = (k[key][2p], k[key][2p+1])
//   values: [kv_head][block][32][D]     dword = (v[2i][d], v[2i+1][d])
// Then a task takes (KV head, 16 query rows): its G·16 queries stream over the
// key blocks with an online softmax, 4 queries at a time. Scores of 4 queries
// against 64 keys take 16 accumulators, each key vector loaded once for the 4
// queries (score_group); the softmax update reduces the 4 queries' maxima and
// sums together (softmax_group); the value product runs 4 queries × 64 output
// dims per pass, each value vector loaded once for the 4 (value_group). Each
// query's arithmetic depends only on the block layout, never on which thread
// runs it.
//
// Per core this reaches ~250 GFLOP/s of the ~395 vdpbf16ps peak (Zen 5,
// head_dim 128, 2k keys): the two dot-product loops run at ~80% of peak and
// the softmax (exp, reductions, bf16 rounding of the weights) takes ~20% of
// the time.
#include "kernels/cpu/simd_avx512.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/thread_pool.hpp"
#include "kernels/attention_blocks.hpp"
#include "kernels/cpu/avx512_kernels.hpp"

namespace stepmix::kernels::avx512 {
namespace {

constexpr int64_t kKeys = 64;          // keys per block: 4 vectors of scores
constexpr int64_t kPairs = kKeys / 2;  // key pairs per block (value product steps)
constexpr int64_t kRowsPerTask = 16;   // query rows per task, times G heads
constexpr int kGroup = 4;              // queries sharing each loaded key / value vector
constexpr int64_t kDimsPerPass = 64;   // output dims per value-product pass: 4 vectors

inline int32_t load_pair(const uint16_t* p) {
  int32_t pair;
  std::memcpy(&pair, p, sizeof pair);
  return pair;
}

inline __m512 dot_pairs(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}

struct PackedKV {
  int64_t blocks = 0;
  int64_t block_dwords = 0;  // D/2 · 64 for keys, 32 · D for values: the same
  uint32_t* keys = nullptr;
  uint32_t* values = nullptr;

  uint32_t* key_block(int64_t head, int64_t block) const { return keys + (head * blocks + block) * block_dwords; }
  uint32_t* value_block(int64_t head, int64_t block) const { return values + (head * blocks + block) * block_dwords; }
};

void pack_block(const AttentionProblem& p, const uint16_t* k, const uint16_t* v, int64_t head, int64_t block,
                const PackedKV& packed) {
  const int64_t D = p.head_dim, pairs = D / 2, key_begin = block * kKeys;
  const int64_t keys = std::min(kKeys, p.kv_rows - key_begin);
  uint32_t* kb = packed.key_block(head, block);
  for (int64_t j = 0; j < kKeys; ++j) {
    if (j >= keys) {
      for (int64_t pr = 0; pr < pairs; ++pr) kb[pr * kKeys + j] = 0;
      continue;
    }
    const uint16_t* key = k + ((key_begin + j) * p.kv_heads + head) * D;
    for (int64_t pr = 0; pr < pairs; ++pr) kb[pr * kKeys + j] = uint32_t(load_pair(key + 2 * pr));
  }
  uint32_t* vb = packed.value_block(head, block);
  for (int64_t i = 0; i < kPairs; ++i) {
    uint32_t* out = vb + i * D;
    const int64_t even = key_begin + 2 * i, odd = even + 1;
    const uint16_t* a = 2 * i < keys ? v + (even * p.kv_heads + head) * D : nullptr;
    const uint16_t* b = 2 * i + 1 < keys ? v + (odd * p.kv_heads + head) * D : nullptr;
    for (int64_t d = 0; d < D; ++d) out[d] = uint32_t(a ? a[d] : 0) | uint32_t(b ? b[d] : 0) << 16;
  }
}

// Lane g of the result = horizontal max / sum of v[g]. Reducing the four
// queries of a group together keeps their reductions side by side instead of
// four serial shuffle chains.
inline __m128 reduce4_max(const __m512 v[4]) {
  __m256 h[4];
  for (int g = 0; g < 4; ++g) h[g] = _mm256_max_ps(_mm512_castps512_ps256(v[g]), _mm512_extractf32x8_ps(v[g], 1));
  const __m256 ab = _mm256_max_ps(_mm256_unpacklo_ps(h[0], h[1]), _mm256_unpackhi_ps(h[0], h[1]));
  const __m256 cd = _mm256_max_ps(_mm256_unpacklo_ps(h[2], h[3]), _mm256_unpackhi_ps(h[2], h[3]));
  const __m256 w =
      _mm256_max_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm_max_ps(_mm256_castps256_ps128(w), _mm256_extractf128_ps(w, 1));
}
inline __m128 reduce4_add(const __m512 v[4]) {
  __m256 h[4];
  for (int g = 0; g < 4; ++g) h[g] = _mm256_add_ps(_mm512_castps512_ps256(v[g]), _mm512_extractf32x8_ps(v[g], 1));
  const __m256 ab = _mm256_add_ps(_mm256_unpacklo_ps(h[0], h[1]), _mm256_unpackhi_ps(h[0], h[1]));
  const __m256 cd = _mm256_add_ps(_mm256_unpacklo_ps(h[2], h[3]), _mm256_unpackhi_ps(h[2], h[3]));
  const __m256 w =
      _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)), _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm_add_ps(_mm256_castps256_ps128(w), _mm256_extractf128_ps(w, 1));
}

// State of one task's queries (qi = row offset · G + head in group), padded
// to whole groups of 4: padding queries repeat the last real one and are
// never written out.
struct TaskScratch {
  std::vector<float> accumulator;  // [queries, D], unnormalised output
  std::vector<float> running_max, running_sum, correction;
  std::vector<uint32_t> weights;  // [queries, 32]: this block's softmax weights, bf16 pairs
};

struct BlockView {
  int64_t key_begin = 0, keys = 0;
};

// raw_scores[g][j] = q_g · k_j for the 64 keys of a block: 16 accumulators,
// each key vector loaded once for the 4 queries. Kept out of line (as is
// value_group) so that the compiler gives the loop all vector registers.
__attribute__((noinline)) void score_group(const uint32_t* kb, const uint16_t* const (&qp)[kGroup], int64_t pairs,
                                           float* raw_scores) {
  __m512 acc[kGroup][4];
  for (auto& row : acc)
    for (__m512& x : row) x = _mm512_setzero_ps();
  for (int64_t pr = 0; pr < pairs; ++pr) {
    const uint32_t* kt = kb + pr * kKeys;
    __m512i key[4];
    for (int c = 0; c < 4; ++c) key[c] = _mm512_loadu_si512(kt + 16 * c);
    for (int g = 0; g < kGroup; ++g) {
      const __m512i query_pair = _mm512_set1_epi32(load_pair(qp[g] + 2 * pr));
      for (int c = 0; c < 4; ++c) acc[g][c] = dot_pairs(acc[g][c], key[c], query_pair);
    }
  }
  for (int g = 0; g < kGroup; ++g)
    for (int c = 0; c < 4; ++c) _mm512_store_ps(raw_scores + (g * 4 + c) * 16, acc[g][c]);
}

// accumulator[g] (64 dims, row stride `stride`) = accumulator[g] · correction[g]
// + Σ_i w[g][i] · v[i] over the block's key pairs: 16 accumulators, each value
// vector loaded once for the 4 queries. weights: [4][32] bf16 pairs; vt: the
// block's value pairs at the first of the 64 dims, `D` dwords per pair.
__attribute__((noinline)) void value_group(const uint32_t* vt, int64_t D, const uint32_t* weights, int64_t used_pairs,
                                           const float* correction, float* accumulator, int64_t stride) {
  __m512 acc[kGroup][4];
  for (int g = 0; g < kGroup; ++g) {
    const __m512 factor = _mm512_set1_ps(correction[g]);
    for (int c = 0; c < 4; ++c) acc[g][c] = _mm512_mul_ps(_mm512_loadu_ps(accumulator + g * stride + 16 * c), factor);
  }
  for (int64_t i = 0; i < used_pairs; ++i) {
    __m512i value[4];
    for (int c = 0; c < 4; ++c) value[c] = _mm512_loadu_si512(vt + i * D + 16 * c);
    for (int g = 0; g < kGroup; ++g) {
      const __m512i weight_pair = _mm512_set1_epi32(int32_t(weights[g * kPairs + i]));
      for (int c = 0; c < 4; ++c) acc[g][c] = dot_pairs(acc[g][c], value[c], weight_pair);
    }
  }
  for (int g = 0; g < kGroup; ++g)
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(accumulator + g * stride + 16 * c, acc[g][c]);
}

// Online-softmax update of queries [group, group + 4) from their raw scores
// acc[g][c] (q·k for keys 16c..16c+15 of the block): new running max,
// correction factor exp(old max − new max), bf16 weights, running sum.
// raw_scores: [4 queries][64 keys], q·k before scaling.
void softmax_group(const AttentionProblem& p, TaskScratch& s, const float* raw_scores, int64_t group, int64_t queries,
                   int64_t row_begin, const BlockView& block, float scale) {
  const int64_t G = p.groups();
  __mmask16 lanes[kGroup][4];
  __m512 scores[kGroup][4];
  __m512 row_max[kGroup];
  for (int g = 0; g < kGroup; ++g) {
    const int64_t row = row_begin + std::min<int64_t>(group + g, queries - 1) / G;
    const int64_t visible = p.causal ? std::min(block.keys, row + 1 - block.key_begin) : block.keys;
    row_max[g] = _mm512_set1_ps(-INFINITY);
    for (int c = 0; c < 4; ++c) {
      lanes[g][c] = simd::first_lanes(visible - 16 * c);
      scores[g][c] = _mm512_mul_ps(_mm512_load_ps(raw_scores + (g * 4 + c) * 16), _mm512_set1_ps(scale));
      row_max[g] = _mm512_mask_max_ps(row_max[g], lanes[g][c], row_max[g], scores[g][c]);
    }
  }
  const __m128 old_max = _mm_loadu_ps(s.running_max.data() + group);
  const __m128 new_max = _mm_max_ps(old_max, reduce4_max(row_max));
  // exp(old − new): 0 on a query's first block (old = −inf), exactly 1 where
  // the max did not move, including rows that see no key of this block.
  const __m128 unchanged = _mm_cmpeq_ps(old_max, new_max);
  const __m128 difference = _mm_andnot_ps(unchanged, _mm_sub_ps(old_max, new_max));
  const __m128 correction = _mm512_castps512_ps128(simd::exp(_mm512_zextps128_ps512(difference)));
  alignas(16) float max_of[kGroup];
  _mm_store_ps(max_of, new_max);

  __m512 sums[kGroup];
  for (int g = 0; g < kGroup; ++g) {
    uint32_t* weights = s.weights.data() + (group + g) * kPairs;
    const __m512 shift = _mm512_set1_ps(max_of[g]);
    sums[g] = _mm512_setzero_ps();
    for (int c = 0; c < 4; ++c) {
      const __m512 w = _mm512_maskz_mov_ps(lanes[g][c], simd::exp(_mm512_sub_ps(scores[g][c], shift)));
      const __m256bh rounded = _mm512_cvtneps_pbh(w);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(weights + 8 * c), (__m256i)rounded);
      // The normaliser sums the rounded weights the value product uses, so
      // the output stays a weighted mean of the values.
      sums[g] = _mm512_add_ps(sums[g], simd::widen_bf16((__m256i)rounded));
    }
  }
  const __m128 old_sum = _mm_loadu_ps(s.running_sum.data() + group);
  _mm_storeu_ps(s.running_sum.data() + group, _mm_add_ps(_mm_mul_ps(old_sum, correction), reduce4_add(sums)));
  _mm_storeu_ps(s.running_max.data() + group, new_max);
  _mm_storeu_ps(s.correction.data() + group, correction);
}

void attend_task(const AttentionProblem& p, const uint16_t* q, const PackedKV& kv, uint16_t* out, int64_t kv_head,
                 int64_t row_begin, int64_t row_end) {
  thread_local TaskScratch s;
  const int64_t D = p.head_dim, pairs = D / 2, G = p.groups();
  const int64_t queries = (row_end - row_begin) * G;
  const int64_t padded = (queries + kGroup - 1) / kGroup * kGroup;
  const float scale = 1.0f / std::sqrt(float(D));
  alignas(64) float raw_scores[kGroup * kKeys];
  s.accumulator.assign(std::size_t(padded * D), 0.0f);
  s.running_max.assign(std::size_t(padded), -INFINITY);
  s.running_sum.assign(std::size_t(padded), 0.0f);
  s.correction.resize(std::size_t(padded));
  s.weights.resize(std::size_t(padded * kPairs));
  auto query_of = [&](int64_t qi) {
    qi = std::min(qi, queries - 1);
    return q + ((row_begin + qi / G) * p.q_heads + kv_head * G + qi % G) * D;
  };

  // A causal task's last row sees keys 0..row_end-1.
  const int64_t key_end = p.causal ? row_end : p.kv_rows;
  for (int64_t b = 0; b * kKeys < key_end; ++b) {
    const BlockView block{b * kKeys, std::min(kKeys, key_end - b * kKeys)};
    const uint32_t* kb = kv.key_block(kv_head, b);

    // Scores of 4 queries against the 64 keys, then their softmax update.
    for (int64_t group = 0; group < padded; group += kGroup) {
      const uint16_t* qp[kGroup];
      for (int g = 0; g < kGroup; ++g) qp[g] = query_of(group + g);
      score_group(kb, qp, pairs, raw_scores);
      softmax_group(p, s, raw_scores, group, queries, row_begin, block, scale);
    }

    // accumulator = accumulator · correction + Σ_pairs w · v, 4 queries × 64 dims per pass.
    const uint32_t* vb = kv.value_block(kv_head, b);
    const int64_t used_pairs = (block.keys + 1) / 2;  // weights past `visible` are zero
    for (int64_t group = 0; group < padded; group += kGroup)
      for (int64_t d0 = 0; d0 < D; d0 += kDimsPerPass)
        value_group(vb + d0, D, s.weights.data() + group * kPairs, used_pairs, s.correction.data() + group,
                    s.accumulator.data() + group * D + d0, D);
  }

  for (int64_t qi = 0; qi < queries; ++qi) {
    const __m512 inverse_sum = _mm512_set1_ps(1.0f / s.running_sum[std::size_t(qi)]);
    const float* a = s.accumulator.data() + qi * D;
    uint16_t* o = out + ((row_begin + qi / G) * p.q_heads + kv_head * G + qi % G) * D;
    for (int64_t d = 0; d < D; d += 16) simd::store_bf16(o + d, _mm512_mul_ps(_mm512_loadu_ps(a + d), inverse_sum));
  }
}

// The packed kernel needs AVX512_BF16 and whole 64-dim chunks of a head.
bool packed_kernel_applies(const AttentionProblem& p) {
  return cpu_features().can_run_avx512_bf16() && p.head_dim % 64 == 0 && p.head_dim <= 256;
}

void packed_attention(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                      uint16_t* out) {
  if (p.q_rows == 0) return;

  // Packed K/V of the calling thread, grown as needed and reused by later calls.
  thread_local std::vector<uint32_t> packed_storage;
  PackedKV packed;
  packed.blocks = (p.kv_rows + kKeys - 1) / kKeys;
  packed.block_dwords = p.head_dim / 2 * kKeys;
  const std::size_t dwords = std::size_t(p.kv_heads * packed.blocks * packed.block_dwords);
  if (packed_storage.size() < 2 * dwords) packed_storage.resize(2 * dwords);
  packed.keys = packed_storage.data();
  packed.values = packed_storage.data() + dwords;

  ThreadPool& pool = ThreadPool::global();
  pool.parallel_for(p.kv_heads * packed.blocks, [&](int64_t task) {
    pack_block(p, k, v, task % p.kv_heads, task / p.kv_heads, packed);
  });
  const int64_t row_blocks = (p.q_rows + kRowsPerTask - 1) / kRowsPerTask;
  pool.parallel_for(p.kv_heads * row_blocks, [&](int64_t task) {
    const int64_t row_begin = (task / p.kv_heads) * kRowsPerTask;
    attend_task(p, q, packed, out, task % p.kv_heads, row_begin, std::min(p.q_rows, row_begin + kRowsPerTask));
  });
}

}  // namespace

void attention_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    uint16_t* out) {
  check_attention_problem(p);
  if (packed_kernel_applies(p))
    packed_attention(p, q, k, v, out);
  else
    detail::attention_bf16_via_f32(p, q, k, v, out, attention_f32);
}

}  // namespace stepmix::kernels::avx512
