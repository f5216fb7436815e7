// Every kernel variant this CPU supports against the scalar reference ("ref"):
// the GEMM on a grid of shapes (ragged M, N, K; M = 1; K = 16), every operand
// combination (tests/support/gemm_problem.hpp, which also states the bound),
// BF16 and FP32 outputs, with and without bias.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/cpu_features.hpp"
#include "gemm_problem.hpp"
#include "kernels/cpu/amx_kernels.hpp"
#include "kernels/cpu/avx512_kernels.hpp"
#include "kernels/kernel_set.hpp"

namespace stepmix::kernels {
namespace {

using test::all_gemm_combos;
using test::combo_name;
using test::GemmCombo;

// x and W of one shape, every representation.
struct Problem {
  test::GemmActivations x;
  test::GemmWeights w;
  int64_t M, N, K;
  Problem(int64_t m, int64_t n, int64_t k, uint32_t seed)
      : x(test::make_gemm_activations(m, k, seed)), w(test::make_gemm_weights(n, k, seed)), M(m), N(n), K(k) {}
  GemmArgs args(const GemmCombo& c, OutputType out, BiasType bias, float alpha, void* y) const {
    return test::make_gemm_args(x, w, c, bias, out, alpha, y);
  }
};

// Runs `variant` and "ref" on one configuration and checks the bound above.
void expect_matches_reference(const KernelSet& variant, const Problem& p, const GemmCombo& c, OutputType out,
                              BiasType bias, float alpha, const std::string& what) {
  std::vector<float> yf_variant(size_t(p.M * p.N)), yf_ref(size_t(p.M * p.N));
  std::vector<uint16_t> yh_variant(size_t(p.M * p.N)), yh_ref(size_t(p.M * p.N));
  void* variant_out = out == OutputType::F32 ? static_cast<void*>(yf_variant.data()) : yh_variant.data();
  void* ref_out = out == OutputType::F32 ? static_cast<void*>(yf_ref.data()) : yh_ref.data();
  variant.linear.gemm(p.args(c, out, bias, alpha, variant_out));
  kernel_variant("ref").linear.gemm(p.args(c, out, bias, alpha, ref_out));
  const GemmArgs g = p.args(c, out, bias, alpha, nullptr);
  const test::GemmComparison r =
      test::compare_gemm_outputs(g, variant_out, ref_out, test::sum_abs_products(p.x, p.w, c));
  EXPECT_EQ(r.violations, 0) << what << ": " << r.first;
}

std::vector<const KernelSet*> optimised_variants() {
  std::vector<const KernelSet*> v;
  for (const KernelSet& k : kernel_variants())
    if (std::string(k.name) != "ref" && k.linear.supported()) v.push_back(&k);
  return v;
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
          for (const GemmCombo& c : all_gemm_combos()) {
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
// boundaries), odd K, K = 1, and large enough to run multithreaded; M = 1100
// takes the amx GEMM's blocks of 512 rows of x (M > 1024), the last one partial.
TEST(GemmVariants, BlockingBoundariesAndOddK) {
  const auto variants = optimised_variants();
  if (variants.empty()) GTEST_SKIP() << "no optimised variant runs on this CPU";
  struct Shape { int64_t M, N, K; };
  const Shape shapes[] = {{1, 1, 1},       {5, 3, 37},     {2, 130, 1030}, {33, 200, 300},
                          {300, 100, 520}, {40, 97, 513},  {260, 20, 1500}, {1100, 40, 70}};
  int config = 0;
  for (const KernelSet* variant : variants)
    for (const Shape& s : shapes) {
      const Problem p(s.M, s.N, s.K, uint32_t(s.M + 7 * s.N + 13 * s.K));
      for (const GemmCombo& c : all_gemm_combos()) {
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
    if (!variant.linear.supported()) continue;
    for (int64_t K : {16, 37, 600}) {
      const Problem p(19, 45, K, uint32_t(K));
      std::vector<uint16_t> cache(p.w.codes.size());
      variant.linear.dequantize_e4m3_to_bf16(p.w.codes.data(), int64_t(cache.size()), p.w.weight_scale, cache.data());
      std::vector<uint16_t> fused(size_t(p.M * p.N)), cached(size_t(p.M * p.N));
      GemmArgs g = p.args({GemmArithmetic::BF16, ActivationOperand::BF16, WeightOperand::E4M3TimesScaleBF16},
                          OutputType::BF16, BiasType::BF16, 1.0f, fused.data());
      variant.linear.gemm(g);
      g.w_type = WeightOperand::BF16;
      g.w = cache.data();
      g.y = cached.data();
      variant.linear.gemm(g);
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
  for (const GemmCombo& c : all_gemm_combos()) {
    if (c.arithmetic != GemmArithmetic::BF16) continue;
    const OutputType out = (config % 2) ? OutputType::BF16 : OutputType::F32;
    const BiasType bias = BiasType((config / 2) % 3);
    ++config;
    check(c, out, bias, size_t(p.M * p.N) * (out == OutputType::F32 ? 4 : 2));
  }
}

// The AMX GEMM's blocking (work-unit sizes, K chunks, weights packed per call
// or per unit) changes no bit of the result: the k order of every sum is the
// same for all of them. M = 1100: gemm() itself uses 512 rows of x per unit.
TEST(GemmVariants, AmxBlockingDoesNotChangeBits) {
  if (!amx::supported()) GTEST_SKIP() << "amx does not run on this CPU/OS";
  const amx::Blocking blockings[] = {
      {32, 32, 32, -1}, {32, 64, 64, 1}, {64, 96, 96, 0}, {256, 256, 512, 1}, {512, 32, 1024, 0}};
  int config = 0;
  for (const auto& [M, N, K] : {std::array<int64_t, 3>{1, 5, 16}, {40, 97, 513}, {300, 100, 520}, {70, 33, 1500},
                                {1100, 40, 300}}) {
    const Problem p(M, N, K, uint32_t(M + 3 * N + 5 * K));
    for_each_bf16_combo(p, config, [&](const GemmCombo& c, OutputType out, BiasType bias, size_t bytes) {
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
    for_each_bf16_combo(p, config, [&](const GemmCombo& c, OutputType out, BiasType bias, size_t bytes) {
      std::vector<float> rows(size_t(M * N), -1.0f), columns(size_t(M * N), -2.0f);
      avx512::gemm_rows(p.args(c, out, bias, 0.5f, rows.data()));
      avx512::gemm_columns(p.args(c, out, bias, 0.5f, columns.data()));
      EXPECT_EQ(0, std::memcmp(rows.data(), columns.data(), bytes))
          << combo_name(c) << " M=" << M << " N=" << N << " K=" << K;
    });
  }
}

// The FP32 columns layout (float32 activations: W8A16 and dense on float32,
// gemm_columns_f32_avx512.cpp) runs the rows layout's FMA chain per output,
// so the two agree bit for bit; shapes cross its 8-row and 48-column
// micro-tiles and panels, split work over threads, odd K, K = 1.
TEST(GemmVariants, Avx512F32RowAndColumnLayoutsAreBitIdentical) {
  if (!kernel_variant("avx512").linear.supported()) GTEST_SKIP() << "avx512 does not run on this CPU";
  int config = 0;
  for (const auto& [M, N, K] : {std::array<int64_t, 3>{1, 1, 1}, {7, 17, 2}, {9, 47, 63}, {49, 192, 576},
                                {98, 576, 192}, {200, 49, 1023}, {300, 100, 520}, {1, 300, 1024}}) {
    const Problem p(M, N, K, uint32_t(7 * M + 3 * N + K));
    for (const GemmCombo& c : all_gemm_combos()) {
      if (c.arithmetic != GemmArithmetic::F32 || c.a != ActivationOperand::F32) continue;
      const OutputType out = (config % 2) ? OutputType::BF16 : OutputType::F32;
      const BiasType bias = BiasType((config / 2) % 3);
      ++config;
      std::vector<float> rows(size_t(M * N), -1.0f), columns(size_t(M * N), -2.0f);
      avx512::gemm_rows(p.args(c, out, bias, 0.5f, rows.data()));
      avx512::gemm_columns_f32(p.args(c, out, bias, 0.5f, columns.data()));
      EXPECT_EQ(0, std::memcmp(rows.data(), columns.data(), size_t(M * N) * (out == OutputType::F32 ? 4 : 2)))
          << combo_name(c) << " M=" << M << " N=" << N << " K=" << K;
    }
  }
}

// The FP32 columns layout packs FP8 weights by transposing the codes before
// decoding them, with a cheaper conversion for groups of 64 codes that hold no
// NaN. Every code (subnormals, ±448, both NaNs) in every position of those
// groups, weight scales whose products are subnormal or near the top of the
// float range, and blocks with and without NaN codes: bit for bit the rows
// layout, and within the bound of "ref" where the outputs are finite.
TEST(GemmVariants, Avx512F32ColumnsDecodeEveryFp8Code) {
  if (!kernel_variant("avx512").linear.supported()) GTEST_SKIP() << "avx512 does not run on this CPU";
  for (const auto& [N, K] : {std::array<int64_t, 2>{33, 200}, {48, 64}, {17, 1}}) {
    for (const bool with_nan : {true, false}) {
      Problem p(9, N, K, uint32_t(N + K));
      for (int64_t i = 0; i < N * K; ++i) {
        uint8_t code = uint8_t((i * 37 + i / 256) % 256);
        // Without NaN: 0x7F/0xFF become ±448; with: the first 16 rows keep theirs, the rest hold none.
        if ((code & 0x7F) == 0x7F && (!with_nan || i / K >= 16)) code = uint8_t(code - 1);
        p.w.codes[size_t(i)] = code;
      }
      for (const float scale : {0.0173f, 1.0e-36f, 3.0e35f}) {
        p.w.weight_scale = scale;
        for (const WeightOperand w : {WeightOperand::E4M3, WeightOperand::E4M3TimesScaleF32}) {
          const GemmCombo c{GemmArithmetic::F32, ActivationOperand::F32, w};
          std::vector<float> rows(size_t(p.M * N), -1.0f), columns(size_t(p.M * N), -2.0f);
          avx512::gemm_rows(p.args(c, OutputType::F32, BiasType::None, 1.0f, rows.data()));
          avx512::gemm_columns_f32(p.args(c, OutputType::F32, BiasType::None, 1.0f, columns.data()));
          EXPECT_EQ(0, std::memcmp(rows.data(), columns.data(), rows.size() * sizeof(float)))
              << combo_name(c) << " N=" << N << " K=" << K << " scale " << scale << " NaN codes " << with_nan;
          if (!with_nan && scale < 1.0f) {
            expect_matches_reference(kernel_variant("avx512"), p, c, OutputType::F32, BiasType::None, 1.0f,
                                     combo_name(c) + " N=" + std::to_string(N) + " K=" + std::to_string(K));
          }
        }
      }
    }
  }
}

// A row of y does not depend on the other rows of the call: rows [m0, m1) of
// one GEMM over M rows equal, bit for bit, a GEMM over those rows alone, for
// every variant and operand combination. This is what makes a batched forward
// (the two CFG passes' rows stacked into one call) exact. The shapes put the
// parts and the whole on different sides of the AVX-512 rows/columns choice
// (M·(N + K) >= N·K) and of the AMX x-row blocks (one block of 256 rows or
// several, which decides whether W is packed per call).
TEST(GemmVariants, RowsDoNotDependOnTheOtherRows) {
  struct Split { int64_t M, m0, N, K; };
  const Split small[] = {{33, 1, 7, 48}, {98, 49, 192, 192}, {40, 17, 64, 576}};
  const Split large[] = {{300, 150, 512, 512}, {600, 200, 96, 520}};
  int config = 0;
  for (const KernelSet& variant : kernel_variants()) {
    if (!variant.linear.supported()) continue;
    std::vector<Split> splits(std::begin(small), std::end(small));
    if (std::string(variant.name) != "ref") splits.insert(splits.end(), std::begin(large), std::end(large));
    for (const Split& s : splits) {
      const Problem p(s.M, s.N, s.K, uint32_t(s.M + 11 * s.N + s.K));
      for (const GemmCombo& c : all_gemm_combos()) {
        const OutputType out = (config % 2) ? OutputType::BF16 : OutputType::F32;
        const BiasType bias = BiasType((config / 2) % 3);
        ++config;
        const std::size_t element = out == OutputType::F32 ? 4 : 2;
        std::vector<float> whole(size_t(s.M * s.N), -1.0f), parts(size_t(s.M * s.N), -2.0f);
        variant.linear.gemm(p.args(c, out, bias, 0.5f, whole.data()));
        const std::size_t a_element = c.a == ActivationOperand::F32 ? 4 : c.a == ActivationOperand::BF16 ? 2 : 1;
        for (const auto& [m0, m1] : {std::pair<int64_t, int64_t>{0, s.m0}, {s.m0, s.M}}) {
          GemmArgs g = p.args(c, out, bias, 0.5f, reinterpret_cast<char*>(parts.data()) + m0 * s.N * element);
          g.a = static_cast<const char*>(g.a) + m0 * s.K * a_element;
          g.M = m1 - m0;
          variant.linear.gemm(g);
        }
        EXPECT_EQ(0, std::memcmp(whole.data(), parts.data(), size_t(s.M * s.N) * element))
            << variant.name << " " << combo_name(c) << " M=" << s.M << " split at " << s.m0 << " N=" << s.N
            << " K=" << s.K;
      }
    }
  }
}

}  // namespace
}  // namespace stepmix::kernels
