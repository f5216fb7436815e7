// Shared by the flash attention tests on the GPU (attention_test.cpp) and on
// the CPU through the SIMT emulator (attention_flash_on_cpu_test.cpp): the
// ragged problems, their seeded operands and the flash kernel's bounds.
//
// Bounds. The flash kernel rounds each softmax weight to bf16 (relative error
// <= 2^-9), sums in another order and rounds its output once: as for the
// CPU's AVX-512 kernel (tests/kernels/attention_bf16_test.cpp) we allow
// 2^-7·max|v| against the reference and float64, and 2^-10·max|v| for the
// mean error (the weight roundings are unbiased).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "kernels/attention.hpp"

namespace stepmix::test {

struct AttentionCase {
  int64_t q_rows, kv_rows, q_heads, kv_heads, head_dim;
  bool causal;
  AttentionProblem problem() const { return {q_rows, kv_rows, q_heads, kv_heads, head_dim, causal}; }
};

inline std::string attention_case_name(const ::testing::TestParamInfo<AttentionCase>& info) {
  const AttentionCase& c = info.param;
  return "q" + std::to_string(c.q_rows) + "_kv" + std::to_string(c.kv_rows) + "_heads" + std::to_string(c.q_heads) +
         "x" + std::to_string(c.kv_heads) + "_d" + std::to_string(c.head_dim) + (c.causal ? "_causal" : "");
}

struct AttentionOperands {
  std::vector<uint16_t> q, k, v;
  double max_v = 0;
};

inline AttentionOperands make_attention_operands(const AttentionProblem& p) {
  AttentionOperands o;
  // Scale 2 on q and k: peaked softmaxes, so the running max moves.
  o.q = normal_bf16(size_t(p.q_rows * p.q_heads * p.head_dim), 21, 2.0f);
  o.k = normal_bf16(size_t(p.kv_rows * p.kv_heads * p.head_dim), 22, 2.0f);
  o.v = normal_bf16(size_t(p.kv_rows * p.kv_heads * p.head_dim), 23, 1.0f);
  for (uint16_t x : o.v) o.max_v = std::max(o.max_v, double(std::fabs(bf16_to_float(x))));
  return o;
}

inline std::vector<float> widened(const std::vector<uint16_t>& x) {
  std::vector<float> out;
  for (uint16_t b : x) out.push_back(bf16_to_float(b));
  return out;
}

// Checks a flash result against a reference result (bf16) and float64 within
// the bounds above; `what` names the run in the failure messages.
inline void expect_flash_bounds(const std::vector<uint16_t>& flash, const std::vector<uint16_t>& reference,
                                const std::vector<double>& exact, double max_v, const std::string& what) {
  ASSERT_EQ(flash.size(), reference.size()) << what;
  double worst_reference = 0, worst_exact = 0, mean_exact = 0;
  for (size_t i = 0; i < flash.size(); ++i) {
    const double f = bf16_to_float(flash[i]);
    ASSERT_TRUE(std::isfinite(f)) << what << ": output " << i;
    worst_reference = std::max(worst_reference, std::fabs(f - bf16_to_float(reference[i])));
    worst_exact = std::max(worst_exact, std::fabs(f - exact[i]));
    mean_exact += std::fabs(f - exact[i]) / double(flash.size());
  }
  EXPECT_LE(worst_reference, std::ldexp(max_v, -7)) << what;
  EXPECT_LE(worst_exact, std::ldexp(max_v, -7)) << what;
  EXPECT_LE(mean_exact, std::ldexp(max_v, -10)) << what;
}

// Ragged sizes, GQA, causal (the understanding stream) and non-causal over
// [understanding; generation] keys (the generation stream).
inline const std::vector<AttentionCase>& ragged_attention_cases() {
  static const std::vector<AttentionCase> cases = {
      {1, 1, 1, 1, 64, true},
      {5, 5, 4, 2, 64, true},
      {70, 70, 4, 1, 128, true},
      {130, 130, 8, 2, 128, true},
      {257, 257, 4, 1, 128, true},
      {8, 13, 4, 2, 64, false},
      {17, 83, 4, 4, 128, false},
      {40, 131, 8, 2, 128, false},
      {33, 200, 16, 4, 128, false},
      // generation stream: 200 vision rows over [64 text rows; 200 vision rows]
      {200, 264, 8, 2, 128, false},
      // the tiny golden model's head sizes (reference kernel only)
      {19, 40, 4, 2, 32, true},
      {12, 30, 2, 1, 16, false}};
  return cases;
}

}  // namespace stepmix::test
