// AMX-BF16 VAE convolution (conv_kernels.hpp, BF16 arithmetic): the same
// implicit GEMM as the AVX-512 kernel, on tiles.
//
// Roles. A tile (16 rows × 32 bf16) = 16 consecutive output positions of one
// row × 32 input channels of one tap. B tile (16 rows × 16 pairs) = 32 input
// channels × 16 output channels of one tap: rows of the packed BF16 weights
// ([tap][c_in/2][width][2], rows width·4 bytes apart), loaded straight from
// the packing. C tile = 16 positions × 16 output channels, float32.
//
// Input copy. Each distinct input frame is copied once per call into a
// zero-bordered, channel-blocked buffer [row][c_in/32][column][32]: the 16
// positions of an A tile are then 1 KiB of consecutive memory whatever c_in
// (in channels-last frames they are c_in·2 bytes apart, which at c_in = 1024
// puts all 16 rows in two L1 sets), and a tap one column to the right is the
// next 64 bytes. The border covers the spatial zero padding and the slack of
// the last, partial tile of a row (whose extra outputs are computed and
// discarded); taps whose input row is outside the input are skipped, as are
// null (zero) frames.
//
// Blocking. On the CPUs measured a tile load that misses L1 costs more than
// the tile multiply it feeds, and a 2×2 block of accumulators needs one tile
// load per multiply, so the loop nest reuses what it loads. Work unit:
// (output frame, a few output rows, one 64-channel weight block); units run
// weight block by weight block, so one block's weights (9 taps × 1024 channels
// × 64 × 2 bytes = 1.2 MiB for an image's 3×3×3 layer) stay in L2 across the
// units that use them. A unit walks its position tiles in groups of
// kGroupTiles whose float32 sums are parked in L1. For a group, K runs in (frame a, tap row b, channel chunk,
// channel step, tap column c) order: one call per pair of position tiles ×
// pair of output tiles loads its four accumulators, runs the chunk's
// 32-channel steps for every tap column (the three columns read almost the
// same A lines, which stay in L1), and stores them back (float32, exact).
// The chunk's weight tiles serve every pair of position tiles of the group.
// After the last chunk the group's sums go through the float32 epilogue
// (bias, residual, output type).
//
// Each sum is made by one thread in a fixed order, so results do not depend
// on the thread count; the order differs from the reference's (channel
// chunks outside tap columns, 32 products per tile multiply in the
// hardware's order), so results differ from it by float32 rounding only
// (tests/kernels/conv_kernels_test.cpp bounds two float32 orders).
//
// Where AMX cannot run (CPU, or Linux refused the tile state), for F32
// arithmetic and for c_in not a multiple of 32, the AVX-512 kernel runs.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/thread_pool.hpp"
#include "kernels/conv_kernels.hpp"
#include "kernels/cpu/amx_kernels.hpp"
#include "kernels/cpu/amx_tiles.hpp"
#include "kernels/cpu/avx512_helpers.hpp"

namespace stepmix::kernels::amx {
namespace {

using avx512::tail_mask16;

constexpr int64_t kTile = 16;    // positions or output channels per tile
constexpr int64_t kStepK = 32;   // input channels per tile multiply

struct PaddedFrames {
  int64_t rows = 0, columns = 0;  // padded frame size
  std::vector<std::unique_ptr<uint16_t[]>> frames;  // one per distinct input frame
  std::vector<const uint16_t*> of_input;            // input slot -> padded copy (null = zero frame)
};

// Zero-bordered, channel-blocked copies [row][c_in/32][column][32] of the
// distinct non-null input frames. Only the border is written with zeros (the
// interior is copied over), so each buffer is written once.
PaddedFrames pad_inputs(const Conv3dArgs& g, ThreadPool& pool) {
  const ConvWeights& w = *g.weights;
  PaddedFrames p;
  const int64_t tiles_w = (g.w_out + kTile - 1) / kTile * kTile;
  p.rows = std::max<int64_t>(g.h_in + g.pad_top, (g.h_out - 1) * g.stride_h + w.kh);
  p.columns = std::max<int64_t>(g.w_in + g.pad_left, (tiles_w - 1) * g.stride_w + w.kw);
  const int64_t inputs = (g.frames_out - 1) * g.stride_t + w.kt;
  const int64_t steps = w.c_in / kStepK, row_elements = steps * p.columns * kStepK;
  std::vector<const void*> seen;
  p.of_input.assign(std::size_t(inputs), nullptr);
  for (int64_t i = 0; i < inputs; ++i) {
    const void* src = g.x_frames[i];
    if (!src) continue;
    const auto it = std::find(seen.begin(), seen.end(), src);
    if (it != seen.end()) {
      p.of_input[std::size_t(i)] = p.frames[std::size_t(it - seen.begin())].get();
      continue;
    }
    seen.push_back(src);
    p.frames.emplace_back(new uint16_t[std::size_t(p.rows * row_elements)]);  // uninitialised: every element is written below
    uint16_t* dst = p.frames.back().get();
    const auto* in = static_cast<const uint16_t*>(src);
    pool.parallel_for(p.rows, [&](int64_t r) {
      uint16_t* row = dst + r * row_elements;
      const int64_t y = r - g.pad_top;
      if (y < 0 || y >= g.h_in) {
        std::memset(row, 0, std::size_t(row_elements) * 2);
        return;
      }
      const uint16_t* from = in + y * g.w_in * w.c_in;
      const int64_t right = p.columns - g.pad_left - g.w_in;
      for (int64_t kb = 0; kb < steps; ++kb) {
        uint16_t* block = row + kb * p.columns * kStepK;
        std::memset(block, 0, std::size_t(g.pad_left * kStepK) * 2);
        for (int64_t x = 0; x < g.w_in; ++x)
          _mm512_storeu_si512(block + (g.pad_left + x) * kStepK, _mm512_loadu_si512(from + x * w.c_in + kb * kStepK));
        std::memset(block + (g.pad_left + g.w_in) * kStepK, 0, std::size_t(right * kStepK) * 2);
      }
    });
    p.of_input[std::size_t(i)] = dst;
  }
  return p;
}

// A run of up to 16 consecutive output positions of one row: one A tile.
struct PositionTile {
  int64_t y, x0, count;
};

// Position tiles per group (their parked sums: 8 × 4 output tiles × 1 KiB =
// 32 KiB, in L1) and 32-channel steps per chunk (256 channels; per call 8
// steps × kw tap columns of multiplies per accumulator load and store).
// Measured on the decoder's shapes (bench/run-conv.sh) against 4 tiles and
// 2-4 steps, which keep the chunk's weights in L1 as well: within the noise
// of a shared machine, and ahead on the 3×3 layers at 128×128.
constexpr int64_t kGroupTiles = 8;
constexpr int64_t kChunkSteps = 8;

// One K chunk for a pair of position tiles (the first, the second or both:
// M0, M1) and NT output tiles: the accumulators (tile i, j) are loaded into
// tmm(2i + j) from c[2i + j]; for each 32-channel step, for each of `taps`
// tap columns (A a_tap and B b_tap elements further on), two A and two B
// tiles are loaded and multiplied; then the accumulators are stored back
// (float32, exact). A tiles tmm4, tmm5, B tiles tmm6, tmm7; all loads of a
// step come before its multiplies (measured faster than interleaving them).
// Tile numbers must be literals, hence one instantiation per case.
template <bool M0, bool M1, int NT>
void chunk_steps(const uint16_t* a0, const uint16_t* a1, int64_t a_stride, int64_t a_step, int64_t a_tap,
                 const uint16_t* b0, const uint16_t* b1, int64_t b_stride, int64_t b_step, int64_t b_tap, int taps,
                 int64_t steps, float* const c[4]) {
  if constexpr (M0) STEPMIX_TILE_LOAD(0, c[0], 64);
  if constexpr (M0 && NT == 2) STEPMIX_TILE_LOAD(1, c[1], 64);
  if constexpr (M1) STEPMIX_TILE_LOAD(2, c[2], 64);
  if constexpr (M1 && NT == 2) STEPMIX_TILE_LOAD(3, c[3], 64);
  for (int64_t s = 0; s < steps; ++s)
    for (int tap = 0; tap < taps; ++tap) {
      if constexpr (M0) STEPMIX_TILE_LOAD(4, a0 + s * a_step + tap * a_tap, a_stride);
      if constexpr (M1) STEPMIX_TILE_LOAD(5, a1 + s * a_step + tap * a_tap, a_stride);
      STEPMIX_TILE_LOAD(6, b0 + s * b_step + tap * b_tap, b_stride);
      if constexpr (NT == 2) STEPMIX_TILE_LOAD(7, b1 + s * b_step + tap * b_tap, b_stride);
      if constexpr (M0) STEPMIX_TILE_DPBF16PS(0, 4, 6);
      if constexpr (M0 && NT == 2) STEPMIX_TILE_DPBF16PS(1, 4, 7);
      if constexpr (M1) STEPMIX_TILE_DPBF16PS(2, 5, 6);
      if constexpr (M1 && NT == 2) STEPMIX_TILE_DPBF16PS(3, 5, 7);
    }
  if constexpr (M0) STEPMIX_TILE_STORE(0, c[0], 64);
  if constexpr (M0 && NT == 2) STEPMIX_TILE_STORE(1, c[1], 64);
  if constexpr (M1) STEPMIX_TILE_STORE(2, c[2], 64);
  if constexpr (M1 && NT == 2) STEPMIX_TILE_STORE(3, c[3], 64);
}

using ChunkSteps = void (*)(const uint16_t*, const uint16_t*, int64_t, int64_t, int64_t, const uint16_t*,
                            const uint16_t*, int64_t, int64_t, int64_t, int, int64_t, float* const[4]);
// [which position tiles: 1 = first, 2 = second, 3 = both][NT - 1]
constexpr ChunkSteps kChunkKernels[4][2] = {{nullptr, nullptr},
                                           {chunk_steps<true, false, 1>, chunk_steps<true, false, 2>},
                                           {chunk_steps<false, true, 1>, chunk_steps<false, true, 2>},
                                           {chunk_steps<true, true, 1>, chunk_steps<true, true, 2>}};

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

// Output rows [y0, y1) of frame t, one weight block, group by group of
// position tiles (the loop nest of the header comment).
void run_unit(const Conv3dArgs& g, const PaddedFrames& pad, int64_t t, int64_t y0, int64_t y1, int64_t block) {
  const ConvWeights& w = *g.weights;
  const int64_t width = w.block_width(block), o_begin = block * kConvBlock, ntiles = width / kTile;
  const int64_t c_in = w.c_in, pairs = c_in / 2, c_steps = c_in / kStepK, chunk = kChunkSteps;
  const uint16_t* packed = w.bf16.data() + w.block_offset(block);
  std::vector<PositionTile> tiles;
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x0 = 0; x0 < g.w_out; x0 += kTile) tiles.push_back({y, x0, std::min(kTile, g.w_out - x0)});
  alignas(64) float sums[kGroupTiles][4][256];
  // Element offsets: A rows, the next 32 channels, the next tap column; B
  // rows, the next 32 channels, the next tap.
  const int64_t a_stride = g.stride_w * kStepK * 2, a_step = pad.columns * kStepK, a_tap = kStepK;
  const int64_t b_stride = width * 4, b_step = kStepK / 2 * width * 2, b_tap = pairs * width * 2;
  for (std::size_t g0 = 0; g0 < tiles.size(); g0 += kGroupTiles) {
    const std::size_t count = std::min<std::size_t>(kGroupTiles, tiles.size() - g0);
    std::memset(sums, 0, sizeof sums);
    for (int a = 0; a < w.kt; ++a) {
      const uint16_t* frame = pad.of_input[std::size_t(t * g.stride_t + a)];
      if (!frame) continue;
      for (int b = 0; b < w.kh; ++b) {
        // Per position tile: its input row at this tap row (tap column 0),
        // or null outside the input.
        const uint16_t* rows[kGroupTiles] = {};
        bool any = false;
        for (std::size_t i = 0; i < count; ++i) {
          const PositionTile& pt = tiles[g0 + i];
          const int64_t iy = pt.y * g.stride_h + b - g.pad_top;
          if (iy < 0 || iy >= g.h_in) continue;
          rows[i] = frame + ((pt.y * g.stride_h + b) * c_steps * pad.columns + pt.x0 * g.stride_w) * kStepK;
          any = true;
        }
        if (!any) continue;
        const uint16_t* taps_w = packed + int64_t((a * w.kh + b) * w.kw) * b_tap;
        for (int64_t s0 = 0; s0 < c_steps; s0 += chunk) {
          const int64_t steps = std::min(chunk, c_steps - s0);
          const uint16_t* wt = taps_w + s0 * b_step;
          for (std::size_t i = 0; i < count; i += 2) {
            const std::size_t j = i + 1 < count ? i + 1 : i;  // the pair's second tile (itself when alone)
            const int which = (rows[i] ? 1 : 0) | (j != i && rows[j] ? 2 : 0);
            if (!which) continue;
            const uint16_t* a0 = rows[i] ? rows[i] + s0 * a_step : nullptr;
            const uint16_t* a1 = which & 2 ? rows[j] + s0 * a_step : nullptr;
            for (int64_t n = 0; n < ntiles; n += 2) {
              const int nt = n + 1 < ntiles ? 2 : 1;
              float* c_blocks[4] = {sums[i][n], sums[i][n + nt - 1], sums[j][n], sums[j][n + nt - 1]};
              kChunkKernels[which][nt - 1](a0, a1, a_stride, a_step, a_tap, wt + n * kTile * 2, wt + (n + 1) * kTile * 2,
                                           b_stride, b_step, b_tap, w.kw, steps, c_blocks);
            }
          }
        }
      }
    }
    for (std::size_t i = 0; i < count; ++i)
      for (int64_t n = 0; n < ntiles; ++n)
        if (o_begin + n * kTile < w.c_out) epilogue(g, t, tiles[g0 + i], o_begin + n * kTile, sums[i][n]);
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
  // Rows per unit: enough positions to reuse each chunk of weights many
  // times, but a few units per thread.
  int64_t rows = std::clamp<int64_t>((8 * kTile + g.w_out - 1) / g.w_out, 1, g.h_out);
  while (rows > 1 && g.frames_out * ((g.h_out + rows - 1) / rows) * blocks < 4 * int64_t(pool.size())) rows = (rows + 1) / 2;
  const int64_t groups = (g.h_out + rows - 1) / rows;
  // Weight block outermost: consecutive units share one block's weights.
  pool.parallel_for(g.frames_out * groups * blocks, [&](int64_t u) {
    const int64_t block = u / (g.frames_out * groups), t = (u / groups) % g.frames_out, group = u % groups;
    // Tile state is per thread: configured for each unit, released after.
    STEPMIX_TILE_LOADCONFIG(&kTileConfig);
    run_unit(g, pad, t, group * rows, std::min(g.h_out, (group + 1) * rows), block);
    STEPMIX_TILE_RELEASE();
  });
}

}  // namespace stepmix::kernels::amx
