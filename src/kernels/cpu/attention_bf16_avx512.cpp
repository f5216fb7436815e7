// AVX-512 BF16 attention (see kernels/attention.hpp for the semantics).
//
// Keys and values are first repacked, once per call and in parallel, into
// blocks of 64 keys laid out for vdpbf16ps, which multiplies pairs of bf16
// held in one dword:
//   keys:   [kv_head][block][D/2][64]   dword = (k[key][2p], k[key][2p+1])
//   values: [kv_head][block][32][D]     dword = (v[2i][d], v[2i+1][d])
// Then the packed-block driver (attention_packed_avx512.hpp) streams tasks of
// (KV head, 32 query rows) over the blocks, 4 queries at a time, with this
// file's two loops: score_softmax_group (scores of 4 queries against 64 keys
// in 16 accumulators, each key vector loaded once for the 4, then the online
// softmax on them in registers, the weights 2^(s·c − max·c) rounded to bf16
// pairs two vectors at a time, sums of the rounded weights) and value_group
// (4 queries × 64 output dims per pass, each value vector loaded once for the
// 4).
//
// At Nano's shapes (128 queries per task, 4 396 keys: a head's packed K/V is
// 2.2 MiB, past L2) one thread reaches about 89–90% of the vdpbf16ps peak
// measured beside it (bench/run-attention.sh), against 71–78% with 64-query
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
#include "kernels/cpu/attention_packed_avx512.hpp"
#include "kernels/cpu/avx512_kernels.hpp"

namespace stepmix::kernels::avx512 {
namespace {

using packed::kGroup;
using packed::kKeys;
using packed::kRowsPerTask;
constexpr int64_t kPairs = kKeys / 2;  // key pairs per block (value product steps)
static_assert(kKeys == kAttentionKeys, "the AMX kernel reads these blocks too");

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

// The two loops of the bf16 kernel (packed::attend_task's K).
struct Bf16Loops {
  using Element = uint16_t;
  using Weight = uint32_t;                      // a bf16 pair: weights of keys 2i, 2i + 1
  static constexpr int64_t kWeights = kPairs;   // weight pairs per query and block
  static int64_t used_weights(int64_t keys) { return (keys + 1) / 2; }

  // Scores of queries [group, group + 4) against the block's 64 keys and
  // their online-softmax update (weights rounded to bf16 pairs, the running
  // sums adding the rounded weights). Out of line (as is value_group) so that
  // the compiler gives the loop all vector registers.
  __attribute__((noinline)) static void score_softmax_group(const uint32_t* kb, const uint16_t* const (&qp)[kGroup],
                                                            int64_t D, const int64_t (&visible)[kGroup], float c,
                                                            packed::TaskScratch<Weight>& s, int64_t group) {
    __m512 acc[kGroup][4];
    for (auto& row : acc)
      for (__m512& x : row) x = _mm512_setzero_ps();
    for (int64_t pr = 0; pr < D / 2; ++pr) {
      const uint32_t* kt = kb + pr * kKeys;
      __m512i key[4];
      for (int i = 0; i < 4; ++i) key[i] = _mm512_loadu_si512(kt + 16 * i);
      for (int g = 0; g < kGroup; ++g) {
        const __m512i query_pair = _mm512_set1_epi32(load_pair(qp[g] + 2 * pr));
        for (int i = 0; i < 4; ++i) acc[g][i] = dot_pairs(acc[g][i], key[i], query_pair);
      }
    }
    packed::GroupSoftmax sm;
    packed::begin_group_softmax(acc, visible, c, s.running_max.data() + group, sm);
    const __m512 factor = _mm512_set1_ps(c);
    __m512 sums[kGroup];
    for (int g = 0; g < kGroup; ++g) {
      uint32_t* weights = s.weights.data() + (group + g) * kPairs;
      sums[g] = _mm512_setzero_ps();
      for (int i = 0; i < 4; i += 2) {
        // Keys 16i .. 16i + 31 as bf16 pairs, the layout value_group reads.
        const __m512i pairs = simd::round_weight_pairs(packed::group_weights(sm, acc, g, i, factor),
                                                       packed::group_weights(sm, acc, g, i + 1, factor), sums[g]);
        _mm512_storeu_si512(weights + 8 * i, pairs);
      }
    }
    packed::end_group_softmax(sm, sums, s.running_max.data() + group, s.running_sum.data() + group,
                              s.correction.data() + group);
  }

  // accumulator[g] (64 dims, row stride `stride`) = accumulator[g] ·
  // correction[g] + Σ_i w[g][i] · v[i] over the block's key pairs: 16
  // accumulators, each value vector loaded once for the 4 queries. weights:
  // [4][32] bf16 pairs; vt: the block's value pairs at the first of the 64
  // dims, `D` dwords per pair.
  __attribute__((noinline)) static void value_group(const uint32_t* vt, int64_t D, const uint32_t* weights,
                                                    int64_t used_pairs, const float* correction, float* accumulator,
                                                    int64_t stride) {
    __m512 acc[kGroup][4];
    packed::load_corrected_accumulators(acc, accumulator, stride, correction);
    for (int64_t j = 0; j < used_pairs; ++j) {
      __m512i value[4];
      for (int i = 0; i < 4; ++i) value[i] = _mm512_loadu_si512(vt + j * D + 16 * i);
      for (int g = 0; g < kGroup; ++g) {
        const __m512i weight_pair = _mm512_set1_epi32(int32_t(weights[g * kPairs + j]));
        for (int i = 0; i < 4; ++i) acc[g][i] = dot_pairs(acc[g][i], value[i], weight_pair);
      }
    }
    packed::store_accumulators(acc, accumulator, stride);
  }

  static void store_row(uint16_t* out, const float* accumulator, __m512 inverse_sum, int64_t D) {
    for (int64_t d = 0; d < D; d += 16)
      simd::store_bf16(out + d, _mm512_mul_ps(_mm512_loadu_ps(accumulator + d), inverse_sum));
  }
};

// The packed kernel needs AVX512_BF16 and whole 64-dim chunks of a head.
bool packed_kernel_applies(const AttentionProblem& p) {
  return cpu_features().can_run_avx512_bf16() && p.head_dim % 64 == 0 && p.head_dim <= 256;
}

void packed_attention(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                      uint16_t* out) {
  if (p.q_rows == 0) return;

  const PackedKV kv = pack_attention_kv(p, k, v);
  ThreadPool& pool = ThreadPool::global();
  const int64_t row_blocks = (p.q_rows + kRowsPerTask - 1) / kRowsPerTask;
  pool.parallel_for(p.kv_heads * row_blocks, [&](int64_t task) {
    const int64_t row_begin = (task / p.kv_heads) * kRowsPerTask;
    packed::attend_task<Bf16Loops>(p, q, kv, out, task % p.kv_heads, row_begin,
                                   std::min(p.q_rows, row_begin + kRowsPerTask));
  });
}

}  // namespace

PackedKV pack_attention_kv(const AttentionProblem& p, const uint16_t* k, const uint16_t* v) {
  // Packed K/V of the calling thread, grown as needed and reused by later calls.
  thread_local std::vector<uint32_t> packed_storage;
  PackedKV kv;
  kv.blocks = (p.kv_rows + kKeys - 1) / kKeys;
  kv.block_dwords = p.head_dim / 2 * kKeys;
  const std::size_t dwords = std::size_t(p.kv_heads * kv.blocks * kv.block_dwords);
  if (packed_storage.size() < 2 * dwords) packed_storage.resize(2 * dwords);
  kv.keys = packed_storage.data();
  kv.values = packed_storage.data() + dwords;
  ThreadPool::global().parallel_for(p.kv_heads * kv.blocks, [&](int64_t task) {
    pack_block(p, k, v, task % p.kv_heads, task / p.kv_heads, kv);
  });
  return kv;
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
