// The CUDA runtime as the CPU build of the CUDA kernels sees it
// (stepmix_cuda_on_cpu, tests/cuda/on_cpu/): this folder is first on that
// library's include path only, so the .cu sources, compiled there by the host
// compiler, get the device-code spellings of cuda_on_cpu.hpp, the few runtime
// names they use, and a launch_kernel that runs the kernel on the SIMT
// emulator. Memory is the emulated device's (device_on_cpu.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "cuda_on_cpu.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "simt_emulator.hpp"
#include "stepmix/error.hpp"

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
using cudaStream_t = CUstream_st*;
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
inline const char* cudaGetErrorName(cudaError_t e) {
  return e == cudaSuccess ? "cudaSuccess" : "cudaErrorInvalidValue";
}
inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "invalid argument"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }

namespace stepmix::cuda::detail {

// Each kernel's cudaFuncAttributeMaxDynamicSharedMemorySize (device_on_cpu.cpp):
// a launch may use 48 KiB unless its kernel raised it, to at most 227 KiB.
cudaError_t set_max_dynamic_shared_bytes(const void* kernel, int bytes);
std::size_t max_dynamic_shared_bytes(const void* kernel);

}  // namespace stepmix::cuda::detail

template <class Kernel>
cudaError_t cudaFuncSetAttribute(Kernel kernel, cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  return stepmix::cuda::detail::set_max_dynamic_shared_bytes(reinterpret_cast<const void*>(kernel), value);
}

namespace stepmix::cuda::detail {

// The emulated device's allocations (device_on_cpu.cpp).
bool in_device_memory(const void* p, std::size_t bytes);
std::vector<std::pair<const void*, std::size_t>> device_allocations();

// A kernel's pointer arguments must be device memory (null allowed): on a GPU
// a host pointer would fault, here it would silently work.
template <class T>
void check_kernel_argument(const char*, const T&) {}
template <class T>
void check_kernel_argument(const char* name, T* pointer) {
  if (pointer && !in_device_memory(pointer, 1))
    throw Error("cuda", std::string(name) + ": a kernel's pointer argument is not device memory");
}

template <class... Parameters, class... Arguments>
void launch_kernel(const char* name, void (*kernel)(Parameters...), dim3 grid, dim3 block, std::size_t shared_bytes,
                   StreamHandle, Arguments... arguments) {
  (check_kernel_argument(name, arguments), ...);
  simt::LaunchConfig config;
  config.grid = {grid.x, grid.y, grid.z};
  config.block = {block.x, block.y, block.z};
  config.dynamic_shared_bytes = shared_bytes;
  config.max_dynamic_shared_bytes = max_dynamic_shared_bytes(reinterpret_cast<const void*>(kernel));
  // What a GPU refuses to launch (check_launch's error there).
  if (const std::string refusal = simt::launch_refusal(config); !refusal.empty())
    throw Error("cuda", std::string(name) + ": launch refused: " + refusal);
  config.readable = device_allocations();
  simt::launch(config, [&] { kernel(arguments...); });
}

}  // namespace stepmix::cuda::detail
