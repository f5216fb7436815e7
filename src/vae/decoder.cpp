#include "vae/decoder.hpp"

#include <algorithm>

#include "vae/device_frames.hpp"

namespace stepmix::vae {
namespace {

// Channels [c0, c0 + c) of every position of x.
Frame channel_slice(const Frame& x, int64_t c0, int64_t c) {
  if (x.on_device()) return on_device::channel_slice(x, c0, c);
  Frame y = Frame::zeros(x.h, x.w, c);
  for (int64_t p = 0; p < x.positions(); ++p)
    std::copy_n(x.f32.begin() + p * x.c + c0, c, y.f32.begin() + p * c);
  return y;
}

}  // namespace

Decoder Decoder::load(WeightLoader& weights, const VaeConfig& config) {
  Decoder d;
  d.patch_size_ = int(config.patch_size);
  const int64_t z = config.z_dim;
  const std::vector<int64_t> widths = config.decoder_widths();
  const std::vector<bool> temporal = config.decoder_temporal_upsample();
  const int levels = config.levels();
  d.post_quant_conv_ = weights.conv("post_quant_conv", z, z, 1, 1, 1);
  d.conv_in_ = CausalConv(weights.conv("decoder.conv_in", widths[0], z, 3, 3, 3));
  d.mid_ = load_mid_block(weights, "decoder.mid_block", widths[0]);
  for (int i = 0; i < levels; ++i) {
    UpBlock b;
    b.c_in = widths[std::size_t(i)];
    b.c_out = widths[std::size_t(i) + 1];
    b.upsample = i < levels - 1;
    b.temporal = b.upsample && temporal[std::size_t(i)];
    const std::string prefix = "decoder.up_blocks." + std::to_string(i);
    for (int64_t j = 0; j <= config.num_res_blocks; ++j)
      b.resnets.push_back(
          load_residual_block(weights, prefix + ".resnets." + std::to_string(j), j == 0 ? b.c_in : b.c_out, b.c_out));
    if (b.temporal) b.time_conv = CausalConv(weights.conv(prefix + ".upsampler.time_conv", 2 * b.c_out, b.c_out, 3, 1, 1));
    if (b.upsample) b.up_conv = weights.conv(prefix + ".upsampler.resample.1", b.c_out, b.c_out, 1, 3, 3, true);
    d.up_.push_back(std::move(b));
  }
  d.norm_out_ = weights.gamma("decoder.norm_out.gamma", widths.back(), 4);
  d.conv_out_ = CausalConv(weights.conv("decoder.conv_out", config.out_channels, widths.back(), 3, 3, 3));
  return d;
}

void Decoder::push(const Frame& z, const std::function<void(Frame&&)>& emit, const FrameTap* tap) {
  Frame x = conv_frame(post_quant_conv_, convert_frame(z, post_quant_conv_.input_type()), 1, 0, 0, z.h, z.w);
  tap_frame(tap, "post_quant_conv", x);
  x = conv_in_.step(std::move(x));
  tap_frame(tap, "decoder.conv_in", x);
  push_up(0, mid_.forward(x, "decoder.mid_block", tap), emit, tap);
}

// Up block i on one of its input frames x: residual blocks, then (all but
// the last block) temporal up-sampling (frame 0 passes, later frames become
// two), nearest ×2 + 3×3 conv per frame, plus the duplicate-up shortcut of x.
void Decoder::push_up(std::size_t i, Frame&& x, const std::function<void(Frame&&)>& emit, const FrameTap* tap) {
  if (i == up_.size()) return head(std::move(x), emit, tap);
  UpBlock& b = up_[i];
  const std::string prefix = "decoder.up_blocks." + std::to_string(i);
  Frame h = b.resnets[0].forward(x);
  tap_frame(tap, prefix + ".resnets.0", h);
  for (std::size_t j = 1; j < b.resnets.size(); ++j) {
    h = b.resnets[j].forward(h);
    tap_frame(tap, prefix + ".resnets." + std::to_string(j), h);
  }
  if (!b.upsample) {
    tap_frame(tap, prefix, h);
    return push_up(i + 1, std::move(h), emit, tap);
  }
  const int ft = b.temporal ? 2 : 1;
  std::vector<Frame> frames;
  std::vector<int> offsets;  // time offset of each frame within the shortcut's duplicates
  if (b.temporal && b.seen_first) {
    // One frame in, two out: channels [0, C) are the earlier, [C, 2C) the later.
    const Frame both = b.time_conv.step(std::move(h));
    frames.push_back(channel_slice(both, 0, b.c_out));
    frames.push_back(channel_slice(both, b.c_out, b.c_out));
    offsets = {0, 1};
  } else {
    // Frame 0 skips the time convolution (and never enters its history);
    // the shortcut keeps only the last of its ft copies.
    frames.push_back(std::move(h));
    offsets = {ft - 1};
  }
  b.seen_first = true;
  for (std::size_t k = 0; k < frames.size(); ++k) {
    Frame out;
    {  // the nearest copy and the shortcut are gone before the next block runs
      const Frame up = upsample_nearest2(frames[k], b.up_conv.input_type());
      frames[k] = Frame{};
      const Frame shortcut = duplicate_up(x, b.c_out, ft, 2, offsets[k]);
      if (tap && *tap) {
        out = conv_frame(b.up_conv, up, 1, 1, 1, 2 * x.h, 2 * x.w);
        tap_frame(tap, prefix + ".upsampler", out);
        add_in_place(out, shortcut);
      } else {
        out = conv_frame(b.up_conv, up, 1, 1, 1, 2 * x.h, 2 * x.w, &shortcut);
      }
    }
    tap_frame(tap, prefix, out);
    push_up(i + 1, std::move(out), emit, tap);
  }
}

void Decoder::head(Frame&& x, const std::function<void(Frame&&)>& emit, const FrameTap* tap) {
  Frame y = conv_out_.step(rms_norm(x, norm_out_, true, conv_out_.layer().input_type()));
  x = Frame{};
  tap_frame(tap, "decoder.conv_out", y);
  emit(unpatchify_clamped(y, patch_size_));
}

std::size_t Decoder::history_bytes(int64_t h, int64_t w, int64_t latent_frames) const {
  int64_t n = latent_frames;  // frames every conv of the current level has seen
  std::size_t total = conv_in_.history_bytes(h, w, n);
  for (const ResidualBlock* r : {&mid_.resnet0, &mid_.resnet1})
    total += r->conv1.history_bytes(h, w, n) + r->conv2.history_bytes(h, w, n);
  for (const UpBlock& b : up_) {
    for (const ResidualBlock& r : b.resnets) total += r.conv1.history_bytes(h, w, n) + r.conv2.history_bytes(h, w, n);
    if (b.temporal) {
      total += b.time_conv.history_bytes(h, w, n - 1);  // frame 0 never enters it
      n = 2 * n - 1;
    }
    if (b.upsample) {
      h *= 2;
      w *= 2;
    }
  }
  return total + conv_out_.history_bytes(h, w, n);
}

std::size_t Decoder::working_bytes(int64_t h, int64_t w) const {
  // While a frame travels down the up blocks, each block above it holds its
  // input (the shortcut's source) and, when temporal, the later of its two
  // frames; the step running at that moment adds its own frames: a residual
  // block's input, shortcut, norm and two conv outputs (five frames of its
  // wider width), or an up-sampling's nearest copy, conv output and
  // shortcut at twice the size (plus both time-conv outputs).
  const int64_t c0 = up_.front().c_in, p = h * w;
  std::size_t held = 0;
  std::size_t peak = 5 * f32_frame_bytes(h, w, c0) + std::size_t(7 * p * c0 + 256 * p) * sizeof(float);
  for (const UpBlock& b : up_) {
    std::size_t step = 5 * f32_frame_bytes(h, w, std::max(b.c_in, b.c_out));
    if (b.upsample)
      step = std::max(step, f32_frame_bytes(h, w, b.c_in) + 3 * f32_frame_bytes(2 * h, 2 * w, b.c_out) +
                                (b.temporal ? 2 * f32_frame_bytes(h, w, 2 * b.c_out) : 0));
    peak = std::max(peak, held + step);
    held += f32_frame_bytes(h, w, b.c_in) + (b.temporal ? f32_frame_bytes(h, w, b.c_out) : 0);
    if (b.upsample) {
      h *= 2;
      w *= 2;
    }
  }
  // Head: its input, the norm, the conv output and the pixel frame.
  peak = std::max(peak, held + 2 * f32_frame_bytes(h, w, up_.back().c_out) + f32_frame_bytes(h, w, conv_out_.layer().c_out()) +
                            f32_frame_bytes(h * patch_size_, w * patch_size_, 3));
  // BF16 on AMX: a convolution copies its (up to three) input frames with
  // zero borders; the largest inputs are the widest convs at full size.
  if (conv_out_.layer().input_type() == FrameElement::BF16)
    peak += 3 * f32_frame_bytes(h + 2, w + 18, std::max(up_.back().c_in, up_[up_.size() - 2].c_out)) / 2;
  return peak;
}

}  // namespace stepmix::vae
