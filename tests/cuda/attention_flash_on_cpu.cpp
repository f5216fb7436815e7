// Runs attention_flash_kernel.cuh under the SIMT emulator. This file defines
// CUDA's spellings as macros (cuda_on_cpu.hpp), so CMake keeps it out of the
// unity batches.
#include "attention_flash_on_cpu.hpp"

// clang-format off
#include "on_cpu/cuda_on_cpu.hpp"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"  // #pragma unroll
#include "kernels/cuda/attention_flash_kernel.cuh"
#pragma GCC diagnostic pop
// clang-format on

#include <algorithm>
#include <stdexcept>

namespace stepmix::test {
namespace {

template <int D, int kWarps, int kTilesPerWarp, int kKeys>
std::vector<uint16_t> run(const AttentionProblem& p, const std::vector<uint16_t>& q, const std::vector<uint16_t>& k,
                          const std::vector<uint16_t>& v) {
  using Shape = cuda::FlashShape<D, kWarps, kTilesPerWarp, kKeys>;
  std::vector<uint16_t> out(q.size(), 0xA5A5);
  simt::LaunchConfig config;
  config.grid = {unsigned((p.q_rows + cuda::kBlockRows - 1) / cuda::kBlockRows), unsigned(p.q_heads), 1};
  config.block = {unsigned(Shape::kThreads), 1, 1};
  config.dynamic_shared_bytes = Shape::kSharedBytes;
  config.max_dynamic_shared_bytes = Shape::kSharedBytes;  // as attention_flash.cu raises it
  config.readable = {{q.data(), q.size() * 2}, {k.data(), k.size() * 2}, {v.data(), v.size() * 2}};
  const float scale_log2 = cuda::flash_scale_log2(p.head_dim);
  simt::launch(config, [&] {
    cuda::flash_attention_kernel<D, kWarps, kTilesPerWarp, kKeys>(q.data(), k.data(), v.data(), out.data(),
                                                                  int(p.q_rows), int(p.kv_rows), int(p.q_heads),
                                                                  int(p.kv_heads), p.causal, scale_log2);
  });
  return out;
}

template <int D, int kWarps, int kTilesPerWarp, int kKeys>
uint64_t expected_mma(const AttentionProblem& p) {
  using Shape = cuda::FlashShape<D, kWarps, kTilesPerWarp, kKeys>;
  const uint64_t per_tile =
      uint64_t(kWarps) * kTilesPerWarp * ((D / 16) * (Shape::kTileKeys / 8) + (Shape::kTileKeys / 16) * (D / 8));
  uint64_t total = 0;
  for (int64_t row0 = 0; row0 < p.q_rows; row0 += cuda::kBlockRows) {
    const int64_t key_end = p.causal ? std::min(p.kv_rows, row0 + cuda::kBlockRows) : p.kv_rows;
    total += uint64_t((key_end + Shape::kTileKeys - 1) / Shape::kTileKeys) * per_tile;
  }
  return total * uint64_t(p.q_heads);
}

}  // namespace

std::vector<uint16_t> flash_attention_on_cpu(const AttentionProblem& p, const std::vector<uint16_t>& q,
                                             const std::vector<uint16_t>& k, const std::vector<uint16_t>& v,
                                             cuda::FlashVariant variant) {
  if (p.head_dim != 64 && p.head_dim != 128) throw std::invalid_argument("flash_attention_on_cpu: head_dim 64 or 128");
  std::vector<uint16_t> out;
  cuda::with_flash_shape(p.head_dim, variant, [&]<int D, int kWarps, int kTilesPerWarp, int kKeys>() {
    out = run<D, kWarps, kTilesPerWarp, kKeys>(p, q, k, v);
  });
  return out;
}

uint64_t flash_expected_mma_count(const AttentionProblem& p, cuda::FlashVariant variant) {
  uint64_t count = 0;
  cuda::with_flash_shape(p.head_dim, variant, [&]<int D, int kWarps, int kTilesPerWarp, int kKeys>() {
    count = expected_mma<D, kWarps, kTilesPerWarp, kKeys>(p);
  });
  return count;
}

}  // namespace stepmix::test
