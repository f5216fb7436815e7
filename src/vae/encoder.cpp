#include "vae/encoder.hpp"

#include <algorithm>

namespace stepmix::vae {

Encoder Encoder::load(WeightLoader& weights, const VaeConfig& config) {
  Encoder e;
  e.patch_size_ = int(config.patch_size);
  const std::vector<int64_t> widths = config.encoder_widths();
  const int levels = config.levels();
  e.conv_in_ = CausalConv(weights.conv("encoder.conv_in", widths[0], config.in_channels, 3, 3, 3));
  for (int i = 0; i < levels; ++i) {
    DownBlock b;
    b.c_in = widths[std::size_t(i)];
    b.c_out = widths[std::size_t(i) + 1];
    b.downsample = i < levels - 1;
    b.temporal = b.downsample && config.temperal_downsample[std::size_t(i)];
    const std::string prefix = "encoder.down_blocks." + std::to_string(i);
    for (int64_t j = 0; j < config.num_res_blocks; ++j)
      b.resnets.push_back(
          load_residual_block(weights, prefix + ".resnets." + std::to_string(j), j == 0 ? b.c_in : b.c_out, b.c_out));
    if (b.downsample) b.down_conv = weights.conv(prefix + ".downsampler.resample.1", b.c_out, b.c_out, 1, 3, 3, true);
    if (b.temporal) b.time_conv = weights.conv(prefix + ".downsampler.time_conv", b.c_out, b.c_out, 3, 1, 1);
    e.down_.push_back(std::move(b));
  }
  const int64_t c = widths.back();
  e.mid_ = load_mid_block(weights, "encoder.mid_block", c);
  e.norm_out_ = weights.gamma("encoder.norm_out.gamma", c, 4);
  e.conv_out_ = CausalConv(weights.conv("encoder.conv_out", 2 * config.z_dim, c, 3, 3, 3));
  e.quant_conv_ = weights.conv("quant_conv", 2 * config.z_dim, 2 * config.z_dim, 1, 1, 1);
  return e;
}

void Encoder::push(const Frame& pixels, const std::function<void(Frame&&)>& emit, const FrameTap* tap) {
  Frame x = patchify(pixels, patch_size_);
  tap_frame(tap, "patchified", x);
  x = conv_in_.step(std::move(x));
  tap_frame(tap, "encoder.conv_in", x);
  push_down(0, std::move(x), emit, tap);
}

// Down block i on one of its input frames x: residual blocks, then (all but
// the last block) a stride-2 3×3 conv, then for temporal blocks the stride-2
// time conv (frame 0 passes); plus the average-down shortcut of the inputs.
void Encoder::push_down(std::size_t i, Frame&& x, const std::function<void(Frame&&)>& emit, const FrameTap* tap) {
  if (i == down_.size()) return head(std::move(x), emit, tap);
  DownBlock& b = down_[i];
  const std::string prefix = "encoder.down_blocks." + std::to_string(i);
  const int64_t k = b.frames_seen++;
  Frame h = b.resnets[0].forward(x);
  for (std::size_t j = 1; j < b.resnets.size(); ++j) h = b.resnets[j].forward(h);
  if (b.downsample)
    h = conv_frame(b.down_conv, convert_frame(std::move(h), b.down_conv.input_type()), 2, 0, 0, x.h / 2, x.w / 2);
  const int fs = b.downsample ? 2 : 1;
  if (!b.temporal) {
    add_in_place(h, average_down({&x}, b.c_out, fs));
    tap_frame(tap, prefix, h);
    return push_down(i + 1, std::move(h), emit, tap);
  }
  const FrameElement time_type = b.time_conv.input_type();
  Frame out;
  if (k == 0) {
    // A device frame's copy shares its memory: the history must be a
    // converted frame of its own before `out` is added into (on a device
    // the time conv's input is bf16, h float32).
    if (h.on_device() && h.type == time_type)
      throw Error("vae", "internal: the time history would share memory with the block output");
    b.time_history.push_back(convert_frame(h, time_type));
    out = std::move(h);
    add_in_place(out, average_down({nullptr, &x}, b.c_out, fs));
  } else if (k % 2 == 1) {
    b.time_history.push_back(convert_frame(std::move(h), time_type));
    b.previous_input = std::move(x);
    return;
  } else {
    Frame current = convert_frame(std::move(h), time_type);
    out = conv_frames(b.time_conv, {&b.time_history[0], &b.time_history[1], &current});
    add_in_place(out, average_down({&*b.previous_input, &x}, b.c_out, fs));
    b.time_history.clear();
    b.time_history.push_back(std::move(current));
    b.previous_input.reset();
  }
  tap_frame(tap, prefix, out);
  push_down(i + 1, std::move(out), emit, tap);
}

void Encoder::head(Frame&& x, const std::function<void(Frame&&)>& emit, const FrameTap* tap) {
  x = mid_.forward(x, "encoder.mid_block", tap);
  Frame y = conv_out_.step(rms_norm(x, norm_out_, true, conv_out_.layer().input_type()));
  tap_frame(tap, "encoder.conv_out", y);
  Frame moments = conv_frame(quant_conv_, convert_frame(std::move(y), quant_conv_.input_type()), 1, 0, 0, x.h, x.w);
  tap_frame(tap, "moments", moments);
  emit(std::move(moments));
}

std::size_t Encoder::history_bytes(int64_t H, int64_t W) const {
  int64_t h = H / patch_size_, w = W / patch_size_;
  std::size_t total = conv_in_.history_bytes(h, w);
  for (const DownBlock& b : down_) {
    for (const ResidualBlock& r : b.resnets) total += r.conv1.history_bytes(h, w) + r.conv2.history_bytes(h, w);
    if (b.downsample) {
      h /= 2;
      w /= 2;
    }
    // Two down-sampled frames for the time conv, one block input for the shortcut.
    if (b.temporal) total += 2 * f32_frame_bytes(h, w, b.c_out) + f32_frame_bytes(2 * h, 2 * w, b.c_in);
  }
  for (const ResidualBlock* r : {&mid_.resnet0, &mid_.resnet1})
    total += r->conv1.history_bytes(h, w) + r->conv2.history_bytes(h, w);
  return total + conv_out_.history_bytes(h, w);
}

std::size_t Encoder::working_bytes(int64_t H, int64_t W) const {
  int64_t h = H / patch_size_, w = W / patch_size_;
  std::size_t total = 2 * f32_frame_bytes(H, W, 3) + 2 * f32_frame_bytes(h, w, 3 * patch_size_ * patch_size_);
  for (const DownBlock& b : down_) {
    total += 6 * f32_frame_bytes(h, w, std::max(b.c_in, b.c_out));
    if (b.downsample) {
      h /= 2;
      w /= 2;
    }
  }
  const int64_t c = down_.back().c_out, p = h * w;
  return total + 6 * f32_frame_bytes(h, w, c) + std::size_t(7 * p * c + 256 * p) * sizeof(float);
}

}  // namespace stepmix::vae
