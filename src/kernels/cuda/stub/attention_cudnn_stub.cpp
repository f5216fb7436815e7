// cuDNN attention where there is none, saying why: a CUDA build that found no
// cuDNN headers (src/kernels/cuda/CMakeLists.txt; the default reason says how
// to point the build at them), and the CPU build of the backend
// (tests/CMakeLists.txt: cuDNN runs on a GPU only), which sets
// STEPMIX_CUDNN_ABSENT to its own reason. The tests that need cuDNN skip with
// it.
#include <string>

#include "kernels/cuda/attention_cudnn.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "stepmix/error.hpp"

#ifndef STEPMIX_CUDNN_ABSENT
#define STEPMIX_CUDNN_ABSENT \
  "built without cuDNN's headers (configure with STEPMIX_CUDNN_ROOT set to a folder holding include/cudnn_graph.h)"
#endif

namespace stepmix::cuda {

namespace {
constexpr const char* kWithoutCudnn = "attention_cudnn_bf16: " STEPMIX_CUDNN_ABSENT;
}

bool attention_cudnn_available(std::string* why) {
  if (why) *why = kWithoutCudnn;
  return false;
}

bool attention_cudnn_preferred(const AttentionProblem& problem, std::string* why) {
  const std::string refusal = detail::cudnn_attention_shape_refusal(problem);
  if (why) *why = refusal.empty() ? std::string(kWithoutCudnn) : "attention_cudnn_bf16: " + refusal;
  return false;
}

void attention_cudnn_bf16(const AttentionProblem&, const uint16_t*, const uint16_t*, const uint16_t*, uint16_t*,
                          StreamHandle) {
  throw Error("cuda", kWithoutCudnn);
}

}  // namespace stepmix::cuda
