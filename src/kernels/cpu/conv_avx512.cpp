// AVX-512 VAE convolution (conv_kernels.hpp): a direct implicit GEMM over
// channels-last frames.
//
// Lanes run over output channels (16 per zmm, up to 4 zmm = one packed
// block), so the packed weights are plain vector loads and each input value
// is one broadcast: a micro-kernel holds MR positions × NZ vectors of sums
// and, per input channel (F32) or channel pair (BF16), loads NZ weight
// vectors, broadcasts MR inputs and issues MR·NZ FMAs / vdpbf16ps. Input
// positions of one output row are c_in (or stride·c_in) floats apart, so no
// input is copied or transposed, and taps that read zero padding or a null
// (zero) frame are simply not run: the micro-kernels cover only the valid
// column range of each tap.
//
// Work unit: (output frame, a group of output rows, one weight block). Its
// sums live in a per-thread tile [positions][block width] while it walks the
// taps in (a, b, c) order and, inside each tap, the input channels in chunks
// whose weight panel ([chunk][width], 16–32 KiB) stays in L1 across all the
// unit's positions. Every sum is built in the reference order by one thread,
// so results match ref::conv3d bit for bit in F32 and do not depend on the
// thread count.
#include <algorithm>
#include <array>
#include <type_traits>
#include <cstring>
#include <utility>

#include "core/thread_pool.hpp"
#include "kernels/conv_kernels.hpp"
#include "kernels/cpu/avx512_helpers.hpp"

namespace stepmix::kernels::avx512 {
namespace {

// Input channels per weight panel: 128 floats · 64 lanes = 32 KiB (F32),
// 128 channels = 64 pairs · 64 lanes · 4 bytes = 32 KiB (BF16).
constexpr int64_t kChunkChannels = 128;
// Positions per micro-kernel by vectors per block (NZ = 1..4): MR·NZ sums,
// NZ weights and a broadcast fit in the 32 zmm registers.
constexpr int kMaxRows[4] = {16, 12, 8, 6};
// Positions a work unit aims for (rows are grouped until a unit has this
// many), and the most its sum tile may hold.
constexpr int64_t kUnitPositions = 96;

using MicroKernel = void (*)(const void* x, int64_t x_stride, const void* w, int64_t w_stride, int64_t steps,
                             float* acc, int64_t acc_stride);

// acc[r][z] (16 output channels per z) over s < steps:
//   F32:  += x[r·x_stride + s] · w[s·w_stride + 16 z + lane]            (vfmadd)
//   BF16: steps are channel pairs, x and w bf16, w_stride in bf16 elements
//         per pair (2 · width): += the pair (x[r·x_stride + 2s], +1) · the
//         lane's weight pair                                              (vdpbf16ps)
template <bool Bf16, int MR, int NZ>
void micro(const void* xv, int64_t x_stride, const void* wv, int64_t w_stride, int64_t steps, float* acc,
           int64_t acc_stride) {
  using Element = std::conditional_t<Bf16, uint16_t, float>;
  const auto* x = static_cast<const Element*>(xv);
  const auto* w = static_cast<const Element*>(wv);
  __m512 c[MR][NZ];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z) c[r][z] = _mm512_load_ps(acc + r * acc_stride + 16 * z);
  // Unrolled: the loop's own increments and branch otherwise cost ~15%.
#pragma GCC unroll 4
  for (int64_t s = 0; s < steps; ++s) {
    __m512i wz[NZ];
#pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z) wz[z] = _mm512_loadu_si512(w + s * w_stride + 16 * z * (Bf16 ? 2 : 1));
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      if constexpr (Bf16) {
        int32_t pair;
        std::memcpy(&pair, x + r * x_stride + 2 * s, 4);
        const __m512bh xb = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 4
        for (int z = 0; z < NZ; ++z) c[r][z] = _mm512_dpbf16_ps(c[r][z], xb, (__m512bh)wz[z]);
      } else {
        const __m512 xb = _mm512_set1_ps(x[r * x_stride + s]);
#pragma GCC unroll 4
        for (int z = 0; z < NZ; ++z) c[r][z] = _mm512_fmadd_ps(xb, _mm512_castsi512_ps(wz[z]), c[r][z]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int z = 0; z < NZ; ++z) _mm512_store_ps(acc + r * acc_stride + 16 * z, c[r][z]);
}

template <bool Bf16, int NZ, std::size_t... R>
constexpr std::array<MicroKernel, sizeof...(R)> kernels_for(std::index_sequence<R...>) {
  return {&micro<Bf16, int(R) + 1, NZ>...};
}
template <bool Bf16>
struct KernelTable {
  static constexpr auto nz1 = kernels_for<Bf16, 1>(std::make_index_sequence<16>{});
  static constexpr auto nz2 = kernels_for<Bf16, 2>(std::make_index_sequence<12>{});
  static constexpr auto nz3 = kernels_for<Bf16, 3>(std::make_index_sequence<8>{});
  static constexpr auto nz4 = kernels_for<Bf16, 4>(std::make_index_sequence<6>{});
  static MicroKernel get(int nz, int rows) {
    switch (nz) {
      case 1: return nz1[rows - 1];
      case 2: return nz2[rows - 1];
      case 3: return nz3[rows - 1];
      default: return nz4[rows - 1];
    }
  }
};

MicroKernel micro_kernel(bool bf16, int nz, int rows) {
  return bf16 ? KernelTable<true>::get(nz, rows) : KernelTable<false>::get(nz, rows);
}

// Output positions [lo, hi) whose tap at offset k reads inside [0, in_size).
void valid_range(int64_t out_size, int64_t in_size, int stride, int pad, int k, int64_t& lo, int64_t& hi) {
  const int64_t shift = int64_t(k) - pad;
  lo = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
  const int64_t last = in_size - 1 - shift;
  hi = last < 0 ? 0 : std::min<int64_t>(out_size, last / stride + 1);
  if (hi < lo) hi = lo;
}

struct Plan {
  const Conv3dArgs* g;
  const ConvWeights* w;
  bool bf16;
  int64_t rows_per_unit;
  int64_t row_groups;
};

void write_outputs(const Plan& p, int64_t t, int64_t block, int64_t y0, int64_t y1, const float* acc, int64_t width) {
  const Conv3dArgs& g = *p.g;
  const ConvWeights& w = *p.w;
  const int64_t o0 = block * kConvBlock;
  const int nz = int(width / 16);
  __m512 bias[4];
  __mmask16 mask[4];
  for (int z = 0; z < nz; ++z) {
    mask[z] = tail_mask16(std::max<int64_t>(0, w.c_out - o0 - 16 * z));
    bias[z] = _mm512_maskz_loadu_ps(mask[z], w.bias.data() + o0 + 16 * z);
  }
  const float* residual = g.residual_frames ? g.residual_frames[t] : nullptr;
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = 0; x < g.w_out; ++x) {
      const float* a = acc + ((y - y0) * g.w_out + x) * width;
      const int64_t out = (y * g.w_out + x) * w.c_out + o0;
      for (int z = 0; z < nz; ++z) {
        __m512 v = _mm512_add_round_ps(_mm512_load_ps(a + 16 * z), bias[z], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        if (residual)
          v = _mm512_add_round_ps(v, _mm512_maskz_loadu_ps(mask[z], residual + out + 16 * z),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        if (g.y_type == FrameElement::F32) {
          _mm512_mask_storeu_ps(static_cast<float*>(g.y_frames[t]) + out + 16 * z, mask[z], v);
        } else {
          _mm256_mask_storeu_epi16(static_cast<uint16_t*>(g.y_frames[t]) + out + 16 * z, mask[z], f32_to_bf16_rne(v));
        }
      }
    }
}

void run_unit(const Plan& p, int64_t t, int64_t group, int64_t block) {
  const Conv3dArgs& g = *p.g;
  const ConvWeights& w = *p.w;
  const int64_t width = w.block_width(block);
  const int nz = int(width / 16);
  const int max_rows = kMaxRows[nz - 1];
  const int64_t y0 = group * p.rows_per_unit, y1 = std::min(g.h_out, y0 + p.rows_per_unit);
  thread_local AlignedScratch tile;
  float* acc = tile.get<float>(std::size_t((y1 - y0) * g.w_out * width));
  std::memset(acc, 0, std::size_t((y1 - y0) * g.w_out * width) * sizeof(float));

  const int64_t c_in = w.c_in;
  const int64_t element = p.bf16 ? 2 : 4;
  const auto* packed = p.bf16 ? static_cast<const std::byte*>(static_cast<const void*>(w.bf16.data()))
                              : static_cast<const std::byte*>(static_cast<const void*>(w.f32.data()));
  packed += w.block_offset(block) * element;
  for (int a = 0; a < w.kt; ++a) {
    const auto* frame = static_cast<const std::byte*>(g.x_frames[t * g.stride_t + a]);
    if (!frame) continue;
    for (int b = 0; b < w.kh; ++b)
      for (int c = 0; c < w.kw; ++c) {
        int64_t xlo, xhi;
        valid_range(g.w_out, g.w_in, g.stride_w, g.pad_left, c, xlo, xhi);
        if (xlo >= xhi) continue;
        const int tap = (a * w.kh + b) * w.kw + c;
        for (int64_t k0 = 0; k0 < c_in; k0 += kChunkChannels) {
          const int64_t channels = std::min(kChunkChannels, c_in - k0);
          // Weight panel of this tap and channel chunk: [channels][width]
          // floats, or [channels/2][width][2] bf16.
          const std::byte* panel = packed + (int64_t(tap) * c_in + k0) * width * element;
          const int64_t steps = p.bf16 ? channels / 2 : channels;
          const int64_t w_stride = p.bf16 ? 2 * width : width;
          for (int64_t y = y0; y < y1; ++y) {
            const int64_t iy = y * g.stride_h + b - g.pad_top;
            if (iy < 0 || iy >= g.h_in) continue;
            const std::byte* row = frame + (iy * g.w_in * c_in + k0) * element;
            float* acc_row = acc + (y - y0) * g.w_out * width;
            for (int64_t s = xlo; s < xhi; s += max_rows) {
              const int rows = int(std::min<int64_t>(max_rows, xhi - s));
              const int64_t ix = s * g.stride_w + c - g.pad_left;
              micro_kernel(p.bf16, nz, rows)(row + ix * c_in * element, g.stride_w * c_in, panel, w_stride, steps,
                                             acc_row + s * width, width);
            }
          }
        }
      }
  }
  write_outputs(p, t, block, y0, y1, acc, width);
}

}  // namespace

void conv3d(const Conv3dArgs& g) {
  validate_conv3d(g);
  Plan p;
  p.g = &g;
  p.w = g.weights;
  p.bf16 = g.weights->arithmetic == GemmArithmetic::BF16;
  ThreadPool& pool = ThreadPool::global();
  const int64_t blocks = g.weights->blocks();
  // Rows per unit: enough positions for the weight panel to be reused, but
  // no fewer units than a few per thread.
  int64_t rows = std::clamp<int64_t>((kUnitPositions + g.w_out - 1) / g.w_out, 1, g.h_out);
  while (rows > 1 && g.frames_out * ((g.h_out + rows - 1) / rows) * blocks < 4 * int64_t(pool.size())) rows = (rows + 1) / 2;
  p.rows_per_unit = rows;
  p.row_groups = (g.h_out + rows - 1) / rows;
  const int64_t units = g.frames_out * p.row_groups * blocks;
  auto unit = [&](int64_t u) {
    const int64_t block = u % blocks;
    const int64_t group = (u / blocks) % p.row_groups;
    const int64_t t = u / (blocks * p.row_groups);
    run_unit(p, t, group, block);
  };
  // Small calls run inline: waking the workers costs more than they save.
  if (conv3d_macs(g) < double(1 << 18) || pool.size() == 1) {
    for (int64_t u = 0; u < units; ++u) unit(u);
  } else {
    pool.parallel_for(units, unit);
  }
}

}  // namespace stepmix::kernels::avx512
