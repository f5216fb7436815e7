// The vision tokens of a Cosmos3 transformer call: the patch grid that cuts
// a latent [1, C, T, H, W] into tokens, and the width of the timestep
// sinusoid added to them. Plain data, shared by the model and the device
// kernels.
#pragma once

#include <cstdint>
#include <span>

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

// latent: [C, T, H, W] → patches: [T·Hp·Wp, p·p·C], every element written.
// H/W not divisible by p are zero-padded at the bottom/right. Tokens are
// t-major, then h, then w; within a token the feature index is
// (ph·p + pw)·C + c.
void patchify_into(const float* latent, const PatchGrid& grid, float* patches);

// Inverse for the noisy frames only. patches: [Nn, p·p·C] for the frames in
// noisy_frames (in that order, Hp·Wp tokens each) → out: [C, T, H, W]
// (padding cropped, every other frame zero), every element written.
void unpatchify_into(const float* patches, const PatchGrid& grid, std::span<const int64_t> noisy_frames, float* out);

// timestep_sinusoid (model/embedding.hpp) returns [n, kTimestepChannels].
inline constexpr int64_t kTimestepChannels = 256;

}  // namespace stepmix
