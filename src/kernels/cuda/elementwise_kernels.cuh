// The grid-stride kernels behind elementwise.cuh's launches: device code
// only, so the tests can run them on the CPU (tests/cuda/on_cpu/cuda_on_cpu.hpp). A
// functor has `one(i)` for element i and, for 16-byte accesses, `eight(g)`
// for the elements 8g .. 8g+7.
#pragma once

#include <cstdint>

namespace stepmix::cuda::detail {
namespace {

template <class Op>
__global__ void elementwise_vec8_kernel(Op op, int64_t count) {
  const int64_t groups = count / 8;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += stride) op.eight(g);
  for (int64_t i = groups * 8 + int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) op.one(i);
}

template <class Op>
__global__ void elementwise_kernel(Op op, int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) op.one(i);
}

}  // namespace
}  // namespace stepmix::cuda::detail
