// AMX-BF16 GEMM (the "amx" variant): y[M,N] = x[M,K] · W[N,K]ᵀ with BF16
// arithmetic on AMX tiles (tdpbf16ps: products of bf16 pairs, FP32 sums).
// Everything else (FP32 arithmetic, quantization, dequantization) is the
// AVX-512 variant's; so are the conversions used here (avx512_helpers.hpp).
//
// Roles. W is the tile "A" operand: an A tile row is 32 consecutive k of one
// row of W, which is how W is stored, so weights are converted (E4M3 -> bf16)
// or copied but never transposed. x is the "B" operand, in VNNI pairs: B tile
// row kp holds (x[m][2kp], x[m][2kp+1]) for 16 rows m. An accumulator tile is
// therefore a block of yᵀ ([16 n][16 m] floats) and the epilogue transposes
// it back while applying alpha, bias and the output conversion.
//
// Layouts (bf16, zero padded: M and N to 16, K to 32; padding adds +0):
//   packed x: [m tile][k block][16 k pairs][16 m][2]   (1 KiB per tile)
//   packed W: [n tile][k block][16 n][32 k]            (1 KiB per tile)
// so every tile load reads 1 KiB of contiguous memory (stride 64 bytes).
// x is packed once per call. W is packed once per call when more than one
// block of x rows shares it; otherwise each work unit converts its rows of W
// (one K chunk, one pair of tiles at a time) into a per-thread panel of the
// same layout. Either way each weight is converted once per call. The packed
// copies live in grow-only buffers of the calling thread (M·K·2 bytes for x,
// N·K·2 more when W is packed), so steady-state calls allocate nothing.
//
// Blocking. A work unit is (x_rows rows of x) × (w_rows rows of W) and walks
// K in chunks of k_chunk (defaults in amx_kernels.hpp: 256 × 256, 256 k;
// 512 rows of x when M > 1024, fewer rows of W where that keeps every thread
// busy, 2048 k when all of x is one block of rows).
// Per chunk: for each pair of W tiles (32 rows of W, k_chunk · 64 bytes,
// stays in L1), for each pair of x tiles (from L2): four accumulator tiles
// (2 W × 2 x) run over the chunk with 4 tile loads and 4 tdpbf16ps per 32 k,
// each load placed just before the first product that reads it (tile
// registers are not renamed: a load waits until the products still reading
// its tile are done, so grouping the four loads first serialises loads and
// products). Between chunks the accumulators are parked in a
// per-thread buffer (exact: float32 stored and reloaded); after the last
// chunk each 32×32 block goes through the epilogue straight away. The k order
// of every sum is the same for every blocking and thread count, so results
// are bit-identical across them.
//
// Threads. Units are claimed from an atomic counter by one task per pool
// thread; each task configures the tiles itself (tile state is per thread),
// then releases them (tilerelease) when its part is done. AMX needs Linux's
// per-process permission, asked for by supported(); gemm() checks it too.
//
// Build with -DSTEPMIX_AMX_EMULATE to replace the tile instructions by a
// scalar model of them (and report "amx" supported wherever the AVX-512
// variant is): for testing the packing, blocking and epilogue on a CPU
// without AMX. Never for production builds.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "core/cpu_features.hpp"
#include "kernels/cpu/amx_kernels.hpp"
#include "kernels/cpu/amx_tiles.hpp"
#include "kernels/cpu/avx512_helpers.hpp"
#include "kernels/cpu/avx512_kernels.hpp"

namespace stepmix::kernels {
namespace amx {
namespace {

using avx512::AlignedScratch;
using avx512::E4M3ToBf16ByteTables;
using avx512::E4M3ToBf16Table;
using avx512::tail_mask16;
using avx512::tail_mask32;
using avx512::transpose_16x16_dwords;

constexpr int64_t kTileRows = 16;     // rows of every tile (m, n or k pairs)
constexpr int64_t kBlockK = 32;       // k per tile row (64 bytes of bf16)
constexpr int64_t kTileElems = 512;   // bf16 per A/B tile, floats per 2 C tiles
constexpr int64_t kTileStride = 64;   // bytes between tile rows, everywhere
constexpr int64_t kCTileFloats = 256; // floats per accumulator tile
constexpr int64_t kLargeXRows = 512;  // rows of x per unit when M > 1024


// ---------------------------------------------------------------- micro-kernel
// NT W tiles (w0, w1) × MT x tiles (x0, x1) over kbn k blocks (consecutive
// tiles 1 KiB apart). c holds the accumulators, tile (i, j) at c + (2i+j)·256
// floats; loaded first if `accumulate`, else started from zero; stored back.
template <int NT, int MT>
void tile_kernel(const uint16_t* w0, const uint16_t* w1, const uint16_t* x0, const uint16_t* x1, int64_t kbn, float* c,
                 bool accumulate) {
  constexpr long S = kTileStride;
  if (accumulate) {
    STEPMIX_TILE_LOAD(0, c, S);
    if constexpr (MT == 2) STEPMIX_TILE_LOAD(1, c + kCTileFloats, S);
    if constexpr (NT == 2) STEPMIX_TILE_LOAD(2, c + 2 * kCTileFloats, S);
    if constexpr (NT == 2 && MT == 2) STEPMIX_TILE_LOAD(3, c + 3 * kCTileFloats, S);
  } else {
    STEPMIX_TILE_ZERO(0);
    if constexpr (MT == 2) STEPMIX_TILE_ZERO(1);
    if constexpr (NT == 2) STEPMIX_TILE_ZERO(2);
    if constexpr (NT == 2 && MT == 2) STEPMIX_TILE_ZERO(3);
  }
  for (int64_t kb = 0; kb < kbn; ++kb) {
    const int64_t offset = kb * kTileElems;
    STEPMIX_TILE_LOAD(4, w0 + offset, S);
    STEPMIX_TILE_LOAD(6, x0 + offset, S);
    STEPMIX_TILE_DPBF16PS(0, 4, 6);
    if constexpr (MT == 2) {
      STEPMIX_TILE_LOAD(7, x1 + offset, S);
      STEPMIX_TILE_DPBF16PS(1, 4, 7);
    }
    if constexpr (NT == 2) {
      STEPMIX_TILE_LOAD(5, w1 + offset, S);
      STEPMIX_TILE_DPBF16PS(2, 5, 6);
    }
    if constexpr (NT == 2 && MT == 2) STEPMIX_TILE_DPBF16PS(3, 5, 7);
  }
  STEPMIX_TILE_STORE(0, c, S);
  if constexpr (MT == 2) STEPMIX_TILE_STORE(1, c + kCTileFloats, S);
  if constexpr (NT == 2) STEPMIX_TILE_STORE(2, c + 2 * kCTileFloats, S);
  if constexpr (NT == 2 && MT == 2) STEPMIX_TILE_STORE(3, c + 3 * kCTileFloats, S);
}

using TileKernel = void (*)(const uint16_t*, const uint16_t*, const uint16_t*, const uint16_t*, int64_t, float*, bool);
constexpr TileKernel kTileKernels[2][2] = {{&tile_kernel<1, 1>, &tile_kernel<1, 2>},
                                           {&tile_kernel<2, 1>, &tile_kernel<2, 2>}};

// ---------------------------------------------------------------- call plan
struct Plan {
  const GemmArgs* args;
  int64_t kb_total;      // k blocks of 32 (K rounded up)
  int64_t m_tiles;       // 16-row tiles of x
  int64_t n_tiles;       // 16-row tiles of W
  int64_t unit_m_tiles;  // per work unit (even)
  int64_t unit_n_tiles;  // per work unit (even)
  int64_t chunk_kb;      // k blocks per K chunk
  int64_t m_blocks, n_blocks;
  uint16_t* packed_x;    // [m_tiles][kb_total][512]
  uint16_t* packed_w;    // [n_tiles][kb_total][512], or null: per-unit panels
  E4M3ToBf16Table exact_table;   // decode(code) as bf16
  E4M3ToBf16Table weight_table;  // bf16(decode(code) · weight_scale)
  bool vbmi;                     // byte-permute conversion available
  E4M3ToBf16ByteTables exact_bytes, weight_bytes;
};

// ---------------------------------------------------------------- packing x
// x tile row m_tile, every k block: 16 rows × 32 k -> transposed dword pairs.
void pack_x_tile_row(const Plan& p, int64_t m_tile) {
  const GemmArgs& g = *p.args;
  uint16_t* out = p.packed_x + m_tile * p.kb_total * kTileElems;
  for (int64_t kb = 0; kb < p.kb_total; ++kb) {
    const int64_t k0 = kb * kBlockK;
    const __mmask32 mask = tail_mask32(g.K - k0);
    __m512i rows[16];
    for (int r = 0; r < 16; ++r) {
      const int64_t m = m_tile * kTileRows + r;
      if (m >= g.M) {
        rows[r] = _mm512_setzero_si512();
      } else if (g.a_type == ActivationOperand::BF16) {
        rows[r] = _mm512_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(g.a) + m * g.K + k0);
      } else {  // E4M3 codes, decoded exactly; masked-off codes are 0 -> +0.0
        rows[r] = p.exact_table.convert(_mm256_maskz_loadu_epi8(mask, static_cast<const uint8_t*>(g.a) + m * g.K + k0));
      }
    }
    // rows[r] dword j = (x[m][k0+2j], x[m][k0+2j+1]); afterwards rows[j] holds
    // that pair for the 16 rows m: B tile row j.
    transpose_16x16_dwords(rows);
    uint16_t* tile = out + kb * kTileElems;
    for (int j = 0; j < 16; ++j) _mm512_store_si512(tile + j * kBlockK, rows[j]);
  }
}

// ---------------------------------------------------------------- weights
// 64 codes per step (avx512::decode_64_e4m3_to_bf16_vbmi); codes [32i, 32i+32)
// land at dst + i·512 (consecutive k blocks of one tile row). Returns how
// many k blocks it filled (an even number).
__attribute__((target("avx512vbmi"))) int64_t convert_codes_to_tile_rows_vbmi(const E4M3ToBf16ByteTables& t,
                                                                               const uint8_t* codes, int64_t count,
                                                                               uint16_t* dst) {
  const E4M3ToBf16ByteTables tables = t;  // a local copy stays in registers (stores through dst cannot alias it)
  int64_t i = 0;
  for (; i + 64 <= count; i += 64) {
    __m512i first, second;
    avx512::decode_64_e4m3_to_bf16_vbmi(tables, codes + i, first, second);
    uint16_t* d = dst + (i / kBlockK) * kTileElems;
    _mm512_store_si512(d, first);
    _mm512_store_si512(d + kTileElems, second);
  }
  return i / kBlockK;
}

// Row n of W, k blocks [kb0, kb0 + kbn), as bf16: block i goes to
// dst + i·512 (dst: this row's place in the first tile). Rows past N and k
// past K are zero.
void convert_w_row(const Plan& p, int64_t n, int64_t kb0, int64_t kbn, uint16_t* dst) {
  const GemmArgs& g = *p.args;
  if (n >= g.N) {
    for (int64_t i = 0; i < kbn; ++i) _mm512_store_si512(dst + i * kTileElems, _mm512_setzero_si512());
    return;
  }
  const int64_t k_begin = kb0 * kBlockK;
  const int64_t avail = std::min(g.K - k_begin, kbn * kBlockK);  // real k in this run (> 0)
  auto mask_for = [&](int64_t i) { return tail_mask32(std::max<int64_t>(0, avail - i * kBlockK)); };
  if (g.w_type == WeightOperand::BF16) {
    const uint16_t* src = static_cast<const uint16_t*>(g.w) + n * g.K + k_begin;
    for (int64_t i = 0; i < kbn; ++i) {
      const __m512i v = (i + 1) * kBlockK <= avail ? _mm512_loadu_si512(src + i * kBlockK)
                                                    : _mm512_maskz_loadu_epi16(mask_for(i), src + i * kBlockK);
      _mm512_store_si512(dst + i * kTileElems, v);
    }
    return;
  }
  // E4M3 (exact) or E4M3TimesScaleBF16 (bf16(decode · scale)).
  const bool exact = g.w_type == WeightOperand::E4M3;
  const uint8_t* src = static_cast<const uint8_t*>(g.w) + n * g.K + k_begin;
  int64_t i = 0;
  if (p.vbmi) i = convert_codes_to_tile_rows_vbmi(exact ? p.exact_bytes : p.weight_bytes, src, avail, dst);
  const E4M3ToBf16Table& table = exact ? p.exact_table : p.weight_table;
  for (; i < kbn; ++i) {
    __m512i v;
    if ((i + 1) * kBlockK <= avail) {
      v = table.convert(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i * kBlockK)));
    } else {
      const __mmask32 mask = mask_for(i);
      v = _mm512_maskz_mov_epi16(mask, table.convert(_mm256_maskz_loadu_epi8(mask, src + i * kBlockK)));
    }
    _mm512_store_si512(dst + i * kTileElems, v);
  }
}

// W tiles [t0, t0 + nt), k blocks [kb0, kb0 + kbn) into dst laid out
// [tile][k block][16 rows][32 k], `tile_stride` elements between tiles.
void convert_w_tiles(const Plan& p, int64_t t0, int64_t nt, int64_t kb0, int64_t kbn, uint16_t* dst,
                     int64_t tile_stride) {
  compiler_barrier();
  for (int64_t t = 0; t < nt; ++t)
    for (int r = 0; r < 16; ++r)
      convert_w_row(p, (t0 + t) * kTileRows + r, kb0, kbn, dst + t * tile_stride + r * kBlockK);
  compiler_barrier();
}

// Asks for the source bytes of W rows [n_begin, n_end), k blocks
// [kb0, kb0 + kbn) to be brought into L2 ahead of their conversion: each row's
// run is short and rows are far apart, which the hardware prefetchers pick up
// late.
void prefetch_w_rows(const Plan& p, int64_t n_begin, int64_t n_end, int64_t kb0, int64_t kbn) {
  const GemmArgs& g = *p.args;
  const int64_t element = g.w_type == WeightOperand::BF16 ? 2 : 1;
  const int64_t k_begin = kb0 * kBlockK;
  const int64_t bytes = std::min(g.K - k_begin, kbn * kBlockK) * element;
  const auto* base = static_cast<const char*>(g.w);
  for (int64_t n = n_begin; n < std::min(n_end, g.N); ++n) {
    const char* row = base + (n * g.K + k_begin) * element;
    for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(row + b, _MM_HINT_T1);
  }
}

// ---------------------------------------------------------------- epilogue
// One accumulator tile c ([16 n][16 m] floats) -> y rows [m0, m0+16),
// columns [n0, n0+16) (clipped to M, N): y = float32(acc · alpha) (+ bias),
// then the output type.
void write_tile(const Plan& p, const float* c, int64_t n0, int64_t m0) {
  const GemmArgs& g = *p.args;
  const int64_t cols = std::min<int64_t>(16, g.N - n0), valid_rows = std::min<int64_t>(16, g.M - m0);
  if (cols <= 0 || valid_rows <= 0) return;
  __m512i rows[16];
  for (int j = 0; j < 16; ++j) rows[j] = _mm512_load_si512(c + 16 * j);
  transpose_16x16_dwords(rows);  // rows[r]: y row m0 + r, columns n0..n0+15
  const __mmask16 col_mask = tail_mask16(cols);
  __m512 bias = _mm512_setzero_ps();
  if (g.bias_type == BiasType::F32) bias = _mm512_maskz_loadu_ps(col_mask, static_cast<const float*>(g.bias) + n0);
  if (g.bias_type == BiasType::BF16)
    bias = avx512::bf16_to_f32(_mm256_maskz_loadu_epi16(col_mask, static_cast<const uint16_t*>(g.bias) + n0));
  const __m512 alpha = _mm512_set1_ps(g.alpha);
  for (int64_t r = 0; r < valid_rows; ++r) {
    // Explicit rounding intrinsics: never contracted into an FMA, so the two
    // roundings match the reference exactly.
    __m512 v = _mm512_mul_round_ps(_mm512_castsi512_ps(rows[r]), alpha, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (g.bias_type != BiasType::None) v = _mm512_add_round_ps(v, bias, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const int64_t offset = (m0 + r) * g.N + n0;
    if (g.y_type == OutputType::F32) {
      _mm512_mask_storeu_ps(static_cast<float*>(g.y) + offset, col_mask, v);
    } else {
      _mm256_mask_storeu_epi16(static_cast<uint16_t*>(g.y) + offset, col_mask, avx512::f32_to_bf16_rne(v));
    }
  }
}

// ---------------------------------------------------------------- work unit
struct WorkerScratch {
  uint16_t* panel;  // 2 W tiles × chunk_kb k blocks (per-unit conversion)
  float* sums;      // parked accumulators: (unit pairs of W tiles × of x tiles) × 4 tiles
  float* block;     // accumulators of one 32×32 block when K is one chunk
};

void run_unit(const Plan& p, int64_t mb, int64_t nb, const WorkerScratch& s) {
  const int64_t m_tile0 = mb * p.unit_m_tiles, n_tile0 = nb * p.unit_n_tiles;
  const int64_t m_tiles = std::min(p.unit_m_tiles, p.m_tiles - m_tile0);
  const int64_t n_tiles = std::min(p.unit_n_tiles, p.n_tiles - n_tile0);
  const int64_t m_pairs = (m_tiles + 1) / 2, n_pairs = (n_tiles + 1) / 2;
  const int64_t chunks = (p.kb_total + p.chunk_kb - 1) / p.chunk_kb;
  const int64_t x_tile_row = p.kb_total * kTileElems;  // elements between consecutive x (or packed W) tiles
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t kb0 = chunk * p.chunk_kb, kbn = std::min(p.chunk_kb, p.kb_total - kb0);
    const bool last = chunk + 1 == chunks;
    for (int64_t pn = 0; pn < n_pairs; ++pn) {
      const int64_t t0 = n_tile0 + 2 * pn;
      const int nt = int(std::min<int64_t>(2, n_tile0 + n_tiles - t0));
      const uint16_t *w0, *w1;
      if (p.packed_w) {
        w0 = p.packed_w + (t0 * p.kb_total + kb0) * kTileElems;
        w1 = w0 + x_tile_row;
      } else {
        // Prefetch the rows the next conversion reads (next pair, or the
        // first pair of the next chunk), then convert this pair.
        if (pn + 1 < n_pairs) {
          prefetch_w_rows(p, (t0 + 2) * kTileRows, (t0 + 4) * kTileRows, kb0, kbn);
        } else if (!last) {
          const int64_t next_kb0 = kb0 + p.chunk_kb;
          prefetch_w_rows(p, n_tile0 * kTileRows, (n_tile0 + 2) * kTileRows, next_kb0,
                          std::min(p.chunk_kb, p.kb_total - next_kb0));
        }
        convert_w_tiles(p, t0, nt, kb0, kbn, s.panel, kbn * kTileElems);
        w0 = s.panel;
        w1 = s.panel + kbn * kTileElems;
      }
      for (int64_t pm = 0; pm < m_pairs; ++pm) {
        const int64_t s0 = m_tile0 + 2 * pm;
        const int mt = int(std::min<int64_t>(2, m_tile0 + m_tiles - s0));
        const uint16_t* x0 = p.packed_x + (s0 * p.kb_total + kb0) * kTileElems;
        const uint16_t* x1 = x0 + x_tile_row;
        float* c = chunks > 1 ? s.sums + (pn * m_pairs + pm) * 4 * kCTileFloats : s.block;
        kTileKernels[nt - 1][mt - 1](w0, w1, x0, x1, kbn, c, chunk > 0);
        if (last) {
          for (int i = 0; i < nt; ++i)
            for (int j = 0; j < mt; ++j)
              write_tile(p, c + (2 * i + j) * kCTileFloats, (t0 + i) * kTileRows, (s0 + j) * kTileRows);
        }
      }
    }
  }
}

bool handled_here(const GemmArgs& g) {
  // BF16 arithmetic with operands exact in bf16; K = 0 (no products) is
  // left to the reference.
  return g.arithmetic == GemmArithmetic::BF16 && g.a_type != ActivationOperand::F32 &&
         g.w_type != WeightOperand::F32 && g.w_type != WeightOperand::E4M3TimesScaleF32 && g.K > 0;
}

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

void run(const GemmArgs& g, const Blocking& requested, bool adapt) {
  if (!handled_here(g)) {
    if (g.arithmetic == GemmArithmetic::BF16 && g.K == 0 && g.M > 0 && g.N > 0) return ref::gemm(g);
    return avx512::gemm(g);
  }
  if (g.M <= 0 || g.N <= 0) return;
  if (!supported()) return avx512::gemm(g);

  const avx512::GemmTasks tasks(g);
  const int threads = tasks.threads();

  Plan p;
  p.args = &g;
  p.kb_total = (g.K + kBlockK - 1) / kBlockK;
  p.m_tiles = (g.M + kTileRows - 1) / kTileRows;
  p.n_tiles = (g.N + kTileRows - 1) / kTileRows;
  int64_t x_rows = std::max<int64_t>(32, round_up(requested.x_rows, 32));
  // Many rows of x (M > 1024): every block of x rows streams all of W through
  // the cache once, so blocks of 512 rows halve that traffic against 256;
  // the chunk's x tiles (256 KiB) and parked sums (512 KiB at 256 rows of W)
  // still fit a 2 MiB L2.
  if (adapt && g.M > 2 * kLargeXRows) x_rows = std::max(x_rows, kLargeXRows);
  p.unit_m_tiles = x_rows / kTileRows;
  p.m_blocks = (p.m_tiles + p.unit_m_tiles - 1) / p.unit_m_tiles;
  int64_t w_rows = std::max<int64_t>(32, round_up(requested.w_rows, 32));
  if (adapt) {
    // About four units per thread, where the rows of W allow it.
    const int64_t wanted_n_blocks = (4 * threads + p.m_blocks - 1) / p.m_blocks;
    w_rows = std::clamp(round_up((g.N + wanted_n_blocks - 1) / wanted_n_blocks, 32), int64_t(32), w_rows);
  }
  p.unit_n_tiles = w_rows / kTileRows;
  p.n_blocks = (p.n_tiles + p.unit_n_tiles - 1) / p.unit_n_tiles;
  p.chunk_kb = std::max<int64_t>(32, round_up(requested.k_chunk, 32)) / kBlockK;
  // One block of x rows (M <= x_rows): every W panel is converted once and
  // used once, so longer chunks mean longer runs along each weight row and
  // fewer parked accumulators. Measured on a 16-core Intel Xeon with AMX
  // (bench/amx-device-check.sh, blocking sweep): K = N = 4096 at M = 16 and
  // M = 256 ran 10-50% faster with 2048 than with 256; at M >= 1024, where
  // x tiles are reused across many W panels, 256 stays best.
  if (adapt && p.m_blocks == 1) p.chunk_kb = std::max<int64_t>(p.chunk_kb, 2048 / kBlockK);
  p.exact_table = E4M3ToBf16Table::exact();
  p.weight_table = E4M3ToBf16Table::scaled(g.weight_scale);
  p.vbmi = cpu_features().avx512_vbmi;
  if (p.vbmi) {
    p.exact_bytes = E4M3ToBf16ByteTables::from(p.exact_table);
    p.weight_bytes = E4M3ToBf16ByteTables::from(p.weight_table);
  }
  const bool prepack = requested.prepack_weights < 0 ? p.m_blocks > 1 : requested.prepack_weights > 0;

  thread_local AlignedScratch packed_x_scratch, packed_w_scratch;
  p.packed_x = packed_x_scratch.get<uint16_t>(std::size_t(p.m_tiles * p.kb_total * kTileElems));
  p.packed_w = prepack ? packed_w_scratch.get<uint16_t>(std::size_t(p.n_tiles * p.kb_total * kTileElems)) : nullptr;

  constexpr int64_t kTilesPerTask = 4;
  tasks.run((p.m_tiles + kTilesPerTask - 1) / kTilesPerTask, [&](int64_t task) {
    for (int64_t t = task * kTilesPerTask; t < std::min(p.m_tiles, (task + 1) * kTilesPerTask); ++t)
      pack_x_tile_row(p, t);
  });
  if (p.packed_w) {
    tasks.run((p.n_tiles + kTilesPerTask - 1) / kTilesPerTask, [&](int64_t task) {
      const int64_t t0 = task * kTilesPerTask, nt = std::min(p.n_tiles, t0 + kTilesPerTask) - t0;
      convert_w_tiles(p, t0, nt, 0, p.kb_total, p.packed_w + t0 * p.kb_total * kTileElems, p.kb_total * kTileElems);
    });
  }
  compiler_barrier();

  const int64_t units = p.m_blocks * p.n_blocks;
  const int64_t chunks = (p.kb_total + p.chunk_kb - 1) / p.chunk_kb;
  const std::size_t sums_floats =
      chunks > 1 ? std::size_t((p.unit_m_tiles / 2) * (p.unit_n_tiles / 2) * 4 * kCTileFloats) : 0;
  std::atomic<int64_t> next_unit{0};
  // One task per thread: each configures its own tiles, runs units until none
  // are left, and releases the tiles.
  auto worker = [&](int64_t) {
    thread_local AlignedScratch panel_scratch, sums_scratch, block_scratch;
    WorkerScratch s;
    s.panel = p.packed_w ? nullptr : panel_scratch.get<uint16_t>(std::size_t(2 * p.chunk_kb * kTileElems));
    s.sums = sums_floats ? sums_scratch.get<float>(sums_floats) : nullptr;
    s.block = block_scratch.get<float>(std::size_t(4 * kCTileFloats));
    STEPMIX_TILE_LOADCONFIG(&kTileConfig);
    for (int64_t u = next_unit.fetch_add(1); u < units; u = next_unit.fetch_add(1))
      run_unit(p, u / p.n_blocks, u % p.n_blocks, s);
    STEPMIX_TILE_RELEASE();
  };
  tasks.run(std::min<int64_t>(threads, units), worker);
}

}  // namespace

bool supported() {
#ifdef STEPMIX_AMX_EMULATE
  return cpu_features().can_run_avx512_bf16();
#else
  // Ask Linux only where the CPU has AMX; the answer is cached per process.
  return cpu_features().can_run_amx_bf16() && request_amx_permission();
#endif
}

void gemm(const GemmArgs& args) { run(args, Blocking{}, true); }

void gemm_with_blocking(const GemmArgs& args, const Blocking& blocking) { run(args, blocking, false); }

}  // namespace amx

}  // namespace stepmix::kernels
