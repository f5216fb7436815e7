// AMX-BF16 attention (the "amx" variant's attention family, bf16 operands;
// semantics in kernels/attention.hpp): the two products of each key block on
// tiles, the online softmax between them in AVX-512.
//
// Keys and values are repacked once per call into the AVX-512 kernel's
// layout (avx512::pack_attention_kv), which is already what tdpbf16ps reads
// as its B operand: a key block's [D/2][64] dword pairs give, 16 pair-rows ×
// 16 keys at a time, the B tile of S = q·kᵀ; a value block's [32][D] pairs
// give, 16 key-pair rows × 16 dims at a time, the B tile of o += w·v.
//
// A task takes (KV head, 16·R query rows) and the G query heads of that KV
// head: G·R query tiles (16 rows × D, copied into a zero-padded scratch;
// R = 16 / G, so 16 tiles = 256 queries for Nano's G = 4). Per step of 128
// keys:
//   scores  S[16 q][64 keys] per query tile, two query tiles × two key tiles
//           at a time (4 accumulator tiles), over D in steps of 32;
//   softmax per query tile (AVX-512, as the AVX-512 kernel does it, the 16
//           rows' maxima and sums reduced together): mask, running max,
//           correction 2^((old − new)·c) applied to the rows' accumulated
//           output, weights 2^(s·c − max·c) (c = scale · log2 e) rounded to
//           bf16 (the A operand of the value product), running sum of the
//           rounded weights;
//   values  O[16 q][D] += W[16 q][keys] · V, two query tiles × two 16-dim
//           chunks at a time, O kept in float32 memory between steps.
// A step is two packed blocks (128 keys), so the accumulators' round trip
// through memory is paid once per 128 keys.
// Each query's arithmetic depends only on the block layout, never on the
// thread or on other rows. Like the AVX-512 kernel it rounds the softmax
// weights to bf16, so it agrees with attention_bf16_reference within about
// 2^-8 of the values' magnitude (tests/kernels/attention_bf16_test.cpp).
//
// head_dim must be a multiple of 32 and at most 256; other problems, and CPUs
// without AMX, run the AVX-512 kernel.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/thread_pool.hpp"
#include "kernels/cpu/amx_kernels.hpp"
#include "kernels/cpu/amx_tiles.hpp"
#include "kernels/cpu/avx512_kernels.hpp"
#include "kernels/cpu/simd_avx512.hpp"

// GCC 12 reports the _mm512_undefined_* placeholders of the reductions as
// uninitialized once inlined (the same note as in avx512_helpers.hpp).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace stepmix::kernels::amx {
namespace {

constexpr int64_t kKeys = avx512::kAttentionKeys;  // keys per packed block (4 key tiles)
// Keys per softmax step: two packed blocks, so each accumulator tile of the
// output makes one round trip through memory per 128 keys.
constexpr int64_t kBlocksPerStep = 2;
constexpr int64_t kStepKeys = kBlocksPerStep * kKeys;
constexpr int kKeyTiles = int(kStepKeys / 16);
constexpr int kHalves = int(kStepKeys / 32);  // 32-key A tiles of the weights
constexpr int64_t kRows = 16;                      // query rows per tile
constexpr int64_t kMaxHeadDim = 256;
// Query tiles per task: a task takes the G heads of its KV head on
// kMaxTiles / G tiles of 16 rows (64 rows × 4 heads for Nano), so each key
// and value block it streams in serves 256 queries. At thousands of keys a
// head's packed K/V (32 KiB per 64 keys) comes from beyond L2, and the tiles
// consume it faster than it arrives when fewer queries share it.
constexpr int64_t kMaxTiles = 16;

// Per-thread state of one task, for G query tiles of D dims.
struct TaskScratch {
  avx512::AlignedScratch q_tiles;  // [G][16][D] bf16, rows past the problem zero
  avx512::AlignedScratch output;   // [G][16][D] float32, unnormalised
  avx512::AlignedScratch weights;  // [G][kHalves][16][32] bf16: the step's softmax weights, A tiles
  alignas(64) float scores[2][kKeyTiles][256];  // [query tile of the pair][key tile][16 × 16]
  float running_max[kMaxTiles * kRows], running_sum[kMaxTiles * kRows];
};

// Accumulator tiles C(i, j) = tmm(2i + j) += A_i (tmm4 + i) · B_j (tmm6 + j)
// for query tiles i < QT and both B tiles.
template <int QT>
inline void dot_tiles() {
  STEPMIX_TILE_DPBF16PS(0, 4, 6);
  STEPMIX_TILE_DPBF16PS(1, 4, 7);
  if constexpr (QT == 2) {
    STEPMIX_TILE_DPBF16PS(2, 5, 6);
    STEPMIX_TILE_DPBF16PS(3, 5, 7);
  }
}

// S tiles of query tiles q0 (and q1 when QT = 2) against key tiles t0 and
// t0 + 1 of the step (t0 % 4 of them within the packed block at kb): tile
// C(i, j) = tmm(2i + j).
template <int QT>
void score_tiles(const uint16_t* q0, const uint16_t* q1, const uint32_t* kb, int64_t t0, int64_t D,
                 float (*out)[kKeyTiles][256]) {
  const long q_stride = long(D * 2), k_stride = long(kKeys * 4);
  STEPMIX_TILE_ZERO(0);
  STEPMIX_TILE_ZERO(1);
  if constexpr (QT == 2) {
    STEPMIX_TILE_ZERO(2);
    STEPMIX_TILE_ZERO(3);
  }
  for (int64_t d0 = 0; d0 < D; d0 += 32) {
    STEPMIX_TILE_LOAD(4, q0 + d0, q_stride);
    if constexpr (QT == 2) STEPMIX_TILE_LOAD(5, q1 + d0, q_stride);
    const uint32_t* keys = kb + (d0 / 2) * kKeys + 16 * (t0 % 4);  // pair rows d0/2 .. d0/2 + 15
    STEPMIX_TILE_LOAD(6, keys, k_stride);
    STEPMIX_TILE_LOAD(7, keys + 16, k_stride);
    dot_tiles<QT>();
  }
  STEPMIX_TILE_STORE(0, out[0][t0], 64);
  STEPMIX_TILE_STORE(1, out[0][t0 + 1], 64);
  if constexpr (QT == 2) {
    STEPMIX_TILE_STORE(2, out[1][t0], 64);
    STEPMIX_TILE_STORE(3, out[1][t0 + 1], 64);
  }
}

// O[16 q][16 dims] chunks c0, c0 + 1 of query tiles o0 (and o1) += W · V over
// the step's key pairs: w0/w1 are the tiles' weights [kHalves][16][32],
// vb[0..1] the two value blocks, `halves` how many 32-key halves hold
// visible keys.
template <int QT>
void value_tiles(float* o0, float* o1, const uint16_t* w0, const uint16_t* w1, const uint32_t* const* vb, int64_t c0,
                 int64_t D, int halves) {
  const long o_stride = long(D * 4), v_stride = long(D * 4);
  STEPMIX_TILE_LOAD(0, o0 + 16 * c0, o_stride);
  STEPMIX_TILE_LOAD(1, o0 + 16 * c0 + 16, o_stride);
  if constexpr (QT == 2) {
    STEPMIX_TILE_LOAD(2, o1 + 16 * c0, o_stride);
    STEPMIX_TILE_LOAD(3, o1 + 16 * c0 + 16, o_stride);
  }
  for (int h = 0; h < halves; ++h) {
    STEPMIX_TILE_LOAD(4, w0 + h * 512, 64);
    if constexpr (QT == 2) STEPMIX_TILE_LOAD(5, w1 + h * 512, 64);
    const uint32_t* values = vb[h / 2] + (16 * (h % 2)) * D + 16 * c0;  // key pairs 16h .. 16h + 15 of the step
    STEPMIX_TILE_LOAD(6, values, v_stride);
    STEPMIX_TILE_LOAD(7, values + 16, v_stride);
    dot_tiles<QT>();
  }
  STEPMIX_TILE_STORE(0, o0 + 16 * c0, o_stride);
  STEPMIX_TILE_STORE(1, o0 + 16 * c0 + 16, o_stride);
  if constexpr (QT == 2) {
    STEPMIX_TILE_STORE(2, o1 + 16 * c0, o_stride);
    STEPMIX_TILE_STORE(3, o1 + 16 * c0 + 16, o_stride);
  }
}

// Online-softmax update of one query tile from its step's scores
// s[kKeyTiles][256] (q·k, key tile t at s[t], row r at 16r), as the AVX-512
// kernel does it: running maxima of the raw scores, weights 2^(s·c − max·c)
// (c = scale · log2 e) rounded to bf16 [kHalves][16][32], running sums of the
// rounded weights; rescales the tile's output rows o [16][D] where the
// running max moved. The 16 rows' maxima and sums are reduced together
// (a transpose of their 16 partial vectors), so a row's update is never a
// serial chain of horizontal reductions and no branch depends on one row.
void softmax_tile(const AttentionProblem& p, const float (*s)[256], int64_t row_begin, int64_t key_begin,
                  int64_t keys, float c, float* running_max, float* running_sum, uint16_t* w, float* o) {
  const int64_t D = p.head_dim;
  const __m512 factor = _mm512_set1_ps(c);
  __mmask16 lanes[kRows][kKeyTiles];
  __m512i partial[kRows];  // row r's maxima, then sums, over its key tiles: 16 lanes to reduce
  for (int64_t r = 0; r < kRows; ++r) {
    const int64_t row = row_begin + r;
    const int64_t visible = p.causal ? std::clamp<int64_t>(row + 1 - key_begin, 0, keys) : keys;
    __m512 row_max = _mm512_set1_ps(-INFINITY);
    for (int t = 0; t < kKeyTiles; ++t) {
      lanes[r][t] = simd::first_lanes(visible - 16 * t);
      row_max = _mm512_mask_max_ps(row_max, lanes[r][t], row_max, _mm512_load_ps(s[t] + 16 * r));
    }
    partial[r] = _mm512_castps_si512(row_max);
  }
  avx512::transpose_16x16_dwords(partial);
  __m512 step_max = _mm512_castsi512_ps(partial[0]);  // lane r: row r's max over the step
  for (int i = 1; i < 16; ++i) step_max = _mm512_max_ps(step_max, _mm512_castsi512_ps(partial[i]));
  const __m512 old_max = _mm512_loadu_ps(running_max);
  const __m512 new_max = _mm512_max_ps(old_max, step_max);
  __mmask16 moved;
  const __m512 correction = simd::softmax_correction(old_max, new_max, factor, moved);
  alignas(64) float shift_of[kRows];
  _mm512_store_ps(shift_of, _mm512_mul_ps(new_max, factor));
  _mm512_storeu_ps(running_max, new_max);

  for (int64_t r = 0; r < kRows; ++r) {
    const __m512 shift = _mm512_set1_ps(shift_of[r]);
    __m512 sum = _mm512_setzero_ps();
    for (int t = 0; t < kKeyTiles; t += 2) {
      const __m512 e0 = _mm512_maskz_mov_ps(
          lanes[r][t], simd::exp2_nonpositive(_mm512_fmsub_ps(_mm512_load_ps(s[t] + 16 * r), factor, shift)));
      const __m512 e1 = _mm512_maskz_mov_ps(
          lanes[r][t + 1], simd::exp2_nonpositive(_mm512_fmsub_ps(_mm512_load_ps(s[t + 1] + 16 * r), factor, shift)));
      // Key tiles t, t + 1 are keys 16t .. 16t + 31 of the step: row r of half t / 2 of the weights.
      _mm512_storeu_si512(w + (t / 2) * 512 + r * 32, simd::round_weight_pairs(e0, e1, sum));
    }
    partial[r] = _mm512_castps_si512(sum);
  }
  avx512::transpose_16x16_dwords(partial);
  __m512 step_sum = _mm512_castsi512_ps(partial[0]);
  for (int i = 1; i < 16; ++i) step_sum = _mm512_add_ps(step_sum, _mm512_castsi512_ps(partial[i]));
  _mm512_storeu_ps(running_sum, _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(running_sum), correction), step_sum));

  if (moved) {
    alignas(64) float correction_of[kRows];
    _mm512_store_ps(correction_of, correction);
    for (int64_t r = 0; r < kRows; ++r) {
      if (!((moved >> r) & 1)) continue;
      const __m512 scale_by = _mm512_set1_ps(correction_of[r]);
      float* orow = o + r * D;
      for (int64_t d = 0; d < D; d += 16) _mm512_store_ps(orow + d, _mm512_mul_ps(_mm512_load_ps(orow + d), scale_by));
    }
  }
}

// Row tiles per task: as many as keep G · R query tiles within kMaxTiles.
int64_t row_tiles_per_task(const AttentionProblem& p) { return std::max<int64_t>(1, kMaxTiles / p.groups()); }

// Query tile i of a task: row tile i / G (rows row_begin + 16 · (i / G) ..),
// query head kv_head · G + i % G.
void attend_task(const AttentionProblem& p, const uint16_t* q, const avx512::PackedKV& kv, uint16_t* out,
                 int64_t kv_head, int64_t row_begin, int64_t row_end) {
  thread_local TaskScratch s;
  const int64_t D = p.head_dim, G = p.groups(), rows = row_end - row_begin;
  const int64_t tiles = (rows + kRows - 1) / kRows * G;
  const float c = float(1.4426950408889634 / std::sqrt(double(D)));  // scale · log2 e
  uint16_t* q_tiles = s.q_tiles.get<uint16_t>(std::size_t(tiles * kRows * D));
  float* output = s.output.get<float>(std::size_t(tiles * kRows * D));
  uint16_t* weights = s.weights.get<uint16_t>(std::size_t(tiles * kHalves * kRows * 32));
  auto first_row = [&](int64_t tile) { return row_begin + (tile / G) * kRows; };
  auto head_of = [&](int64_t tile) { return kv_head * G + tile % G; };
  for (int64_t i = 0; i < tiles; ++i)
    for (int64_t r = 0; r < kRows; ++r) {
      uint16_t* dst = q_tiles + (i * kRows + r) * D;
      const int64_t row = first_row(i) + r;
      if (row < row_end) {
        std::memcpy(dst, q + (row * p.q_heads + head_of(i)) * D, std::size_t(D) * 2);
      } else {
        std::memset(dst, 0, std::size_t(D) * 2);
      }
    }
  std::fill_n(output, tiles * kRows * D, 0.0f);
  std::fill_n(s.running_max, tiles * kRows, -INFINITY);
  std::fill_n(s.running_sum, tiles * kRows, 0.0f);

  STEPMIX_TILE_LOADCONFIG(&kTileConfig);
  compiler_barrier();
  const int64_t key_end = p.causal ? row_end : p.kv_rows;  // a causal task's last row sees keys < row_end
  for (int64_t key_begin = 0; key_begin < key_end; key_begin += kStepKeys) {
    const int64_t keys = std::min(kStepKeys, key_end - key_begin), b = key_begin / kKeys;
    // The second block of a step past the last one is never read (its keys are not visible).
    const uint32_t* kb[kBlocksPerStep];
    const uint32_t* vb[kBlocksPerStep];
    for (int64_t i = 0; i < kBlocksPerStep; ++i) {
      const int64_t block = i * kKeys < keys ? b + i : b;
      kb[i] = kv.key_block(kv_head, block);
      vb[i] = kv.value_block(kv_head, block);
    }
    const int halves = int((keys + 31) / 32);
    for (int64_t g = 0; g < tiles; g += 2) {
      const bool pair = g + 1 < tiles;
      const uint16_t* q0 = q_tiles + g * kRows * D;
      for (int64_t t0 = 0; t0 < kKeyTiles; t0 += 2) {
        if (16 * t0 >= keys) {  // no visible key in these two key tiles: their scores are masked anyway
          std::fill_n(&s.scores[0][t0][0], 512, 0.0f);
          std::fill_n(&s.scores[1][t0][0], 512, 0.0f);
          continue;
        }
        if (pair) {
          score_tiles<2>(q0, q0 + kRows * D, kb[t0 / 4], t0, D, s.scores);
        } else {
          score_tiles<1>(q0, q0, kb[t0 / 4], t0, D, s.scores);
        }
      }
      compiler_barrier();
      for (int64_t i = 0; i < (pair ? 2 : 1); ++i)
        softmax_tile(p, s.scores[i], first_row(g + i), key_begin, keys, c, s.running_max + (g + i) * kRows,
                     s.running_sum + (g + i) * kRows, weights + (g + i) * kHalves * kRows * 32,
                     output + (g + i) * kRows * D);
      compiler_barrier();
      float* o0 = output + g * kRows * D;
      const uint16_t* w0 = weights + g * kHalves * kRows * 32;
      for (int64_t c0 = 0; c0 < D / 16; c0 += 2) {
        if (pair) {
          value_tiles<2>(o0, o0 + kRows * D, w0, w0 + kHalves * kRows * 32, vb, c0, D, halves);
        } else {
          value_tiles<1>(o0, o0, w0, w0, vb, c0, D, halves);
        }
      }
      compiler_barrier();
    }
  }
  STEPMIX_TILE_RELEASE();

  for (int64_t i = 0; i < tiles; ++i)
    for (int64_t r = 0; r < kRows && first_row(i) + r < row_end; ++r) {
      const __m512 inverse_sum = _mm512_set1_ps(1.0f / s.running_sum[i * kRows + r]);
      const float* a = output + (i * kRows + r) * D;
      uint16_t* o = out + ((first_row(i) + r) * p.q_heads + head_of(i)) * D;
      for (int64_t d = 0; d < D; d += 16) simd::store_bf16(o + d, _mm512_mul_ps(_mm512_load_ps(a + d), inverse_sum));
    }
}

bool tile_kernel_applies(const AttentionProblem& p) {
  return p.head_dim % 32 == 0 && p.head_dim <= kMaxHeadDim && p.groups() <= kMaxTiles && supported();
}

}  // namespace

void attention_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    uint16_t* out) {
  check_attention_problem(p);
  if (!tile_kernel_applies(p)) return avx512::attention_bf16(p, q, k, v, out);
  if (p.q_rows == 0) return;
  const avx512::PackedKV packed = avx512::pack_attention_kv(p, k, v);
  const int64_t task_rows = row_tiles_per_task(p) * kRows;
  const int64_t row_blocks = (p.q_rows + task_rows - 1) / task_rows;
  ThreadPool::global().parallel_for(p.kv_heads * row_blocks, [&](int64_t task) {
    const int64_t row_begin = (task / p.kv_heads) * task_rows;
    attend_task(p, q, packed, out, task % p.kv_heads, row_begin, std::min(p.q_rows, row_begin + task_rows));
  });
}

}  // namespace stepmix::kernels::amx
