// The CUDA spellings a kernel source uses, mapped onto the SIMT emulator
// (simt_emulator.hpp), so a test can include a kernel header written for
// nvcc (src/kernels/cuda/*_kernels.cuh, attention_flash_kernel.cuh) and run
// it on the CPU under simt::launch. Include this first, then the kernel
// headers; only the files that run kernels on the CPU include it (it defines
// macros such as threadIdx and __global__), and CMake compiles them outside
// the unity batches with -ffp-contract=off, so that the round-to-nearest
// intrinsics below, plain C++ operations, are each rounded as on the GPU.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "simt_emulator.hpp"
#include "static_shared.hpp"

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define threadIdx (::stepmix::simt::thread_index())
#define blockIdx (::stepmix::simt::block_index())
#define blockDim (::stepmix::simt::block_dimensions())
#define gridDim (::stepmix::simt::grid_dimensions())
#define __syncthreads() ::stepmix::simt::sync_threads()
#define __shfl_xor_sync(mask, value, lane_mask) ::stepmix::simt::shuffle_xor(mask, value, lane_mask)
// A block's threads run one block at a time, so a static local is its
// shared memory; the kernels declare their static shared arrays as
// SharedArray<T, N>, which checks every access here (static_shared.hpp).
#define __shared__ static
namespace stepmix::cuda::detail {
template <class T, int N>
using SharedArray = simt::SharedArray<T, N>;
}  // namespace stepmix::cuda::detail

// CUDA's vector types.
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// The IEEE round-to-nearest intrinsics and bit casts.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline int __float2int_rn(float a) { return int(std::nearbyint(a)); }  // the default mode: nearest even
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }

// The warp operations of src/kernels/cuda/warp_ops.cuh.
namespace stepmix::cuda {
namespace {

inline uint32_t dynamic_shared_base() { return simt::dynamic_shared_base(); }
inline void copy_16(uint32_t dst, const void* src, bool valid) { simt::async_copy_16(dst, src, valid); }
inline void copy_commit() { simt::async_copy_commit(); }
template <int N>
inline void copy_wait() {
  simt::async_copy_wait(N);
}
inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) { simt::ldmatrix_x4(r, address, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) { simt::ldmatrix_x4(r, address, true); }
inline void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  simt::mma_m16n8k16_bf16(c, a, b0, b1);
}
inline uint32_t pack_bf16(float lo, float hi) { return simt::pack_bf16(lo, hi); }

}  // namespace
}  // namespace stepmix::cuda
