// Attention on bf16 activations (ActivationDType::BF16): the problem and
// layouts of attention_ref.hpp with q, k, v and out as bf16 bits.
//
// Semantics (the scalar twin, attention_bf16_reference): q, k, v widened
// exactly to float32, float32 scores and softmax, output rounded to bf16 once.
// The AVX-512 kernel computes scores with vdpbf16ps (products of bf16 are
// exact, sums float32) and, as flash-attention kernels on bf16 do, rounds the
// softmax weights to bf16 before the value product (float32 sums); so it
// agrees with the twin within about 2^-8 of the values' magnitude, not bit for
// bit. Results never depend on the number of threads.
#pragma once

#include <cstdint>

#include "model/attention_ref.hpp"

namespace stepmix {

// The fastest variant this process may use: AVX-512 BF16 when the CPU has it,
// head_dim is a multiple of 64 (<= 256) and the active kernel set is not "ref";
// otherwise the portable path.
void attention_bf16(const AttentionProblem& problem, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    uint16_t* out);

// The scalar twin: widen, attention_reference, round.
void attention_bf16_reference(const AttentionProblem& problem, const uint16_t* q, const uint16_t* k,
                              const uint16_t* v, uint16_t* out);

// Widen, the blocked float32 kernels of attention.hpp, round (any CPU).
void attention_bf16_portable(const AttentionProblem& problem, const uint16_t* q, const uint16_t* k,
                             const uint16_t* v, uint16_t* out);

// AVX-512F/BW + AVX512_BF16; callable only when attention_bf16_avx512_supported(problem).
bool attention_bf16_avx512_supported(const AttentionProblem& problem);
void attention_bf16_avx512(const AttentionProblem& problem, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                           uint16_t* out);

}  // namespace stepmix
