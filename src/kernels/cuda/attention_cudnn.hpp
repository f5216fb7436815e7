// Private to the CUDA backend and its tests: what of cuDNN's attention
// (attention_cudnn.cpp) can be checked without a GPU.
#pragma once

#include "kernels/attention.hpp"

namespace stepmix::cuda::detail {

// Builds and finalizes cuDNN's SDPA forward operation for `problem` (its
// tensors' layouts, GQA, the by-value scale): what cuDNN checks of the
// descriptors before there is a handle, a plan or a GPU. Throws as
// attention_cudnn_bf16 does (no library, a library older than 9.13.1, a
// descriptor cuDNN refuses).
void validate_cudnn_attention(const AttentionProblem& problem);

}  // namespace stepmix::cuda::detail
