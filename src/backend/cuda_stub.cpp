// The CUDA backend of a build without it (STEPMIX_CUDA off or no toolkit).
#include "backend/backend.hpp"
#include "stepmix/error.hpp"

namespace stepmix {

Backend& cuda_backend() {
  throw Error("cuda", "--device cuda: this stepmix was built without CUDA (configure with -DSTEPMIX_CUDA=ON and the "
                      "CUDA toolkit installed)");
}

}  // namespace stepmix
