// The CUDA backend of a build without it (STEPMIX_CUDA off or no toolkit).
#include "backend/backend.hpp"
#include "backend/vae_device.hpp"
#include "stepmix/error.hpp"

namespace stepmix {

namespace {
[[noreturn]] void built_without_cuda() {
  throw Error("cuda", "--device cuda: this stepmix was built without CUDA (configure with -DSTEPMIX_CUDA=ON and the "
                      "CUDA toolkit installed)");
}
}  // namespace

Backend& cuda_backend() { built_without_cuda(); }
VaeDevice& cuda_vae_device() { built_without_cuda(); }

}  // namespace stepmix
