// Frames on a VAE device (backend/vae_device.hpp): making them, moving them
// between host and device memory, and the operations of vae/layers.hpp whose
// host code is a loop over the frame (layers.cpp calls these when its input
// frame is on a device; convolutions and norms go to the device directly).
// Every output is a new device frame on the input's device.
#pragma once

#include <cstdint>
#include <vector>

#include "vae/frame.hpp"

namespace stepmix::vae {

// A frame of `type` on `device`, uninitialised: every operation writes all
// of its output.
Frame device_frame(VaeDevice& device, int64_t h, int64_t w, int64_t c, FrameElement type = FrameElement::F32);
// The frame `like` makes its outputs in: on its device, or zeros in host memory.
Frame frame_like(const Frame& like, int64_t h, int64_t w, int64_t c, FrameElement type = FrameElement::F32);
Frame upload_frame(VaeDevice& device, const Frame& host);
// A host copy of a device frame (a host frame is returned as it is).
Frame download_frame(const Frame& frame);

namespace on_device {
Frame convert(const Frame& x, FrameElement type);
void add_in_place(Frame& x, const Frame& y);
// qkv [h][w][3C] -> softmax(q·kᵀ/sqrt(C))·v [h][w][C].
Frame attention(const Frame& qkv);
Frame upsample_nearest2(const Frame& x, FrameElement out);
Frame duplicate_up(const Frame& x, int64_t c_out, int ft, int fs, int dt);
Frame unpatchify_clamped(const Frame& x, int p);
Frame channel_slice(const Frame& x, int64_t c0, int64_t c);
Frame patchify(const Frame& pixels, int p);
// frames: ft entries, null = zeros, at least one not null.
Frame average_down(const std::vector<const Frame*>& frames, int64_t c_out, int fs);
}  // namespace on_device

}  // namespace stepmix::vae
