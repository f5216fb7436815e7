// Private to the CUDA backend: CUDA statuses as stepmix::Error("cuda",
// "<operation>: <status name>: <message>"), and small launch helpers shared by
// the .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_device.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
struct AttentionProblem;
}

namespace stepmix::cuda::detail {

[[noreturn]] inline void throw_cuda_error(const std::string& operation, cudaError_t status) {
  throw Error("cuda", operation + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

inline void check_cuda(cudaError_t status, const char* operation) {
  if (status != cudaSuccess) throw_cuda_error(operation, status);
}
inline void check_cuda(cudaError_t status, const std::string& operation) {
  if (status != cudaSuccess) throw_cuda_error(operation, status);
}

// After a kernel launch: a bad configuration (grid, shared memory) is
// reported here; faults while it runs surface at the next synchronization.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

#if defined(__CUDACC__)
// The one way the .cu files launch a kernel: kernel<<<grid, block,
// shared_bytes, stream>>>(arguments...), then check_launch(name). A host
// compiler building these sources for the CPU (the tests' SIMT emulator,
// tests/cuda/on_cpu/) gets its own launch_kernel from its cuda_runtime.h.
template <class... Parameters, class... Arguments>
void launch_kernel(const char* name, void (*kernel)(Parameters...), dim3 grid, dim3 block, std::size_t shared_bytes,
                   StreamHandle stream, Arguments... arguments) {
  kernel<<<grid, block, shared_bytes, stream>>>(arguments...);
  check_launch(name);
}
#endif

// Blocks of `threads` covering `work` items, capped for grid-stride loops.
inline unsigned grid_for(int64_t work, int threads, int64_t max_blocks = 65536) {
  int64_t blocks = (work + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > max_blocks) blocks = max_blocks;
  return unsigned(blocks);
}

inline bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// Arguments that the caller must get right are checked before any launch.
void require(bool condition, const char* function, const std::string& what);

// Heads that group, rows a causal problem can serve, non-null operands.
void check_attention(const char* function, const AttentionProblem& problem, const void* q, const void* k,
                     const void* v, const void* out);

}  // namespace stepmix::cuda::detail
