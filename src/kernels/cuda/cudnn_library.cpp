// cuDNN opened with dlopen at first use (cudnn_library.hpp says why).
#include "kernels/cuda/cudnn_library.hpp"

#include "core/dynamic_library.hpp"

namespace stepmix::cuda::detail {

using ::stepmix::detail::open_once;
using ::stepmix::detail::open_table;
using ::stepmix::detail::soname_then_folder;
using ::stepmix::detail::SymbolLookup;

CudnnLibrary open_cudnn(const std::vector<std::string>& candidates) {
  return open_table<CudnnLibrary>(
      "cuda", candidates,
      [](CudnnLibrary& library, const SymbolLookup& lookup, std::string& missing) {
        STEPMIX_CUDNN_ENTRY_POINTS(STEPMIX_LOOK_UP)
      },
      "cuDNN",
      "install cuDNN " + std::to_string(CUDNN_MAJOR) +
          " (the CUDA toolkit's, or the one a CUDA build of PyTorch carries), or put its folder on LD_LIBRARY_PATH");
}

const CudnnLibrary& cudnn() {
#ifdef STEPMIX_CUDNN_LIBRARY_DIR
  const char* folder = STEPMIX_CUDNN_LIBRARY_DIR;
#else
  const char* folder = nullptr;
#endif
  return open_once<CudnnLibrary>([folder] {
    return open_cudnn(soname_then_folder("libcudnn.so." + std::to_string(CUDNN_MAJOR), folder));
  });
}

}  // namespace stepmix::cuda::detail
