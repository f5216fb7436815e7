// Every variant's pointwise family (kernel_set.hpp registry) against the
// reference variant on ragged sizes, and the threaded entry points against
// the active kernel on one thread. Exact equality except where
// kernels/pointwise.hpp documents a reason.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/numerics.hpp"
#include "kernels/kernel_set.hpp"

namespace stepmix::test {
namespace {

std::vector<float> normals(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = float_to_bf16_rne(v[i]);
  return out;
}

// Distance in bf16 steps (same sign assumed for nearby values).
int ulp_distance(uint16_t a, uint16_t b) {
  const auto ordered = [](uint16_t x) { return (x & 0x8000) ? -int(x & 0x7FFF) : int(x); };
  return std::abs(ordered(a) - ordered(b));
}

std::vector<float> widened_copy(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_float(v[i]);
  return out;
}

int worst_ulps(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  int worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, ulp_distance(a[i], b[i]));
  return worst;
}

using kernels::PointwiseFamily;

const PointwiseFamily& reference() { return kernels::reference_kernels().pointwise; }

// Every variant whose pointwise family runs here, the reference one included.
std::vector<std::pair<std::string, const PointwiseFamily*>> variants() {
  std::vector<std::pair<std::string, const PointwiseFamily*>> v;
  for (const kernels::KernelSet& k : kernels::kernel_variants())
    if (k.pointwise.supported()) v.emplace_back(k.name, &k.pointwise);
  return v;
}

class PointwiseBf16 : public ::testing::TestWithParam<int64_t> {};

TEST_P(PointwiseBf16, RmsNormWithinOneUlpOfTheTwin) {
  const int64_t n = GetParam(), rows = 7;
  const auto x = normals(rows * n, 1, 3.0f);
  const auto weight = normals(n, 2, 1.0f);
  for (const auto& [name, fast] : variants())
    for (NormKind kind : {NormKind::Standard, NormKind::Nemotron}) {
      std::vector<uint16_t> a(x.size()), b(x.size());
      reference().rms_norm_bf16(x.data(), rows, n, weight.data(), 1e-6f, kind, a.data());
      fast->rms_norm_bf16(x.data(), rows, n, weight.data(), 1e-6f, kind, b.data());
      EXPECT_LE(worst_ulps(a, b), 1) << name << " n " << n;
      // Float32 outputs: every variant runs the reference arithmetic.
      std::vector<float> fa(x.size()), fb(x.size());
      reference().rms_norm_f32(x.data(), rows, n, weight.data(), 1e-6f, kind, fa.data());
      fast->rms_norm_f32(x.data(), rows, n, weight.data(), 1e-6f, kind, fb.data());
      EXPECT_EQ(fa, fb) << name;
    }
}

TEST_P(PointwiseBf16, HeadNormRotaryWithinOneUlpOfTheTwin) {
  const int64_t D = 2 * ((GetParam() + 1) / 2), rows = 5, heads = 3;
  const auto x = to_bf16(normals(rows * heads * D, 3, 2.0f));
  const auto weight = normals(D, 4, 1.0f);
  const auto angles = normals(rows * D, 5, 3.0f);
  std::vector<float> cos(angles.size()), sin(angles.size());
  for (std::size_t i = 0; i < angles.size(); ++i) cos[i] = std::cos(angles[i]), sin[i] = std::sin(angles[i]);
  for (const auto& [name, fast] : variants())
    for (const float* norm : {weight.data(), static_cast<const float*>(nullptr)}) {
      std::vector<uint16_t> a = x, b = x;
      reference().head_norm_rotary_bf16(a.data(), rows, heads, D, norm, 1e-6f, NormKind::Standard, cos.data(),
                                        sin.data());
      fast->head_norm_rotary_bf16(b.data(), rows, heads, D, norm, 1e-6f, NormKind::Standard, cos.data(), sin.data());
      // Without a norm nothing is summed: the arithmetic is identical.
      EXPECT_LE(worst_ulps(a, b), norm ? 1 : 0) << name << " D " << D;
      std::vector<float> fa = widened_copy(x), fb = fa;
      reference().head_norm_rotary_f32(fa.data(), rows, heads, D, norm, 1e-6f, NormKind::Standard, cos.data(),
                                       sin.data());
      fast->head_norm_rotary_f32(fb.data(), rows, heads, D, norm, 1e-6f, NormKind::Standard, cos.data(), sin.data());
      EXPECT_EQ(fa, fb) << name;
    }
}

TEST_P(PointwiseBf16, SiluGateWithinOneUlpReluSquaredAndConversionsExact) {
  const int64_t n = GetParam() * 5 + 3;
  auto g = normals(n, 6, 4.0f);
  g[0] = 95.0f, g[1] = -95.0f;  // e^x overflow on both sides of the polynomial's range
  const auto gate = to_bf16(g), up = to_bf16(normals(n, 7, 2.0f));
  // Rounding: ties, denormals, NaN and infinities as float_to_bf16_rne.
  std::vector<float> special = normals(n, 8, 1e3f);
  special[0] = 1.00390625f, special[1] = 1.01171875f, special[2] = 1e-40f, special[3] = NAN;
  special[4] = -INFINITY, special[5] = -0.0f;
  for (const auto& [name, fast] : variants()) {
    std::vector<uint16_t> a(static_cast<std::size_t>(n)), b(static_cast<std::size_t>(n));
    reference().silu_gate_bf16(gate.data(), up.data(), n, a.data());
    fast->silu_gate_bf16(gate.data(), up.data(), n, b.data());
    EXPECT_LE(worst_ulps(a, b), 1) << name;

    a = gate, b = gate;
    reference().relu_squared_bf16(a.data(), n);
    fast->relu_squared_bf16(b.data(), n);
    EXPECT_EQ(a, b) << name;

    std::vector<float> wa(static_cast<std::size_t>(n), 0.5f), wb = wa;
    reference().add_bf16(wa.data(), gate.data(), n);
    fast->add_bf16(wb.data(), gate.data(), n);
    EXPECT_EQ(wa, wb) << name;
    reference().widen_bf16(gate.data(), n, wa.data());
    fast->widen_bf16(gate.data(), n, wb.data());
    EXPECT_EQ(wa, wb) << name;

    reference().round_bf16(special.data(), n, a.data());
    fast->round_bf16(special.data(), n, b.data());
    EXPECT_EQ(a, b) << name;

    // Float32 members: the reference arithmetic in every variant.
    const std::vector<float> gf = widened_copy(gate), uf = widened_copy(up);
    std::vector<float> fa(gf.size()), fb(gf.size());
    reference().silu_gate_f32(gf.data(), uf.data(), n, fa.data());
    fast->silu_gate_f32(gf.data(), uf.data(), n, fb.data());
    EXPECT_EQ(fa, fb) << name;
    fa = gf, fb = gf;
    reference().relu_squared_f32(fa.data(), n);
    fast->relu_squared_f32(fb.data(), n);
    EXPECT_EQ(fa, fb) << name;
    reference().add_f32(fa.data(), uf.data(), n);
    fast->add_f32(fb.data(), uf.data(), n);
    EXPECT_EQ(fa, fb) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(RaggedSizes, PointwiseBf16, ::testing::Values(1, 15, 16, 17, 64, 100, 128, 2048));

TEST(Rotary, EveryVariantRotatesPairsAcrossTheHalves) {
  // D = 4: pairs (0, 2) and (1, 3); a quarter turn on the first, none on the second.
  const float cos[4] = {0.0f, 1.0f, 0.0f, 1.0f};
  const float sin[4] = {1.0f, 0.0f, 1.0f, 0.0f};
  for (const auto& [name, family] : variants()) {
    std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f};
    family->head_norm_rotary_f32(x.data(), 1, 1, 4, nullptr, 1e-6f, NormKind::Standard, cos, sin);
    EXPECT_EQ(x, (std::vector<float>{-3.0f, 2.0f, 1.0f, 4.0f})) << name;
    std::vector<uint16_t> b = to_bf16({1.0f, 2.0f, 3.0f, 4.0f});
    family->head_norm_rotary_bf16(b.data(), 1, 1, 4, nullptr, 1e-6f, NormKind::Standard, cos, sin);
    EXPECT_EQ(b, to_bf16({-3.0f, 2.0f, 1.0f, 4.0f})) << name;
  }
}

TEST(PointwiseBf16Threads, WrappersEqualTheActiveKernelOnOneThread) {
  const int64_t rows = 300, n = 512;  // several pool tasks
  const auto x = normals(rows * n, 9, 1.0f);
  const auto weight = normals(n, 10, 1.0f);
  std::vector<uint16_t> threaded(x.size()), single(x.size());
  kernels::rms_norm(x.data(), rows, n, weight.data(), 1e-6f, NormKind::Standard, threaded.data());
  kernels::active_kernels().pointwise.rms_norm_bf16(x.data(), rows, n, weight.data(), 1e-6f, NormKind::Standard,
                                                     single.data());
  EXPECT_EQ(threaded, single);
}

}  // namespace
}  // namespace stepmix::test
