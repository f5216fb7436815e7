#include "core/vision_tokens.hpp"

#include <algorithm>

namespace stepmix {

void patchify_into(const float* latent, const PatchGrid& grid, float* patches) {
  const int64_t C = grid.channels, T = grid.frames, H = grid.height, W = grid.width, p = grid.patch;
  const int64_t Hp = grid.patches_h(), Wp = grid.patches_w(), F = grid.features();
  std::fill_n(patches, grid.tokens() * F, 0.0f);  // zeros = the padding
  for (int64_t t = 0; t < T; ++t)
    for (int64_t hp = 0; hp < Hp; ++hp)
      for (int64_t wp = 0; wp < Wp; ++wp) {
        float* token = patches + ((t * Hp + hp) * Wp + wp) * F;
        for (int64_t ph = 0; ph < p; ++ph)
          for (int64_t pw = 0; pw < p; ++pw) {
            const int64_t h = hp * p + ph, w = wp * p + pw;
            if (h >= H || w >= W) continue;
            for (int64_t c = 0; c < C; ++c) token[(ph * p + pw) * C + c] = latent[((c * T + t) * H + h) * W + w];
          }
      }
}

void unpatchify_into(const float* patches, const PatchGrid& grid, std::span<const int64_t> noisy_frames, float* out) {
  const int64_t C = grid.channels, T = grid.frames, H = grid.height, W = grid.width, p = grid.patch;
  const int64_t Hp = grid.patches_h(), Wp = grid.patches_w(), F = grid.features();
  std::fill_n(out, C * T * H * W, 0.0f);
  for (std::size_t n = 0; n < noisy_frames.size(); ++n) {
    const int64_t t = noisy_frames[n];
    for (int64_t hp = 0; hp < Hp; ++hp)
      for (int64_t wp = 0; wp < Wp; ++wp) {
        const float* token = patches + ((int64_t(n) * Hp + hp) * Wp + wp) * F;
        for (int64_t ph = 0; ph < p; ++ph)
          for (int64_t pw = 0; pw < p; ++pw) {
            const int64_t h = hp * p + ph, w = wp * p + pw;
            if (h >= H || w >= W) continue;  // crop the padding
            for (int64_t c = 0; c < C; ++c) out[((c * T + t) * H + h) * W + w] = token[(ph * p + pw) * C + c];
          }
      }
  }
}

}  // namespace stepmix
