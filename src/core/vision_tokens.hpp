// The vision tokens of a Cosmos3 transformer call: the patch grid that cuts
// a latent [1, C, T, H, W] into tokens, and the width of the timestep
// sinusoid added to them. Plain data, shared by the model and the device
// kernels.
#pragma once

#include <cstdint>

namespace stepmix {

// Geometry of one vision latent [1, C, T, H, W] with spatial patch p.
struct PatchGrid {
  int64_t channels = 0, frames = 0, height = 0, width = 0, patch = 1;

  int64_t patches_h() const { return (height + patch - 1) / patch; }  // Hp = ⌈H/p⌉
  int64_t patches_w() const { return (width + patch - 1) / patch; }   // Wp = ⌈W/p⌉
  int64_t tokens_per_frame() const { return patches_h() * patches_w(); }
  int64_t tokens() const { return frames * tokens_per_frame(); }  // Nv
  int64_t features() const { return patch * patch * channels; }   // p·p·C
};

// timestep_sinusoid (model/embedding.hpp) returns [n, kTimestepChannels].
inline constexpr int64_t kTimestepChannels = 256;

}  // namespace stepmix
