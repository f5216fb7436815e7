// cuBLASLt opened with dlopen at first use (cublaslt_library.hpp says why).
#include "kernels/cuda/cublaslt_library.hpp"

#include <memory>
#include <mutex>

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
  // A failed open is not kept: the next call tries the files again and
  // throws again.
  static std::mutex mutex;
  static std::unique_ptr<const CublasLtLibrary> library;
  std::lock_guard lock(mutex);
  if (!library) {
    const std::string soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
    std::vector<std::string> candidates{soname};
#ifdef STEPMIX_CUDA_LIBRARY_DIR
    candidates.push_back(std::string(STEPMIX_CUDA_LIBRARY_DIR) + "/" + soname);
#endif
    library = std::make_unique<const CublasLtLibrary>(open_cublaslt(candidates));
  }
  return *library;
}

}  // namespace stepmix::cuda::detail
