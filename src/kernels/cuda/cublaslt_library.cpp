// cuBLASLt opened with dlopen at first use (cublaslt_library.hpp says why).
#include "kernels/cuda/cublaslt_library.hpp"

#include "core/dynamic_library.hpp"

namespace stepmix::cuda::detail {

using ::stepmix::detail::open_once;
using ::stepmix::detail::open_table;
using ::stepmix::detail::soname_then_folder;
using ::stepmix::detail::SymbolLookup;

CublasLtLibrary open_cublaslt(const std::vector<std::string>& candidates) {
  return open_table<CublasLtLibrary>(
      "cuda", candidates,
      [](CublasLtLibrary& library, const SymbolLookup& lookup, std::string& missing) {
        STEPMIX_CUBLASLT_ENTRY_POINTS(STEPMIX_LOOK_UP)
      },
      "cuBLASLt", "install the CUDA toolkit's cuBLAS, or put its folder on LD_LIBRARY_PATH");
}

const CublasLtLibrary& cublaslt() {
#ifdef STEPMIX_CUDA_LIBRARY_DIR
  const char* folder = STEPMIX_CUDA_LIBRARY_DIR;
#else
  const char* folder = nullptr;
#endif
  return open_once<CublasLtLibrary>([folder] {
    return open_cublaslt(soname_then_folder("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR), folder));
  });
}

}  // namespace stepmix::cuda::detail
