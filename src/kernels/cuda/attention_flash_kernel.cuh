// The flash attention kernel for bf16 q/k/v (FlashAttention-2 scheme) on
// mma.sync tensor-core instructions (m16n8k16, bf16 operands, float32
// accumulators).
//
// A block owns 128 query rows of one query head and streams the key/value
// rows of its KV head through shared memory in tiles of kKeys (32 or 64), two tiles deep
// (cp.async, so the next tile loads while this one is used). Per tile each
// warp computes S = Q·Kᵀ for its rows (float32), scales it by log2(e)/sqrt(D),
// masks (past the last key; above the diagonal when causal), updates the
// running row max m and row sum l (float32), rescales its output
// accumulator O and adds P·V with P rounded to bf16. At the end O / l is
// rounded to bf16. Nothing of size [q_rows, kv_rows] is ever stored.
//
// Shared-memory rows are D bf16 = D/8 chunks of 16 bytes; chunk c of row r
// lives at chunk c ^ (r & 7), so the 8 row addresses of one ldmatrix land
// in 8 different bank groups (no conflicts); D >= 64 keeps 8 chunks a row.
//
// Three shapes of the same kernel (FlashVariant, with_flash_shape): 8 warps
// of 16 rows and 64-key tiles, Q fragments kept in registers; or 4 warps of
// 32 rows (two 16-row tiles share every K/V fragment read, halving
// shared-memory traffic per flop), Q read from shared memory at each step,
// with 32- or 64-key tiles. Which is faster on a Hopper GPU is
// measured by bench/cuda-device-check.sh.
//
// Device code only: the includer supplies the warp operations of
// warp_ops.cuh (attention_flash.cu on the GPU, tests/cuda/on_cpu/simt_emulator.hpp on
// the CPU), and this file names nothing else of CUDA but threadIdx, blockIdx,
// __syncthreads and __shfl_xor_sync.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_kernels.hpp"

namespace stepmix::cuda {
namespace {

constexpr int kBlockRows = 128;  // query rows per block

// The kernel's score scale: log2(e) / sqrt(head_dim), so exp2 of a scaled
// score is exp of the softmax's argument.
inline float flash_scale_log2(int64_t head_dim) { return float(1.4426950408889634 / std::sqrt(double(head_dim))); }

// For each of the T row tiles: acc n8 tiles 2·j2 and 2·j2+1 += a · (the two
// B fragments of one ldmatrix.x4: b[0..1], b[2..3]).
template <int T, int N>
__device__ __forceinline__ void mma_two_tiles(float (&acc)[T][N][4], int j2, const uint32_t (&a)[T][4],
                                              const uint32_t (&b)[4]) {
#pragma unroll
  for (int t = 0; t < T; ++t) {
    mma_bf16(acc[t][2 * j2], a[t], b[0], b[1]);
    mma_bf16(acc[t][2 * j2 + 1], a[t], b[2], b[3]);
  }
}

// Byte offset of (row, 16-byte chunk) in a swizzled tile of D-element rows.
template <int D>
__device__ __forceinline__ uint32_t tile_offset(int row, int chunk) {
  return uint32_t((row * (D / 8) + (chunk ^ (row & 7))) * 16);
}

// Loads `rows` rows (from `row0`, `limit` rows exist) of one head into a tile.
template <int D, int kThreads>
__device__ __forceinline__ void load_tile(uint32_t tile, const uint16_t* base, int64_t row_stride, int row0,
                                          int limit, int rows) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int id = threadIdx.x; id < rows * kChunks; id += kThreads) {
    const int r = id / kChunks, c = id % kChunks;
    const int row = row0 + r;
    const bool valid = row < limit;
    const uint16_t* src = base + (valid ? row : 0) * row_stride + c * 8;
    copy_16(tile + tile_offset<D>(r, c), src, valid);
  }
}

// kWarps warps of 16·kTilesPerWarp query rows each; kTileKeys key/value rows
// per tile.
template <int D, int kWarps, int kTilesPerWarp, int kKeys>
struct FlashShape {
  static constexpr int kTileKeys = kKeys;
  static constexpr int kThreads = kWarps * 32;
  static constexpr bool kQInRegisters = kTilesPerWarp == 1;
  static constexpr int kQBytes = kBlockRows * D * 2;
  static constexpr int kTileBytes = kTileKeys * D * 2;
  static constexpr int kSharedBytes = kQBytes + 4 * kTileBytes;  // Q, 2 × (K, V)
  static_assert(kWarps * 16 * kTilesPerWarp == kBlockRows, "a block covers kBlockRows query rows");
  static_assert(D % 64 == 0 && D <= 128, "head_dim 64 or 128");
  static_assert(kKeys % 16 == 0 && kKeys <= 64, "key tiles of 16 to 64 rows");
};

// Calls f.template operator()<D, kWarps, kTilesPerWarp, kKeys>() with the
// shape of `variant` at head_dim 64 or 128 (FlashVariant, cuda_kernels.hpp):
// 8 × 16 rows and 64 keys; 4 × 32 rows and 32 keys (its two score tiles of
// 64 keys spill a few registers); 4 × 32 rows and 64 keys, FlashAttention-2's
// shape on Hopper, spills included. The one list of shapes, for the launch,
// its CPU emulation and the tests.
template <class F>
void with_flash_shape(int64_t head_dim, FlashVariant variant, F&& f) {
  const auto at = [&]<int D>() {
    switch (variant) {
      case FlashVariant::Rows32PerWarp: return f.template operator()<D, 4, 2, 32>();
      case FlashVariant::Rows32PerWarp64Keys: return f.template operator()<D, 4, 2, 64>();
      case FlashVariant::Auto:
      case FlashVariant::Rows16PerWarp: break;
    }
    return f.template operator()<D, 8, 1, 64>();
  };
  if (head_dim == 64)
    at.template operator()<64>();
  else
    at.template operator()<128>();
}

template <int D, int kWarps, int kTilesPerWarp, int kKeys>
__global__ void __launch_bounds__(kWarps * 32, 1)
    flash_attention_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k,
                           const uint16_t* __restrict__ v, uint16_t* __restrict__ out, int q_rows, int kv_rows,
                           int q_heads, int kv_heads, bool causal, float scale_log2) {
  using Shape = FlashShape<D, kWarps, kTilesPerWarp, kKeys>;
  constexpr int kThreads = Shape::kThreads;
  constexpr int kTileKeys = Shape::kTileKeys;
  constexpr int kKSteps = D / 16;             // k16 slices of the head dimension
  constexpr int kKeyTiles8 = kTileKeys / 8;   // n8 tiles of S per key tile
  constexpr int kDimTiles8 = D / 8;           // n8 tiles of O
  const uint32_t q_tile = dynamic_shared_base();
  const uint32_t kv_base = q_tile + Shape::kQBytes;
  auto k_tile = [&](int buffer) { return kv_base + uint32_t(buffer * 2 * Shape::kTileBytes); };
  auto v_tile = [&](int buffer) { return kv_base + uint32_t((buffer * 2 + 1) * Shape::kTileBytes); };

  const int head = blockIdx.y;
  const int kv_head = head / (q_heads / kv_heads);
  const int row0 = int(blockIdx.x) * kBlockRows;
  const int64_t q_stride = int64_t(q_heads) * D, kv_stride = int64_t(kv_heads) * D;
  const uint16_t* q_head = q + head * D;
  const uint16_t* k_head = k + kv_head * D;
  const uint16_t* v_head = v + kv_head * D;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, quad_lane = lane % 4;
  const int warp_row0 = warp * 16 * kTilesPerWarp;  // first of this warp's rows in the block

  // Keys a causal block can see end at its last row.
  const int key_end = causal && row0 + kBlockRows < kv_rows ? row0 + kBlockRows : kv_rows;
  const int tiles = (key_end + kTileKeys - 1) / kTileKeys;

  load_tile<D, kThreads>(q_tile, q_head, q_stride, row0, q_rows, kBlockRows);
  load_tile<D, kThreads>(k_tile(0), k_head, kv_stride, 0, kv_rows, kTileKeys);
  load_tile<D, kThreads>(v_tile(0), v_head, kv_stride, 0, kv_rows, kTileKeys);
  copy_commit();

  uint32_t q_frag[Shape::kQInRegisters ? kKSteps : 1][4];
  float o[kTilesPerWarp][kDimTiles8][4];
  float row_max[kTilesPerWarp][2], row_sum[kTilesPerWarp][2];
#pragma unroll
  for (int t = 0; t < kTilesPerWarp; ++t) {
#pragma unroll
    for (int j = 0; j < kDimTiles8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[t][j][e] = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_max[t][h] = -INFINITY;
      row_sum[t][h] = 0.0f;
    }
  }

  // ldmatrix lane addressing (see the fragment layouts of mma.m16n8k16):
  // A (16×16 of Q): lanes 0-15 rows 0-15 at chunk 0, lanes 16-31 at chunk 1.
  const int a_row = lane % 16, a_chunk = lane / 16;
  // B from K (keys × d, not transposed): two n8 tiles of keys × k16.
  const int kb_row = (lane % 8) + (lane / 16) * 8, kb_chunk = (lane / 8) % 2;
  // B from V (keys × d, transposed): k16 keys × two n8 tiles of d.
  const int vb_row = (lane % 8) + ((lane / 8) % 2) * 8, vb_chunk = lane / 16;

  for (int tile = 0; tile < tiles; ++tile) {
    const int buffer = tile % 2;
    if (tile + 1 < tiles) {
      const int next = (tile + 1) * kTileKeys;
      load_tile<D, kThreads>(k_tile(buffer ^ 1), k_head, kv_stride, next, kv_rows, kTileKeys);
      load_tile<D, kThreads>(v_tile(buffer ^ 1), v_head, kv_stride, next, kv_rows, kTileKeys);
      copy_commit();
      copy_wait<1>();
    } else {
      copy_wait<0>();
    }
    __syncthreads();
    if constexpr (Shape::kQInRegisters) {
      if (tile == 0) {
#pragma unroll
        for (int s = 0; s < kKSteps; ++s)
          ldmatrix_x4(q_frag[s], q_tile + tile_offset<D>(warp_row0 + a_row, 2 * s + a_chunk));
      }
    }

    // ---- S = Q · Kᵀ for this warp's rows and the tile's 64 keys
    float s_acc[kTilesPerWarp][kKeyTiles8][4];
#pragma unroll
    for (int t = 0; t < kTilesPerWarp; ++t)
#pragma unroll
      for (int j = 0; j < kKeyTiles8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) s_acc[t][j][e] = 0.0f;
#pragma unroll
    for (int s = 0; s < kKSteps; ++s) {
      uint32_t a[kTilesPerWarp][4];
#pragma unroll
      for (int t = 0; t < kTilesPerWarp; ++t) {
        if constexpr (Shape::kQInRegisters) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[t][e] = q_frag[s][e];
        } else {
          ldmatrix_x4(a[t], q_tile + tile_offset<D>(warp_row0 + t * 16 + a_row, 2 * s + a_chunk));
        }
      }
#pragma unroll
      for (int j2 = 0; j2 < kKeyTiles8 / 2; ++j2) {
        uint32_t b[4];
        ldmatrix_x4(b, k_tile(buffer) + tile_offset<D>(j2 * 16 + kb_row, 2 * s + kb_chunk));
        mma_two_tiles(s_acc, j2, a, b);
      }
    }

    // ---- scale, mask, online softmax
    const int key0 = tile * kTileKeys;
    const bool needs_mask = key0 + kTileKeys > kv_rows || (causal && key0 + kTileKeys - 1 > row0);
#pragma unroll
    for (int t = 0; t < kTilesPerWarp; ++t) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int query = row0 + warp_row0 + t * 16 + group + 8 * h;
        float tile_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < kKeyTiles8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float x = s_acc[t][j][2 * h + e] * scale_log2;
            if (needs_mask) {
              const int key = key0 + j * 8 + quad_lane * 2 + e;
              if (key >= kv_rows || (causal && key > query)) x = -INFINITY;
            }
            s_acc[t][j][2 * h + e] = x;
            tile_max = fmaxf(tile_max, x);
          }
        // The four lanes of a quad hold the same two rows.
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xFFFFFFFFu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xFFFFFFFFu, tile_max, 2));
        const float new_max = fmaxf(row_max[t][h], tile_max);
        // A row that has seen only masked keys keeps max -inf: subtract 0.
        const float subtract = new_max == -INFINITY ? 0.0f : new_max;
        const float rescale = exp2f(row_max[t][h] - subtract);
        row_max[t][h] = new_max;
        float partial = 0.0f;
#pragma unroll
        for (int j = 0; j < kKeyTiles8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = exp2f(s_acc[t][j][2 * h + e] - subtract);
            s_acc[t][j][2 * h + e] = p;
            partial += p;
          }
        row_sum[t][h] = row_sum[t][h] * rescale + partial;  // this lane's columns; quad-summed at the end
#pragma unroll
        for (int j = 0; j < kDimTiles8; ++j) {
          o[t][j][2 * h] *= rescale;
          o[t][j][2 * h + 1] *= rescale;
        }
      }
    }

    // ---- O += P · V, P rounded to bf16 (the accumulator layout of two n8
    // tiles of S is the A-operand layout of one k16 step)
#pragma unroll
    for (int s = 0; s < kTileKeys / 16; ++s) {
      uint32_t p[kTilesPerWarp][4];
#pragma unroll
      for (int t = 0; t < kTilesPerWarp; ++t) {
        p[t][0] = pack_bf16(s_acc[t][2 * s][0], s_acc[t][2 * s][1]);
        p[t][1] = pack_bf16(s_acc[t][2 * s][2], s_acc[t][2 * s][3]);
        p[t][2] = pack_bf16(s_acc[t][2 * s + 1][0], s_acc[t][2 * s + 1][1]);
        p[t][3] = pack_bf16(s_acc[t][2 * s + 1][2], s_acc[t][2 * s + 1][3]);
      }
#pragma unroll
      for (int j2 = 0; j2 < kDimTiles8 / 2; ++j2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, v_tile(buffer) + tile_offset<D>(s * 16 + vb_row, 2 * j2 + vb_chunk));
        mma_two_tiles(o, j2, p, b);
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is refilled
  }

  // ---- O / l, rounded to bf16
#pragma unroll
  for (int t = 0; t < kTilesPerWarp; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = row_sum[t][h];
      l += __shfl_xor_sync(0xFFFFFFFFu, l, 1);
      l += __shfl_xor_sync(0xFFFFFFFFu, l, 2);
      const float inverse = l > 0.0f ? 1.0f / l : 0.0f;
      const int query = row0 + warp_row0 + t * 16 + group + 8 * h;
      if (query >= q_rows) continue;
      uint16_t* row_out = out + int64_t(query) * q_stride + head * D;
#pragma unroll
      for (int j = 0; j < kDimTiles8; ++j) {
        const uint32_t pair = pack_bf16(o[t][j][2 * h] * inverse, o[t][j][2 * h + 1] * inverse);
        *reinterpret_cast<uint32_t*>(row_out + j * 8 + quad_lane * 2) = pair;
      }
    }
}

}  // namespace
}  // namespace stepmix::cuda
