// Decoded pixels to files: one decode feeding every requested output.
// Video and frame folders are streamed (frames go to the encoder as they are
// decoded), images and tensors are written after the decode; every output is
// written under a temporary name and renamed, and none appears when the
// decode fails (non-finite values included) or is cancelled.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "vae/vae.hpp"

namespace stepmix::vae {

struct DecodeOutputs {
  std::optional<std::string> image;       // PNG: the picture (one frame), or all frames side by side
  std::optional<std::string> video;       // MP4, H.264 yuv420p at `fps`
  std::optional<std::string> frames_dir;  // a new folder of frame_00000.png, frame_00001.png, ...
  std::optional<std::string> tensor;      // safetensors: 'pixels' F32 [1, 3, F, H, W]
  double fps = 24.0;

  // Whether the outputs hold the whole clip in memory (image strip, tensor).
  bool collects() const { return image.has_value() || tensor.has_value(); }
};

// Decodes `latent` [1, z_dim, T, h, w] once and writes every output given.
void decode_to_outputs(const WanVae& vae, const float* latent, const std::vector<int64_t>& shape,
                       const DecodeOutputs& outputs, const RunOptions& options = {});

}  // namespace stepmix::vae
