// What the two packed-block attention kernels share (the bf16 one,
// attention_bf16_avx512.cpp, on vdpbf16ps pairs; the float32 one,
// attention_packed_f32_avx512.cpp, on FMAs): the task driver that streams a
// task's queries over the key blocks, and the online-softmax bookkeeping of
// a group of 4 queries. Include only from files compiled with the AVX-512
// flags.
//
// A task takes (KV head, kRowsPerTask query rows) and the G query heads of
// that KV head. Per 64-key block: for each group of 4 queries, the kernel's
// score_softmax_group (scores in 16 accumulators, each key vector loaded once
// for the 4, then the softmax update on them in registers); then for each
// group and each 64 output dims, its value_group (accumulator · correction +
// weights · values, each value vector loaded once for the 4). While a block
// computes, the next block's keys and values are hinted toward L2, a slice
// per group. Each query's arithmetic depends only on the block layout, never
// on which thread runs it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace stepmix::kernels::avx512::packed {

constexpr int64_t kKeys = 64;  // keys per block: 4 vectors of scores
// Query rows per task, times G heads (128 queries for Nano's G = 4): each
// key/value block a task streams in is used by that many queries, and at
// thousands of keys the blocks come from beyond L2, so fewer, larger tasks
// read less of them.
constexpr int64_t kRowsPerTask = 32;
constexpr int kGroup = 4;             // queries sharing each loaded key / value vector
constexpr int64_t kDimsPerPass = 64;  // output dims per value-product pass: 4 vectors

// State of one task's queries (qi = row offset · G + head in group), padded
// to whole groups of 4: padding queries repeat the last real one and are
// never written out. Maxima are of the raw scores q·k (the scale is applied
// inside the exponent).
template <class Weight>
struct TaskScratch {
  std::vector<float> accumulator;  // [queries, D], unnormalised output
  std::vector<float> running_max, running_sum, correction;
  std::vector<Weight> weights;  // [queries, weights per block]: this block's softmax weights
};

// The first half of a group's online-softmax update, from the raw scores
// acc[g][i] (q_g · keys 16i .. 16i + 15): the lanes query g sees, the new
// running maxima, the corrections 2^((old max − new max)·c) and the shifts
// new max · c (c = scale · log2 e) the weights 2^(s·c − shift) use.
struct GroupSoftmax {
  __mmask16 lanes[kGroup][4];
  __m128 new_max, correction;
  alignas(16) float shift_of[kGroup];
};

inline void begin_group_softmax(const __m512 (&acc)[kGroup][4], const int64_t (&visible)[kGroup], float c,
                                const float* running_max, GroupSoftmax& out) {
  __m512 row_max[kGroup];
  for (int g = 0; g < kGroup; ++g) {
    row_max[g] = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < 4; ++i) {
      out.lanes[g][i] = simd::first_lanes(visible[g] - 16 * i);
      row_max[g] = _mm512_mask_max_ps(row_max[g], out.lanes[g][i], row_max[g], acc[g][i]);
    }
  }
  const __m128 old_max = _mm_loadu_ps(running_max);
  out.new_max = _mm_max_ps(old_max, simd::reduce4_max(row_max));
  __mmask16 moved;
  out.correction = _mm512_castps512_ps128(simd::softmax_correction(
      _mm512_zextps128_ps512(old_max), _mm512_zextps128_ps512(out.new_max), _mm512_set1_ps(c), moved));
  _mm_store_ps(out.shift_of, _mm_mul_ps(out.new_max, _mm_set1_ps(c)));
}

// The weights of keys 16i .. 16i + 15 for query g: 2^(s·c − shift), zero
// past what the query sees.
inline __m512 group_weights(const GroupSoftmax& sm, const __m512 (&acc)[kGroup][4], int g, int i, __m512 c) {
  return _mm512_maskz_mov_ps(
      sm.lanes[g][i], simd::exp2_nonpositive(_mm512_fmsub_ps(acc[g][i], c, _mm512_set1_ps(sm.shift_of[g]))));
}

// The second half: running sums (old · correction + the block's sums of
// weights, sums[g] to be reduced), maxima and corrections stored.
inline void end_group_softmax(const GroupSoftmax& sm, const __m512 (&sums)[kGroup], float* running_max,
                              float* running_sum, float* correction) {
  const __m128 old_sum = _mm_loadu_ps(running_sum);
  _mm_storeu_ps(running_sum, _mm_add_ps(_mm_mul_ps(old_sum, sm.correction), simd::reduce4_add(sums)));
  _mm_storeu_ps(running_max, sm.new_max);
  _mm_storeu_ps(correction, sm.correction);
}

// The value product's 16 accumulators (4 queries × 64 dims, row stride
// `stride`): loaded already scaled by each query's correction, and stored
// back.
inline void load_corrected_accumulators(__m512 (&acc)[kGroup][4], const float* accumulator, int64_t stride,
                                        const float* correction) {
  for (int g = 0; g < kGroup; ++g) {
    const __m512 factor = _mm512_set1_ps(correction[g]);
    for (int i = 0; i < 4; ++i) acc[g][i] = _mm512_mul_ps(_mm512_loadu_ps(accumulator + g * stride + 16 * i), factor);
  }
}
inline void store_accumulators(const __m512 (&acc)[kGroup][4], float* accumulator, int64_t stride) {
  for (int g = 0; g < kGroup; ++g)
    for (int i = 0; i < 4; ++i) _mm512_storeu_ps(accumulator + g * stride + 16 * i, acc[g][i]);
}

// Queries of rows [row_begin, row_end) on the G heads of kv_head, through the
// kernel K:
//   K::Element                   q/out element (uint16_t bf16 bits, float)
//   K::Weight, K::kWeights       softmax weight storage and count per query and block
//   K::used_weights(keys)        weights the value product reads for `keys` keys
//   K::score_softmax_group(kb, qp, D, visible, c, scratch, group)
//   K::value_group(vt, D, weights, used, correction, accumulator, stride)
//   K::store_row(out, accumulator, inverse_sum, D)
// kv: the packed blocks (key_block, value_block, block_bytes()).
template <class K, class Packed>
void attend_task(const AttentionProblem& p, const typename K::Element* q, const Packed& kv,
                 typename K::Element* out, int64_t kv_head, int64_t row_begin, int64_t row_end) {
  thread_local TaskScratch<typename K::Weight> s;
  const int64_t D = p.head_dim, G = p.groups();
  const int64_t queries = (row_end - row_begin) * G;
  const int64_t padded = (queries + kGroup - 1) / kGroup * kGroup;
  const float c = float(1.4426950408889634 / std::sqrt(double(D)));  // scale · log2 e
  s.accumulator.assign(std::size_t(padded * D), 0.0f);
  s.running_max.assign(std::size_t(padded), -INFINITY);
  s.running_sum.assign(std::size_t(padded), 0.0f);
  s.correction.resize(std::size_t(padded));
  s.weights.resize(std::size_t(padded * K::kWeights));
  auto query_of = [&](int64_t qi) {
    qi = std::min(qi, queries - 1);
    return q + ((row_begin + qi / G) * p.q_heads + kv_head * G + qi % G) * D;
  };

  // A causal task's last row sees keys 0..row_end-1.
  const int64_t key_end = p.causal ? row_end : p.kv_rows;
  const int64_t blocks = (key_end + kKeys - 1) / kKeys, groups = padded / kGroup;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t key_begin = b * kKeys, keys = std::min(kKeys, key_end - key_begin);
    const bool prefetch = b + 1 < blocks;
    for (int64_t group = 0; group < padded; group += kGroup) {
      if (prefetch)
        simd::prefetch_slice(kv.key_block(kv_head, b + 1), kv.value_block(kv_head, b + 1), kv.block_bytes(),
                             group / kGroup, groups);
      const typename K::Element* qp[kGroup];
      int64_t visible[kGroup];
      for (int g = 0; g < kGroup; ++g) {
        qp[g] = query_of(group + g);
        const int64_t row = row_begin + std::min<int64_t>(group + g, queries - 1) / G;
        visible[g] = p.causal ? std::min(keys, row + 1 - key_begin) : keys;
      }
      K::score_softmax_group(kv.key_block(kv_head, b), qp, D, visible, c, s, group);
    }
    // accumulator = accumulator · correction + Σ weights · values, 4 queries ×
    // 64 dims per pass (weights past a query's visible keys are zero).
    const auto* vb = kv.value_block(kv_head, b);
    const int64_t used = K::used_weights(keys);
    for (int64_t group = 0; group < padded; group += kGroup)
      for (int64_t d0 = 0; d0 < D; d0 += kDimsPerPass)
        K::value_group(vb + d0, D, s.weights.data() + group * K::kWeights, used, s.correction.data() + group,
                       s.accumulator.data() + group * D + d0, D);
  }

  for (int64_t qi = 0; qi < queries; ++qi) {
    const __m512 inverse_sum = _mm512_set1_ps(1.0f / s.running_sum[std::size_t(qi)]);
    K::store_row(out + ((row_begin + qi / G) * p.q_heads + kv_head * G + qi % G) * D,
                 s.accumulator.data() + qi * D, inverse_sum, D);
  }
}

}  // namespace stepmix::kernels::avx512::packed
