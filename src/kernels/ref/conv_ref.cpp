// Weight packing, argument checks and the scalar reference of the VAE
// convolution (conv_kernels.hpp). The reference is plain loops, one output
// element at a time, summing in the documented order.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/numerics.hpp"
#include "kernels/conv_kernels.hpp"
#include "stepmix/error.hpp"

namespace stepmix::kernels {

namespace {

int64_t packed_index(const ConvWeights& w, int64_t o, int64_t i, int tap) {
  const int64_t block = o / kConvBlock, lane = o % kConvBlock;
  const int64_t width = w.block_width(block);
  const int64_t base = w.block_offset(block);
  if (w.arithmetic == GemmArithmetic::BF16) {
    const int64_t pairs = w.c_in_packed() / 2;
    return base + ((int64_t(tap) * pairs + i / 2) * width + lane) * 2 + i % 2;
  }
  return base + (int64_t(tap) * w.c_in + i) * width + lane;
}

float frame_value(const void* frame, FrameElement type, int64_t index) {
  if (type == FrameElement::BF16) return bf16_to_float(static_cast<const uint16_t*>(frame)[index]);
  return static_cast<const float*>(frame)[index];
}

// Input rows/columns range [lo, hi) of output positions whose tap at offset
// `k` reads inside [0, size) (stride s, padding pad before).
void valid_range(int64_t out_size, int64_t in_size, int stride, int pad, int k, int64_t& lo, int64_t& hi) {
  // in = o·stride + k − pad ∈ [0, in_size)
  const int64_t shift = int64_t(k) - pad;
  lo = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
  const int64_t last = in_size - 1 - shift;  // o·stride <= last
  hi = last < 0 ? 0 : std::min<int64_t>(out_size, last / stride + 1);
  if (hi < lo) hi = lo;
}

}  // namespace

ConvWeights pack_conv_weights(const void* w, bool w_is_bf16, int64_t c_out, int64_t c_in, int kt, int kh, int kw,
                              const float* bias, GemmArithmetic arithmetic) {
  if (c_out < 1 || c_in < 1 || kt < 1 || kh < 1 || kw < 1)
    throw Error("kernels", "pack_conv_weights: sizes must be positive, got c_out " + std::to_string(c_out) +
                               ", c_in " + std::to_string(c_in) + ", kernel " + std::to_string(kt) + "x" +
                               std::to_string(kh) + "x" + std::to_string(kw));
  ConvWeights p;
  p.c_out = c_out;
  p.c_in = c_in;
  p.kt = kt;
  p.kh = kh;
  p.kw = kw;
  p.arithmetic = arithmetic;
  const int taps = p.taps();
  const int64_t total = p.block_offset(p.blocks() - 1) + p.block_width(p.blocks() - 1) * taps * p.c_in_packed();
  if (arithmetic == GemmArithmetic::BF16) {
    p.bf16.assign(std::size_t(total), 0);
  } else {
    p.f32.assign(std::size_t(total), 0.0f);
  }
  for (int64_t o = 0; o < c_out; ++o)
    for (int64_t i = 0; i < c_in; ++i)
      for (int tap = 0; tap < taps; ++tap) {
        const int64_t src = (o * c_in + i) * taps + tap;  // [o][i][a][b][c] with tap = (a·kh + b)·kw + c
        const float v = w_is_bf16 ? bf16_to_float(static_cast<const uint16_t*>(w)[src]) : static_cast<const float*>(w)[src];
        const int64_t dst = packed_index(p, o, i, tap);
        if (arithmetic == GemmArithmetic::BF16) {
          p.bf16[std::size_t(dst)] = float_to_bf16_rne(v);
        } else {
          p.f32[std::size_t(dst)] = v;
        }
      }
  p.bias.assign(std::size_t(c_out), 0.0f);
  if (bias) std::copy(bias, bias + c_out, p.bias.begin());
  return p;
}

float packed_conv_weight(const ConvWeights& w, int64_t o, int64_t i, int a, int b, int c) {
  const int64_t index = packed_index(w, o, i, (a * w.kh + b) * w.kw + c);
  return w.arithmetic == GemmArithmetic::BF16 ? bf16_to_float(w.bf16[std::size_t(index)]) : w.f32[std::size_t(index)];
}

void validate_conv3d(const Conv3dArgs& g) {
  auto fail = [](const std::string& what) { throw Error("kernels", "conv3d: " + what); };
  if (!g.weights) fail("no weights");
  const ConvWeights& w = *g.weights;
  if (g.h_in < 1 || g.w_in < 1 || g.h_out < 1 || g.w_out < 1 || g.frames_out < 1)
    fail("frame sizes and frame count must be positive");
  if (g.stride_h < 1 || g.stride_w < 1 || g.stride_t < 1 || g.pad_top < 0 || g.pad_left < 0)
    fail("strides must be positive and paddings non-negative");
  const bool bf16 = w.arithmetic == GemmArithmetic::BF16;
  if ((g.x_type == FrameElement::BF16) != bf16)
    fail(std::string("input frames must be ") + (bf16 ? "bf16" : "float32") + " for " + (bf16 ? "BF16" : "F32") +
         " arithmetic");
  if (bf16 && w.c_in % 2 != 0) fail("BF16 arithmetic needs an even number of input channels, got " + std::to_string(w.c_in));
  if (!g.x_frames || !g.y_frames) fail("missing frame arrays");
  for (int64_t t = 0; t < g.frames_out; ++t)
    if (!g.y_frames[t]) fail("output frame " + std::to_string(t) + " is null");
  if (g.residual_frames && g.y_type != FrameElement::F32) {
    for (int64_t t = 0; t < g.frames_out; ++t)
      if (g.residual_frames[t] && g.residual_frames[t] == g.y_frames[t]) fail("a residual may alias only a float32 output");
  }
}

double conv3d_macs(const Conv3dArgs& g) {
  const ConvWeights& w = *g.weights;
  double macs = 0;
  for (int64_t t = 0; t < g.frames_out; ++t)
    for (int a = 0; a < w.kt; ++a) {
      if (!g.x_frames[t * g.stride_t + a]) continue;
      for (int b = 0; b < w.kh; ++b) {
        int64_t ylo, yhi;
        valid_range(g.h_out, g.h_in, g.stride_h, g.pad_top, b, ylo, yhi);
        for (int c = 0; c < w.kw; ++c) {
          int64_t xlo, xhi;
          valid_range(g.w_out, g.w_in, g.stride_w, g.pad_left, c, xlo, xhi);
          macs += double(yhi - ylo) * double(xhi - xlo) * double(w.c_in) * double(w.c_out);
        }
      }
    }
  return macs;
}

namespace ref {

void conv3d(const Conv3dArgs& g) {
  validate_conv3d(g);
  const ConvWeights& w = *g.weights;
  const bool bf16 = w.arithmetic == GemmArithmetic::BF16;
  for (int64_t t = 0; t < g.frames_out; ++t) {
    const float* residual = g.residual_frames ? g.residual_frames[t] : nullptr;
    for (int64_t y = 0; y < g.h_out; ++y)
      for (int64_t x = 0; x < g.w_out; ++x)
        for (int64_t o = 0; o < w.c_out; ++o) {
          float acc = 0.0f;
          for (int a = 0; a < w.kt; ++a) {
            const void* frame = g.x_frames[t * g.stride_t + a];
            if (!frame) continue;
            for (int b = 0; b < w.kh; ++b) {
              const int64_t iy = y * g.stride_h + b - g.pad_top;
              if (iy < 0 || iy >= g.h_in) continue;
              for (int c = 0; c < w.kw; ++c) {
                const int64_t ix = x * g.stride_w + c - g.pad_left;
                if (ix < 0 || ix >= g.w_in) continue;
                const int64_t base = (iy * g.w_in + ix) * w.c_in;
                if (bf16) {
                  // vdpbf16ps order: per pair of channels, the odd one first;
                  // bf16 products are exact in float32.
                  for (int64_t i = 0; i < w.c_in; i += 2) {
                    acc += frame_value(frame, g.x_type, base + i + 1) * packed_conv_weight(w, o, i + 1, a, b, c);
                    acc += frame_value(frame, g.x_type, base + i) * packed_conv_weight(w, o, i, a, b, c);
                  }
                } else {
                  for (int64_t i = 0; i < w.c_in; ++i)
                    acc = std::fma(frame_value(frame, g.x_type, base + i), packed_conv_weight(w, o, i, a, b, c), acc);
                }
              }
            }
          }
          float v = acc + w.bias[std::size_t(o)];
          const int64_t out = (y * g.w_out + x) * w.c_out + o;
          if (residual) v = v + residual[out];
          if (g.y_type == FrameElement::F32) {
            static_cast<float*>(g.y_frames[t])[out] = v;
          } else {
            static_cast<uint16_t*>(g.y_frames[t])[out] = float_to_bf16_rne(v);
          }
        }
  }
}

}  // namespace ref
}  // namespace stepmix::kernels
