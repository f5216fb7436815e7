// cuBLASLt opened with dlopen at first use (cublaslt_library.hpp says why).
#include "kernels/cuda/cublaslt_library.hpp"

#include <dlfcn.h>

#include <memory>
#include <mutex>

#include "stepmix/error.hpp"

namespace stepmix::cuda::detail {

CublasLtLibrary open_cublaslt(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const std::string& candidate : candidates) {
    dlerror();
    // RTLD_LOCAL: its symbols stay out of the global namespace, as a linked
    // library's would not; the handle is never closed (the library's own
    // threads and static state live as long as the process).
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      tried += "; " + (why ? std::string(why) : candidate + ": dlopen failed");  // dlerror names the file
      continue;
    }
    CublasLtLibrary library;
    library.path = candidate;
    std::string missing;
#define STEPMIX_CUBLASLT_RESOLVE(name)                                           \
  library.name = reinterpret_cast<decltype(library.name)>(dlsym(handle, #name)); \
  if (!library.name) missing += std::string(missing.empty() ? "" : ", ") + #name;
    STEPMIX_CUBLASLT_ENTRY_POINTS(STEPMIX_CUBLASLT_RESOLVE)
#undef STEPMIX_CUBLASLT_RESOLVE
    if (missing.empty()) return library;
    dlclose(handle);
    tried += "; " + candidate + ": lacks " + missing;
  }
  throw Error("cuda", "cuBLASLt: no usable library (" +
                          (tried.empty() ? std::string("no candidates") : tried.substr(2)) +
                          "); install the CUDA toolkit's cuBLAS, or put its folder on LD_LIBRARY_PATH");
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
