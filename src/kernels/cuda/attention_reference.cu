// The plain attention kernel the flash kernel is tested against
// (attention_reference_kernel.cuh), its argument checks and launch, and the
// dispatch between the two.
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/attention_reference_kernel.cuh"

namespace stepmix::cuda {

namespace detail {

void check_attention(const char* function, const AttentionProblem& p, const void* q, const void* k, const void* v,
                     const void* out) {
  require(p.q_heads > 0 && p.kv_heads > 0 && p.head_dim > 0 && p.q_heads % p.kv_heads == 0, function,
          "q_heads " + std::to_string(p.q_heads) + " is not a positive multiple of kv_heads " +
              std::to_string(p.kv_heads));
  require(p.q_rows >= 0 && p.kv_rows >= 0 && !(p.q_rows > 0 && p.kv_rows == 0) &&
              !(p.causal && p.q_rows > p.kv_rows),
          function,
          "cannot attend " + std::to_string(p.q_rows) + " query rows to " + std::to_string(p.kv_rows) +
              (p.causal ? " causal" : "") + " key rows");
  require(p.q_heads <= 65535, function, "at most 65535 query heads, got " + std::to_string(p.q_heads));
  require(p.q_rows == 0 || (q && k && v && out), function, "null device pointer");
}

}  // namespace detail

void attention_reference_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                              uint16_t* out, StreamHandle stream) {
  check_attention("attention_reference_bf16", p, q, k, v, out);
  require(p.head_dim <= kMaxHeadDim, "attention_reference_bf16",
          "head_dim at most " + std::to_string(kMaxHeadDim) + ", got " + std::to_string(p.head_dim));
  if (p.q_rows == 0) return;
  const int64_t tasks = p.q_rows * p.q_heads;
  constexpr int kThreads = 128;
  launch_kernel("attention_reference_bf16", attention_reference_kernel, unsigned((tasks + kThreads - 1) / kThreads),
                kThreads, 0, stream, q, k, v, out, p.q_rows, p.kv_rows, int(p.q_heads), int(p.kv_heads),
                int(p.head_dim), p.causal);
}

AttentionChoice attention_choice() {
  const char* set = std::getenv("STEPMIX_CUDA_ATTENTION");
  const std::string value = set ? set : "";
  if (value.empty() || value == "auto") return AttentionChoice::Auto;
  if (value == "flash") return AttentionChoice::Flash;
  if (value == "cudnn") return AttentionChoice::Cudnn;
  throw Error("cuda", "STEPMIX_CUDA_ATTENTION=" + value + ": expected auto (the default), flash or cudnn");
}

AttentionEngine attention_engine(const AttentionProblem& p) {
  const AttentionChoice choice = attention_choice();
  // By default cuDNN's attention stands in for the flash kernel, not for the
  // reference kernel: the head dims without a flash kernel are the tiny test
  // models', whose GPU tests keep their engine.
  if (!p.causal && (choice == AttentionChoice::Cudnn ||
                    (choice == AttentionChoice::Auto && attention_flash_supported(p) && attention_cudnn_preferred(p))))
    return AttentionEngine::Cudnn;
  // By head size alone: an operand off 16 bytes is refused by the flash
  // kernel, rather than sent to the one-thread-per-row reference, which would
  // take hours at 44k tokens.
  return attention_flash_supported(p) ? AttentionEngine::Flash : AttentionEngine::Reference;
}

void attention_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    uint16_t* out, StreamHandle stream) {
  check_attention("attention_bf16", p, q, k, v, out);  // before an engine is asked about the problem
  switch (attention_engine(p)) {
    case AttentionEngine::Cudnn: attention_cudnn_bf16(p, q, k, v, out, stream); return;
    case AttentionEngine::Flash: attention_flash_bf16(p, q, k, v, out, stream); return;
    case AttentionEngine::Reference: attention_reference_bf16(p, q, k, v, out, stream); return;
  }
}

}  // namespace stepmix::cuda
