// Private to the CUDA backend: grid-stride launches of elementwise functors.
// A functor has `one(i)` for element i and, when it can take 16-byte
// accesses, `eight(g)` for the elements 8g .. 8g+7; launch_elementwise uses
// eight() when the caller says every pointer allows it, one() for the tail.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/cuda/elementwise_kernels.cuh"

namespace stepmix::cuda::detail {

inline constexpr int kElementwiseThreads = 256;

// op.one(i) for i < count; nothing when count == 0.
template <class Op>
void launch_each(const char* name, const Op& op, int64_t count, StreamHandle stream) {
  require(count >= 0, name, "negative count " + std::to_string(count));
  if (count == 0) return;
  launch_kernel(name, elementwise_kernel<Op>, grid_for(count, kElementwiseThreads), kElementwiseThreads, 0, stream, op,
                count);
}

// The same through op.eight(g) where `vectorizable` (every pointer op
// touches is 16-byte aligned, so groups of 8 bf16 or float start on 16 bytes).
template <class Op>
void launch_each_by_eight(const char* name, const Op& op, int64_t count, bool vectorizable, StreamHandle stream) {
  if (!vectorizable) return launch_each(name, op, count, stream);
  require(count >= 0, name, "negative count " + std::to_string(count));
  if (count == 0) return;
  launch_kernel(name, elementwise_vec8_kernel<Op>, grid_for(count / 8 + 1, kElementwiseThreads), kElementwiseThreads, 0,
                stream, op, count);
}

}  // namespace stepmix::cuda::detail
