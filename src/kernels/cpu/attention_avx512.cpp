// AVX-512 variant of the blocked online-softmax attention: the blocking of
// the portable kernel, 16 lanes wide, with FMAs and a polynomial exp, so it
// agrees with the reference within float32 rounding, not bit for bit. Head
// dims that are a multiple of 64 run the packed-block kernel instead
// (attention_packed_f32_avx512.cpp, several times faster at long sequences).
// Compiled with AVX-512 flags (file suffix); the avx512 table
// (avx512_table.cpp) registers it for CPUs with AVX-512F and FMA.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention_blocks.hpp"
#include "kernels/cpu/avx512_kernels.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace stepmix::kernels::avx512 {
namespace {

constexpr int64_t kKeys = 64;            // keys per block: 4 vectors
constexpr int64_t kQueriesPerGroup = 4;  // queries sharing each loaded key vector
constexpr int kChunks = 8;               // 16-float vectors of the output kept in registers

// Horizontal reductions through memory: GCC's reduce intrinsics trip
// maybe-uninitialized false positives on their undefined sources.
inline float horizontal_max(__m512 x) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, x);
  return *std::max_element(lanes, lanes + 16);
}
inline float horizontal_sum(__m512 x) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, x);
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}

struct Scratch {
  std::vector<float> keys_transposed;  // [D, kKeys], zero beyond the block's keys
  std::vector<float> running_max, running_sum;
  std::vector<float> accumulator;  // [queries, D]
  alignas(64) float weights[kKeys];
};

// Queries of rows [row_begin, row_end) on the G heads of `kv_head`.
void attend_block(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out,
                         int64_t kv_head, int64_t row_begin, int64_t row_end) {
  thread_local Scratch s;
  const int64_t D = p.head_dim, G = p.groups();
  const int64_t queries = (row_end - row_begin) * G;
  const float scale = 1.0f / std::sqrt(float(D));
  s.keys_transposed.resize(std::size_t(D * kKeys));
  s.running_max.assign(std::size_t(queries), -INFINITY);
  s.running_sum.assign(std::size_t(queries), 0.0f);
  s.accumulator.assign(std::size_t(queries * D), 0.0f);
  auto query_ptr = [&](int64_t qi) { return q + ((row_begin + qi / G) * p.q_heads + kv_head * G + qi % G) * D; };

  const int64_t key_end = p.causal ? row_end : p.kv_rows;
  for (int64_t key_begin = 0; key_begin < key_end; key_begin += kKeys) {
    const int64_t keys = std::min(kKeys, key_end - key_begin);
    std::fill(s.keys_transposed.begin(), s.keys_transposed.end(), 0.0f);
    for (int64_t j = 0; j < keys; ++j) {
      const float* key = k + ((key_begin + j) * p.kv_heads + kv_head) * D;
      for (int64_t d = 0; d < D; ++d) s.keys_transposed[std::size_t(d * kKeys + j)] = key[d];
    }

    for (int64_t group = 0; group < queries; group += kQueriesPerGroup) {
      // Scores of up to 4 queries against the 64 keys, each key vector loaded once.
      const float* qp[kQueriesPerGroup];
      for (int64_t g = 0; g < kQueriesPerGroup; ++g) qp[g] = query_ptr(std::min(group + g, queries - 1));
      __m512 acc_scores[kQueriesPerGroup][4];
      for (auto& row : acc_scores)
        for (__m512& x : row) x = _mm512_setzero_ps();
      for (int64_t d = 0; d < D; ++d) {
        const float* kt = s.keys_transposed.data() + d * kKeys;
        const __m512 k0 = _mm512_loadu_ps(kt), k1 = _mm512_loadu_ps(kt + 16);
        const __m512 k2 = _mm512_loadu_ps(kt + 32), k3 = _mm512_loadu_ps(kt + 48);
        for (int64_t g = 0; g < kQueriesPerGroup; ++g) {
          const __m512 b = _mm512_set1_ps(qp[g][d]);
          acc_scores[g][0] = _mm512_fmadd_ps(b, k0, acc_scores[g][0]);
          acc_scores[g][1] = _mm512_fmadd_ps(b, k1, acc_scores[g][1]);
          acc_scores[g][2] = _mm512_fmadd_ps(b, k2, acc_scores[g][2]);
          acc_scores[g][3] = _mm512_fmadd_ps(b, k3, acc_scores[g][3]);
        }
      }

      for (int64_t g = 0; g < kQueriesPerGroup && group + g < queries; ++g) {
        const int64_t qi = group + g;
        const int64_t row = row_begin + qi / G;
        const int64_t visible = p.causal ? std::min(keys, row + 1 - key_begin) : keys;
        if (visible <= 0) continue;
        __mmask16 masks[4];
        __m512 scores[4];
        __m512 max_vec = _mm512_set1_ps(-INFINITY);
        for (int c = 0; c < 4; ++c) {
          masks[c] = simd::first_lanes(visible - 16 * c);
          scores[c] = _mm512_mul_ps(acc_scores[g][c], _mm512_set1_ps(scale));
          max_vec = _mm512_mask_max_ps(max_vec, masks[c], max_vec, scores[c]);
        }
        float& running_max = s.running_max[std::size_t(qi)];
        float& running_sum = s.running_sum[std::size_t(qi)];
        const float new_max = std::max(running_max, horizontal_max(max_vec));
        const float correction = std::exp(running_max - new_max);
        __m512 sum_vec = _mm512_setzero_ps();
        for (int c = 0; c < 4; ++c) {
          const __m512 w =
              _mm512_maskz_mov_ps(masks[c], simd::exp(_mm512_sub_ps(scores[c], _mm512_set1_ps(new_max))));
          sum_vec = _mm512_add_ps(sum_vec, w);
          _mm512_store_ps(s.weights + 16 * c, w);
        }
        running_sum = running_sum * correction + horizontal_sum(sum_vec);
        running_max = new_max;

        // acc = acc · correction + Σ_j w_j · v_j, 128 dims at a time so that
        // eight independent FMA chains hide the FMA latency.
        float* acc = s.accumulator.data() + qi * D;
        const __m512 corr = _mm512_set1_ps(correction);
        for (int64_t d0 = 0; d0 < D; d0 += 16 * kChunks) {
          __mmask16 lanes[kChunks];
          __m512 a[kChunks];
          for (int c = 0; c < kChunks; ++c) {
            lanes[c] = simd::first_lanes(D - d0 - 16 * c);
            a[c] = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes[c], acc + d0 + 16 * c), corr);
          }
          for (int64_t j = 0; j < visible; ++j) {
            const float* value = v + ((key_begin + j) * p.kv_heads + kv_head) * D + d0;
            const __m512 w = _mm512_set1_ps(s.weights[j]);
            for (int c = 0; c < kChunks; ++c)
              if (lanes[c]) a[c] = _mm512_fmadd_ps(w, _mm512_maskz_loadu_ps(lanes[c], value + 16 * c), a[c]);
          }
          for (int c = 0; c < kChunks; ++c) _mm512_mask_storeu_ps(acc + d0 + 16 * c, lanes[c], a[c]);
        }
      }
    }
  }

  for (int64_t qi = 0; qi < queries; ++qi) {
    const __m512 inv_sum = _mm512_set1_ps(1.0f / s.running_sum[std::size_t(qi)]);
    const float* acc = s.accumulator.data() + qi * D;
    float* o = out + ((row_begin + qi / G) * p.q_heads + kv_head * G + qi % G) * D;
    for (int64_t d0 = 0; d0 < D; d0 += 16) {
      const __mmask16 lanes = simd::first_lanes(D - d0);
      _mm512_mask_storeu_ps(o + d0, lanes, _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, acc + d0), inv_sum));
    }
  }
}

}  // namespace

void attention_f32(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out) {
  if (attention_f32_packed_applies(p)) {
    check_attention_problem(p);
    return attention_f32_packed(p, q, k, v, out);
  }
  detail::run_attention_blocks(p, q, k, v, out, attend_block);  // checks p
}

}  // namespace stepmix::kernels::avx512
