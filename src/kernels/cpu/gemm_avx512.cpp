// AVX-512 GEMM: y[M,N] = x[M,K] · W[N,K]ᵀ with FP32 (vfmadd) or BF16
// (vdpbf16ps: exact products of bf16 pairs, FP32 sums) arithmetic.
//
// This file is the "rows" layout (gemm_rows). gemm() hands BF16 calls with
// many rows of x and short K or N to the "columns" layout instead
// (gemm_columns_avx512.cpp; the rule is in avx512_kernels.hpp); the two
// agree bit for bit.
//
// Layout choice: the 16 lanes of a zmm run over *rows of x* (m), and weights
// are broadcast 4 bytes at a time (one bf16 pair or one float) straight from
// row-major [N, K] storage. So weights never need transposing: a BF16
// checkpoint (or the BF16 cache) is read in place, and FP8 weights are only
// widened row by row into a small scratch. The activations are transposed
// once per call into `packed x` ([16-row strip][k step][16 lanes]); the
// micro-kernel's accumulators come out transposed and are turned back in the
// epilogue.
//
// Blocking: a work unit is (kMC rows of x) × (kNC rows of W) and runs the
// whole K in chunks (as long as the unit's packed x for a chunk fits in L2;
// long runs along each weight row stream well); partial sums live in a
// per-thread buffer laid out like the accumulators. Units are spread over
// the thread pool, those sharing rows of x back to back.
//
// Per core this runs at the vdpbf16ps / vfmadd throughput limit (the loop
// is 2 loads of x, 12 weight broadcasts and 24 dot products per k step).
#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "core/cpu_features.hpp"
#include "kernels/cpu/avx512_helpers.hpp"
#include "kernels/cpu/avx512_kernels.hpp"

namespace stepmix::kernels::avx512 {
namespace {

constexpr int64_t kLanes = 16;    // rows of x per strip (one zmm of floats)
constexpr int64_t kMC = 256;      // rows of x per work unit (a multiple of 2 strips)
constexpr int64_t kNC = 96;       // rows of W per work unit
constexpr int kNR = 12;           // rows of W per micro-kernel call
// K is processed in chunks of k steps (a step is 2 k for BF16, 1 k for F32)
// sized so that the unit's packed x for one chunk fits in this much of L2.
constexpr int64_t kPackedXChunkBytes = 384 << 10;


// ---------------------------------------------------------------- micro-kernel
// acc[j][i] (lanes = x rows of strip i, j = weight row) over `steps` k steps:
//   BF16: acc += x_pair · w_pair (vdpbf16ps), F32: acc += x · w (vfmadd).
// Stores the sums to c[j * c_stride + 16 i + lane], adding what is there if
// `accumulate`.
using MicroKernel = void (*)(const std::byte* w, int64_t w_stride_bytes, const float* a, int64_t a_strip_stride,
                             int64_t steps, float* c, int64_t c_stride, bool accumulate);

template <GemmArithmetic Arithmetic, int NR, int MZ>
void micro_kernel(const std::byte* w, int64_t w_stride_bytes, const float* a, int64_t a_strip_stride, int64_t steps,
                  float* c, int64_t c_stride, bool accumulate) {
  __m512 acc[NR][MZ];
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j)
#pragma GCC unroll 2
    for (int i = 0; i < MZ; ++i)
      acc[j][i] = accumulate ? _mm512_load_ps(c + j * c_stride + 16 * i) : _mm512_setzero_ps();

  for (int64_t s = 0; s < steps; ++s) {
    __m512 x[MZ];
#pragma GCC unroll 2
    for (int i = 0; i < MZ; ++i) x[i] = _mm512_load_ps(a + i * a_strip_stride + 16 * s);
#pragma GCC unroll 16
    for (int j = 0; j < NR; ++j) {
      const std::byte* wp = w + j * w_stride_bytes + 4 * s;
      if constexpr (Arithmetic == GemmArithmetic::BF16) {
        int32_t pair;
        std::memcpy(&pair, wp, 4);
        const __m512bh wv = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 2
        for (int i = 0; i < MZ; ++i) acc[j][i] = _mm512_dpbf16_ps(acc[j][i], (__m512bh)x[i], wv);
      } else {
        float value;
        std::memcpy(&value, wp, 4);
        const __m512 wv = _mm512_set1_ps(value);
#pragma GCC unroll 2
        for (int i = 0; i < MZ; ++i) acc[j][i] = _mm512_fmadd_ps(x[i], wv, acc[j][i]);
      }
    }
  }
#pragma GCC unroll 16
  for (int j = 0; j < NR; ++j)
#pragma GCC unroll 2
    for (int i = 0; i < MZ; ++i) _mm512_store_ps(c + j * c_stride + 16 * i, acc[j][i]);
}

template <GemmArithmetic Arithmetic, int MZ, std::size_t... R>
constexpr std::array<MicroKernel, sizeof...(R)> micro_kernels_for(std::index_sequence<R...>) {
  return {&micro_kernel<Arithmetic, int(R) + 1, MZ>...};
}
template <GemmArithmetic Arithmetic, int MZ>
constexpr auto kMicroKernels = micro_kernels_for<Arithmetic, MZ>(std::make_index_sequence<kNR>{});

MicroKernel micro_kernel_for(GemmArithmetic arithmetic, int strips, int rows) {
  if (arithmetic == GemmArithmetic::BF16)
    return strips == 2 ? kMicroKernels<GemmArithmetic::BF16, 2>[rows - 1] : kMicroKernels<GemmArithmetic::BF16, 1>[rows - 1];
  return strips == 2 ? kMicroKernels<GemmArithmetic::F32, 2>[rows - 1] : kMicroKernels<GemmArithmetic::F32, 1>[rows - 1];
}

// ---------------------------------------------------------------- call plan
struct Plan {
  const GemmArgs* args;
  bool bf16;              // arithmetic
  int64_t steps;          // k steps over the whole K (pairs for BF16)
  int64_t strips;         // 16-row strips of x
  float* packed_x;        // [strips][steps][16] (floats or bf16 pairs)
  E4M3ToBf16Table exact_table;   // decode(code) as bf16
  E4M3ToBf16Table weight_table;  // bf16(decode(code) · weight_scale)
  bool vbmi;                     // byte-permute conversion available
  E4M3ToBf16ByteTables exact_bytes, weight_bytes;  // the same tables, for it
  bool weights_in_place;  // weight rows read straight from args.w
};

// ---------------------------------------------------------------- packing x
// One 16-row strip: rows → [step][16 lanes], 16 steps per transpose.
void pack_x_strip(const Plan& p, int64_t strip) {
  const GemmArgs& g = *p.args;
  float* out = p.packed_x + strip * p.steps * kLanes;
  const int64_t k_per_block = p.bf16 ? 32 : 16;  // k covered by 16 steps
  for (int64_t k0 = 0; k0 < g.K; k0 += k_per_block) {
    const int64_t kn = std::min(k_per_block, g.K - k0);
    __m512i rows[16];
    for (int r = 0; r < 16; ++r) {
      const int64_t m = strip * kLanes + r;
      if (m >= g.M) {
        rows[r] = _mm512_setzero_si512();
        continue;
      }
      const int64_t offset = m * g.K + k0;
      if (p.bf16) {
        const __mmask32 mask = tail_mask32(kn);
        if (g.a_type == ActivationOperand::BF16) {
          rows[r] = _mm512_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(g.a) + offset);
        } else {  // E4M3 codes; masked-off codes are 0 -> +0.0
          rows[r] = p.exact_table.convert(_mm256_maskz_loadu_epi8(mask, static_cast<const uint8_t*>(g.a) + offset));
        }
      } else {
        const __mmask16 mask = tail_mask16(kn);
        switch (g.a_type) {
          case ActivationOperand::F32:
            rows[r] = _mm512_castps_si512(_mm512_maskz_loadu_ps(mask, static_cast<const float*>(g.a) + offset));
            break;
          case ActivationOperand::BF16:
            rows[r] = _mm512_castps_si512(
                bf16_to_f32(_mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(g.a) + offset)));
            break;
          case ActivationOperand::E4M3Codes:
            rows[r] = _mm512_castps_si512(e4m3_to_f32_scaled(
                _mm_maskz_loadu_epi8(mask, static_cast<const uint8_t*>(g.a) + offset), _mm512_set1_ps(256.0f)));
            break;
        }
      }
    }
    transpose_16x16_dwords(rows);
    const int64_t step0 = p.bf16 ? k0 / 2 : k0;
    const int64_t nsteps = std::min<int64_t>(16, p.steps - step0);
    for (int64_t s = 0; s < nsteps; ++s) _mm512_store_si512(out + (step0 + s) * kLanes, rows[s]);
  }
}

// ---------------------------------------------------------------- weights
// Widens rows [n0, n0+rows) × k steps [step0, step0+steps) of W into `out`
// (row stride out_stride bytes), zero-padding an odd K's last pair.
void convert_weight_rows(const Plan& p, int64_t n0, int64_t rows, int64_t step0, int64_t steps, std::byte* out,
                         int64_t out_stride) {
  const GemmArgs& g = *p.args;
  const int64_t k0 = p.bf16 ? 2 * step0 : step0;
  const int64_t kn = std::min(g.K - k0, p.bf16 ? 2 * steps : steps);  // real k in this chunk
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t src = (n0 + r) * g.K + k0;
    std::byte* dst = out + r * out_stride;
    if (p.bf16) {
      auto* d = reinterpret_cast<uint16_t*>(dst);
      const int64_t padded = 2 * steps;
      const E4M3ToBf16Table& table = g.w_type == WeightOperand::E4M3 ? p.exact_table : p.weight_table;
      int64_t k = 0;
      // Full vectors first: plain loads and stores.
      if (g.w_type == WeightOperand::BF16) {
        for (; k + 32 <= kn; k += 32)
          _mm512_storeu_si512(d + k, _mm512_loadu_si512(static_cast<const uint16_t*>(g.w) + src + k));
      } else {
        if (p.vbmi) {
          k = convert_e4m3_to_bf16_vbmi(g.w_type == WeightOperand::E4M3 ? p.exact_bytes : p.weight_bytes,
                                        static_cast<const uint8_t*>(g.w) + src, kn, d);
        }
        for (; k + 32 <= kn; k += 32)
          _mm512_storeu_si512(d + k, table.convert(_mm256_loadu_si256(
                                         reinterpret_cast<const __m256i*>(static_cast<const uint8_t*>(g.w) + src + k))));
      }
      for (; k < padded; k += 32) {
        const __mmask32 load = kn - k > 0 ? tail_mask32(kn - k) : 0;
        const __mmask32 store = tail_mask32(padded - k);
        __m512i v;
        if (g.w_type == WeightOperand::BF16) {
          v = _mm512_maskz_loadu_epi16(load, static_cast<const uint16_t*>(g.w) + src + k);
        } else {
          v = _mm512_maskz_mov_epi16(load, table.convert(_mm256_maskz_loadu_epi8(load, static_cast<const uint8_t*>(g.w) + src + k)));
        }
        _mm512_mask_storeu_epi16(d + k, store, v);
      }
    } else {
      auto* d = reinterpret_cast<float*>(dst);
      const __m512 scale256 = _mm512_set1_ps(g.w_type == WeightOperand::E4M3 ? 256.0f : g.weight_scale * 256.0f);
      for (int64_t k = 0; k < kn; k += 16) {
        const __mmask16 mask = tail_mask16(kn - k);
        __m512 v;
        switch (g.w_type) {
          case WeightOperand::F32:
            v = _mm512_maskz_loadu_ps(mask, static_cast<const float*>(g.w) + src + k);
            break;
          case WeightOperand::BF16:
            v = bf16_to_f32(_mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(g.w) + src + k));
            break;
          case WeightOperand::E4M3:
          case WeightOperand::E4M3TimesScaleF32:
            v = e4m3_to_f32_scaled(_mm_maskz_loadu_epi8(mask, static_cast<const uint8_t*>(g.w) + src + k), scale256);
            break;
          case WeightOperand::E4M3TimesScaleBF16: {
            const __m512i words = p.weight_table.convert(
                _mm256_maskz_loadu_epi8(mask, static_cast<const uint8_t*>(g.w) + src + k));
            v = bf16_to_f32(_mm512_castsi512_si256(words));
            break;
          }
        }
        if (k + 16 <= kn) {
          _mm512_storeu_ps(d + k, v);  // masked stores are slow on some cores; only the tail needs one
        } else {
          _mm512_mask_storeu_ps(d + k, mask, v);
        }
      }
    }
  }
}

// Asks for the weight bytes of rows [n0, n0+rows), k steps [step0, step0+steps)
// to be brought into L2. Issued one chunk ahead: each row's chunk is a run of
// a few KiB at a large stride (one page per row), which the hardware
// prefetchers pick up late; measured, the FP8 conversion otherwise waits on
// DRAM latency.
void prefetch_weight_chunk(const Plan& p, int64_t n0, int64_t rows, int64_t step0, int64_t steps) {
  const GemmArgs& g = *p.args;
  const int64_t element = g.w_type == WeightOperand::F32 ? 4 : g.w_type == WeightOperand::BF16 ? 2 : 1;
  const int64_t k0 = p.bf16 ? 2 * step0 : step0;
  const int64_t kn = std::min(g.K - k0, p.bf16 ? 2 * steps : steps);
  const auto* base = static_cast<const char*>(g.w);
  for (int64_t r = 0; r < rows; ++r) {
    const char* row = base + ((n0 + r) * g.K + k0) * element;
    for (int64_t b = 0; b < kn * element; b += 64) _mm_prefetch(row + b, _MM_HINT_T1);
  }
}

// ---------------------------------------------------------------- epilogue
// c: [rows of W][lanes of x] sums of one unit -> y rows [m0, m0+mm), columns
// [n0, n0+nn): y = float32(acc · alpha) (+ bias), then the output type.
void write_outputs(const Plan& p, const float* c, int64_t c_stride, int64_t m0, int64_t mm, int64_t n0, int64_t nn) {
  const GemmArgs& g = *p.args;
  const __m512 alpha = _mm512_set1_ps(g.alpha);
  for (int64_t j0 = 0; j0 < nn; j0 += 16) {
    const int64_t cols = std::min<int64_t>(16, nn - j0);
    const __mmask16 col_mask = tail_mask16(cols);
    __m512 bias = _mm512_setzero_ps();
    if (g.bias_type == BiasType::F32) bias = _mm512_maskz_loadu_ps(col_mask, static_cast<const float*>(g.bias) + n0 + j0);
    if (g.bias_type == BiasType::BF16)
      bias = bf16_to_f32(_mm256_maskz_loadu_epi16(col_mask, static_cast<const uint16_t*>(g.bias) + n0 + j0));
    for (int64_t l0 = 0; l0 < mm; l0 += kLanes) {
      __m512i rows[16];
      for (int j = 0; j < 16; ++j)
        rows[j] = j < cols ? _mm512_load_si512(c + (j0 + j) * c_stride + l0) : _mm512_setzero_si512();
      transpose_16x16_dwords(rows);
      const int64_t valid = std::min<int64_t>(kLanes, mm - l0);
      for (int64_t r = 0; r < valid; ++r) {
        // Explicit rounding intrinsics: never contracted into an FMA, so the
        // two roundings match the reference exactly.
        __m512 v = _mm512_mul_round_ps(_mm512_castsi512_ps(rows[r]), alpha, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        if (g.bias_type != BiasType::None) v = _mm512_add_round_ps(v, bias, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const int64_t offset = (m0 + l0 + r) * g.N + n0 + j0;
        if (g.y_type == OutputType::F32) {
          _mm512_mask_storeu_ps(static_cast<float*>(g.y) + offset, col_mask, v);
        } else {
          _mm256_mask_storeu_epi16(static_cast<uint16_t*>(g.y) + offset, col_mask, f32_to_bf16_rne(v));
        }
      }
    }
  }
}

// ---------------------------------------------------------------- work unit
void run_unit(const Plan& p, int64_t m0, int64_t n0) {
  const GemmArgs& g = *p.args;
  const int64_t mm = std::min(kMC, g.M - m0), nn = std::min(kNC, g.N - n0);
  const int64_t unit_strips = (mm + kLanes - 1) / kLanes;
  const int64_t c_stride = unit_strips * kLanes;
  // Chunk length: as long as the packed-x budget allows (long runs along each
  // weight row stream well; short ones wait on DRAM), split evenly.
  const int64_t max_chunk = std::max<int64_t>(256, kPackedXChunkBytes / (unit_strips * kLanes * 4));
  const int64_t chunks = (p.steps + max_chunk - 1) / max_chunk;
  const int64_t chunk_steps = ((p.steps + chunks - 1) / chunks + 15) / 16 * 16;
  thread_local AlignedScratch sums_scratch, weight_scratch;
  float* sums = sums_scratch.get<float>(std::size_t(kNC * kMC));
  const int64_t scratch_stride = chunk_steps * 4;  // bytes per converted weight row
  auto* converted =
      p.weights_in_place ? nullptr : reinterpret_cast<std::byte*>(weight_scratch.get<float>(std::size_t(kNC * chunk_steps)));
  const int64_t x_strip_stride = p.steps * kLanes;
  const float* x_unit = p.packed_x + (m0 / kLanes) * x_strip_stride;

  for (int64_t step0 = 0; step0 < p.steps; step0 += chunk_steps) {
    const int64_t steps = std::min(chunk_steps, p.steps - step0);
    if (step0 + chunk_steps < p.steps)
      prefetch_weight_chunk(p, n0, nn, step0 + chunk_steps, std::min(chunk_steps, p.steps - step0 - chunk_steps));
    const std::byte* w;
    int64_t w_stride;
    if (p.weights_in_place) {
      const int64_t element = p.bf16 ? 2 : 4;
      w_stride = g.K * element;
      w = static_cast<const std::byte*>(g.w) + n0 * w_stride + step0 * 4;
    } else {
      convert_weight_rows(p, n0, nn, step0, steps, converted, scratch_stride);
      w = converted;
      w_stride = scratch_stride;
    }
    for (int64_t j = 0; j < nn; j += kNR) {
      const int rows = int(std::min<int64_t>(kNR, nn - j));
      for (int64_t s = 0; s < unit_strips;) {
        const int pair = unit_strips - s >= 2 ? 2 : 1;
        micro_kernel_for(p.bf16 ? GemmArithmetic::BF16 : GemmArithmetic::F32, pair, rows)(
            w + j * w_stride, w_stride, x_unit + s * x_strip_stride + step0 * kLanes, x_strip_stride, steps,
            sums + j * c_stride + s * kLanes, c_stride, step0 > 0);
        s += pair;
      }
    }
  }
  write_outputs(p, sums, c_stride, m0, mm, n0, nn);
}

bool handled_here(const GemmArgs& g) {
  if (g.arithmetic == GemmArithmetic::F32) return true;
  // BF16 arithmetic needs operands that are exact in bf16.
  return g.a_type != ActivationOperand::F32 && g.w_type != WeightOperand::F32 &&
         g.w_type != WeightOperand::E4M3TimesScaleF32;
}

}  // namespace

void gemm(const GemmArgs& g) {
  if (handled_here(g) && columns_kernel_applies(g)) return gemm_columns(g);
  if (columns_f32_kernel_applies(g)) return gemm_columns_f32(g);
  gemm_rows(g);
}

void gemm_rows(const GemmArgs& g) {
  if (!handled_here(g)) return ref::gemm(g);
  Plan p;
  p.args = &g;
  p.bf16 = g.arithmetic == GemmArithmetic::BF16;
  p.steps = p.bf16 ? (g.K + 1) / 2 : g.K;
  p.strips = (g.M + kLanes - 1) / kLanes;
  p.exact_table = E4M3ToBf16Table::exact();
  p.weight_table = E4M3ToBf16Table::scaled(g.weight_scale);
  p.vbmi = cpu_features().avx512_vbmi;
  if (p.vbmi) {
    p.exact_bytes = E4M3ToBf16ByteTables::from(p.exact_table);
    p.weight_bytes = E4M3ToBf16ByteTables::from(p.weight_table);
  }
  p.weights_in_place = p.bf16 ? (g.w_type == WeightOperand::BF16 && g.K % 2 == 0) : g.w_type == WeightOperand::F32;

  thread_local AlignedScratch packed_x_scratch;
  p.packed_x = packed_x_scratch.get<float>(std::size_t(p.strips * p.steps * kLanes));

  const GemmTasks tasks(g);
  constexpr int64_t kStripsPerTask = 4;
  const int64_t pack_tasks = (p.strips + kStripsPerTask - 1) / kStripsPerTask;
  auto pack = [&](int64_t t) {
    for (int64_t s = t * kStripsPerTask; s < std::min(p.strips, (t + 1) * kStripsPerTask); ++s) pack_x_strip(p, s);
  };
  const int64_t mc_blocks = (g.M + kMC - 1) / kMC, nc_blocks = (g.N + kNC - 1) / kNC;
  // Units sharing rows of x run back to back, so that block stays in cache.
  auto unit = [&](int64_t u) { run_unit(p, (u / nc_blocks) * kMC, (u % nc_blocks) * kNC); };
  tasks.run(pack_tasks, pack);
  tasks.run(mc_blocks * nc_blocks, unit);
}

}  // namespace stepmix::kernels::avx512
