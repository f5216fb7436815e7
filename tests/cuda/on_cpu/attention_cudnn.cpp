// The CPU build's cuDNN attention: cuDNN runs on a GPU only, so the CPU build
// of the backend says so (the tests that need it skip with this reason).
#include <string>

#include "kernels/cuda/cuda_kernels.hpp"
#include "stepmix/error.hpp"

namespace stepmix::cuda {

namespace {
constexpr const char* kNotOnCpu = "attention_cudnn_bf16: cuDNN is not part of the CPU build of the backend";
}

bool attention_cudnn_available(std::string* why) {
  if (why) *why = kNotOnCpu;
  return false;
}

void attention_cudnn_bf16(const AttentionProblem&, const uint16_t*, const uint16_t*, const uint16_t*, uint16_t*,
                          StreamHandle) {
  throw Error("cuda", kNotOnCpu);
}

}  // namespace stepmix::cuda
