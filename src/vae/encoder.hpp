// The Wan2.2 encoder (with quant_conv), run one pixel frame at a time.
//
// Temporal down-sampling blocks pass frame 0 through and then emit one
// frame per two inputs: their time convolution (kernel 3, stride 2, no
// padding) reads frames 2j−2, 2j−1, 2j, and their average-down shortcut pairs
// (zero, x₀), (x₁, x₂), … So pixel frame 0 gives latent frame 0 on its own, and
// each later group of temporal_factor frames one more.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "vae/config.hpp"
#include "vae/layers.hpp"
#include "vae/weights.hpp"

namespace stepmix::vae {

class Encoder {
 public:
  // Reads encoder.* and quant_conv.* through `weights`.
  static Encoder load(WeightLoader& weights, const VaeConfig& config);

  // pixels: one frame [H][W][3] in [-1, 1] (H, W multiples of the spatial
  // factor). Emits the posterior moments [H/16][W/16][2·z_dim] (mean first)
  // of each latent frame completed by this pixel frame.
  void push(const Frame& pixels, const std::function<void(Frame&&)>& emit, const FrameTap* tap = nullptr);

  // As Decoder: histories for pixel frames of H × W, and frames in flight.
  std::size_t history_bytes(int64_t H, int64_t W) const;
  std::size_t working_bytes(int64_t H, int64_t W) const;

 private:
  struct DownBlock {
    std::vector<ResidualBlock> resnets;
    int64_t c_in = 0, c_out = 0;
    bool downsample = false, temporal = false;
    ConvLayer down_conv;   // downsample: 3×3, stride 2, one zero row/column after the input
    ConvLayer time_conv;   // temporal: [3, 1, 1], stride 2 in time, no padding
    int64_t frames_seen = 0;
    std::optional<Frame> previous_input;  // block input of the last odd frame (shortcut pair)
    std::vector<Frame> time_history;      // down-sampled frames 2j−2, 2j−1 awaiting frame 2j
  };

  void push_down(std::size_t block, Frame&& x, const std::function<void(Frame&&)>& emit, const FrameTap* tap);
  void head(Frame&& x, const std::function<void(Frame&&)>& emit, const FrameTap* tap);

  int patch_size_ = 2;
  CausalConv conv_in_;
  std::vector<DownBlock> down_;
  MidBlock mid_;
  std::vector<float> norm_out_;
  CausalConv conv_out_;
  ConvLayer quant_conv_;
};

}  // namespace stepmix::vae
