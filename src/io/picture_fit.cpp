// The conditioning picture of image-to-video, fitted to the request as the
// reference pipeline fits it (Diffusers' Cosmos3 pipeline prepares the picture
// with PyTorch before the VAE sees it):
//
//   scale   = max(W / w, H / h)                      float64
//   resized = ceil(scale·h) × ceil(scale·w)          float64, then ceil
//   resample with F.interpolate(mode="bilinear", antialias=True,
//            align_corners=False) in float32: the width pass, then the height
//   crop    = rows round((resized_h − H)/2) …, columns round((resized_w − W)/2) …
//             (Python's round: half to even)
//   pixel   = clamp(round(value), 0, 255)            round half to even
//
// The antialiased filter is Pillow's BILINEAR (a triangle stretched by the
// scale when shrinking). Its weights are computed in float32 with PyTorch's
// mixed float32/float64 expressions, so they are PyTorch's bit for bit; the
// sums fuse each multiply-add after the first (std::fma), which is what
// PyTorch's compiled loop gives where it is measured to agree (every
// enlargement). Shrinking pictures can differ from PyTorch in the last bit of
// a float32 sum, which moves an 8-bit value only when the sum sits within that
// bit of a half: docs/vae.md gives the measured agreement. Plain arithmetic:
// no FFmpeg needed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "io/video.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

// The taps of one output sample: input[first + j]·weights[j].
struct Taps {
  int64_t first = 0;
  std::vector<float> weights;
};

float triangle(float x) {  // Pillow's bilinear filter, in float32
  if (x < 0.0f) x = -x;
  return x < 1.0f ? float(1.0 - double(x)) : 0.0f;
}

// The taps of `out_size` samples resampled from `in_size` (PyTorch's
// antialiased weights: center, support and the normalisation in float32, the
// mixed expressions widened to float64 where PyTorch's are).
std::vector<Taps> antialiased_taps(int64_t in_size, int64_t out_size) {
  const float scale = float(in_size) / float(out_size);
  const float support = scale >= 1.0f ? float(1.0 * double(scale)) : 1.0f;
  const float invscale = scale >= 1.0f ? float(1.0 / double(scale)) : 1.0f;
  std::vector<Taps> taps(static_cast<std::size_t>(out_size));
  for (int64_t i = 0; i < out_size; ++i) {
    const float center = float(double(scale) * (double(i) + 0.5));
    const int64_t first = std::max<int64_t>(int64_t(double(center - support) + 0.5), 0);
    const int64_t end = std::min<int64_t>(int64_t(double(center + support) + 0.5), in_size);
    Taps& t = taps[std::size_t(i)];
    t.first = first;
    float total = 0.0f;
    for (int64_t j = 0; j < end - first; ++j) {
      const float w = triangle(float((double(float(j + first) - center) + 0.5) * double(invscale)));
      t.weights.push_back(w);
      total += w;
    }
    if (total != 0.0f)
      for (float& w : t.weights) w /= total;
  }
  return taps;
}

float weighted_sum(const float* input, std::ptrdiff_t stride, const Taps& t) {
  const float* p = input + t.first * stride;
  float sum = p[0] * t.weights[0];
  for (std::size_t j = 1; j < t.weights.size(); ++j) sum = std::fma(p[std::ptrdiff_t(j) * stride], t.weights[j], sum);
  return sum;
}

}  // namespace

Image8 resize_and_center_crop(const Image8& image, int width, int height) {
  if (width < 1 || height < 1 || image.width < 1 || image.height < 1)
    throw Error("video", "resize: sizes must be positive");
  if (image.channels != 1 && image.channels != 3) throw Error("video", "resize: the picture must be gray or RGB");
  const int64_t in_w = image.width, in_h = image.height;
  const int channels = image.channels;
  const double scale = std::max(double(width) / double(in_w), double(height) / double(in_h));
  const auto resized_w = int64_t(std::ceil(scale * double(in_w)));
  const auto resized_h = int64_t(std::ceil(scale * double(in_h)));
  const auto left = int64_t(std::nearbyint(double(resized_w - width) / 2.0));
  const auto top = int64_t(std::nearbyint(double(resized_h - height) / 2.0));

  // Planar float32 copy of the source [C][h][w] (gray is one plane, repeated
  // at the end: the three channels of PIL's convert("RGB") are equal).
  std::vector<float> source(std::size_t(channels * in_h * in_w));
  for (int64_t y = 0; y < in_h; ++y)
    for (int64_t x = 0; x < in_w; ++x)
      for (int c = 0; c < channels; ++c)
        source[std::size_t((c * in_h + y) * in_w + x)] = image.pixels[std::size_t((y * in_w + x) * channels + c)];

  // Width pass over the kept columns [C][h][width] (a dimension that keeps
  // its size passes through: its weights would be 1 and 0).
  std::vector<float> wide(std::size_t(channels * in_h * width));
  const std::vector<Taps> across = resized_w != in_w ? antialiased_taps(in_w, resized_w) : std::vector<Taps>{};
  for (int64_t row = 0; row < channels * in_h; ++row)
    for (int64_t x = 0; x < width; ++x) {
      const float* in = source.data() + row * in_w;
      wide[std::size_t(row * width + x)] =
          across.empty() ? in[left + x] : weighted_sum(in, 1, across[std::size_t(left + x)]);
    }

  // Height pass over the kept rows, then round, clamp and interleave.
  const std::vector<Taps> down = resized_h != in_h ? antialiased_taps(in_h, resized_h) : std::vector<Taps>{};
  Image8 out;
  out.width = width;
  out.height = height;
  out.channels = 3;
  out.pixels.resize(std::size_t(width) * std::size_t(height) * 3);
  for (int c = 0; c < 3; ++c) {
    const float* plane = wide.data() + int64_t(std::min(c, channels - 1)) * in_h * width;
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x) {
        const float v =
            down.empty() ? plane[(top + y) * width + x] : weighted_sum(plane + x, width, down[std::size_t(top + y)]);
        const float rounded = std::clamp(std::nearbyint(v), 0.0f, 255.0f);
        out.pixels[std::size_t((y * width + x) * 3 + c)] = uint8_t(rounded);
      }
  }
  return out;
}

}  // namespace stepmix
