// One frame of a VAE feature map, channels-last [h][w][c], float32 or bf16
// (the layout of the convolution kernels, src/kernels/conv_kernels.hpp).
// The VAE runs frame by frame, so a frame is the unit of every operation.
// A frame lives in host memory (the vectors) or on a VAE device
// (vae/device_frames.hpp: `device` set, the vectors empty); every operation
// of vae/layers.hpp runs where its input frame lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/conv_kernels.hpp"

namespace stepmix {
class VaeDevice;
}

namespace stepmix::vae {

using kernels::FrameElement;

// Bytes of one float32 frame [h][w][c] (the memory estimates count in them).
inline std::size_t f32_frame_bytes(int64_t h, int64_t w, int64_t c) { return std::size_t(h * w * c) * sizeof(float); }

struct Frame {
  int64_t h = 0, w = 0, c = 0;
  FrameElement type = FrameElement::F32;
  std::vector<float> f32;      // type F32
  std::vector<uint16_t> bf16;  // type BF16
  // A device frame: its memory (shared by copies of the frame, which only
  // read it) and the device whose operations run on it.
  std::shared_ptr<void> device_memory;
  VaeDevice* device = nullptr;

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
  bool on_device() const { return device != nullptr; }
  int64_t positions() const { return h * w; }
  int64_t size() const { return h * w * c; }
  std::size_t element_bytes() const { return type == FrameElement::F32 ? sizeof(float) : sizeof(uint16_t); }
  std::size_t bytes() const {
    if (on_device()) return std::size_t(size()) * element_bytes();
    return f32.size() * sizeof(float) + bf16.size() * sizeof(uint16_t);
  }
  const void* data() const {
    if (on_device()) return device_memory.get();
    return type == FrameElement::F32 ? static_cast<const void*>(f32.data()) : static_cast<const void*>(bf16.data());
  }
  void* data() {
    if (on_device()) return device_memory.get();
    return type == FrameElement::F32 ? static_cast<void*>(f32.data()) : static_cast<void*>(bf16.data());
  }
  // Device frames' typed pointers (the vectors' data() on the host).
  float* f32_data() { return static_cast<float*>(data()); }
  const float* f32_data() const { return static_cast<const float*>(data()); }
};

}  // namespace stepmix::vae
