// Shared by the VAE tests: paths into the tiny Wan2.2 goldens, a recorder of
// module outputs, and the goldens' deviation metric.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/golden.hpp"
#include "io/safetensors.hpp"
#include "vae/vae.hpp"

namespace stepmix::test {

inline std::string vae_golden(const std::string& rel) { return data_path("golden/wan22-vae-tiny/" + rel); }

// Bounds of the golden README §7 (max|a − g| / max|g|, 10× the measured
// float32-vs-float64 deviation): decoded pixels and every decoder
// intermediate 5e-5, the de-normalised latent z 1e-6, the encoder mean,
// normalised latent, moments and every encoder intermediate 1e-5.
constexpr double kDecodeBound = 5e-5;
constexpr double kDenormalisedBound = 1e-6;
constexpr double kEncodeBound = 1e-5;

// Every frame a tap saw, per module, in order.
struct TapRecorder {
  std::map<std::string, std::vector<vae::Frame>> frames;
  vae::FrameTap tap() {
    return [this](const std::string& module, const vae::Frame& frame) { frames[module].push_back(frame); };
  }
};

// max|a − g| / max|g| of channels-last frames against a golden [1, C, T, H, W].
inline double deviation(const std::vector<vae::Frame>& frames, const TensorView& golden) {
  EXPECT_EQ(golden.rank(), 5) << golden.name;
  const int64_t C = golden.shape[1], T = golden.shape[2], H = golden.shape[3], W = golden.shape[4];
  EXPECT_EQ(int64_t(frames.size()), T) << golden.name;
  if (int64_t(frames.size()) != T) return INFINITY;
  double max_diff = 0, max_golden = 0;
  const float* g = golden.as<float>();
  for (int64_t t = 0; t < T; ++t) {
    const vae::Frame& f = frames[std::size_t(t)];
    EXPECT_TRUE(f.h == H && f.w == W && f.c == C) << golden.name << " frame " << t << ": " << f.h << "x" << f.w << "x"
                                                   << f.c << ", expected " << H << "x" << W << "x" << C;
    if (f.h != H || f.w != W || f.c != C) return INFINITY;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < H * W; ++p) {
        const double want = g[(c * T + t) * H * W + p];
        max_diff = std::max(max_diff, std::fabs(double(f.f32[std::size_t(p * C + c)]) - want));
        max_golden = std::max(max_golden, std::fabs(want));
      }
  }
  return max_diff / max_golden;
}

// The same metric for two [1, C, T, H, W] tensors in the same layout.
inline double deviation(const float* actual, const TensorView& golden) {
  double max_diff = 0, max_golden = 0;
  const float* g = golden.as<float>();
  for (int64_t i = 0; i < golden.numel(); ++i) {
    max_diff = std::max(max_diff, std::fabs(double(actual[i]) - double(g[i])));
    max_golden = std::max(max_golden, std::fabs(double(g[i])));
  }
  return max_diff / max_golden;
}

inline const vae::WanVae& golden_vae() {
  static const vae::WanVae vae = vae::WanVae::load(vae_golden("vae"));
  return vae;
}

}  // namespace stepmix::test
