// Private to the CUDA backend: cuDNN, opened when its attention is first
// asked for (attention_cudnn.cpp) rather than linked, for cuBLASLt's reasons
// (cublaslt_library.hpp): a program that does not ask for it never loads its
// several hundred MiB, and a machine without it still runs everything else.
// Only the backend ("graph") API is used: its descriptors and enumerations
// are stable across cuDNN 9 releases, so a build against one release's
// headers runs on another's library.
#pragma once

#include <cudnn_graph.h>

#include <string>
#include <vector>

// Every cuDNN entry point stepmix calls.
#define STEPMIX_CUDNN_ENTRY_POINTS(X) \
  X(cudnnGetVersion)                  \
  X(cudnnGetErrorString)              \
  X(cudnnGetLastErrorString)          \
  X(cudnnCreate)                      \
  X(cudnnDestroy)                     \
  X(cudnnSetStream)                   \
  X(cudnnBackendCreateDescriptor)     \
  X(cudnnBackendDestroyDescriptor)    \
  X(cudnnBackendSetAttribute)         \
  X(cudnnBackendGetAttribute)         \
  X(cudnnBackendFinalize)             \
  X(cudnnBackendExecute)

namespace stepmix::cuda::detail {

struct CudnnLibrary {
#define STEPMIX_CUDNN_MEMBER(name) decltype(&::name) name = nullptr;
  STEPMIX_CUDNN_ENTRY_POINTS(STEPMIX_CUDNN_MEMBER)
#undef STEPMIX_CUDNN_MEMBER
  std::string path;  // the file it was opened from
};

// The library, opened on the first call (thread-safe) and kept open for the
// life of the process: the soname of the cuDNN the build was compiled
// against (libcudnn.so.9, through LD_LIBRARY_PATH or the loader's cache),
// then the library folder beside the headers the build found. Throws
// Error("cuda", ...) naming every file tried and why each failed; the next
// call tries again.
const CudnnLibrary& cudnn();

// Opens the first of `candidates` that loads and has every entry point.
CudnnLibrary open_cudnn(const std::vector<std::string>& candidates);

}  // namespace stepmix::cuda::detail
