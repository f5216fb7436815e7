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
// Work unit: (output frame, a group of output rows, 64-channel weight
// block). K runs in (tap, 256-channel chunk) order; for each chunk, whose
// weight tiles then stay in L1, every pair of position tiles × pair of output
// tiles loads its four accumulators from a per-thread buffer, runs the
// chunk's 32-channel steps and stores them back (float32, exact). After the
// last chunk every tile goes through the float32 epilogue (bias, residual,
// output type). Each sum is made by one thread in a fixed order, so results
// do not depend on the thread count; the order inside a tile multiply is the
// hardware's, so they differ from the reference by float32 rounding only
// (tests/kernels/conv_kernels_test.cpp).
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

// A run of up to 16 consecutive output positions of one row: one A tile.
struct PositionTile {
  int64_t y, x0, count;
};

// Accumulators of (position tile i, output tile j) live in `sums` as 1 KiB
// blocks [16 positions][16 channels] and are loaded into tmm(2i + j) for a
// chunk of K; A tiles tmm4, tmm5, B tiles tmm6, tmm7. Tile numbers must be
// literals, hence one instantiation per (MT, NT).
template <int MT, int NT>
void chunk_sums(const uint16_t* const a[2], int64_t a_stride, const uint16_t* const b[2], int64_t b_stride,
                int64_t b_step, int64_t steps, float* const c[4]) {
  _tile_loadd(0, c[0], 64);
  if constexpr (NT == 2) _tile_loadd(1, c[1], 64);
  if constexpr (MT == 2) _tile_loadd(2, c[2], 64);
  if constexpr (MT == 2 && NT == 2) _tile_loadd(3, c[3], 64);
  for (int64_t s = 0; s < steps; ++s) {
    _tile_loadd(4, a[0] + s * kStepK, a_stride);
    if constexpr (MT == 2) _tile_loadd(5, a[1] + s * kStepK, a_stride);
    _tile_loadd(6, b[0] + s * b_step, b_stride);
    if constexpr (NT == 2) _tile_loadd(7, b[1] + s * b_step, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NT == 2) _tile_dpbf16ps(1, 4, 7);
    if constexpr (MT == 2) _tile_dpbf16ps(2, 5, 6);
    if constexpr (MT == 2 && NT == 2) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c[0], 64);
  if constexpr (NT == 2) _tile_stored(1, c[1], 64);
  if constexpr (MT == 2) _tile_stored(2, c[2], 64);
  if constexpr (MT == 2 && NT == 2) _tile_stored(3, c[3], 64);
}

using ChunkSums = void (*)(const uint16_t* const[2], int64_t, const uint16_t* const[2], int64_t, int64_t, int64_t,
                           float* const[4]);
constexpr ChunkSums kChunkSums[2][2] = {{chunk_sums<1, 1>, chunk_sums<1, 2>}, {chunk_sums<2, 1>, chunk_sums<2, 2>}};

// Input channels per chunk: the chunk's B tiles for a whole block (8 steps ×
// 4 tiles × 1 KiB) stay in L1 while every position tile of the unit uses them.
constexpr int64_t kChunkChannels = 256;

void epilogue(const Conv3dArgs& g, int64_t t, const PositionTile& tile, int64_t o0, const float* sums) {
  const ConvWeights& w = *g.weights;
  const float* residual = g.residual_frames ? g.residual_frames[t] : nullptr;
  const __mmask16 mask = tail_mask16(std::min<int64_t>(16, w.c_out - o0));
  const __m512 bias = _mm512_maskz_loadu_ps(mask, w.bias.data() + o0);
  for (int64_t p = 0; p < tile.count; ++p) {
    const int64_t out = (tile.y * g.w_out + tile.x0 + p) * w.c_out + o0;
    __m512 v = _mm512_add_round_ps(_mm512_load_ps(sums + p * 16), bias, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (residual)
      v = _mm512_add_round_ps(v, _mm512_maskz_loadu_ps(mask, residual + out), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (g.y_type == FrameElement::F32) {
      _mm512_mask_storeu_ps(static_cast<float*>(g.y_frames[t]) + out, mask, v);
    } else {
      _mm256_mask_storeu_epi16(static_cast<uint16_t*>(g.y_frames[t]) + out, mask, avx512::f32_to_bf16_rne(v));
    }
  }
}

// Output rows [y0, y1) of frame t, one weight block: every position tile of
// those rows against every output tile of the block, K in (tap, chunk) order.
void run_unit(const Conv3dArgs& g, const PaddedFrames& pad, int64_t t, int64_t y0, int64_t y1, int64_t block) {
  const ConvWeights& w = *g.weights;
  const int64_t width = w.block_width(block), o_begin = block * kConvBlock, ntiles = width / kTile;
  const int64_t c_in = w.c_in, pairs = c_in / 2;
  const uint16_t* packed = w.bf16.data() + w.block_offset(block);
  std::vector<PositionTile> tiles;
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x0 = 0; x0 < g.w_out; x0 += kTile) tiles.push_back({y, x0, std::min(kTile, g.w_out - x0)});
  thread_local AlignedScratch scratch;
  float* sums = scratch.get<float>(std::size_t(tiles.size() * ntiles * 256));
  std::memset(sums, 0, tiles.size() * std::size_t(ntiles) * 256 * sizeof(float));
  auto sum_block = [&](std::size_t tile, int64_t n) { return sums + (tile * std::size_t(ntiles) + std::size_t(n)) * 256; };
  const int64_t a_stride = g.stride_w * c_in * 2, b_stride = width * 4;
  std::vector<std::size_t> valid;
  for (int a = 0; a < w.kt; ++a) {
    const uint16_t* frame = pad.of_input[std::size_t(t * g.stride_t + a)];
    if (!frame) continue;
    for (int b = 0; b < w.kh; ++b) {
      // Position tiles whose input row of this tap row is inside the input.
      valid.clear();
      for (std::size_t i = 0; i < tiles.size(); ++i) {
        const int64_t iy = tiles[i].y * g.stride_h + b - g.pad_top;
        if (iy >= 0 && iy < g.h_in) valid.push_back(i);
      }
      for (int c = 0; c < w.kw; ++c) {
        const int tap = (a * w.kh + b) * w.kw + c;
        for (int64_t k0 = 0; k0 < c_in; k0 += kChunkChannels) {
          const int64_t steps = (std::min(c_in, k0 + kChunkChannels) - k0) / kStepK;
          const uint16_t* wt = packed + (int64_t(tap) * pairs + k0 / 2) * width * 2;
          for (std::size_t v = 0; v < valid.size(); v += 2) {
            const int mt = v + 1 < valid.size() ? 2 : 1;
            const uint16_t* a_rows[2];
            for (int i = 0; i < mt; ++i) {
              const PositionTile& pt = tiles[valid[v + std::size_t(i)]];
              a_rows[i] = frame + ((pt.y * g.stride_h + b) * pad.columns + pt.x0 * g.stride_w + c) * c_in + k0;
            }
            for (int64_t n = 0; n < ntiles; n += 2) {
              const int nt = n + 1 < ntiles ? 2 : 1;
              const uint16_t* b_rows[2] = {wt + n * kTile * 2, wt + (n + 1) * kTile * 2};
              float* c_blocks[4] = {sum_block(valid[v], n), sum_block(valid[v], n + nt - 1),
                                    sum_block(valid[v + std::size_t(mt) - 1], n),
                                    sum_block(valid[v + std::size_t(mt) - 1], n + nt - 1)};
              kChunkSums[mt - 1][nt - 1](a_rows, a_stride, b_rows, b_stride, kStepK / 2 * width * 2, steps, c_blocks);
            }
          }
        }
      }
    }
  }
  for (std::size_t i = 0; i < tiles.size(); ++i)
    for (int64_t n = 0; n < ntiles; ++n)
      if (o_begin + n * kTile < w.c_out) epilogue(g, t, tiles[i], o_begin + n * kTile, sum_block(i, n));
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
  // Rows per unit: enough positions to reuse each chunk of weights many
  // times, but a few units per thread.
  int64_t rows = std::clamp<int64_t>((8 * kTile + g.w_out - 1) / g.w_out, 1, g.h_out);
  while (rows > 1 && g.frames_out * ((g.h_out + rows - 1) / rows) * blocks < 4 * int64_t(pool.size())) rows = (rows + 1) / 2;
  const int64_t groups = (g.h_out + rows - 1) / rows;
  pool.parallel_for(g.frames_out * groups * blocks, [&](int64_t u) {
    const int64_t block = u % blocks, group = (u / blocks) % groups, t = u / (blocks * groups);
    // Tile state is per thread: configured for each unit, released after.
    _tile_loadconfig(&kTileConfig);
    run_unit(g, pad, t, group * rows, std::min(g.h_out, (group + 1) * rows), block);
    _tile_release();
  });
}

}  // namespace stepmix::kernels::amx
