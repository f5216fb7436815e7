// AVX-512 BF16 attention (see kernels/attention.hpp for the semantics).
//
// Keys and values are first repacked, once per call and in parallel, into
// blocks of 64 keys laid out for vdpbf16ps, which multiplies pairs of bf16
// held in one dword:
//   keys:   [kv_head][block][D/2][64]   dword = (k[key][2p], k[key][2p+1])
//   values: [kv_head][block][32][D]     dword = (v[2i][d], v[2i+1][d])
// Then a task takes (KV head, 32 query rows): its G·32 queries stream over the
// key blocks with an online softmax, 4 queries at a time. Scores of 4 queries
// against 64 keys take 16 accumulators, each key vector loaded once for the 4
// queries, and the softmax update runs on them in registers
// (score_softmax_group: maxima of the 4 queries reduced together, weights
// 2^(s·c − max·c) with the scale folded into c, rounded to bf16 two vectors
// at a time, sums of the rounded weights); the value product runs 4 queries ×
// 64 output dims per pass, each value vector loaded once for the 4
// (value_group). While a block computes, the next block's keys and values are
// hinted toward L2, a slice per query group. Each query's arithmetic depends
// only on the block layout, never on which thread runs it.
//
// At Nano's shapes (128 queries per task, 4 396 keys: a head's packed K/V is
// 2.2 MiB, past L2) one thread reaches about 82–89% of the vdpbf16ps peak
// measured beside it (bench/run-attention.sh), against 73–78% with 64-query
// tasks, the softmax in a separate pass over stored scores and no prefetch:
// the two dot-product loops run at the instruction's rate when their
// operands are in L1, and what is left is the softmax (about 20 vector
// operations per 16 scores beside 128 vdpbf16ps) and the key/value stream.
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

constexpr int64_t kKeys = kAttentionKeys;  // keys per block: 4 vectors of scores
constexpr int64_t kPairs = kKeys / 2;  // key pairs per block (value product steps)
// Query rows per task, times G heads (128 queries for Nano's G = 4): each
// key/value block a task streams in is used by that many queries, and at
// thousands of keys the blocks come from beyond L2 (a head's packed K/V is
// 32 KiB per 64 keys), so fewer, larger tasks read less of them.
constexpr int64_t kRowsPerTask = 32;
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
// never written out. Maxima are of the raw scores q·k (the scale is applied
// inside the exponent).
struct TaskScratch {
  std::vector<float> accumulator;  // [queries, D], unnormalised output
  std::vector<float> running_max, running_sum, correction;
  std::vector<uint32_t> weights;  // [queries, 32]: this block's softmax weights, bf16 pairs
};

// Scores of queries [group, group + 4) against the 64 keys of a block and
// their online-softmax update, in one pass over registers: the scores
// q_g · k_j take 16 accumulators, each key vector loaded once for the 4
// queries; then the new running maxima, the correction factors
// 2^((old max - new max)·c), the bf16 weights 2^(s·c - max·c) (c = scale ·
// log2 e, one rounding in the fused multiply-subtract) and the running sums of
// the rounded weights. visible[g]: keys of the block query g sees. Kept out
// of line (as is value_group) so that the compiler gives the loop all vector
// registers.
__attribute__((noinline)) void score_softmax_group(const uint32_t* kb, const uint16_t* const (&qp)[kGroup],
                                                   int64_t pairs, const int64_t (&visible)[kGroup], float c,
                                                   TaskScratch& s, int64_t group) {
  __m512 acc[kGroup][4];
  for (auto& row : acc)
    for (__m512& x : row) x = _mm512_setzero_ps();
  for (int64_t pr = 0; pr < pairs; ++pr) {
    const uint32_t* kt = kb + pr * kKeys;
    __m512i key[4];
    for (int i = 0; i < 4; ++i) key[i] = _mm512_loadu_si512(kt + 16 * i);
    for (int g = 0; g < kGroup; ++g) {
      const __m512i query_pair = _mm512_set1_epi32(load_pair(qp[g] + 2 * pr));
      for (int i = 0; i < 4; ++i) acc[g][i] = dot_pairs(acc[g][i], key[i], query_pair);
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
  const __m128 new_max = _mm_max_ps(old_max, reduce4_max(row_max));
  // 2^((old − new)·c): ~0 on a query's first block (old = −inf), exactly 1
  // where the max did not move, including rows that see no key of this block.
  const __m128 unchanged = _mm_cmpeq_ps(old_max, new_max);
  const __m128 difference = _mm_andnot_ps(unchanged, _mm_sub_ps(old_max, new_max));
  const __m128 correction = _mm512_castps512_ps128(
      simd::exp2_nonpositive(_mm512_mul_ps(_mm512_zextps128_ps512(difference), _mm512_set1_ps(c))));
  alignas(16) float shift_of[kGroup];
  _mm_store_ps(shift_of, _mm_mul_ps(new_max, _mm_set1_ps(c)));

  const __m512 factor = _mm512_set1_ps(c);
  __m512 sums[kGroup];
  for (int g = 0; g < kGroup; ++g) {
    uint32_t* weights = s.weights.data() + (group + g) * kPairs;
    const __m512 shift = _mm512_set1_ps(shift_of[g]);
    sums[g] = _mm512_setzero_ps();
    for (int i = 0; i < 4; i += 2) {
      const __m512 w0 =
          _mm512_maskz_mov_ps(lanes[g][i], simd::exp2_nonpositive(_mm512_fmsub_ps(acc[g][i], factor, shift)));
      const __m512 w1 =
          _mm512_maskz_mov_ps(lanes[g][i + 1], simd::exp2_nonpositive(_mm512_fmsub_ps(acc[g][i + 1], factor, shift)));
      // Keys 16i .. 16i + 31 as bf16 pairs, the layout value_group reads.
      _mm512_storeu_si512(weights + 8 * i, simd::round_weight_pairs(w0, w1, sums[g]));
    }
  }
  const __m128 old_sum = _mm_loadu_ps(s.running_sum.data() + group);
  _mm_storeu_ps(s.running_sum.data() + group, _mm_add_ps(_mm_mul_ps(old_sum, correction), reduce4_add(sums)));
  _mm_storeu_ps(s.running_max.data() + group, new_max);
  _mm_storeu_ps(s.correction.data() + group, correction);
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

// Hints the next key/value block toward L2 one slice per query group while
// this block computes: at thousands of keys the blocks come from L3.
inline void prefetch_slice(const uint32_t* next_keys, const uint32_t* next_values, int64_t block_bytes,
                           int64_t slice_index, int64_t slices) {
  const int64_t lines = block_bytes / 64, per_slice = (lines + slices - 1) / slices;
  const char* k = reinterpret_cast<const char*>(next_keys);
  const char* v = reinterpret_cast<const char*>(next_values);
  for (int64_t line = slice_index * per_slice; line < std::min(lines, (slice_index + 1) * per_slice); ++line) {
    _mm_prefetch(k + 64 * line, _MM_HINT_T1);
    _mm_prefetch(v + 64 * line, _MM_HINT_T1);
  }
}

void attend_task(const AttentionProblem& p, const uint16_t* q, const PackedKV& kv, uint16_t* out, int64_t kv_head,
                 int64_t row_begin, int64_t row_end) {
  thread_local TaskScratch s;
  const int64_t D = p.head_dim, pairs = D / 2, G = p.groups();
  const int64_t queries = (row_end - row_begin) * G;
  const int64_t padded = (queries + kGroup - 1) / kGroup * kGroup;
  const float c = float(1.4426950408889634 / std::sqrt(double(D)));  // scale · log2 e
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
  const int64_t blocks = (key_end + kKeys - 1) / kKeys, groups = padded / kGroup;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t key_begin = b * kKeys, keys = std::min(kKeys, key_end - key_begin);
    const uint32_t* kb = kv.key_block(kv_head, b);
    const bool prefetch = b + 1 < blocks;

    // Scores of 4 queries against the 64 keys and their softmax update.
    for (int64_t group = 0; group < padded; group += kGroup) {
      if (prefetch)
        prefetch_slice(kv.key_block(kv_head, b + 1), kv.value_block(kv_head, b + 1), kv.block_dwords * 4,
                       group / kGroup, groups);
      const uint16_t* qp[kGroup];
      int64_t visible[kGroup];
      for (int g = 0; g < kGroup; ++g) {
        qp[g] = query_of(group + g);
        const int64_t row = row_begin + std::min<int64_t>(group + g, queries - 1) / G;
        visible[g] = p.causal ? std::min(keys, row + 1 - key_begin) : keys;
      }
      score_softmax_group(kb, qp, pairs, visible, c, s, group);
    }

    // accumulator = accumulator · correction + Σ_pairs w · v, 4 queries × 64 dims per pass.
    const uint32_t* vb = kv.value_block(kv_head, b);
    const int64_t used_pairs = (keys + 1) / 2;  // weights past `visible` are zero
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

  const PackedKV packed = pack_attention_kv(p, k, v);
  ThreadPool& pool = ThreadPool::global();
  const int64_t row_blocks = (p.q_rows + kRowsPerTask - 1) / kRowsPerTask;
  pool.parallel_for(p.kv_heads * row_blocks, [&](int64_t task) {
    const int64_t row_begin = (task / p.kv_heads) * kRowsPerTask;
    attend_task(p, q, packed, out, task % p.kv_heads, row_begin, std::min(p.q_rows, row_begin + kRowsPerTask));
  });
}

}  // namespace

PackedKV pack_attention_kv(const AttentionProblem& p, const uint16_t* k, const uint16_t* v) {
  // Packed K/V of the calling thread, grown as needed and reused by later calls.
  thread_local std::vector<uint32_t> packed_storage;
  PackedKV packed;
  packed.blocks = (p.kv_rows + kKeys - 1) / kKeys;
  packed.block_dwords = p.head_dim / 2 * kKeys;
  const std::size_t dwords = std::size_t(p.kv_heads * packed.blocks * packed.block_dwords);
  if (packed_storage.size() < 2 * dwords) packed_storage.resize(2 * dwords);
  packed.keys = packed_storage.data();
  packed.values = packed_storage.data() + dwords;
  ThreadPool::global().parallel_for(p.kv_heads * packed.blocks, [&](int64_t task) {
    pack_block(p, k, v, task % p.kv_heads, task / p.kv_heads, packed);
  });
  return packed;
}

void attention_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    uint16_t* out) {
  check_attention_problem(p);
  if (packed_kernel_applies(p))
    packed_attention(p, q, k, v, out);
  else
    detail::attention_bf16_via_f32(p, q, k, v, out, attention_f32);
}

}  // namespace stepmix::kernels::avx512
