// AVX-512 channel RMS norm (+ SiLU), channel_norm_kernels.hpp: 16 channels
// per vector, one position at a time, positions spread over the thread pool
// (each output depends on its position alone, so the split changes nothing).
#include <algorithm>
#include <cmath>

#include "core/thread_pool.hpp"
#include "kernels/channel_norm_kernels.hpp"
#include "kernels/cpu/avx512_helpers.hpp"

namespace stepmix::kernels::avx512 {
namespace {

constexpr int64_t kPositionsPerTask = 64;

void positions(const ChannelNormArgs& g, int64_t begin, int64_t end) {
  const int64_t C = g.channels;
  const __m512 scale = _mm512_set1_ps(g.scale), one = _mm512_set1_ps(1.0f);
  for (int64_t p = begin; p < end; ++p) {
    const float* in = g.x + p * C;
    __m512 squares = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c += 16) {
      const __m512 v = _mm512_maskz_loadu_ps(tail_mask16(C - c), in + c);
      squares = _mm512_fmadd_ps(v, v, squares);
    }
    const __m512 norm = _mm512_set1_ps(std::max(std::sqrt(_mm512_reduce_add_ps(squares)), 1e-12f));
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 lanes = tail_mask16(C - c);
      __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(lanes, in + c), norm);
      v = _mm512_mul_ps(v, scale);
      v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(lanes, g.gamma + c));
      if (g.silu) v = _mm512_div_ps(v, _mm512_add_ps(one, exp(_mm512_sub_ps(_mm512_setzero_ps(), v))));
      if (g.y_type == FrameElement::F32) {
        _mm512_mask_storeu_ps(static_cast<float*>(g.y) + p * C + c, lanes, v);
      } else {
        _mm256_mask_storeu_epi16(static_cast<uint16_t*>(g.y) + p * C + c, lanes, f32_to_bf16_rne(v));
      }
    }
  }
}

}  // namespace

void channel_rms_norm(const ChannelNormArgs& g) {
  const int64_t tasks = (g.positions + kPositionsPerTask - 1) / kPositionsPerTask;
  ThreadPool::global().parallel_for(tasks, [&](int64_t t) {
    positions(g, t * kPositionsPerTask, std::min(g.positions, (t + 1) * kPositionsPerTask));
  });
}

}  // namespace stepmix::kernels::avx512
