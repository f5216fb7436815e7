// One frame of a VAE feature map, channels-last [h][w][c], float32 or bf16
// (the layout of the convolution kernels, src/kernels/conv_kernels.hpp).
// The VAE runs frame by frame, so a frame is the unit of every operation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/conv_kernels.hpp"

namespace stepmix::vae {

using kernels::FrameElement;

// Bytes of one float32 frame [h][w][c] (the memory estimates count in them).
inline std::size_t f32_frame_bytes(int64_t h, int64_t w, int64_t c) { return std::size_t(h * w * c) * sizeof(float); }

struct Frame {
  int64_t h = 0, w = 0, c = 0;
  FrameElement type = FrameElement::F32;
  std::vector<float> f32;      // type F32
  std::vector<uint16_t> bf16;  // type BF16

  // A frame of zeros.
  static Frame zeros(int64_t h, int64_t w, int64_t c, FrameElement type = FrameElement::F32) {
    Frame f;
    f.h = h;
    f.w = w;
    f.c = c;
    f.type = type;
    if (type == FrameElement::F32) {
      f.f32.assign(std::size_t(h * w * c), 0.0f);
    } else {
      f.bf16.assign(std::size_t(h * w * c), 0);
    }
    return f;
  }
  int64_t positions() const { return h * w; }
  int64_t size() const { return h * w * c; }
  std::size_t bytes() const { return f32.size() * sizeof(float) + bf16.size() * sizeof(uint16_t); }
  const void* data() const {
    return type == FrameElement::F32 ? static_cast<const void*>(f32.data()) : static_cast<const void*>(bf16.data());
  }
  void* data() { return type == FrameElement::F32 ? static_cast<void*>(f32.data()) : static_cast<void*>(bf16.data()); }
};

}  // namespace stepmix::vae
