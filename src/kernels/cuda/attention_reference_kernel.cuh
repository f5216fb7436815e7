// The plain attention kernel the flash kernel is tested against: device code
// only, so the tests also run it on the CPU (tests/cuda/on_cpu/cuda_on_cpu.hpp);
// attention_reference.cu checks arguments and launches it.
//
// One thread per (query row, query head) follows attention_reference
// (kernels/ref/attention_ref.cpp) step for step on the widened bf16 operands:
// float32 dot products summed in d order, max, exp, sum, normalised weights,
// weighted sum of values in key order, then one rounding to bf16. Each score
// is recomputed in each of the three passes instead of stored (same bits), so
// the kernel needs no [kv_rows] scratch. Every operation is an explicit IEEE
// intrinsic (no fused multiply-add), and exp is float64 rounded to float32:
// the result equals the CPU reference's but for the rare expf whose glibc
// value is not the correctly rounded one.
#pragma once

#include <cmath>
#include <cstdint>

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
}  // namespace stepmix::cuda
