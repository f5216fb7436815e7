// AMX-BF16 VAE convolution (conv_kernels.hpp, BF16 arithmetic): the same
// implicit GEMM as the AVX-512 kernel, on tiles.
//
// Roles. A tile (16 rows × 32 bf16) = 16 consecutive output positions of one
// row × 32 input channels of one tap: in channels-last frames those are 16
// rows of 64 contiguous bytes, stride_w·c_in·2 bytes apart, loaded straight
// from the frame. B tile (16 rows × 16 pairs) = 32 input channels × 16 output
// channels of one tap: rows of the packed BF16 weights ([tap][c_in/2][width]
// [2], rows width·4 bytes apart), loaded straight from the packing. C tile =
// 16 positions × 16 output channels, float32. No operand is copied or
// transposed in the inner loop.
//
// Spatial padding. Tiles cannot skip rows, so each input frame is first
// copied once per call into a zero-bordered buffer (with slack for the last,
// partial tile of a row, whose extra outputs are computed and discarded);
// taps that read rows outside the input are skipped as in the other kernels,
// and so are null (zero) frames.
//
// Work unit: (output frame, output row, 64-channel weight block). Per pair of
// position tiles × pair of output tiles the four accumulators stay in tiles
// for the whole K (taps, then channels in steps of 32), then go through the
// float32 epilogue (bias, residual, output type). Each sum is made by one
// thread in a fixed order, so results do not depend on the thread count; the
// order inside a tile multiply is the hardware's, so they differ from the
// reference by float32 rounding only (tests/kernels/conv_kernels_test.cpp).
//
// Where AMX cannot run (CPU, or Linux refused the tile state), for F32
// arithmetic and for c_in not a multiple of 32, the AVX-512 kernel runs.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/thread_pool.hpp"
#include "kernels/conv_kernels.hpp"
#include "kernels/cpu/amx_kernels.hpp"
#include "kernels/cpu/avx512_helpers.hpp"

namespace stepmix::kernels::amx {
namespace {

using avx512::AlignedScratch;
using avx512::tail_mask16;

constexpr int64_t kTile = 16;    // positions or output channels per tile
constexpr int64_t kStepK = 32;   // input channels per tile multiply

struct PaddedFrames {
  int64_t rows = 0, columns = 0;  // padded frame size
  std::vector<std::vector<uint16_t>> frames;  // one per distinct input frame
  std::vector<const uint16_t*> of_input;      // input slot -> padded copy (null = zero frame)
};

// Zero-bordered copies of the distinct non-null input frames.
PaddedFrames pad_inputs(const Conv3dArgs& g, ThreadPool& pool) {
  const ConvWeights& w = *g.weights;
  PaddedFrames p;
  const int64_t tiles_w = (g.w_out + kTile - 1) / kTile * kTile;
  p.rows = std::max<int64_t>(g.h_in + g.pad_top, (g.h_out - 1) * g.stride_h + w.kh);
  p.columns = std::max<int64_t>(g.w_in + g.pad_left, (tiles_w - 1) * g.stride_w + w.kw);
  const int64_t inputs = (g.frames_out - 1) * g.stride_t + w.kt;
  std::vector<const void*> seen;
  p.of_input.assign(std::size_t(inputs), nullptr);
  p.frames.reserve(std::size_t(inputs));
  for (int64_t i = 0; i < inputs; ++i) {
    const void* src = g.x_frames[i];
    if (!src) continue;
    const auto it = std::find(seen.begin(), seen.end(), src);
    if (it != seen.end()) {
      p.of_input[std::size_t(i)] = p.frames[std::size_t(it - seen.begin())].data();
      continue;
    }
    seen.push_back(src);
    p.frames.emplace_back(std::size_t(p.rows * p.columns * w.c_in), uint16_t(0));
    uint16_t* dst = p.frames.back().data();
    const auto* in = static_cast<const uint16_t*>(src);
    pool.parallel_for(g.h_in, [&](int64_t y) {
      std::memcpy(dst + ((y + g.pad_top) * p.columns + g.pad_left) * w.c_in, in + y * g.w_in * w.c_in,
                  std::size_t(g.w_in * w.c_in) * 2);
    });
    p.of_input[std::size_t(i)] = dst;
  }
  return p;
}

// C tiles (i, j) = tmm(2i + j), i < MT position tiles, j < NT output tiles;
// A tiles tmm4, tmm5; B tiles tmm6, tmm7. Tile numbers must be literals.
template <int MT, int NT>
void tile_sums(const Conv3dArgs& g, const PaddedFrames& pad, int64_t t, int64_t y, int64_t x0, const uint16_t* block,
               int64_t width, int64_t n0, float* out) {
  const ConvWeights& w = *g.weights;
  const int64_t c_in = w.c_in, pairs = c_in / 2;
  const int64_t a_stride = g.stride_w * c_in * 2, b_stride = width * 4;
  _tile_zero(0);
  if constexpr (NT == 2) _tile_zero(1);
  if constexpr (MT == 2) _tile_zero(2);
  if constexpr (MT == 2 && NT == 2) _tile_zero(3);
  for (int a = 0; a < w.kt; ++a) {
    const uint16_t* frame = pad.of_input[std::size_t(t * g.stride_t + a)];
    if (!frame) continue;
    for (int b = 0; b < w.kh; ++b) {
      const int64_t iy = y * g.stride_h + b - g.pad_top;
      if (iy < 0 || iy >= g.h_in) continue;
      for (int c = 0; c < w.kw; ++c) {
        const int tap = (a * w.kh + b) * w.kw + c;
        const uint16_t* x = frame + ((y * g.stride_h + b) * pad.columns + x0 * g.stride_w + c) * c_in;
        const uint16_t* wt = block + (int64_t(tap) * pairs * width + n0) * 2;
        for (int64_t k0 = 0; k0 < c_in; k0 += kStepK) {
          _tile_loadd(4, x + k0, a_stride);
          if constexpr (MT == 2) _tile_loadd(5, x + kTile * g.stride_w * c_in + k0, a_stride);
          _tile_loadd(6, wt + (k0 / 2) * width * 2, b_stride);
          if constexpr (NT == 2) _tile_loadd(7, wt + (k0 / 2) * width * 2 + 2 * kTile, b_stride);
          _tile_dpbf16ps(0, 4, 6);
          if constexpr (NT == 2) _tile_dpbf16ps(1, 4, 7);
          if constexpr (MT == 2) _tile_dpbf16ps(2, 5, 6);
          if constexpr (MT == 2 && NT == 2) _tile_dpbf16ps(3, 5, 7);
        }
      }
    }
  }
  // out: [32 positions][32 channels] floats, 128 bytes per position.
  _tile_stored(0, out, 128);
  if constexpr (NT == 2) _tile_stored(1, out + kTile, 128);
  if constexpr (MT == 2) _tile_stored(2, out + kTile * 32, 128);
  if constexpr (MT == 2 && NT == 2) _tile_stored(3, out + kTile * 32 + kTile, 128);
}

void epilogue(const Conv3dArgs& g, int64_t t, int64_t y, int64_t x0, int64_t positions, int64_t o0, int64_t channels,
              const float* sums) {
  const ConvWeights& w = *g.weights;
  const float* residual = g.residual_frames ? g.residual_frames[t] : nullptr;
  for (int64_t z = 0; z < channels; z += 16) {
    const __mmask16 mask = tail_mask16(std::min<int64_t>(16, w.c_out - o0 - z));
    const __m512 bias = _mm512_maskz_loadu_ps(mask, w.bias.data() + o0 + z);
    for (int64_t p = 0; p < positions; ++p) {
      const int64_t out = (y * g.w_out + x0 + p) * w.c_out + o0 + z;
      __m512 v = _mm512_add_round_ps(_mm512_loadu_ps(sums + p * 32 + z), bias, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      if (residual)
        v = _mm512_add_round_ps(v, _mm512_maskz_loadu_ps(mask, residual + out), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      if (g.y_type == FrameElement::F32) {
        _mm512_mask_storeu_ps(static_cast<float*>(g.y_frames[t]) + out, mask, v);
      } else {
        _mm256_mask_storeu_epi16(static_cast<uint16_t*>(g.y_frames[t]) + out, mask, avx512::f32_to_bf16_rne(v));
      }
    }
  }
}

void run_unit(const Conv3dArgs& g, const PaddedFrames& pad, int64_t t, int64_t y, int64_t block) {
  const ConvWeights& w = *g.weights;
  const int64_t width = w.block_width(block), o_begin = block * kConvBlock;
  const uint16_t* packed = w.bf16.data() + w.block_offset(block);
  thread_local AlignedScratch scratch;
  float* sums = scratch.get<float>(32 * 32);
  for (int64_t x0 = 0; x0 < g.w_out; x0 += 2 * kTile) {
    const int64_t positions = std::min<int64_t>(2 * kTile, g.w_out - x0);
    const bool two_m = positions > kTile;
    for (int64_t n0 = 0; n0 < width; n0 += 2 * kTile) {
      const bool two_n = width - n0 > kTile;
      if (two_m && two_n) tile_sums<2, 2>(g, pad, t, y, x0, packed, width, n0, sums);
      else if (two_m) tile_sums<2, 1>(g, pad, t, y, x0, packed, width, n0, sums);
      else if (two_n) tile_sums<1, 2>(g, pad, t, y, x0, packed, width, n0, sums);
      else tile_sums<1, 1>(g, pad, t, y, x0, packed, width, n0, sums);
      const int64_t channels = std::min<int64_t>(two_n ? 2 * kTile : kTile, w.c_out - o_begin - n0);
      if (channels > 0) epilogue(g, t, y, x0, positions, o_begin + n0, channels, sums);
    }
  }
}

}  // namespace

bool conv3d_applies(const Conv3dArgs& g) {
  return g.weights && g.weights->arithmetic == GemmArithmetic::BF16 && g.weights->c_in % kStepK == 0 && supported();
}

void conv3d(const Conv3dArgs& g) {
  if (!conv3d_applies(g)) return avx512::conv3d(g);
  validate_conv3d(g);
  ThreadPool& pool = ThreadPool::global();
  const PaddedFrames pad = pad_inputs(g, pool);
  const int64_t blocks = g.weights->blocks();
  const int64_t units = g.frames_out * g.h_out * blocks;
  pool.parallel_for(units, [&](int64_t u) {
    // Tile state is per thread: configured for each unit, released after.
    _tile_loadconfig(&kTileConfig);
    run_unit(g, pad, u / (g.h_out * blocks), (u / blocks) % g.h_out, u % blocks);
    _tile_release();
  });
}

}  // namespace stepmix::kernels::amx
