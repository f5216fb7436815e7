// The VAE's channel RMS norm (+ SiLU) over channels-last frames, the one
// pointwise operation of the VAE that costs enough to matter (a sum of
// squares, a division, two products and, with SiLU, an exponential per
// value, over every activation that enters a residual block or the head).
//
//   y[p][c] = f(x[p][c] / max(‖x[p]‖₂, 1e-12) · scale · gamma[c]),
//   f = identity, or SiLU v / (1 + e^-v),   ‖x[p]‖₂ = sqrt(Σ_c x[p][c]²)
//
// in that order (division by the clamped norm, then the two products, each
// rounded to float32), as the reference normalises; y float32 or bf16 (round
// to nearest even). Variants differ only in the order of the sum of squares
// and in the exponential (the AVX-512 one within ~2 ulp of std::exp).
#pragma once

#include <cstdint>

#include "kernels/conv_kernels.hpp"

namespace stepmix::kernels {

struct ChannelNormArgs {
  const float* x = nullptr;  // [positions][channels]
  int64_t positions = 0, channels = 0;
  const float* gamma = nullptr;  // [channels]
  float scale = 1.0f;            // sqrt(channels) as a float32, for the VAE
  bool silu = false;
  FrameElement y_type = FrameElement::F32;
  void* y = nullptr;  // [positions][channels]
};

// Scalar loops: the definition.
namespace ref {
void channel_rms_norm(const ChannelNormArgs& args);
}
// AVX-512, positions spread over the global thread pool.
namespace avx512 {
void channel_rms_norm(const ChannelNormArgs& args);
}

// One variant; the one that runs is kernel_set.hpp's
// active_convolution().channel_rms_norm.
using ChannelNormFunction = void (*)(const ChannelNormArgs&);

}  // namespace stepmix::kernels
