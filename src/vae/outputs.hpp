// Decoded pixels to files: one decode feeding every requested output,
// through an OutputSet (io/output_set.hpp): every output is declared and
// checked before the decode, staged under a temporary name, and none appears
// when the decode fails (non-finite values included) or is cancelled. PNG
// frames are staged one by one as they are decoded and the MP4 is encoded
// frame by frame (only its compressed bytes are held); a picture strip and a
// pixel tensor hold the whole clip.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/output_set.hpp"
#include "vae/vae.hpp"

namespace stepmix::vae {

struct DecodeOutputs {
  std::optional<std::string> image;       // PNG: the picture (one frame), or all frames side by side
  std::optional<std::string> video;       // MP4, H.264 yuv420p at `fps`
  std::optional<std::string> frames_dir;  // a new folder of frame_00000.png, frame_00001.png, ...
  std::optional<std::string> tensor;      // safetensors: 'pixels' F32 [1, 3, F, H, W]
  double fps = 24.0;
  std::vector<PngText> image_text;        // text chunks of the PNG picture (generation parameters)

  // Whether the outputs hold the whole clip in memory (image strip, tensor).
  bool collects() const { return image.has_value() || tensor.has_value(); }
};

// The ids of the declared outputs in their set.
struct DecodeOutputIds {
  std::optional<OutputSet::Id> image, video, frames_dir, tensor;
};
// Declares every output of `outputs` in `set`, labelled `out_label` (image,
// video, tensor) and "--frames-dir". The caller validates the set.
DecodeOutputIds declare_decode_outputs(OutputSet& set, const DecodeOutputs& outputs, const std::string& out_label);
// After set.validate(): decodes `latent` [1, z_dim, T, h, w] once and stages
// every declared output; the caller commits.
void decode_and_stage(const WanVae& vae, const float* latent, const std::vector<int64_t>& shape,
                      const DecodeOutputs& outputs, const DecodeOutputIds& ids, OutputSet& set,
                      const RunOptions& options = {});
// Both, with the set validated before and committed after the decode.
void decode_to_outputs(const WanVae& vae, const float* latent, const std::vector<int64_t>& shape,
                       const DecodeOutputs& outputs, const RunOptions& options = {});

}  // namespace stepmix::vae
