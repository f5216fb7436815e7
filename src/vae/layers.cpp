#include "vae/layers.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/vae_device.hpp"
#include "core/numerics.hpp"
#include "core/thread_pool.hpp"
#include "kernels/kernel_set.hpp"
#include "stepmix/error.hpp"
#include "vae/device_frames.hpp"

namespace stepmix::vae {
namespace {

// fn(begin, end) over [0, count) in pieces spread over the global pool.
template <class Fn>
void parallel_ranges(int64_t count, int64_t piece, const Fn& fn) {
  const int64_t pieces = (count + piece - 1) / piece;
  ThreadPool::global().parallel_for(pieces, [&](int64_t i) { fn(i * piece, std::min(count, (i + 1) * piece)); });
}

void run_conv(const ConvLayer& layer, const void* const* inputs, const Frame& x, int stride, int pad_top,
              int pad_left, Frame& y, const Frame* residual) {
  const float* residual_data = residual ? residual->f32_data() : nullptr;
  void* out = y.data();
  kernels::Conv3dArgs args;
  args.weights = layer.weights.get();
  args.h_in = x.h;
  args.w_in = x.w;
  args.h_out = y.h;
  args.w_out = y.w;
  args.stride_h = args.stride_w = stride;
  args.pad_top = pad_top;
  args.pad_left = pad_left;
  args.x_frames = inputs;
  args.x_type = layer.input_type();
  args.residual_frames = residual ? &residual_data : nullptr;
  args.y_frames = &out;
  if (x.on_device()) {
    x.device->conv3d(layer.weights, args);
  } else {
    kernels::active_convolution().conv3d(args);
  }
}

void check_input(const ConvLayer& layer, const Frame& x) {
  if (x.c != layer.c_in() || x.type != layer.input_type())
    throw Error("vae", "internal: convolution expects " + std::to_string(layer.c_in()) + " input channels, got " +
                           std::to_string(x.c));
}

}  // namespace

Frame convert_frame(Frame x, FrameElement type) {
  if (x.type == type) return x;
  if (x.on_device()) return on_device::convert(x, type);
  Frame out;
  out.h = x.h;
  out.w = x.w;
  out.c = x.c;
  out.type = type;
  const int64_t n = x.size();
  if (type == FrameElement::BF16) {
    out.bf16.resize(std::size_t(n));
    parallel_ranges(n, 1 << 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out.bf16[std::size_t(i)] = float_to_bf16_rne(x.f32[std::size_t(i)]);
    });
  } else {
    out.f32.resize(std::size_t(n));
    parallel_ranges(n, 1 << 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out.f32[std::size_t(i)] = bf16_to_float(x.bf16[std::size_t(i)]);
    });
  }
  return out;
}

Frame conv_frame(const ConvLayer& layer, const Frame& x, int stride, int pad_top, int pad_left, int64_t h_out,
                 int64_t w_out, const Frame* residual) {
  check_input(layer, x);
  Frame y = frame_like(x, h_out, w_out, layer.c_out());
  const void* inputs[1] = {x.data()};
  run_conv(layer, inputs, x, stride, pad_top, pad_left, y, residual);
  return y;
}

Frame conv_frames(const ConvLayer& layer, const std::vector<const Frame*>& inputs) {
  const Frame* any = nullptr;
  std::vector<const void*> data;
  for (const Frame* f : inputs) {
    if (f) check_input(layer, *f);
    any = f ? f : any;
    data.push_back(f ? f->data() : nullptr);
  }
  if (!any || int64_t(inputs.size()) != layer.weights->kt) throw Error("vae", "internal: conv_frames needs kt frames");
  Frame y = frame_like(*any, any->h, any->w, layer.c_out());
  run_conv(layer, data.data(), *any, 1, 0, 0, y, nullptr);
  return y;
}

Frame CausalConv::step(Frame x, const Frame* residual) {
  x = convert_frame(std::move(x), layer_.input_type());
  check_input(layer_, x);
  const kernels::ConvWeights& w = *layer_.weights;
  std::vector<const void*> inputs(std::size_t(w.kt), nullptr);
  const std::size_t missing = std::size_t(w.kt - 1) - history_.size();
  for (std::size_t i = 0; i < history_.size(); ++i) inputs[missing + i] = history_[i].data();
  inputs.back() = x.data();
  Frame y = frame_like(x, x.h, x.w, w.c_out);
  run_conv(layer_, inputs.data(), x, 1, w.kh / 2, w.kw / 2, y, residual);
  if (w.kt > 1) {
    history_.push_back(std::move(x));
    if (int64_t(history_.size()) > w.kt - 1) history_.erase(history_.begin());
  }
  return y;
}

std::size_t CausalConv::history_bytes(int64_t h, int64_t w, int64_t frames) const {
  const std::size_t element = layer_.input_type() == FrameElement::BF16 ? 2 : 4;
  const int64_t kept = std::clamp<int64_t>(frames, 0, layer_.weights->kt - 1);
  return std::size_t(kept) * std::size_t(h * w * layer_.c_in()) * element;
}

Frame rms_norm(const Frame& x, const std::vector<float>& gamma, bool silu, FrameElement out_type) {
  Frame y = frame_like(x, x.h, x.w, x.c, out_type);
  kernels::ChannelNormArgs args;
  args.x = x.f32_data();
  args.positions = x.positions();
  args.channels = x.c;
  args.gamma = gamma.data();
  args.scale = float(std::sqrt(double(x.c)));  // the reference multiplies by sqrt(C) as a float32
  args.silu = silu;
  args.y_type = out_type;
  args.y = y.data();
  if (x.on_device()) {
    x.device->channel_rms_norm(args);
  } else {
    kernels::active_convolution().channel_rms_norm(args);
  }
  return y;
}

void add_in_place(Frame& x, const Frame& y) {
  if (x.on_device()) return on_device::add_in_place(x, y);
  for (std::size_t i = 0; i < x.f32.size(); ++i) x.f32[i] += y.f32[i];
}

Frame ResidualBlock::forward(const Frame& x) {
  std::optional<Frame> projected;
  if (shortcut) projected = conv_frame(*shortcut, convert_frame(x, shortcut->input_type()), 1, 0, 0, x.h, x.w);
  Frame h = conv1.step(rms_norm(x, norm1, true, conv1.layer().input_type()));
  return conv2.step(rms_norm(h, norm2, true, conv2.layer().input_type()), projected ? &*projected : &x);
}

Frame single_head_attention(const Frame& qkv) {
  if (qkv.on_device()) return on_device::attention(qkv);
  const int64_t P = qkv.positions(), C = qkv.c / 3;
  // q, k, v as separate row-major [P, C]; v also transposed to [C, P] so that
  // o = softmax(q·kᵀ)·v is a GEMM against "weights" vᵀ.
  std::vector<float> q(std::size_t(P * C)), k(std::size_t(P * C)), vt(std::size_t(C * P));
  for (int64_t p = 0; p < P; ++p)
    for (int64_t c = 0; c < C; ++c) {
      q[std::size_t(p * C + c)] = qkv.f32[std::size_t(p * 3 * C + c)];
      k[std::size_t(p * C + c)] = qkv.f32[std::size_t(p * 3 * C + C + c)];
      vt[std::size_t(c * P + p)] = qkv.f32[std::size_t(p * 3 * C + 2 * C + c)];
    }
  Frame o = Frame::zeros(qkv.h, qkv.w, C);
  constexpr int64_t kQueryBlock = 256;  // bounds the score matrix to 256 × P floats
  std::vector<float> scores(std::size_t(std::min(P, kQueryBlock) * P));
  const auto& gemm = kernels::active_kernels().linear.gemm;
  for (int64_t q0 = 0; q0 < P; q0 += kQueryBlock) {
    const int64_t rows = std::min(kQueryBlock, P - q0);
    kernels::GemmArgs s;
    s.M = rows;
    s.N = P;
    s.K = C;
    s.a = q.data() + q0 * C;
    s.w = k.data();
    s.alpha = float(1.0 / std::sqrt(double(C)));
    s.y = scores.data();
    gemm(s);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = scores.data() + r * P;
      const float top = *std::max_element(row, row + P);
      float sum = 0.0f;
      for (int64_t j = 0; j < P; ++j) sum += (row[j] = std::exp(row[j] - top));
      for (int64_t j = 0; j < P; ++j) row[j] /= sum;
    }
    kernels::GemmArgs a;
    a.M = rows;
    a.N = C;
    a.K = P;
    a.a = scores.data();
    a.w = vt.data();
    a.y = o.f32.data() + q0 * C;
    gemm(a);
  }
  return o;
}

Frame AttentionBlock::forward(const Frame& x) const {
  const Frame qkv = conv_frame(to_qkv, rms_norm(x, norm, false, to_qkv.input_type()), 1, 0, 0, x.h, x.w);
  return conv_frame(proj, convert_frame(single_head_attention(qkv), proj.input_type()), 1, 0, 0, x.h, x.w, &x);
}

Frame MidBlock::forward(const Frame& x, const std::string& prefix, const FrameTap* tap) {
  Frame h = resnet0.forward(x);
  tap_frame(tap, prefix + ".resnets.0", h);
  h = attention.forward(h);
  tap_frame(tap, prefix + ".attentions.0", h);
  h = resnet1.forward(h);
  tap_frame(tap, prefix, h);
  return h;
}

Frame upsample_nearest2(const Frame& x, FrameElement out_type) {
  if (x.on_device()) return on_device::upsample_nearest2(x, out_type);
  Frame y = Frame::zeros(2 * x.h, 2 * x.w, x.c, out_type);
  const int64_t C = x.c;
  parallel_ranges(y.h, 8, [&](int64_t begin, int64_t end) {
    for (int64_t oy = begin; oy < end; ++oy) {
      // One output row from its input row; the next row repeats it.
      const float* in = x.f32.data() + (oy / 2) * x.w * C;
      for (int64_t ox = 0; ox < y.w; ++ox) {
        const float* src = in + (ox / 2) * C;
        const int64_t dst = (oy * y.w + ox) * C;
        if (out_type == FrameElement::F32) {
          std::copy(src, src + C, y.f32.begin() + dst);
        } else {
          for (int64_t c = 0; c < C; ++c) y.bf16[std::size_t(dst + c)] = float_to_bf16_rne(src[c]);
        }
      }
    }
  });
  return y;
}

Frame duplicate_up(const Frame& x, int64_t c_out, int ft, int fs, int dt) {
  if (x.on_device()) return on_device::duplicate_up(x, c_out, ft, fs, dt);
  const int64_t f = int64_t(ft) * fs * fs;
  const int64_t r = c_out * f / x.c;
  // Source channel of every output channel, per sub-position (dy, dx).
  std::vector<int64_t> source(std::size_t(fs * fs * c_out));
  for (int64_t sub = 0; sub < int64_t(fs) * fs; ++sub)
    for (int64_t o = 0; o < c_out; ++o) source[std::size_t(sub * c_out + o)] = (o * f + int64_t(dt) * fs * fs + sub) / r;
  Frame y = Frame::zeros(x.h * fs, x.w * fs, c_out);
  parallel_ranges(x.h, 4, [&](int64_t begin, int64_t end) {
    for (int64_t iy = begin; iy < end; ++iy)
      for (int64_t ix = 0; ix < x.w; ++ix) {
        const float* in = x.f32.data() + (iy * x.w + ix) * x.c;
        for (int dy = 0; dy < fs; ++dy)
          for (int dx = 0; dx < fs; ++dx) {
            float* out = y.f32.data() + ((iy * fs + dy) * y.w + ix * fs + dx) * c_out;
            const int64_t* index = source.data() + (int64_t(dy) * fs + dx) * c_out;
            for (int64_t o = 0; o < c_out; ++o) out[o] = in[index[o]];
          }
      }
  });
  return y;
}

Frame average_down(const std::vector<const Frame*>& frames, int64_t c_out, int fs) {
  const Frame* any = nullptr;
  for (const Frame* f : frames) any = f ? f : any;
  if (any->on_device()) return on_device::average_down(frames, c_out, fs);
  const int64_t ft = int64_t(frames.size());
  const int64_t C = any->c;
  const int64_t f = ft * fs * fs;
  const int64_t g = C * f / c_out;
  Frame y = Frame::zeros(any->h / fs, any->w / fs, c_out);
  std::vector<float> e(std::size_t(C * f));
  const float inv_g = 1.0f / float(g);
  for (int64_t oy = 0; oy < y.h; ++oy)
    for (int64_t ox = 0; ox < y.w; ++ox) {
      for (int64_t dt = 0; dt < ft; ++dt)
        for (int dy = 0; dy < fs; ++dy)
          for (int dx = 0; dx < fs; ++dx) {
            const Frame* src = frames[std::size_t(dt)];
            const int64_t sub = dt * fs * fs + int64_t(dy) * fs + dx;
            for (int64_t c = 0; c < C; ++c)
              e[std::size_t(c * f + sub)] =
                  src ? src->f32[std::size_t(((oy * fs + dy) * src->w + ox * fs + dx) * C + c)] : 0.0f;
          }
      float* out = y.f32.data() + (oy * y.w + ox) * c_out;
      for (int64_t o = 0; o < c_out; ++o) {
        float sum = 0.0f;
        for (int64_t j = 0; j < g; ++j) sum += e[std::size_t(o * g + j)];
        out[o] = g == 1 ? sum : sum * inv_g;
      }
    }
  return y;
}

Frame patchify(const Frame& pixels, int p) {
  if (pixels.on_device()) return on_device::patchify(pixels, p);
  Frame y = Frame::zeros(pixels.h / p, pixels.w / p, pixels.c * p * p);
  for (int64_t oy = 0; oy < y.h; ++oy)
    for (int64_t ox = 0; ox < y.w; ++ox)
      for (int64_t c = 0; c < pixels.c; ++c)
        for (int dx = 0; dx < p; ++dx)
          for (int dy = 0; dy < p; ++dy)
            y.f32[std::size_t((oy * y.w + ox) * y.c + c * p * p + dx * p + dy)] =
                pixels.f32[std::size_t(((oy * p + dy) * pixels.w + ox * p + dx) * pixels.c + c)];
  return y;
}

Frame unpatchify_clamped(const Frame& x, int p) {
  if (x.on_device()) return on_device::unpatchify_clamped(x, p);
  const int64_t colours = x.c / (int64_t(p) * p);
  Frame y = Frame::zeros(x.h * p, x.w * p, colours);
  for (int64_t iy = 0; iy < x.h; ++iy)
    for (int64_t ix = 0; ix < x.w; ++ix)
      for (int64_t c = 0; c < colours; ++c)
        for (int dx = 0; dx < p; ++dx)
          for (int dy = 0; dy < p; ++dy) {
            const float v = x.f32[std::size_t((iy * x.w + ix) * x.c + c * p * p + dx * p + dy)];
            // NaN stays NaN (the caller refuses it), everything else is clamped.
            y.f32[std::size_t(((iy * p + dy) * y.w + ix * p + dx) * colours + c)] = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
          }
  return y;
}

}  // namespace stepmix::vae
