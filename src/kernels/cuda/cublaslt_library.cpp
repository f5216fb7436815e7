// cuBLASLt opened with dlopen at first use (cublaslt_library.hpp says why).
#include "kernels/cuda/cublaslt_library.hpp"

#include "kernels/cuda/dynamic_library.hpp"

namespace stepmix::cuda::detail {

CublasLtLibrary open_cublaslt(const std::vector<std::string>& candidates) {
  CublasLtLibrary library;
  const std::string path = open_first_library(
      candidates,
      [&library](const SymbolLookup& lookup) {
        library = {};
        std::string missing;
#define STEPMIX_CUBLASLT_RESOLVE(name)                                       \
  library.name = reinterpret_cast<decltype(library.name)>(lookup(#name)); \
  if (!library.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
        STEPMIX_CUBLASLT_ENTRY_POINTS(STEPMIX_CUBLASLT_RESOLVE)
#undef STEPMIX_CUBLASLT_RESOLVE
        return missing;
      },
      "cuBLASLt", "install the CUDA toolkit's cuBLAS, or put its folder on LD_LIBRARY_PATH");
  library.path = path;
  return library;
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
