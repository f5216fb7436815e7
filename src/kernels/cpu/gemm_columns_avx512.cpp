// AVX-512 BF16 GEMM, second layout (gemm_columns): y[M,N] = x[M,K] · W[N,K]ᵀ
// with vdpbf16ps, the 16 lanes of a zmm running over *output columns*.
//
// Why a second layout. The main kernel (gemm_avx512.cpp) puts rows of x in
// the lanes and broadcasts weights, which reads weights in place but
// transposes x on the way in and the sums on the way out: two 16×16
// transposes per 16×16 block of y. With many rows of x and short K or N (the
// benchmark's K = N = 64 shape at 1024–4096 tokens) the transposes cost as
// much as the products; at K = N = 2048 and 1024+ tokens still 10–15%.
// Here W is packed into VNNI pairs ([16-column block][k pair][16 columns][2])
// and x is read in place, a bf16 pair at a time broadcast from row-major
// storage, so sums come out as rows of y and the epilogue stores them
// directly.
//
// Per output the arithmetic is the main kernel's: the same vdpbf16ps over the
// same (x, w) pairs in k order from a zero accumulator, then float32(acc ·
// alpha), + bias, the output conversion. So the two kernels agree bit for bit
// (tests/kernels/gemm_variants_test.cpp), and results do not depend on the
// blocking or the thread count (every output is one micro-kernel's sum over
// the whole K).
//
// W is packed one panel (192 columns × K) at a time by the thread that uses
// it, into its own grow-only scratch (384·K_pad bytes); x is converted to
// bf16 pairs (M·K_pad·2 bytes, calling thread's scratch) only when it holds
// E4M3 codes or K is odd.
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "core/cpu_features.hpp"
#include "kernels/cpu/avx512_helpers.hpp"
#include "kernels/cpu/avx512_kernels.hpp"

// GCC 12 also reports the _mm512_undefined_ps placeholder inside
// _mm512_mul_round_ps as uninitialized once the epilogue is inlined into the
// templates below (see the same note in avx512_helpers.hpp).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace stepmix::kernels::avx512 {
namespace {

constexpr int kMR = 8;                // rows of x per micro-kernel
constexpr int kNV = 3;                // 16-column vectors per micro-kernel
constexpr int64_t kPanelBlocks = 12;  // 16-column blocks of W packed together (4 micro-kernel widths)


struct ColumnsPlan {
  const GemmArgs* args;
  int64_t pairs;               // K_pad / 2
  const uint16_t* x;           // [M][x_stride] bf16, pairs zero-padded
  int64_t x_stride;            // elements
  int64_t blocks;              // ceil(N / 16)
  const E4M3ToBf16Table* weight_table;
};

// 32 k of one row of W (from k0, `kn` of them real) as bf16 words, zero past kn.
__m512i load_w_words(const GemmArgs& g, const E4M3ToBf16Table& table, int64_t n, int64_t k0, int64_t kn) {
  const __mmask32 mask = tail_mask32(kn);
  if (g.w_type == WeightOperand::BF16)
    return _mm512_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(g.w) + n * g.K + k0);
  return _mm512_maskz_mov_epi16(mask,
                                table.convert(_mm256_maskz_loadu_epi8(mask, static_cast<const uint8_t*>(g.w) + n * g.K + k0)));
}

// One 16-column block of W into out = [pairs][16][2]: 16 rows × 16 pairs per transpose.
void pack_w_block(const ColumnsPlan& p, int64_t block, uint16_t* out) {
  const GemmArgs& g = *p.args;
  for (int64_t p0 = 0; p0 < p.pairs; p0 += 16) {
    __m512i rows[16];
    for (int r = 0; r < 16; ++r) {
      const int64_t n = block * 16 + r;
      rows[r] = n < g.N ? load_w_words(g, *p.weight_table, n, 2 * p0, g.K - 2 * p0) : _mm512_setzero_si512();
    }
    transpose_16x16_dwords(rows);  // rows[s] = pair p0 + s of the 16 columns
    const int64_t count = std::min<int64_t>(16, p.pairs - p0);
    for (int64_t s = 0; s < count; ++s) _mm512_store_si512(out + (p0 + s) * 32, rows[s]);
  }
}

// Row m of x as bf16 pairs (codes decoded exactly; an odd K's last pair padded with +0).
void convert_x_row(const ColumnsPlan& p, const E4M3ToBf16Table& exact, int64_t m, uint16_t* out) {
  const GemmArgs& g = *p.args;
  const int64_t padded = 2 * p.pairs;
  for (int64_t k = 0; k < padded; k += 32) {
    const __mmask32 load = g.K - k > 0 ? tail_mask32(g.K - k) : 0;
    __m512i v;
    if (g.a_type == ActivationOperand::BF16) {
      v = _mm512_maskz_loadu_epi16(load, static_cast<const uint16_t*>(g.a) + m * g.K + k);
    } else {
      v = _mm512_maskz_mov_epi16(load, exact.convert(_mm256_maskz_loadu_epi8(load, static_cast<const uint8_t*>(g.a) + m * g.K + k)));
    }
    _mm512_mask_storeu_epi16(out + k, tail_mask32(padded - k), v);
  }
}

// ---------------------------------------------------------------- micro-kernel
// y rows [m, m+MR) × the columns of blocks [block, block+NV), whose packed
// weights start at w: sums over every pair, then the epilogue, stored
// straight into y.
using ColumnsKernel = void (*)(const ColumnsPlan& p, int64_t m, int64_t block, const uint16_t* w);

template <int MR, int NV>
void columns_micro_kernel(const ColumnsPlan& p, int64_t m, int64_t block, const uint16_t* w) {
  const GemmArgs& g = *p.args;
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();

  const int64_t w_block_stride = p.pairs * 32;
  const uint16_t* x = p.x + m * p.x_stride;
  for (int64_t s = 0; s < p.pairs; ++s) {
    __m512bh wv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) wv[v] = (__m512bh)_mm512_load_si512(w + v * w_block_stride + s * 32);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t pair;
      std::memcpy(&pair, x + r * p.x_stride + 2 * s, 4);
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], xv, wv[v]);
    }
  }

  // Epilogue, as in the main kernel: two roundings, never fused.
  store_output_block<MR, NV>(g, acc, m, block);
}

template <std::size_t... I>
constexpr std::array<ColumnsKernel, sizeof...(I)> columns_kernels_for(std::index_sequence<I...>) {
  return {&columns_micro_kernel<int(I / kNV) + 1, int(I % kNV) + 1>...};
}
// [MR - 1][NV - 1], flattened.
constexpr auto kColumnsKernels = columns_kernels_for(std::make_index_sequence<kMR * kNV>{});

// A work unit: one panel of W (kPanelBlocks blocks from block_begin), packed
// into this thread's scratch, against rows [m_begin, m_end) of x. Each 8-row
// group of x (from L1) meets every micro-kernel width of the panel (from L2).
void run_columns_unit(const ColumnsPlan& p, int64_t block_begin, int64_t m_begin, int64_t m_end) {
  const int64_t block_end = std::min(p.blocks, block_begin + kPanelBlocks);
  thread_local AlignedScratch panel_scratch;
  uint16_t* panel = panel_scratch.get<uint16_t>(std::size_t(kPanelBlocks * p.pairs * 32));
  for (int64_t b = block_begin; b < block_end; ++b) pack_w_block(p, b, panel + (b - block_begin) * p.pairs * 32);
  for (int64_t m = m_begin; m < m_end; m += kMR) {
    const int mr = int(std::min<int64_t>(kMR, m_end - m));
    for (int64_t b = block_begin; b < block_end; b += kNV) {
      const int nv = int(std::min<int64_t>(kNV, block_end - b));
      kColumnsKernels[std::size_t((mr - 1) * kNV + (nv - 1))](p, m, b, panel + (b - block_begin) * p.pairs * 32);
    }
  }
}

}  // namespace

bool columns_kernel_applies(const GemmArgs& g) {
  const bool operands = g.arithmetic == GemmArithmetic::BF16 &&
                        (g.a_type == ActivationOperand::BF16 || g.a_type == ActivationOperand::E4M3Codes) &&
                        (g.w_type == WeightOperand::BF16 || g.w_type == WeightOperand::E4M3 ||
                         g.w_type == WeightOperand::E4M3TimesScaleBF16);
  return operands && g.K <= kColumnsMaxK && double(g.M) * double(g.N + g.K) >= double(g.N) * double(g.K);
}

void gemm_columns(const GemmArgs& g) {
  ColumnsPlan p;
  p.args = &g;
  p.pairs = (g.K + 1) / 2;
  p.blocks = (g.N + 15) / 16;
  const E4M3ToBf16Table exact = E4M3ToBf16Table::exact();
  const E4M3ToBf16Table weight_table =
      g.w_type == WeightOperand::E4M3TimesScaleBF16 ? E4M3ToBf16Table::scaled(g.weight_scale) : exact;
  p.weight_table = &weight_table;

  thread_local AlignedScratch x_scratch;
  const bool x_in_place = g.a_type == ActivationOperand::BF16 && g.K % 2 == 0;
  uint16_t* converted_x = x_in_place ? nullptr : x_scratch.get<uint16_t>(std::size_t(g.M * 2 * p.pairs));
  p.x = x_in_place ? static_cast<const uint16_t*>(g.a) : converted_x;
  p.x_stride = 2 * p.pairs;

  const GemmTasks tasks(g);
  if (!x_in_place) {
    constexpr int64_t kRowsPerTask = 64;
    tasks.run((g.M + kRowsPerTask - 1) / kRowsPerTask, [&](int64_t t) {
      for (int64_t m = t * kRowsPerTask; m < std::min(g.M, (t + 1) * kRowsPerTask); ++m)
        convert_x_row(p, exact, m, converted_x + m * p.x_stride);
    });
  }
  // Units: every panel of W against a share of the rows. Each panel is packed
  // once per share, so rows are split only as far as it takes to give every
  // thread a few units (M >= N·K / (N + K) makes that packing cheap).
  const int64_t panels = (p.blocks + kPanelBlocks - 1) / kPanelBlocks;
  const int64_t threads = tasks.threads();
  const int64_t row_groups = (g.M + kMR - 1) / kMR;
  const int64_t shares = std::clamp<int64_t>((4 * threads + panels - 1) / panels, 1, row_groups);
  tasks.run(panels * shares, [&](int64_t u) {
    const int64_t panel = u / shares, share = u % shares;
    // Share boundaries on multiples of kMR rows.
    const int64_t m_begin = std::min(g.M, row_groups * share / shares * kMR);
    const int64_t m_end = std::min(g.M, row_groups * (share + 1) / shares * kMR);
    if (m_begin < m_end) run_columns_unit(p, panel * kPanelBlocks, m_begin, m_end);
  });
}

}  // namespace stepmix::kernels::avx512
