// Flash attention for bf16 q/k/v: argument checks, variant choice and the
// launch of the kernel in attention_flash_kernel.cuh (which says how it works).
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/warp_ops.cuh"
#include "kernels/cuda/attention_flash_kernel.cuh"

namespace stepmix::cuda {
namespace {

using detail::check_cuda;
using detail::launch_kernel;

template <int D, int kWarps, int kTilesPerWarp, int kKeys>
void launch_flash(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out,
                  StreamHandle stream) {
  using Shape = FlashShape<D, kWarps, kTilesPerWarp, kKeys>;
  auto kernel = flash_attention_kernel<D, kWarps, kTilesPerWarp, kKeys>;
  // Once per instantiation (stepmix uses device 0 only); a failure is thrown
  // and tried again by the next call.
  static const bool shared_memory_set = [&] {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kSharedBytes),
               "cudaFuncSetAttribute(flash attention shared memory)");
    return true;
  }();
  (void)shared_memory_set;
  const dim3 grid(unsigned((p.q_rows + kBlockRows - 1) / kBlockRows), unsigned(p.q_heads));
  const float scale_log2 = flash_scale_log2(p.head_dim);
  launch_kernel("attention_flash_bf16", kernel, grid, Shape::kThreads, Shape::kSharedBytes, stream, q, k, v, out,
                int(p.q_rows), int(p.kv_rows), int(p.q_heads), int(p.kv_heads), p.causal, scale_log2);
}

}  // namespace

bool attention_flash_supported(const AttentionProblem& p) { return p.head_dim == 64 || p.head_dim == 128; }

void attention_flash_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                          uint16_t* out, StreamHandle stream, FlashVariant variant) {
  detail::check_attention("attention_flash_bf16", p, q, k, v, out);
  detail::require(attention_flash_supported(p), "attention_flash_bf16",
                  "head_dim must be 64 or 128, got " + std::to_string(p.head_dim));
  detail::require(detail::aligned(q, 16) && detail::aligned(k, 16) && detail::aligned(v, 16) &&
                      detail::aligned(out, 16),
                  "attention_flash_bf16", "q, k, v and out must be 16-byte aligned");
  detail::require(p.q_rows < (int64_t(1) << 30) && p.kv_rows < (int64_t(1) << 30), "attention_flash_bf16",
                  "at most 2^30 rows");
  if (p.q_rows == 0) return;
  with_flash_shape(p.head_dim, variant, [&]<int D, int kWarps, int kTilesPerWarp, int kKeys>() {
    launch_flash<D, kWarps, kTilesPerWarp, kKeys>(p, q, k, v, out, stream);
  });
}

}  // namespace stepmix::cuda
