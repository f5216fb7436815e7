#include "gemm_problem.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/numerics.hpp"
#include "core/thread_pool.hpp"

namespace stepmix::test {
namespace {

// Fast deterministic pseudo-normal values (sum of three uniforms, σ ≈ 1):
// the device check fills operands of hundreds of megabytes.
struct Rng {
  uint64_t state;
  explicit Rng(uint64_t seed) : state(seed * 0x9E3779B97F4A7C15ull + 1) {}
  float uniform() {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return float(z >> 40) * 0x1p-24f;
  }
  float normal() { return (uniform() + uniform() + uniform() - 1.5f) * 2.0f; }
};

const GemmCombo kCombos[] = {
    {GemmArithmetic::F32, ActivationOperand::F32, WeightOperand::F32},                  // dense, FP32 acts
    {GemmArithmetic::F32, ActivationOperand::F32, WeightOperand::BF16},                 // dense BF16, FP32 acts
    {GemmArithmetic::F32, ActivationOperand::F32, WeightOperand::E4M3TimesScaleF32},    // W8A16, FP32 acts
    {GemmArithmetic::BF16, ActivationOperand::E4M3Codes, WeightOperand::E4M3},          // W8A8
    {GemmArithmetic::BF16, ActivationOperand::BF16, WeightOperand::BF16},               // dense / cached W8A16
    {GemmArithmetic::BF16, ActivationOperand::BF16, WeightOperand::E4M3TimesScaleBF16}, // W8A16, BF16 acts
    {GemmArithmetic::F32, ActivationOperand::BF16, WeightOperand::F32},                 // F32 weights, BF16 acts
    {GemmArithmetic::F32, ActivationOperand::E4M3Codes, WeightOperand::E4M3},
    {GemmArithmetic::F32, ActivationOperand::F32, WeightOperand::E4M3TimesScaleBF16},
    {GemmArithmetic::BF16, ActivationOperand::BF16, WeightOperand::E4M3},
    {GemmArithmetic::BF16, ActivationOperand::E4M3Codes, WeightOperand::BF16},
    {GemmArithmetic::BF16, ActivationOperand::E4M3Codes, WeightOperand::E4M3TimesScaleBF16},
};

const char* bias_name(BiasType b) { return b == BiasType::None ? "none" : b == BiasType::F32 ? "f32" : "bf16"; }
const char* out_name(OutputType o) { return o == OutputType::F32 ? "f32" : "bf16"; }

}  // namespace

std::span<const GemmCombo> all_gemm_combos() { return kCombos; }

std::string combo_name(const GemmCombo& c) {
  static const char* a_names[] = {"f32", "bf16", "e4m3"};
  static const char* w_names[] = {"f32", "bf16", "e4m3", "e4m3*s(f32)", "e4m3*s(bf16)"};
  return std::string(c.arithmetic == GemmArithmetic::F32 ? "f32-arith" : "bf16-arith") + " a=" + a_names[int(c.a)] +
         " w=" + w_names[int(c.w)];
}

GemmActivations make_gemm_activations(int64_t M, int64_t K, uint64_t seed) {
  GemmActivations a;
  a.M = M, a.K = K;
  a.f32.resize(std::size_t(M * K));
  a.bf16.resize(a.f32.size());
  a.codes.resize(a.f32.size());
  Rng rng(seed);
  for (std::size_t i = 0; i < a.f32.size(); ++i) {
    const float v = rng.normal();
    a.f32[i] = v;
    a.bf16[i] = float_to_bf16_rne(v);
    a.codes[i] = quantize_e4m3_saturating(v * 40.0f);
  }
  return a;
}

GemmWeights make_gemm_weights(int64_t N, int64_t K, uint64_t seed) {
  GemmWeights w;
  w.N = N, w.K = K;
  w.f32.resize(std::size_t(N * K));
  w.bf16.resize(w.f32.size());
  w.codes.resize(w.f32.size());
  Rng rng(seed ^ 0x5bd1e995u);
  for (std::size_t i = 0; i < w.f32.size(); ++i) {
    const float v = rng.normal();
    w.f32[i] = v;
    w.bf16[i] = float_to_bf16_rne(v);
    w.codes[i] = quantize_e4m3_saturating(v * 90.0f);
  }
  for (int64_t i = 0; i < N; ++i) {
    w.bias_f32.push_back(0.1f * rng.normal());
    w.bias_bf16.push_back(float_to_bf16_rne(0.1f * rng.normal()));
  }
  return w;
}

GemmArgs make_gemm_args(const GemmActivations& x, const GemmWeights& w, const GemmCombo& c, BiasType bias,
                        OutputType out, float alpha, void* y) {
  GemmArgs g;
  g.M = x.M, g.N = w.N, g.K = x.K;
  g.arithmetic = c.arithmetic;
  g.a_type = c.a;
  g.a = c.a == ActivationOperand::F32    ? static_cast<const void*>(x.f32.data())
        : c.a == ActivationOperand::BF16 ? static_cast<const void*>(x.bf16.data())
                                         : static_cast<const void*>(x.codes.data());
  g.w_type = c.w;
  g.w = c.w == WeightOperand::F32    ? static_cast<const void*>(w.f32.data())
        : c.w == WeightOperand::BF16 ? static_cast<const void*>(w.bf16.data())
                                     : static_cast<const void*>(w.codes.data());
  g.weight_scale = w.weight_scale;
  g.alpha = alpha;
  g.bias_type = bias;
  g.bias = bias == BiasType::F32 ? static_cast<const void*>(w.bias_f32.data()) : w.bias_bf16.data();
  g.y_type = out;
  g.y = y;
  return g;
}

float activation_value(const GemmActivations& x, ActivationOperand t, int64_t i) {
  switch (t) {
    case ActivationOperand::F32: return x.f32[std::size_t(i)];
    case ActivationOperand::BF16: return bf16_to_float(x.bf16[std::size_t(i)]);
    case ActivationOperand::E4M3Codes: return e4m3_to_float(x.codes[std::size_t(i)]);
  }
  return 0;
}

float weight_value(const GemmWeights& w, WeightOperand t, int64_t i) {
  const std::size_t k = std::size_t(i);
  switch (t) {
    case WeightOperand::F32: return w.f32[k];
    case WeightOperand::BF16: return bf16_to_float(w.bf16[k]);
    case WeightOperand::E4M3: return e4m3_to_float(w.codes[k]);
    case WeightOperand::E4M3TimesScaleF32: return e4m3_to_float(w.codes[k]) * w.weight_scale;
    case WeightOperand::E4M3TimesScaleBF16:
      return bf16_to_float(float_to_bf16_rne(e4m3_to_float(w.codes[k]) * w.weight_scale));
  }
  return 0;
}

std::vector<double> sum_abs_products(const GemmActivations& x, const GemmWeights& w, const GemmCombo& c) {
  const int64_t M = x.M, N = w.N, K = x.K;
  std::vector<float> a_abs(std::size_t(M * K)), w_abs(std::size_t(N * K));
  for (int64_t i = 0; i < M * K; ++i) a_abs[std::size_t(i)] = std::fabs(activation_value(x, c.a, i));
  for (int64_t i = 0; i < N * K; ++i) w_abs[std::size_t(i)] = std::fabs(weight_value(w, c.w, i));
  std::vector<double> s(std::size_t(M * N));
  const int64_t n_chunks = (N + 63) / 64;
  ThreadPool::global().parallel_for(M * n_chunks, [&](int64_t task) {
    const int64_t m = task / n_chunks, n0 = (task % n_chunks) * 64, n1 = std::min(N, n0 + 64);
    const float* a = a_abs.data() + m * K;
    for (int64_t n = n0; n < n1; ++n) {
      const float* wr = w_abs.data() + n * K;
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(a[k]) * double(wr[k]);
      s[std::size_t(m * N + n)] = acc;
    }
  });
  return s;
}

GemmComparison compare_gemm_outputs(const GemmArgs& g, const void* got_y, const void* want_y,
                                    const std::vector<double>& sum_abs) {
  GemmComparison r;
  const double output_rounding = g.y_type == OutputType::BF16 ? 0x1p-7 : 0x1p-22;
  for (int64_t i = 0; i < g.M * g.N; ++i) {
    const float got = g.y_type == OutputType::F32 ? static_cast<const float*>(got_y)[i]
                                                  : bf16_to_float(static_cast<const uint16_t*>(got_y)[i]);
    const float want = g.y_type == OutputType::F32 ? static_cast<const float*>(want_y)[i]
                                                   : bf16_to_float(static_cast<const uint16_t*>(want_y)[i]);
    const double tol =
        std::fabs(g.alpha) * 2.0 * double(g.K + 2) * 0x1p-24 * sum_abs[std::size_t(i)] * (1 + output_rounding) +
        output_rounding * std::fabs(want) + 1e-30;
    const double diff = std::fabs(double(got) - double(want));
    r.max_abs_ref = std::max(r.max_abs_ref, double(std::fabs(want)));
    if (!(diff <= tol)) {  // NaN counts as a violation
      if (r.violations++ == 0) {
        char line[256];
        std::snprintf(line, sizeof line, "m=%lld n=%lld got %.9g want %.9g tol %.3g bias=%s out=%s",
                      (long long)(i / g.N), (long long)(i % g.N), got, want, tol, bias_name(g.bias_type),
                      out_name(g.y_type));
        r.first = line;
      }
      r.max_abs_diff = std::max(r.max_abs_diff, std::isnan(diff) ? INFINITY : diff);
    } else {
      r.max_abs_diff = std::max(r.max_abs_diff, diff);
    }
  }
  return r;
}

}  // namespace stepmix::test
