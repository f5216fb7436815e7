// GEMM operands in every representation the kernels take, the GemmArgs that
// use them, and the bound within which two summation orders of one GEMM must
// agree. Shared by the variant tests (tests/kernels/gemm_variants_test.cpp)
// and the AMX device check (bench/amx_check.cpp).
//
// Bound. Both results approximate the exact sum S = Σ_k a_k·w_k. Any float32
// summation order of K terms is within γ_K·Σ|a_k·w_k| of S (γ_K ≈ K·2^-24),
// and an FMA in place of a rounded product only removes error, so two orders
// differ by at most 2(K+2)·2^-24·Σ|a_k·w_k| before the epilogue. The epilogue
// (·alpha, +bias) adds a float32 rounding on each side; a bf16 output adds at
// most one bf16 step (2^-8 relative) when the two land on either side of a
// rounding midpoint.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/linear_kernels.hpp"

namespace stepmix::test {

using kernels::ActivationOperand;
using kernels::BiasType;
using kernels::GemmArgs;
using kernels::GemmArithmetic;
using kernels::OutputType;
using kernels::WeightOperand;

struct GemmCombo {
  GemmArithmetic arithmetic;
  ActivationOperand a;
  WeightOperand w;
};
// What Linear uses (first six) plus the remaining valid combinations.
std::span<const GemmCombo> all_gemm_combos();
std::string combo_name(const GemmCombo& c);

// x [M, K]: seeded pseudo-normal values, their bf16 rounding and E4M3 codes
// of 40·x.
struct GemmActivations {
  int64_t M = 0, K = 0;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> codes;
};
GemmActivations make_gemm_activations(int64_t M, int64_t K, uint64_t seed);

// W [N, K] likewise (codes of 90·w), a bias [N] in F32 and BF16, s_w.
struct GemmWeights {
  int64_t N = 0, K = 0;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> codes;
  std::vector<float> bias_f32;
  std::vector<uint16_t> bias_bf16;
  float weight_scale = 0.0173f;
};
GemmWeights make_gemm_weights(int64_t N, int64_t K, uint64_t seed);

GemmArgs make_gemm_args(const GemmActivations& x, const GemmWeights& w, const GemmCombo& c, BiasType bias,
                        OutputType out, float alpha, void* y);

// The value the kernels see for element i of each operand.
float activation_value(const GemmActivations& x, ActivationOperand t, int64_t i);
float weight_value(const GemmWeights& w, WeightOperand t, int64_t i);

// Σ_k |a[m,k]·w[n,k]| for every (m, n), in double (on the thread pool).
std::vector<double> sum_abs_products(const GemmActivations& x, const GemmWeights& w, const GemmCombo& c);

struct GemmComparison {
  double max_abs_diff = 0, max_abs_ref = 0;
  int64_t violations = 0;  // elements outside the bound (NaN included)
  std::string first;       // the first one, described
};
// got_y and want_y are outputs of `g` (its y_type); sum_abs from above.
GemmComparison compare_gemm_outputs(const GemmArgs& g, const void* got_y, const void* want_y,
                                    const std::vector<double>& sum_abs);

}  // namespace stepmix::test
