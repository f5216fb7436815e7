// AVX-512 FP32 GEMM in the columns layout (gemm_columns_f32): y[M,N] =
// x[M,K] · W[N,K]ᵀ with vfmadd, the 16 lanes of a zmm running over output
// columns, x (float32, row-major) broadcast one element at a time.
//
// Why. The FP32 arithmetic (W8A16 and dense with float32 activations) runs in
// the rows layout (gemm_avx512.cpp) otherwise, whose lanes are 16 rows of x:
// with few rows (49 or 98 tokens of the embedded model) up to a quarter of
// the lanes hold padding, x is transposed in and the sums out. Here W is
// converted (E4M3 · s_w, bf16 or float32 → float32) and packed once per call,
// one panel of 16-column blocks at a time ([block][k][16]) by the thread that
// uses it, and every lane does useful work.
//
// Per output the arithmetic is the rows layout's: acc = fma(x_k, w_k, acc)
// for k = 0 … K−1 from a zero accumulator (one rounding per step), w_k the
// same float32 the rows layout converts (e4m3_to_f32_scaled), then
// float32(acc · alpha), + bias, the output conversion. So the two layouts
// agree bit for bit (tests/kernels/gemm_variants_test.cpp), whichever gemm()
// picks, and no result depends on the blocking or the thread count.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/cpu/avx512_helpers.hpp"
#include "kernels/cpu/avx512_kernels.hpp"

#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // as in gemm_columns_avx512.cpp
#endif

namespace stepmix::kernels::avx512 {
namespace {

constexpr int kMR = 8;  // rows of x per micro-kernel
constexpr int kNV = 3;  // 16-column vectors per micro-kernel
// Packed panel budget per thread: kept within L2 next to the rows of x.
constexpr int64_t kPanelBytes = 384 << 10;

struct Plan {
  const GemmArgs* args;
  E4M3ToBf16Table weight_table;  // bf16(decode(code) · weight_scale), for E4M3TimesScaleBF16
  int64_t blocks;        // ceil(N / 16)
  int64_t panel_blocks;  // 16-column blocks per panel (a multiple of kNV)
};

// W[n][k0 .. k0+16) as float32 (zero past K or for n >= N), converted as
// the rows layout converts it. E4M3 and E4M3TimesScaleF32 weights never come
// here: pack_block_e4m3 transposes and decodes their codes itself.
__m512 load_w_row(const Plan& p, int64_t n, int64_t k0) {
  const GemmArgs& g = *p.args;
  if (n >= g.N) return _mm512_setzero_ps();
  const __mmask16 mask = tail_mask16(g.K - k0);
  const int64_t at = n * g.K + k0;
  switch (g.w_type) {
    case WeightOperand::F32:
      return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(g.w) + at);
    case WeightOperand::BF16:
      return bf16_to_f32(_mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(g.w) + at));
    case WeightOperand::E4M3:
    case WeightOperand::E4M3TimesScaleF32:
      break;  // packed by pack_block_e4m3
    case WeightOperand::E4M3TimesScaleBF16: {
      const __m512i words =
          p.weight_table.convert(_mm256_maskz_loadu_epi8(mask, static_cast<const uint8_t*>(g.w) + at));
      return _mm512_maskz_mov_ps(mask, bf16_to_f32(_mm512_castsi512_si256(words)));
    }
  }
  return _mm512_setzero_ps();
}

// Lane b of `codes` (16 codes of one k) decoded into panel row b, for the
// first `count` lanes.
template <bool MayHoldNan>
inline void store_decoded_group(__m512i codes, int64_t count, __m512 scale256, float* row) {
  const auto convert = [&](__m128i c) {
    return MayHoldNan ? e4m3_to_f32_scaled(c, scale256) : e4m3_to_f32_scaled_finite(c, scale256);
  };
  _mm512_store_ps(row, convert(_mm512_castsi512_si128(codes)));
  if (count > 1) _mm512_store_ps(row + 16, convert(_mm512_extracti32x4_epi32(codes, 1)));
  if (count > 2) _mm512_store_ps(row + 32, convert(_mm512_extracti32x4_epi32(codes, 2)));
  if (count > 3) _mm512_store_ps(row + 48, convert(_mm512_extracti32x4_epi32(codes, 3)));
}

// An FP8 block of W into out = [K][16], 16 rows × 64 k at a time: the codes
// are transposed as bytes (a dword transpose, then two shuffles per 4 k),
// and each k's 16 codes are then decoded straight into their panel row with
// the rows layout's conversion. Transposing the 1-byte codes rather than the
// decoded floats takes a quarter of the shuffles, and each conversion fills a
// whole panel row; at the embedded model's shapes this pass was a third of
// the GEMM's time with float transposes.
void pack_block_e4m3(const Plan& p, int64_t block, float* out) {
  const GemmArgs& g = *p.args;
  const auto* codes = static_cast<const uint8_t*>(g.w);
  const __m512 scale256 = _mm512_set1_ps(g.w_type == WeightOperand::E4M3 ? 256.0f : g.weight_scale * 256.0f);
  // After the dword transpose byte 4 i + b of vector j is code (row i, k 4 j + b).
  // In-lane byte shuffle, then a dword permute across lanes, put it at byte
  // 16 b + i, so that 128-bit lane b holds the 16 rows' codes of k 4 j + b
  // (AVX512BW and F only: the CPUs this variant runs on need not have VBMI).
  const __m512i in_lane = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  const __m512i across = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const int64_t rows = std::min<int64_t>(16, g.N - block * 16);
  const int64_t next_rows = std::clamp<int64_t>(g.N - (block + 1) * 16, 0, 16);
  for (int64_t k0 = 0; k0 < g.K; k0 += 64) {
    const int64_t kn = std::min<int64_t>(64, g.K - k0);
    const __mmask64 mask = kn == 64 ? ~__mmask64(0) : (__mmask64(1) << kn) - 1;
    __m512i v[16];
    for (int r = 0; r < 16; ++r) {
      const uint8_t* at = codes + (block * 16 + r) * g.K + k0;
      v[r] = r < rows ? _mm512_maskz_loadu_epi8(mask, at) : _mm512_setzero_si512();
      // The same codes of the next block, 16 K bytes on: measured, the
      // conversion otherwise waits on memory for most of its time.
      if (r < next_rows) _mm_prefetch(reinterpret_cast<const char*>(at + 16 * g.K), _MM_HINT_T0);
    }
    transpose_16x16_dwords(v);  // v[j]: dword i = codes (row i, k0 + 4 j … 4 j + 3)
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {  // unrolled, so that v stays in registers
      if (4 * j >= kn) break;
      const __m512i c = _mm512_permutexvar_epi32(across, _mm512_shuffle_epi8(v[j], in_lane));
      float* row = out + (k0 + 4 * j) * 16;
      const int64_t left = kn - 4 * j;  // k of this group inside K (masked-off codes are 0 -> +0.0)
      // Checkpoints hold no NaN codes in practice: one test for the 64 codes
      // instead of one per conversion; any NaN takes the checking conversion.
      const bool has_nan = _mm512_cmpeq_epi8_mask(_mm512_and_si512(c, _mm512_set1_epi8(0x7F)), _mm512_set1_epi8(0x7F)) != 0;
      if (has_nan) {
        store_decoded_group<true>(c, left, scale256, row);
      } else {
        store_decoded_group<false>(c, left, scale256, row);
      }
    }
  }
}

// One 16-column block of W into out = [K][16]: 16 rows × 16 k per transpose.
void pack_block(const Plan& p, int64_t block, float* out) {
  const GemmArgs& g = *p.args;
  if (g.w_type == WeightOperand::E4M3 || g.w_type == WeightOperand::E4M3TimesScaleF32)
    return pack_block_e4m3(p, block, out);
  for (int64_t k0 = 0; k0 < g.K; k0 += 16) {
    __m512i rows[16];
    for (int r = 0; r < 16; ++r) rows[r] = _mm512_castps_si512(load_w_row(p, block * 16 + r, k0));
    transpose_16x16_dwords(rows);  // rows[s] = column k0 + s of the 16 rows of W
    const int64_t count = std::min<int64_t>(16, g.K - k0);
    for (int64_t s = 0; s < count; ++s) _mm512_store_si512(out + (k0 + s) * 16, rows[s]);
  }
}

using Kernel = void (*)(const GemmArgs& g, int64_t m, int64_t block, const float* w);

// y rows [m, m+MR) × the columns of blocks [block, block+NV), packed weights
// at w ([NV][K][16]): sums over every k, then the epilogue straight into y.
template <int MR, int NV>
void micro_kernel(const GemmArgs& g, int64_t m, int64_t block, const float* w) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  const float* x = static_cast<const float*>(g.a) + m * g.K;
  const int64_t block_stride = g.K * 16;
  for (int64_t k = 0; k < g.K; ++k) {
    __m512 wv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) wv[v] = _mm512_load_ps(w + v * block_stride + k * 16);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 xv = _mm512_set1_ps(x[r * g.K + k]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(xv, wv[v], acc[r][v]);
    }
  }
  store_output_block<MR, NV>(g, acc, m, block);
}

template <std::size_t... I>
constexpr std::array<Kernel, sizeof...(I)> kernels_for(std::index_sequence<I...>) {
  return {&micro_kernel<int(I / kNV) + 1, int(I % kNV) + 1>...};
}
constexpr auto kKernels = kernels_for(std::make_index_sequence<kMR * kNV>{});  // [MR - 1][NV - 1]

// One panel (panel_blocks blocks from block_begin), packed into this thread's
// scratch, against rows [m_begin, m_end) of x.
void run_unit(const Plan& p, int64_t block_begin, int64_t m_begin, int64_t m_end) {
  const GemmArgs& g = *p.args;
  const int64_t block_end = std::min(p.blocks, block_begin + p.panel_blocks);
  thread_local AlignedScratch panel_scratch;
  float* panel = panel_scratch.get<float>(std::size_t(p.panel_blocks * g.K * 16));
  for (int64_t b = block_begin; b < block_end; ++b) pack_block(p, b, panel + (b - block_begin) * g.K * 16);
  // Rows in groups of as equal size as kMR allows (98 rows: 7 × 8 + 6 × 7,
  // not 12 × 8 + 2): a group of few rows loads nearly as much per product as
  // it multiplies. Each output's sum is the same whatever its group.
  const int64_t rows = m_end - m_begin, groups = (rows + kMR - 1) / kMR;
  for (int64_t group = 0, m = m_begin; group < groups; ++group) {
    const int mr = int(rows / groups + (group < rows % groups ? 1 : 0));
    for (int64_t b = block_begin; b < block_end; b += kNV) {
      const int nv = int(std::min<int64_t>(kNV, block_end - b));
      kKernels[std::size_t((mr - 1) * kNV + (nv - 1))](g, m, b, panel + (b - block_begin) * g.K * 16);
    }
    m += mr;
  }
}

}  // namespace

bool columns_f32_kernel_applies(const GemmArgs& g) {
  const bool operands = g.arithmetic == GemmArithmetic::F32 && g.a_type == ActivationOperand::F32 &&
                        (g.w_type == WeightOperand::F32 || g.w_type == WeightOperand::BF16 ||
                         g.w_type == WeightOperand::E4M3 || g.w_type == WeightOperand::E4M3TimesScaleF32 ||
                         g.w_type == WeightOperand::E4M3TimesScaleBF16);
  return operands && g.K >= 1 && g.K <= kColumnsMaxK && g.M <= kColumnsF32MaxRows;
}

void gemm_columns_f32(const GemmArgs& g) {
  if (g.M <= 0 || g.N <= 0) return;
  Plan p;
  p.args = &g;
  p.blocks = (g.N + 15) / 16;
  if (g.w_type == WeightOperand::E4M3TimesScaleBF16) p.weight_table = E4M3ToBf16Table::scaled(g.weight_scale);
  const GemmTasks tasks(g);
  // Units: panels of W against shares of the rows. Every share packs its
  // panel again, so work is split into narrower panels first (about two per
  // thread) and rows only when there are fewer panels than threads.
  const int64_t threads = tasks.threads();
  const int64_t widest = std::clamp<int64_t>(kPanelBytes / (g.K * 64) / kNV * kNV, kNV, 4 * kNV);
  const int64_t wanted = (p.blocks + 2 * threads - 1) / (2 * threads);
  p.panel_blocks = std::clamp<int64_t>((wanted + kNV - 1) / kNV * kNV, kNV, widest);
  const int64_t panels = (p.blocks + p.panel_blocks - 1) / p.panel_blocks;
  const int64_t row_groups = (g.M + kMR - 1) / kMR;
  const int64_t shares = std::clamp<int64_t>((threads + panels - 1) / panels, 1, row_groups);
  tasks.run(panels * shares, [&](int64_t u) {
    const int64_t panel = u / shares, share = u % shares;
    const int64_t m_begin = std::min(g.M, row_groups * share / shares * kMR);
    const int64_t m_end = std::min(g.M, row_groups * (share + 1) / shares * kMR);
    if (m_begin < m_end) run_unit(p, panel * p.panel_blocks, m_begin, m_end);
  });
}

}  // namespace stepmix::kernels::avx512
