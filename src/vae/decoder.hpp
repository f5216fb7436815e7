// The Wan2.2 decoder (with post_quant_conv), run one latent frame at a time.
//
// Latent frame 0 yields one pixel frame, every later one temporal_factor
// (4 in Wan2.2) — the causal time handling of the temporal up-sampling
// blocks: frame 0 passes them unchanged, later frames are doubled by their
// time convolution, whose history starts with zeros at frame 1. Every causal
// convolution keeps its last two input frames, so memory is those histories
// plus the frames in flight, whatever the clip length.
#pragma once

#include <functional>
#include <vector>

#include "vae/config.hpp"
#include "vae/layers.hpp"
#include "vae/weights.hpp"

namespace stepmix::vae {

class Decoder {
 public:
  // Reads post_quant_conv.* and decoder.* through `weights`.
  static Decoder load(WeightLoader& weights, const VaeConfig& config);

  // z: one de-normalised latent frame [h][w][z_dim] (float32). Emits its pixel
  // frames [16h][16w][3] (clamped to [-1, 1]) in order through `emit`.
  // Frames must be pushed in time order; a copy of a fresh Decoder starts a
  // new clip.
  void push(const Frame& z, const std::function<void(Frame&&)>& emit, const FrameTap* tap = nullptr);

  // Bytes of every causal history after `latent_frames` frames of h × w
  // (constant from the third latent frame on), and a bound of the frames
  // alive at once while one latent frame is decoded.
  std::size_t history_bytes(int64_t h, int64_t w, int64_t latent_frames) const;
  std::size_t working_bytes(int64_t h, int64_t w) const;

 private:
  struct UpBlock {
    std::vector<ResidualBlock> resnets;
    int64_t c_in = 0, c_out = 0;
    bool upsample = false, temporal = false;
    CausalConv time_conv;  // temporal: [3, 1, 1] conv c_out -> 2·c_out
    ConvLayer up_conv;     // upsample: 3×3 conv c_out -> c_out after nearest ×2
    bool seen_first = false;
  };

  void push_up(std::size_t block, Frame&& x, const std::function<void(Frame&&)>& emit, const FrameTap* tap);
  void head(Frame&& x, const std::function<void(Frame&&)>& emit, const FrameTap* tap);

  int patch_size_ = 2;
  ConvLayer post_quant_conv_;
  CausalConv conv_in_;
  MidBlock mid_;
  std::vector<UpBlock> up_;
  std::vector<float> norm_out_;
  CausalConv conv_out_;
};

}  // namespace stepmix::vae
