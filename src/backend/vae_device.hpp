// The video VAE's operations on frames in a GPU's memory: with --device cuda
// the decoder and the encoder run through them (vae/device_frames.hpp), so a
// generated latent becomes pixels where it was sampled. Frames are channels-last
// [h][w][c] as on the CPU (vae/frame.hpp) and every operation has the CPU
// code's semantics: the convolution and the channel norm those of
// kernels/conv_kernels.hpp and kernels/channel_norm_kernels.hpp (BF16
// arithmetic: bf16 inputs and weights, float32 sums, float32 output), the
// index maps and the attention those of vae/layers.hpp. The index maps are
// bit-exact; the sums differ from the CPU's only in their order.
//
//   CUDA  cuda_vae_device.cpp (built with STEPMIX_CUDA), one stream, weights
//         copied to the device on first use; cuda_stub.cpp otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.hpp"
#include "kernels/channel_norm_kernels.hpp"
#include "kernels/conv_kernels.hpp"

namespace stepmix {

// The scratch a device operation takes beyond its frames is bounded: the
// gathered rows of a convolution and the score rows of the attention come
// in chunks of at most this many bytes.
inline constexpr std::size_t kVaeDeviceChunkBytes = std::size_t(256) << 20;

class VaeDevice {
 public:
  virtual ~VaeDevice() = default;

  // ---- memory
  virtual std::unique_ptr<BackendBuffer> allocate(std::size_t bytes) = 0;
  virtual void upload(void* dst, const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, const void* src, std::size_t bytes) = 0;
  // Free for new frames: the device's free memory and what it keeps for
  // reuse; release_cached() gives back what it keeps (the end of a decode
  // or an encode): pooled frames, scratch, the weight copies of layers that
  // are gone.
  virtual std::size_t memory_free() const = 0;
  virtual void release_cached() {}
  // What the operations hold beyond frames: the scratch of the largest
  // convolution and attention seen so far, the weights copied so far.
  virtual std::size_t scratch_bytes() const = 0;

  // ---- operations (pointers into device memory unless said otherwise)
  // args: BF16 arithmetic, bf16 x_frames (null = zeros), one float32 output
  // frame, stride_t 1, no residual aliasing the output. `weights` (host) is
  // copied to the device on first use and the copy is kept while the
  // weights live.
  virtual void conv3d(const std::shared_ptr<const kernels::ConvWeights>& weights, const kernels::Conv3dArgs& args) = 0;
  // args.x, args.y device; args.gamma host (copied once per vector).
  virtual void channel_rms_norm(const kernels::ChannelNormArgs& args) = 0;
  virtual void round_to_bf16(const float* x, int64_t count, uint16_t* y) = 0;
  virtual void widen_bf16(const uint16_t* x, int64_t count, float* y) = 0;
  // x[i] += y[i], float32.
  virtual void add(float* x, const float* y, int64_t count) = 0;
  // vae/layers.hpp upsample_nearest2, duplicate_up, unpatchify_clamped; the
  // decoder's channel slice y[p][:] = x[p][c0 .. c0 + c).
  virtual void upsample_nearest2(const float* x, int64_t h, int64_t w, int64_t c, kernels::FrameElement out,
                                 void* y) = 0;
  virtual void duplicate_up(const float* x, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int ft, int fs, int dt,
                            float* y) = 0;
  virtual void unpatchify_clamped(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y) = 0;
  virtual void channel_slice(const float* x, int64_t positions, int64_t channels, int64_t c0, int64_t c,
                             float* y) = 0;
  // The encoder's: vae/layers.hpp patchify of pixels [h][w][c], and
  // average_down of frames[0 .. ft) [h][w][c_in] (null = zeros), bit-exact.
  virtual void patchify(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y) = 0;
  virtual void average_down(const float* const* frames, int ft, int64_t h, int64_t w, int64_t c_in, int64_t c_out,
                            int fs, float* y) = 0;
  // The mid block's single-head attention without its projections:
  // out [P][C] = softmax(q·kᵀ / sqrt(C))·v for qkv [P][3C] = [q | k | v].
  virtual void attention(const float* qkv, int64_t positions, int64_t channels, float* out) = 0;
  // Tests: chunks of at most `bytes` (never fewer than 16 rows), so that
  // small problems run the chunked paths; kVaeDeviceChunkBytes restores them.
  virtual void limit_chunk_bytes(std::size_t bytes) {}
};

// The VAE device of `device`: the GPU's for Device::Cuda (throws
// stepmix::Error naming what is missing, as backend_for does); the CPU has
// none (an internal error).
VaeDevice& vae_device_for(Device device);
// Set by the CUDA build (cuda_vae_device.cpp) or the stub (cuda_stub.cpp).
VaeDevice& cuda_vae_device();

}  // namespace stepmix
