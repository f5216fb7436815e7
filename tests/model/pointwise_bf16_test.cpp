// The AVX-512 BF16-activation pointwise kernels against their scalar twins
// (pointwise_kernels.hpp) on ragged sizes, and the threaded wrappers against
// the twins. Exact equality except where the header documents a reason.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/numerics.hpp"
#include "model/pointwise_kernels.hpp"

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

int worst_ulps(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  EXPECT_EQ(a.size(), b.size());
  int worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, ulp_distance(a[i], b[i]));
  return worst;
}

const pointwise::Bf16Kernels& reference() { return pointwise::portable_kernels(); }

class PointwiseBf16 : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    fast_ = pointwise::avx512_kernels();
    if (!fast_) GTEST_SKIP() << "no AVX-512 on this CPU";
  }
  const pointwise::Bf16Kernels* fast_ = nullptr;
};

TEST_P(PointwiseBf16, RmsNormWithinOneUlpOfTheTwin) {
  const int64_t n = GetParam(), rows = 7;
  const auto x = normals(rows * n, 1, 3.0f);
  const auto weight = normals(n, 2, 1.0f);
  for (NormKind kind : {NormKind::Standard, NormKind::Nemotron}) {
    std::vector<uint16_t> a(x.size()), b(x.size());
    reference().rms_norm_to_bf16(x.data(), rows, n, weight.data(), 1e-6f, kind, a.data());
    fast_->rms_norm_to_bf16(x.data(), rows, n, weight.data(), 1e-6f, kind, b.data());
    EXPECT_LE(worst_ulps(a, b), 1) << "n " << n;
  }
}

TEST_P(PointwiseBf16, HeadNormRotaryWithinOneUlpOfTheTwin) {
  const int64_t D = 2 * ((GetParam() + 1) / 2), rows = 5, heads = 3;
  const auto x = to_bf16(normals(rows * heads * D, 3, 2.0f));
  const auto weight = normals(D, 4, 1.0f);
  const auto angles = normals(rows * D, 5, 3.0f);
  std::vector<float> cos(angles.size()), sin(angles.size());
  for (std::size_t i = 0; i < angles.size(); ++i) cos[i] = std::cos(angles[i]), sin[i] = std::sin(angles[i]);
  for (const float* norm : {weight.data(), static_cast<const float*>(nullptr)}) {
    std::vector<uint16_t> a = x, b = x;
    reference().head_norm_rotary(a.data(), rows, heads, D, norm, 1e-6f, NormKind::Standard, cos.data(), sin.data());
    fast_->head_norm_rotary(b.data(), rows, heads, D, norm, 1e-6f, NormKind::Standard, cos.data(), sin.data());
    // Without a norm nothing is summed: the arithmetic is identical.
    EXPECT_LE(worst_ulps(a, b), norm ? 1 : 0) << "D " << D;
  }
}

TEST_P(PointwiseBf16, SiluGateWithinOneUlpReluSquaredAndConversionsExact) {
  const int64_t n = GetParam() * 5 + 3;
  auto g = normals(n, 6, 4.0f);
  g[0] = 95.0f, g[1] = -95.0f;  // e^x overflow on both sides of the polynomial's range
  const auto gate = to_bf16(g), up = to_bf16(normals(n, 7, 2.0f));
  std::vector<uint16_t> a(static_cast<std::size_t>(n)), b(static_cast<std::size_t>(n));
  reference().silu_gate(gate.data(), up.data(), n, a.data());
  fast_->silu_gate(gate.data(), up.data(), n, b.data());
  EXPECT_LE(worst_ulps(a, b), 1);

  a = gate, b = gate;
  reference().relu_squared(a.data(), n);
  fast_->relu_squared(b.data(), n);
  EXPECT_EQ(a, b);

  std::vector<float> wa(static_cast<std::size_t>(n), 0.5f), wb = wa;
  reference().add_to_f32(wa.data(), gate.data(), n);
  fast_->add_to_f32(wb.data(), gate.data(), n);
  EXPECT_EQ(wa, wb);
  reference().widen(gate.data(), n, wa.data());
  fast_->widen(gate.data(), n, wb.data());
  EXPECT_EQ(wa, wb);

  // Rounding: ties, denormals, NaN and infinities as float_to_bf16_rne.
  std::vector<float> special = normals(n, 8, 1e3f);
  special[0] = 1.00390625f, special[1] = 1.01171875f, special[2] = 1e-40f, special[3] = NAN;
  special[4] = -INFINITY, special[5] = -0.0f;
  reference().round(special.data(), n, a.data());
  fast_->round(special.data(), n, b.data());
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(RaggedSizes, PointwiseBf16, ::testing::Values(1, 15, 16, 17, 64, 100, 128, 2048));

TEST(PointwiseBf16Threads, WrappersEqualTheActiveKernelOnOneThread) {
  const int64_t rows = 300, n = 512;  // several pool tasks
  const auto x = normals(rows * n, 9, 1.0f);
  const auto weight = normals(n, 10, 1.0f);
  std::vector<uint16_t> threaded(x.size()), single(x.size());
  rms_norm_to_bf16(x.data(), rows, n, weight.data(), 1e-6f, NormKind::Standard, threaded.data());
  pointwise::active_kernels().rms_norm_to_bf16(x.data(), rows, n, weight.data(), 1e-6f, NormKind::Standard,
                                               single.data());
  EXPECT_EQ(threaded, single);
}

}  // namespace
}  // namespace stepmix::test
