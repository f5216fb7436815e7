// Every kernel variant this CPU supports against the scalar reference ("ref"):
// the GEMM on a grid of shapes (ragged M, N, K; M = 1; K = 16), every operand
// combination stepmix::Linear uses, BF16 and FP32 outputs, with and without
// bias.
//
// Bound. Both results approximate the exact sum S = Σ_k a_k·w_k. Any float32
// summation order of K terms is within γ_K·Σ|a_k·w_k| of S (γ_K ≈ K·2^-24), and
// an FMA in place of a rounded product only removes error, so two orders
// differ by at most 2(K+2)·2^-24·Σ|a_k·w_k| before the epilogue. The epilogue
// (·alpha, +bias) adds a float32 rounding on each side; a bf16 output adds at
// most one bf16 step (2^-8 relative) when the two land on either side of a
// rounding midpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/numerics.hpp"
#include "kernels/cpu/amx_kernels.hpp"
#include "kernels/cpu/avx512_kernels.hpp"
#include "kernels/linear_kernels.hpp"

namespace stepmix::kernels {
namespace {

struct OperandCombo {
  GemmArithmetic arithmetic;
  ActivationOperand a;
  WeightOperand w;
};

// What Linear uses (first six) plus the remaining valid combinations.
const OperandCombo kCombos[] = {
    {GemmArithmetic::F32, ActivationOperand::F32, WeightOperand::F32},                 // dense, FP32 acts
    {GemmArithmetic::F32, ActivationOperand::F32, WeightOperand::BF16},                // dense BF16, FP32 acts
    {GemmArithmetic::F32, ActivationOperand::F32, WeightOperand::E4M3TimesScaleF32},   // W8A16, FP32 acts
    {GemmArithmetic::BF16, ActivationOperand::E4M3Codes, WeightOperand::E4M3},         // W8A8
    {GemmArithmetic::BF16, ActivationOperand::BF16, WeightOperand::BF16},              // dense / cached W8A16
    {GemmArithmetic::BF16, ActivationOperand::BF16, WeightOperand::E4M3TimesScaleBF16},// W8A16, BF16 acts
    {GemmArithmetic::F32, ActivationOperand::BF16, WeightOperand::F32},                // F32 weights, BF16 acts
    {GemmArithmetic::F32, ActivationOperand::E4M3Codes, WeightOperand::E4M3},
    {GemmArithmetic::F32, ActivationOperand::F32, WeightOperand::E4M3TimesScaleBF16},
    {GemmArithmetic::BF16, ActivationOperand::BF16, WeightOperand::E4M3},
};

// Operands kept in every representation, so any combination can be built.
struct Problem {
  int64_t M, N, K;
  std::vector<float> a_f32;
  std::vector<uint16_t> a_bf16;
  std::vector<uint8_t> a_codes;
  std::vector<float> w_f32;
  std::vector<uint16_t> w_bf16;
  std::vector<uint8_t> w_codes;
  std::vector<float> bias_f32;
  std::vector<uint16_t> bias_bf16;
  float weight_scale = 0.0173f;

  Problem(int64_t m, int64_t n, int64_t k, uint32_t seed) : M(m), N(n), K(k) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < M * K; ++i) {
      const float v = normal(rng);
      a_f32.push_back(v);
      a_bf16.push_back(float_to_bf16_rne(v));
      a_codes.push_back(quantize_e4m3_saturating(v * 40.0f));
    }
    for (int64_t i = 0; i < N * K; ++i) {
      const float v = normal(rng);
      w_f32.push_back(v);
      w_bf16.push_back(float_to_bf16_rne(v));
      w_codes.push_back(quantize_e4m3_saturating(v * 90.0f));
    }
    for (int64_t i = 0; i < N; ++i) {
      bias_f32.push_back(0.1f * normal(rng));
      bias_bf16.push_back(float_to_bf16_rne(0.1f * normal(rng)));
    }
  }

  float a_value(ActivationOperand t, int64_t i) const {
    switch (t) {
      case ActivationOperand::F32: return a_f32[i];
      case ActivationOperand::BF16: return bf16_to_float(a_bf16[i]);
      case ActivationOperand::E4M3Codes: return e4m3_to_float(a_codes[i]);
    }
    return 0;
  }
  float w_value(WeightOperand t, int64_t i) const {
    switch (t) {
      case WeightOperand::F32: return w_f32[i];
      case WeightOperand::BF16: return bf16_to_float(w_bf16[i]);
      case WeightOperand::E4M3: return e4m3_to_float(w_codes[i]);
      case WeightOperand::E4M3TimesScaleF32: return e4m3_to_float(w_codes[i]) * weight_scale;
      case WeightOperand::E4M3TimesScaleBF16:
        return bf16_to_float(float_to_bf16_rne(e4m3_to_float(w_codes[i]) * weight_scale));
    }
    return 0;
  }

  GemmArgs args(const OperandCombo& c, OutputType out, BiasType bias, float alpha, void* y) const {
    GemmArgs g;
    g.M = M, g.N = N, g.K = K;
    g.arithmetic = c.arithmetic;
    g.a_type = c.a;
    g.a = c.a == ActivationOperand::F32 ? static_cast<const void*>(a_f32.data())
          : c.a == ActivationOperand::BF16 ? static_cast<const void*>(a_bf16.data())
                                           : static_cast<const void*>(a_codes.data());
    g.w_type = c.w;
    g.w = c.w == WeightOperand::F32 ? static_cast<const void*>(w_f32.data())
          : c.w == WeightOperand::BF16 ? static_cast<const void*>(w_bf16.data())
                                       : static_cast<const void*>(w_codes.data());
    g.weight_scale = weight_scale;
    g.alpha = alpha;
    g.bias_type = bias;
    g.bias = bias == BiasType::F32 ? static_cast<const void*>(bias_f32.data()) : static_cast<const void*>(bias_bf16.data());
    g.y_type = out;
    g.y = y;
    return g;
  }
};

// Runs `variant` and "ref" on one configuration and checks the bound above.
void expect_matches_reference(const KernelSet& variant, const Problem& p, const OperandCombo& c, OutputType out,
                              BiasType bias, float alpha, const std::string& what) {
  std::vector<float> yf_variant(size_t(p.M * p.N)), yf_ref(size_t(p.M * p.N));
  std::vector<uint16_t> yh_variant(size_t(p.M * p.N)), yh_ref(size_t(p.M * p.N));
  void* variant_out = out == OutputType::F32 ? static_cast<void*>(yf_variant.data()) : yh_variant.data();
  void* ref_out = out == OutputType::F32 ? static_cast<void*>(yf_ref.data()) : yh_ref.data();
  variant.gemm(p.args(c, out, bias, alpha, variant_out));
  kernel_variant("ref").gemm(p.args(c, out, bias, alpha, ref_out));
  auto value = [&](const std::vector<float>& f, const std::vector<uint16_t>& h, int64_t i) {
    return out == OutputType::F32 ? f[i] : bf16_to_float(h[i]);
  };
  int failures = 0;
  for (int64_t m = 0; m < p.M; ++m)
    for (int64_t n = 0; n < p.N; ++n) {
      double sum_abs = 0;
      for (int64_t k = 0; k < p.K; ++k)
        sum_abs += std::fabs(double(p.a_value(c.a, m * p.K + k)) * p.w_value(c.w, n * p.K + k));
      const float got = value(yf_variant, yh_variant, m * p.N + n);
      const float want = value(yf_ref, yh_ref, m * p.N + n);
      const double output_rounding = out == OutputType::BF16 ? 0x1p-7 : 0x1p-22;
      const double tol = std::fabs(alpha) * 2.0 * double(p.K + 2) * 0x1p-24 * sum_abs * (1 + output_rounding) +
                         output_rounding * std::fabs(want) + 1e-30;
      if (!(std::fabs(double(got) - double(want)) <= tol) && failures++ < 5)
        ADD_FAILURE() << what << " m=" << m << " n=" << n << " got " << got << " want " << want << " tol " << tol;
    }
}

std::vector<const KernelSet*> optimised_variants() {
  std::vector<const KernelSet*> v;
  for (const KernelSet& k : kernel_variants())
    if (std::string(k.name) != "ref" && k.supported()) v.push_back(&k);
  return v;
}

const char* combo_name(const OperandCombo& c) {
  static std::string s;
  s = std::string(c.arithmetic == GemmArithmetic::F32 ? "f32-arith" : "bf16-arith") + " a" +
      std::to_string(int(c.a)) + " w" + std::to_string(int(c.w));
  return s.c_str();
}

TEST(GemmVariants, ShapeGridAllCombos) {
  const auto variants = optimised_variants();
  if (variants.empty()) GTEST_SKIP() << "no optimised variant runs on this CPU";
  int config = 0;
  for (const KernelSet* variant : variants)
    for (int64_t M : {1, 3, 17, 64})
      for (int64_t K : {16, 48, 64, 200})
        for (int64_t N : {1, 7, 33, 64}) {
          const Problem p(M, N, K, uint32_t(M * 1000 + N * 10 + K));
          for (const OperandCombo& c : kCombos) {
            // Output type and bias rotate over the grid, so each combination
            // sees all six (output, bias) pairs many times.
            const OutputType out = (config % 2) ? OutputType::BF16 : OutputType::F32;
            const BiasType bias = BiasType((config / 2) % 3);
            const float alpha = c.a == ActivationOperand::E4M3Codes ? 3.7e-4f : 1.0f;
            expect_matches_reference(*variant, p, c, out, bias, alpha,
                                     std::string(variant->name) + " " + combo_name(c) + " M=" + std::to_string(M) +
                                         " N=" + std::to_string(N) + " K=" + std::to_string(K));
            ++config;
          }
        }
}

// Shapes that cross the optimised variants' blocking (row, column and K chunk
// boundaries), odd K, K = 1, and large enough to run multithreaded.
TEST(GemmVariants, BlockingBoundariesAndOddK) {
  const auto variants = optimised_variants();
  if (variants.empty()) GTEST_SKIP() << "no optimised variant runs on this CPU";
  struct Shape { int64_t M, N, K; };
  const Shape shapes[] = {{1, 1, 1}, {5, 3, 37}, {2, 130, 1030}, {33, 200, 300}, {300, 100, 520}, {40, 97, 513}, {260, 20, 1500}};
  int config = 0;
  for (const KernelSet* variant : variants)
    for (const Shape& s : shapes) {
      const Problem p(s.M, s.N, s.K, uint32_t(s.M + 7 * s.N + 13 * s.K));
      for (const OperandCombo& c : kCombos) {
        const OutputType out = (config % 2) ? OutputType::BF16 : OutputType::F32;
        const BiasType bias = BiasType((config / 2) % 3);
        expect_matches_reference(*variant, p, c, out, bias, 0.75f,
                                 std::string(variant->name) + " " + combo_name(c) + " M=" + std::to_string(s.M) +
                                     " N=" + std::to_string(s.N) + " K=" + std::to_string(s.K));
        ++config;
      }
    }
}

// The BF16 weight cache is dequantize_e4m3_to_bf16 of the codes; feeding it
// as BF16 weights must give the same bits as converting inside the GEMM.
TEST(GemmVariants, CachedAndFusedWeightConversionAreBitIdentical) {
  for (const KernelSet& variant : kernel_variants()) {
    if (!variant.supported()) continue;
    for (int64_t K : {16, 37, 600}) {
      const Problem p(19, 45, K, uint32_t(K));
      std::vector<uint16_t> cache(p.w_codes.size());
      variant.dequantize_e4m3_to_bf16(p.w_codes.data(), int64_t(cache.size()), p.weight_scale, cache.data());
      std::vector<uint16_t> fused(size_t(p.M * p.N)), cached(size_t(p.M * p.N));
      GemmArgs g = p.args({GemmArithmetic::BF16, ActivationOperand::BF16, WeightOperand::E4M3TimesScaleBF16},
                          OutputType::BF16, BiasType::BF16, 1.0f, fused.data());
      variant.gemm(g);
      g.w_type = WeightOperand::BF16;
      g.w = cache.data();
      g.y = cached.data();
      variant.gemm(g);
      EXPECT_EQ(fused, cached) << variant.name << " K=" << K;
    }
  }
}

// Calls check(combo, out, bias, bytes) for every BF16-arithmetic combination,
// the output type and bias rotating with `config` across calls and shapes;
// bytes: what the GEMM writes for this output type (room for either is a
// float vector of M·N).
template <class Check>
void for_each_bf16_combo(const Problem& p, int& config, Check check) {
  for (const OperandCombo& c : kCombos) {
    if (c.arithmetic != GemmArithmetic::BF16) continue;
    const OutputType out = (config % 2) ? OutputType::BF16 : OutputType::F32;
    const BiasType bias = BiasType((config / 2) % 3);
    ++config;
    check(c, out, bias, size_t(p.M * p.N) * (out == OutputType::F32 ? 4 : 2));
  }
}

// The AMX GEMM's blocking (work-unit sizes, K chunks, weights packed per call
// or per unit) changes no bit of the result: the k order of every sum is the
// same for all of them.
TEST(GemmVariants, AmxBlockingDoesNotChangeBits) {
  if (!amx::supported()) GTEST_SKIP() << "amx does not run on this CPU/OS";
  const amx::Blocking blockings[] = {
      {32, 32, 32, -1}, {32, 64, 64, 1}, {64, 96, 96, 0}, {256, 256, 512, 1}, {512, 32, 1024, 0}};
  int config = 0;
  for (const auto& [M, N, K] : {std::array<int64_t, 3>{1, 5, 16}, {40, 97, 513}, {300, 100, 520}, {70, 33, 1500}}) {
    const Problem p(M, N, K, uint32_t(M + 3 * N + 5 * K));
    for_each_bf16_combo(p, config, [&](const OperandCombo& c, OutputType out, BiasType bias, size_t bytes) {
      std::vector<float> want(size_t(M * N), -1.0f), got(size_t(M * N));
      amx::gemm(p.args(c, out, bias, 0.5f, want.data()));
      for (const amx::Blocking& b : blockings) {
        std::fill(got.begin(), got.end(), -1.0f);
        amx::gemm_with_blocking(p.args(c, out, bias, 0.5f, got.data()), b);
        EXPECT_EQ(0, std::memcmp(got.data(), want.data(), bytes))
            << combo_name(c) << " M=" << M << " N=" << N << " K=" << K << " blocking " << b.x_rows << "/"
            << b.w_rows << "/" << b.k_chunk << "/" << b.prepack_weights;
      }
    });
  }
}

// The AVX-512 variant's two layouts (rows of x in the lanes, or output
// columns in the lanes: avx512_kernels.hpp) run the same vdpbf16ps over the
// same pairs in the same order, so they agree bit for bit, whichever one
// gemm() picks for a shape. Shapes cross the columns kernel's micro-tile
// (8 rows × 48 columns) and panel (192 columns) edges, split rows across
// work units (multithreaded), odd K, K = 1.
TEST(GemmVariants, Avx512RowAndColumnLayoutsAreBitIdentical) {
  if (!cpu_features().can_run_avx512_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  int config = 0;
  for (const auto& [M, N, K] : {std::array<int64_t, 3>{1, 1, 1}, {7, 17, 2}, {9, 47, 63}, {64, 64, 64},
                                {129, 193, 200}, {200, 49, 1023}, {300, 100, 520}, {1, 300, 1024}}) {
    const Problem p(M, N, K, uint32_t(2 * M + 3 * N + 5 * K));
    for_each_bf16_combo(p, config, [&](const OperandCombo& c, OutputType out, BiasType bias, size_t bytes) {
      std::vector<float> rows(size_t(M * N), -1.0f), columns(size_t(M * N), -2.0f);
      avx512::gemm_rows(p.args(c, out, bias, 0.5f, rows.data()));
      avx512::gemm_columns(p.args(c, out, bias, 0.5f, columns.data()));
      EXPECT_EQ(0, std::memcmp(rows.data(), columns.data(), bytes))
          << combo_name(c) << " M=" << M << " N=" << N << " K=" << K;
    });
  }
}

}  // namespace
}  // namespace stepmix::kernels
