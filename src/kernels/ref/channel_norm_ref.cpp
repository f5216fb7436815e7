// Scalar channel RMS norm (+ SiLU): the definition of channel_norm_kernels.hpp.
#include <algorithm>
#include <cmath>

#include "core/numerics.hpp"
#include "kernels/channel_norm_kernels.hpp"

namespace stepmix::kernels::ref {

void channel_rms_norm(const ChannelNormArgs& g) {
  for (int64_t p = 0; p < g.positions; ++p) {
    const float* in = g.x + p * g.channels;
    float sum = 0.0f;
    for (int64_t c = 0; c < g.channels; ++c) sum += in[c] * in[c];
    const float norm = std::max(std::sqrt(sum), 1e-12f);
    for (int64_t c = 0; c < g.channels; ++c) {
      float v = in[c] / norm;
      v = v * g.scale;
      v = v * g.gamma[c];
      if (g.silu) v = v / (1.0f + std::exp(-v));
      const int64_t out = p * g.channels + c;
      if (g.y_type == FrameElement::F32) {
        static_cast<float*>(g.y)[out] = v;
      } else {
        static_cast<uint16_t*>(g.y)[out] = float_to_bf16_rne(v);
      }
    }
  }
}

}  // namespace stepmix::kernels::ref
