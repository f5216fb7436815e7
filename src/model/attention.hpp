// Blocked online-softmax ("flash") attention on the CPU. Same problem and
// layouts as attention_ref.hpp; results agree with the reference within
// float32 rounding (different summation order), which tests check.
//
// Work is split into (KV head, block of query rows) tasks on the global
// thread pool. Each task keeps the G query heads of its KV head together, so
// a key/value block is loaded once for all of them, and streams over key
// blocks keeping a running max, running sum and unnormalised output per
// query. Causal problems skip key blocks past a query block's last row.
#pragma once

#include "model/attention_ref.hpp"

namespace stepmix {

// The fastest variant this process may use: AVX-512 when the CPU has it and
// the active kernel set is not the reference one (STEPMIX_ISA=ref keeps
// portable code everywhere), else the portable blocks.
void attention_blocked(const AttentionProblem& problem, const float* q, const float* k, const float* v, float* out);

// Portable C++ blocks (any x86-64 or other CPU).
void attention_blocked_portable(const AttentionProblem& problem, const float* q, const float* k, const float* v,
                                float* out);

// AVX-512F + FMA blocks; callable only when attention_avx512_supported().
bool attention_avx512_supported();
void attention_blocked_avx512(const AttentionProblem& problem, const float* q, const float* k, const float* v,
                              float* out);

namespace detail {
// One task: query rows [row_begin, row_end) on the G heads of kv_head.
void attend_block_avx512(const AttentionProblem& p, const float* q, const float* k, const float* v, float* out,
                         int64_t kv_head, int64_t row_begin, int64_t row_end);
}  // namespace detail

}  // namespace stepmix
