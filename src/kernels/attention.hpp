// Scaled dot-product attention: the problem description, the entry points the
// model calls (active variant, multithreaded), and the reference twins.
//
// Layouts (row-major):
//   q:   [q_rows, q_heads, D]
//   k,v: [kv_rows, kv_heads, D]
//   out: [q_rows, q_heads, D]
// Grouped-query attention: query head h reads KV head h / (q_heads / kv_heads);
// K/V are never repeated in memory. Scale 1/sqrt(D), softmax in float32.
//
// Variants (kernel_set.hpp, attention family):
//  ref     blocked online softmax ("flash") in portable C++ (ref/attention_blocked.cpp):
//          work split into (KV head, block of query rows) tasks, each keeping
//          the G query heads of its KV head together so a key/value block is
//          loaded once for all of them; causal problems skip key blocks past a
//          query block's last row. bf16: widened exactly, float32 blocks, one
//          rounding of the output.
//  avx512  float32: with head_dim a multiple of 64 (<= 256), keys and values
//          repacked once per call into 64-key blocks and 4 queries sharing
//          every loaded key/value vector (attention_packed_f32_avx512.cpp);
//          other head dims, the same blocks as ref with AVX-512F. bf16 with
//          head_dim a multiple of 64 (<= 256) on CPUs with AVX512_BF16 uses packed
//          vdpbf16ps blocks that, as flash-attention kernels on bf16 do, round
//          the softmax weights to bf16 before the value product, so it agrees
//          with the twin within about 2^-8 of the values' magnitude, not bit
//          for bit. Other bf16 problems: widen, AVX-512F blocks, round.
//  amx     bf16 with head_dim a multiple of 32 (<= 256) and at most 16 query
//          heads per KV head: the score and value products on AMX tiles
//          (attention_amx.cpp); everything else as avx512.
// Every variant agrees with attention_reference within float32 rounding
// (different summation order), and no result depends on the thread count.
#pragma once

#include <cstdint>

namespace stepmix {

struct AttentionProblem {
  int64_t q_rows = 0;
  int64_t kv_rows = 0;
  int64_t q_heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  // Top-left aligned lower triangle: query i sees keys 0..i.
  bool causal = false;

  int64_t groups() const { return q_heads / kv_heads; }
};

// Throws stepmix::Error when the heads do not group or a causal problem has
// more queries than keys (a query row would see no key).
void check_attention_problem(const AttentionProblem& problem);

namespace kernels {

// The active variant's attention (kernel_set.hpp); bf16 operands are bits.
void attention(const AttentionProblem& problem, const float* q, const float* k, const float* v, float* out);
void attention(const AttentionProblem& problem, const uint16_t* q, const uint16_t* k, const uint16_t* v,
               uint16_t* out);

namespace ref {
// The oracle: two passes per query (scores, then softmax-weighted sum).
void attention_reference(const AttentionProblem& problem, const float* q, const float* k, const float* v,
                         float* out);
// Its bf16 twin: widen exactly, attention_reference, round once.
void attention_bf16_reference(const AttentionProblem& problem, const uint16_t* q, const uint16_t* k,
                              const uint16_t* v, uint16_t* out);
// The reference variant's entries: portable blocked online softmax.
void attention_blocked(const AttentionProblem& problem, const float* q, const float* k, const float* v, float* out);
void attention_blocked_bf16(const AttentionProblem& problem, const uint16_t* q, const uint16_t* k,
                            const uint16_t* v, uint16_t* out);
}  // namespace ref

}  // namespace kernels
}  // namespace stepmix
