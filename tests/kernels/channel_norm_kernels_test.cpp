// The VAE's channel RMS norm (+ SiLU): the reference against its formula in
// double, and every variant of the registry's convolution family against the
// reference, for channel counts
// on and off the 16-lane grid, float32 and bf16 outputs, with and without
// SiLU, and values from 1e-3 to 1e3 (the exponential's range).
//
// Bound. The sum of squares in another order moves the norm by at most
// C·2^-24 relative; the division and the two products round the same way on
// both sides; the exponential is within ~2 ulp of std::exp, and SiLU's
// division adds one rounding: (C + 8)·2^-24 relative per value. A bf16
// output adds one bf16 step when the two land on either side of a midpoint.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/numerics.hpp"
#include "kernels/channel_norm_kernels.hpp"
#include "kernels/kernel_set.hpp"

namespace stepmix::kernels {
namespace {

struct Case {
  int64_t channels;
  bool silu;
  bool bf16;
};

std::vector<float> run(ChannelNormFunction f, const std::vector<float>& x, const std::vector<float>& gamma, const Case& k,
                       int64_t positions) {
  std::vector<float> out(x.size());
  std::vector<uint16_t> out_bf16(x.size());
  ChannelNormArgs a;
  a.x = x.data();
  a.positions = positions;
  a.channels = k.channels;
  a.gamma = gamma.data();
  a.scale = float(std::sqrt(double(k.channels)));
  a.silu = k.silu;
  a.y_type = k.bf16 ? FrameElement::BF16 : FrameElement::F32;
  a.y = k.bf16 ? static_cast<void*>(out_bf16.data()) : static_cast<void*>(out.data());
  f(a);
  if (k.bf16)
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_float(out_bf16[i]);
  return out;
}

const Case kCases[] = {{12, true, false}, {48, false, false}, {70, true, true}, {256, true, false}, {512, false, true}};

TEST(ChannelNorm, EveryVariantMatchesTheFormula) {
  for (const KernelSet& variant : kernel_variants()) {
    if (!variant.convolution.supported()) continue;
    SCOPED_TRACE(variant.name);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> magnitude(-3.0f, 3.0f), gamma_range(0.75f, 1.25f);
    std::normal_distribution<float> normal;
    const int64_t positions = 37;
    for (const Case& k : kCases) {
      std::vector<float> x(std::size_t(positions * k.channels)), gamma(std::size_t(k.channels));
      // Each position at its own scale, 1e-3 .. 1e3.
      for (int64_t p = 0; p < positions; ++p) {
        const float scale = std::pow(10.0f, magnitude(rng));
        for (int64_t c = 0; c < k.channels; ++c) x[std::size_t(p * k.channels + c)] = scale * normal(rng);
      }
      for (float& g : gamma) g = gamma_range(rng);
      const std::vector<float> want = run(ref::channel_rms_norm, x, gamma, k, positions);
      const std::vector<float> got = run(variant.convolution.channel_rms_norm, x, gamma, k, positions);
      for (int64_t p = 0; p < positions; ++p) {
        double sum = 0;
        for (int64_t c = 0; c < k.channels; ++c) sum += double(x[std::size_t(p * k.channels + c)]) * x[std::size_t(p * k.channels + c)];
        for (int64_t c = 0; c < k.channels; ++c) {
          const std::size_t i = std::size_t(p * k.channels + c);
          double v = x[i] / std::sqrt(sum) * std::sqrt(double(k.channels)) * gamma[std::size_t(c)];
          if (k.silu) v = v / (1 + std::exp(-v));
          const double relative = double(k.channels + 8) * 0x1p-24 + (k.bf16 ? 0x1p-8 : 0.0);
          ASSERT_NEAR(want[i], v, std::fabs(v) * relative + 1e-30) << "ref, C=" << k.channels << " at " << p << "," << c;
          const double between = double(k.channels + 8) * 0x1p-24 + (k.bf16 ? 0x1p-7 : 0.0);
          ASSERT_NEAR(got[i], want[i], std::fabs(want[i]) * between + 1e-30)
              << "variant vs ref, C=" << k.channels << " at " << p << "," << c;
        }
      }
    }
  }
}

}  // namespace
}  // namespace stepmix::kernels
