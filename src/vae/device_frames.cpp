#include "vae/device_frames.hpp"

#include <string>

#include "backend/vae_device.hpp"
#include "stepmix/error.hpp"

namespace stepmix::vae {

Frame device_frame(VaeDevice& device, int64_t h, int64_t w, int64_t c, FrameElement type) {
  Frame f;
  f.h = h;
  f.w = w;
  f.c = c;
  f.type = type;
  f.device = &device;
  std::shared_ptr<BackendBuffer> memory = device.allocate(std::size_t(h * w * c) * f.element_bytes());
  void* data = memory->data();
  f.device_memory = std::shared_ptr<void>(std::move(memory), data);  // owns the buffer, points at its memory
  return f;
}

Frame frame_like(const Frame& like, int64_t h, int64_t w, int64_t c, FrameElement type) {
  return like.on_device() ? device_frame(*like.device, h, w, c, type) : Frame::zeros(h, w, c, type);
}

Frame upload_frame(VaeDevice& device, const Frame& host) {
  if (host.on_device()) throw Error("vae", "internal: upload_frame of a device frame");
  Frame f = device_frame(device, host.h, host.w, host.c, host.type);
  device.upload(f.data(), host.data(), f.bytes());
  return f;
}

Frame download_frame(const Frame& frame) {
  if (!frame.on_device()) return frame;
  Frame host = Frame::zeros(frame.h, frame.w, frame.c, frame.type);
  frame.device->download(host.data(), frame.data(), host.bytes());
  return host;
}

namespace on_device {

Frame convert(const Frame& x, FrameElement type) {
  Frame y = device_frame(*x.device, x.h, x.w, x.c, type);
  if (type == FrameElement::BF16) {
    x.device->round_to_bf16(x.f32_data(), x.size(), static_cast<uint16_t*>(y.data()));
  } else {
    x.device->widen_bf16(static_cast<const uint16_t*>(x.data()), x.size(), y.f32_data());
  }
  return y;
}

void add_in_place(Frame& x, const Frame& y) { x.device->add(x.f32_data(), y.f32_data(), x.size()); }

Frame attention(const Frame& qkv) {
  const int64_t C = qkv.c / 3;
  Frame o = device_frame(*qkv.device, qkv.h, qkv.w, C);
  qkv.device->attention(qkv.f32_data(), qkv.positions(), C, o.f32_data());
  return o;
}

Frame upsample_nearest2(const Frame& x, FrameElement out) {
  Frame y = device_frame(*x.device, 2 * x.h, 2 * x.w, x.c, out);
  x.device->upsample_nearest2(x.f32_data(), x.h, x.w, x.c, out, y.data());
  return y;
}

Frame duplicate_up(const Frame& x, int64_t c_out, int ft, int fs, int dt) {
  Frame y = device_frame(*x.device, x.h * fs, x.w * fs, c_out);
  x.device->duplicate_up(x.f32_data(), x.h, x.w, x.c, c_out, ft, fs, dt, y.f32_data());
  return y;
}

Frame unpatchify_clamped(const Frame& x, int p) {
  Frame y = device_frame(*x.device, x.h * p, x.w * p, x.c / (int64_t(p) * p));
  x.device->unpatchify_clamped(x.f32_data(), x.h, x.w, x.c, p, y.f32_data());
  return y;
}

Frame channel_slice(const Frame& x, int64_t c0, int64_t c) {
  Frame y = device_frame(*x.device, x.h, x.w, c);
  x.device->channel_slice(x.f32_data(), x.positions(), x.c, c0, c, y.f32_data());
  return y;
}

Frame patchify(const Frame& pixels, int p) {
  Frame y = device_frame(*pixels.device, pixels.h / p, pixels.w / p, pixels.c * p * p);
  pixels.device->patchify(pixels.f32_data(), pixels.h, pixels.w, pixels.c, p, y.f32_data());
  return y;
}

Frame average_down(const std::vector<const Frame*>& frames, int64_t c_out, int fs) {
  const Frame* any = nullptr;
  std::vector<const float*> data;
  for (const Frame* f : frames) {
    any = f ? f : any;
    data.push_back(f ? f->f32_data() : nullptr);
  }
  Frame y = device_frame(*any->device, any->h / fs, any->w / fs, c_out);
  any->device->average_down(data.data(), int(data.size()), any->h, any->w, any->c, c_out, fs, y.f32_data());
  return y;
}

}  // namespace on_device
}  // namespace stepmix::vae
