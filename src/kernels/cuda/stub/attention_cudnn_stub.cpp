// cuDNN attention in a CUDA build that found no cuDNN headers
// (src/kernels/cuda/CMakeLists.txt): it says so, and how to point the build
// at them.
#include <string>

#include "kernels/cuda/cuda_kernels.hpp"
#include "stepmix/error.hpp"

namespace stepmix::cuda {

namespace {
constexpr const char* kWithoutCudnn =
    "attention_cudnn_bf16: built without cuDNN's headers (configure with STEPMIX_CUDNN_ROOT set to a folder "
    "holding include/cudnn_graph.h)";
}

bool attention_cudnn_available(std::string* why) {
  if (why) *why = kWithoutCudnn;
  return false;
}

void attention_cudnn_bf16(const AttentionProblem&, const uint16_t*, const uint16_t*, const uint16_t*, uint16_t*,
                          StreamHandle) {
  throw Error("cuda", kWithoutCudnn);
}

}  // namespace stepmix::cuda
