// Private to the CUDA backend and its tests: what of cuDNN's attention
// (attention_cudnn.cpp) can be checked without a GPU.
#pragma once

#include <string>

#include "kernels/attention.hpp"

namespace stepmix::cuda::detail {

// Why cuDNN's attention does not take `problem`'s shape, "" when it does:
// what attention_cudnn_bf16 refuses and attention_cudnn_preferred answers,
// in every build (the stub of a build without cuDNN says the same first).
inline std::string cudnn_attention_shape_refusal(const AttentionProblem& problem) {
  if (problem.causal) return "causal problems are the flash kernel's (attention_flash_bf16)";
  if (problem.head_dim % 8 != 0 || problem.head_dim > 256)
    return "head_dim must be a multiple of 8 up to 256, got " + std::to_string(problem.head_dim);
  return "";
}

// Builds and finalizes cuDNN's SDPA forward operation for `problem` (its
// tensors' layouts, GQA, the by-value scale): what cuDNN checks of the
// descriptors before there is a handle, a plan or a GPU. Throws as
// attention_cudnn_bf16 does (no library, a library older than 9.13.1, a
// descriptor cuDNN refuses).
void validate_cudnn_attention(const AttentionProblem& problem);

}  // namespace stepmix::cuda::detail
