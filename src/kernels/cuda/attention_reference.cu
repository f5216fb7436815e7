// The plain attention kernel the flash kernel is tested against, and the
// dispatch between the two.
//
// One thread per (query row, query head) follows attention_reference
// (model/attention_ref.cpp) step for step on the widened bf16 operands:
// float32 dot products summed in d order, max, exp, sum, normalised weights,
// weighted sum of values in key order, then one rounding to bf16. Each score
// is recomputed in each of the three passes instead of stored (same bits), so
// the kernel needs no [kv_rows] scratch. Every operation is an explicit IEEE
// intrinsic (no fused multiply-add), and exp is float64 rounded to float32:
// the result equals the CPU reference's but for the rare expf whose glibc
// value is not the correctly rounded one.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/device_numerics.cuh"

namespace stepmix::cuda {
namespace {

using namespace detail;

constexpr int kMaxHeadDim = 256;

__device__ float score(const uint16_t* query, const uint16_t* key, int D, float scale) {
  float dot = 0.0f;
  for (int d = 0; d < D; ++d) dot = __fadd_rn(dot, __fmul_rn(bf16_to_float(query[d]), bf16_to_float(key[d])));
  return __fmul_rn(dot, scale);
}

__global__ void attention_reference_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k,
                                           const uint16_t* __restrict__ v, uint16_t* __restrict__ out,
                                           int64_t q_rows, int64_t kv_rows, int q_heads, int kv_heads, int D,
                                           bool causal) {
  const int64_t task = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (task >= q_rows * q_heads) return;
  const int64_t i = task / q_heads;
  const int h = int(task % q_heads);
  const int kv_head = h / (q_heads / kv_heads);
  const int64_t visible = causal ? i + 1 : kv_rows;
  const float scale = __fdiv_rn(1.0f, __fsqrt_rn(float(D)));
  const uint16_t* query = q + (i * q_heads + h) * D;
  auto key_row = [&](int64_t j) { return k + (j * kv_heads + kv_head) * D; };
  auto value_row = [&](int64_t j) { return v + (j * kv_heads + kv_head) * D; };

  float max_score = -INFINITY;
  for (int64_t j = 0; j < visible; ++j) max_score = fmaxf(max_score, score(query, key_row(j), D, scale));
  float sum = 0.0f;
  for (int64_t j = 0; j < visible; ++j)
    sum = __fadd_rn(sum, exp_f32(__fsub_rn(score(query, key_row(j), D, scale), max_score)));
  float o[kMaxHeadDim];
  for (int d = 0; d < D; ++d) o[d] = 0.0f;
  for (int64_t j = 0; j < visible; ++j) {
    const float w = __fdiv_rn(exp_f32(__fsub_rn(score(query, key_row(j), D, scale), max_score)), sum);
    const uint16_t* value = value_row(j);
    for (int d = 0; d < D; ++d) o[d] = __fadd_rn(o[d], __fmul_rn(w, bf16_to_float(value[d])));
  }
  uint16_t* row = out + (i * q_heads + h) * D;
  for (int d = 0; d < D; ++d) row[d] = float_to_bf16_rne(o[d]);
}

}  // namespace

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
  attention_reference_kernel<<<unsigned((tasks + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      q, k, v, out, p.q_rows, p.kv_rows, int(p.q_heads), int(p.kv_heads), int(p.head_dim), p.causal);
  check_launch("attention_reference_bf16");
}

void attention_bf16(const AttentionProblem& p, const uint16_t* q, const uint16_t* k, const uint16_t* v,
                    uint16_t* out, StreamHandle stream) {
  // By head size alone: an operand off 16 bytes is refused by the flash
  // kernel, rather than sent to the one-thread-per-row reference, which would
  // take hours at 44k tokens.
  if (attention_flash_supported(p))
    attention_flash_bf16(p, q, k, v, out, stream);
  else
    attention_reference_bf16(p, q, k, v, out, stream);
}

}  // namespace stepmix::cuda
