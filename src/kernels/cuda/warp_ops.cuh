// Private to the CUDA kernels: the warp-level PTX operations the flash
// attention kernel is written against: cp.async copies into shared memory,
// ldmatrix, mma.sync m16n8k16 (bf16 operands, float32 accumulators), bf16
// packing and the dynamic shared-memory base address.
//
// The kernel (attention_flash_kernel.cuh) names nothing else of the GPU but
// threadIdx, blockIdx, __syncthreads and __shfl_xor_sync, so the tests run
// the same kernel source on the CPU (tests/cuda/on_cpu/cuda_on_cpu.hpp provides
// these functions there, on the SIMT emulator, with the layouts of the PTX
// ISA and checks on every address) and the GPU tests only have to confirm
// the hardware agrees. A host compiler sees nothing here.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDACC__)
namespace stepmix::cuda {
namespace {

// The address of the block's dynamic shared memory in the shared window.
__device__ __forceinline__ uint32_t dynamic_shared_base() {
  extern __shared__ __align__(128) unsigned char dynamic_shared[];
  return static_cast<uint32_t>(__cvta_generic_to_shared(dynamic_shared));
}

// 16 bytes global → shared; zero-filled (and `src` not read) when `valid` is
// false.
__device__ __forceinline__ void copy_16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Four 8×8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i;
// lane l receives row l/4, columns 2(l%4) and 2(l%4)+1 of each (low half
// first); _trans gives the transposed matrices.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// c (16×8 float32) += a (16×16 bf16, row) · b (16×8 bf16, col).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to bf16 (nearest even), `lo` in the low half.
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<const uint32_t*>(&v);
}

}  // namespace
}  // namespace stepmix::cuda
#endif
