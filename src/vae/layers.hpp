// Building blocks of the Wan2.2 VAE, one frame at a time (frames are
// channels-last [h][w][c], vae/frame.hpp).
//
// Causality makes frame-at-a-time exact: a causal 3×3×3 convolution's output
// frame t reads input frames t−2, t−1, t, so it needs only the last two
// input frames it was given (its history, zeros before the first frame).
// Running a clip frame by frame with that history equals running it whole.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/conv_kernels.hpp"
#include "vae/frame.hpp"

namespace stepmix::vae {

// Called with every named module output, frame by frame in time order
// (module names are the checkpoint's module paths, e.g. "decoder.up_blocks.1").
using FrameTap = std::function<void(const std::string& module, const Frame& frame)>;

// Packed weights of one convolution, shared by every copy of a model: a
// decode copies the decoder (fresh histories) without copying weights.
struct ConvLayer {
  std::shared_ptr<const kernels::ConvWeights> weights;

  int64_t c_in() const { return weights->c_in; }
  int64_t c_out() const { return weights->c_out; }
  // What its input frames must be: bf16 for BF16 arithmetic, else float32.
  FrameElement input_type() const {
    return weights->arithmetic == kernels::GemmArithmetic::BF16 ? FrameElement::BF16 : FrameElement::F32;
  }
};

// x converted to `type` (bf16 rounds to nearest even); moved when it already is.
Frame convert_frame(Frame x, FrameElement type);

// A convolution with kt = 1 on one frame [h_in][w_in][c_in] ->
// [h_out][w_out][c_out] float32, plus `residual` (float32, same shape) if given.
Frame conv_frame(const ConvLayer& layer, const Frame& x, int stride, int pad_top, int pad_left, int64_t h_out,
                 int64_t w_out, const Frame* residual = nullptr);
// One output frame of a convolution over its kt input frames (oldest first,
// null = zeros, all of the layer's input type), no spatial padding or stride.
Frame conv_frames(const ConvLayer& layer, const std::vector<const Frame*>& inputs);

// Causal convolution, kt = 3 (zero front padding through a two-frame
// history) or kt = 1, stride 1, spatial padding kh/2, kw/2 on each side.
class CausalConv {
 public:
  CausalConv() = default;
  explicit CausalConv(ConvLayer layer) : layer_(std::move(layer)) {}
  const ConvLayer& layer() const { return layer_; }
  // x [h][w][c_in] -> [h][w][c_out] float32 (+ residual). x, converted to the
  // conv's input type, is kept as history.
  Frame step(Frame x, const Frame* residual = nullptr);
  // Bytes of the history for frames of h × w once it has seen `frames`
  // input frames (at most kt − 1 are kept).
  std::size_t history_bytes(int64_t h, int64_t w, int64_t frames = 2) const;

 private:
  ConvLayer layer_;
  std::vector<Frame> history_;  // the last kt − 1 inputs, oldest first
};

// Channel RMS norm at every position: x / max(‖x‖₂, 1e-12) · sqrt(C) · γ, in
// that order, then SiLU x·sigmoid(x) if `silu`; output of type `out`.
Frame rms_norm(const Frame& x, const std::vector<float>& gamma, bool silu, FrameElement out);

// In place: x += y (same shape, float32).
void add_in_place(Frame& x, const Frame& y);

// R(C_in -> C_out): conv1(silu(norm1(x))), conv2(silu(norm2(·))) + shortcut(x)
// (a 1×1×1 conv when C_in != C_out, else x).
struct ResidualBlock {
  std::vector<float> norm1, norm2;
  CausalConv conv1, conv2;
  std::optional<ConvLayer> shortcut;

  Frame forward(const Frame& x);
};

// softmax(q·kᵀ / sqrt(C))·v over the positions of one frame, for qkv
// [h][w][3C] = [q | k | v] float32: [h][w][C] float32.
Frame single_head_attention(const Frame& qkv);

// Single-head attention over the positions of one frame, width C, scale
// 1/sqrt(C), then proj and the residual x.
struct AttentionBlock {
  std::vector<float> norm;
  ConvLayer to_qkv, proj;

  Frame forward(const Frame& x) const;
};

// The tap, if there is one.
inline void tap_frame(const FrameTap* tap, const std::string& module, const Frame& frame) {
  if (tap && *tap) (*tap)(module, frame);
}

// M(C): R(C -> C), attention, R(C -> C); outputs tapped as
// prefix.resnets.0, prefix.attentions.0 and prefix.
struct MidBlock {
  ResidualBlock resnet0, resnet1;
  AttentionBlock attention;

  Frame forward(const Frame& x, const std::string& prefix, const FrameTap* tap);
};

// Nearest-neighbour ×2 in both spatial directions, as `out` (bf16 rounds).
Frame upsample_nearest2(const Frame& x, FrameElement out = FrameElement::F32);

// Duplicate-up shortcut DU(C_in -> c_out; ft, fs) of one input frame, the
// output frame with time offset dt (< ft):
//   out[y·fs + dy, x·fs + dx, o] = x[y, x, (o·f + dt·fs² + dy·fs + dx) div r],
// f = ft·fs², r = c_out·f / C_in.
Frame duplicate_up(const Frame& x, int64_t c_out, int ft, int fs, int dt);

// Average-down shortcut AD(C_in -> c_out; ft, fs) of ft input frames (the
// earlier first; null = a zero frame):
//   E[c·f + dt·fs² + dy·fs + dx] = frames[dt][y·fs + dy, x·fs + dx, c],
//   out[o] = (1/g) Σ_{j<g} E[o·g + j],  f = ft·fs², g = C_in·f / c_out.
Frame average_down(const std::vector<const Frame*>& frames, int64_t c_out, int fs);

// Pixels [H][W][3] -> [H/p][W/p][3p²], channel c·p² + dx·p + dy for pixel
// (p·y + dy, p·x + dx); and the inverse, clamped to [-1, 1].
Frame patchify(const Frame& pixels, int p);
Frame unpatchify_clamped(const Frame& x, int p);

}  // namespace stepmix::vae
