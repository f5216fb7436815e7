// Shared plumbing of the blocked attention variants (private to src/kernels).
#pragma once

#include <cstdint>

#include "kernels/attention.hpp"

namespace stepmix::kernels::detail {

// One task: query rows [row_begin, row_end) on the G heads of kv_head.
using AttentionBlockKernel = void (*)(const AttentionProblem& p, const float* q, const float* k, const float* v,
                                      float* out, int64_t kv_head, int64_t row_begin, int64_t row_end);

// Checks the problem and runs `kernel` over (KV head, 16-row block) tasks on
// the global thread pool.
void run_attention_blocks(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out,
                          AttentionBlockKernel kernel);

using AttentionF32 = void (*)(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out);

// bf16 operands through a float32 kernel: widen exactly, run, round once.
void attention_bf16_via_f32(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                            uint16_t* out, AttentionF32 f32_kernel);

}  // namespace stepmix::kernels::detail
