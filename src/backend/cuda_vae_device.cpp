// The VAE device of the CUDA build (backend/vae_device.hpp): device memory,
// one non-blocking stream of its own (host copies wait for it), a cuBLASLt
// runner, and the kernels of src/kernels/cuda/vae.cu.
//
// A convolution is an implicit GEMM in row chunks: the taps of up to
// kVaeDeviceChunkBytes of output rows gathered as bf16 [rows][taps·c_in]
// (a 1×1×1 convolution reads its input frame directly), times the weights
// [c_out][taps·c_in] bf16 into the float32 output, then bias and residual.
// Weights are unpacked from the CPU's packed form (the same bf16 values) on
// first use and kept while their ConvWeights lives (a weak reference
// tells a new layer at a recycled address from the old one). Frame memory is
// pooled by size (FramePool) until a decode ends. The attention
// runs in blocks of query rows whose scores fit the same chunk size.
#include <algorithm>
#include <cmath>
#include <map>

#include "backend/cuda_buffers.hpp"
#include "backend/vae_device.hpp"
#include "core/numerics.hpp"
#include "kernels/cuda/cuda_device.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "stepmix/error.hpp"

namespace stepmix {
namespace {

using kernels::FrameElement;

// Frame memory, reused: cudaFree waits for the whole device, and a decode
// frees hundreds of frames per latent frame, mostly of the sizes the next
// latent frame asks for again. A frame's buffer goes back to the pool when
// the frame is gone; work still queued on the one stream that reads it runs
// before anything queued later writes it.
class FramePool {
 public:
  cuda::DeviceBuffer take(std::size_t bytes) {
    const auto found = free_.find(bytes);
    if (found != free_.end()) {
      cuda::DeviceBuffer buffer = std::move(found->second);
      free_.erase(found);
      pooled_ -= bytes;
      return buffer;
    }
    try {
      return cuda::DeviceBuffer(bytes);
    } catch (const Error&) {
      release();  // the pool's buffers of other sizes first, then once more
      return cuda::DeviceBuffer(bytes);
    }
  }
  void give_back(cuda::DeviceBuffer&& buffer) {
    if (!buffer.data()) return;
    pooled_ += buffer.bytes();
    free_.emplace(buffer.bytes(), std::move(buffer));
  }
  void release() {
    free_.clear();
    pooled_ = 0;
  }
  std::size_t pooled_bytes() const { return pooled_; }

 private:
  std::multimap<std::size_t, cuda::DeviceBuffer> free_;
  std::size_t pooled_ = 0;
};

class VaeDeviceMemory final : public BackendBuffer {
 public:
  VaeDeviceMemory(FramePool& pool, std::size_t bytes) : pool_(pool), buffer_(pool.take(bytes)) {}
  ~VaeDeviceMemory() override {
    try {
      pool_.give_back(std::move(buffer_));
    } catch (...) {  // the pool could not grow its index: the buffer is freed instead
    }
  }
  void* data() const override { return buffer_.data(); }
  std::size_t bytes() const override { return buffer_.bytes(); }

 private:
  FramePool& pool_;  // the device's, which is never destroyed
  cuda::DeviceBuffer buffer_;
};

using cuda_buffers::grown;
using cuda_buffers::uploaded;

[[noreturn]] void fail_on_device(const std::string& what) { throw Error("vae", "device: " + what); }


struct WeightsOnDevice {
  std::weak_ptr<const kernels::ConvWeights> source;
  cuda::DeviceBuffer weight;  // [c_out][taps·c_in] bf16
  cuda::DeviceBuffer bias;    // [c_out] float32
};


class CudaVaeDevice final : public VaeDevice {
  // (Before its first use: its return type is deduced.)
  // The fit checks count pooled frames as free, so an allocation that fails
  // while the pool holds some is tried once more after the pool is emptied.
  template <class Allocate>
  auto with_pool_released(Allocate&& allocate) {
    try {
      return allocate();
    } catch (const Error&) {
      if (pool_.pooled_bytes() == 0) throw;
      pool_.release();
      return allocate();
    }
  }

 public:
  CudaVaeDevice() = default;

  std::unique_ptr<BackendBuffer> allocate(std::size_t bytes) override {
    return std::make_unique<VaeDeviceMemory>(pool_, bytes);
  }
  void upload(void* dst, const void* host, std::size_t bytes) override {
    cuda::copy_to_device(dst, host, bytes, stream());
  }
  void download(void* host, const void* src, std::size_t bytes) override {
    cuda::copy_to_host(host, src, bytes, stream());
  }
  std::size_t memory_free() const override { return cuda::device_memory().free_bytes + pool_.pooled_bytes(); }
  void release_cached() override {
    pool_.release();
    taps_ = cuda::DeviceBuffer();
    scores_ = cuda::DeviceBuffer();
    qkv_split_ = cuda::DeviceBuffer();
    gammas_ = {};  // keyed by host address: each decode's copy of the model has new ones
    std::erase_if(weights_, [](const auto& entry) { return entry.second.source.expired(); });
  }
  std::size_t scratch_bytes() const override {
    std::size_t total = taps_.bytes() + scores_.bytes() + qkv_split_.bytes();
    for (const auto& [key, w] : weights_) total += w.weight.bytes() + w.bias.bytes();
    return total;
  }

  void conv3d(const std::shared_ptr<const kernels::ConvWeights>& weights, const kernels::Conv3dArgs& args) override;
  void channel_rms_norm(const kernels::ChannelNormArgs& a) override {
    const float* gamma =
        with_pool_released([&] { return gammas_.get(a.gamma, std::size_t(a.channels), stream()); });
    cuda::channel_rms_norm(a.x, a.positions, a.channels, gamma, a.scale, a.silu, a.y_type == FrameElement::BF16, a.y,
                           stream());
  }
  void round_to_bf16(const float* x, int64_t count, uint16_t* y) override { cuda::round_to_bf16(x, count, y, stream()); }
  void widen_bf16(const uint16_t* x, int64_t count, float* y) override { cuda::widen_bf16(x, count, y, stream()); }
  void add(float* x, const float* y, int64_t count) override {
    if (count > 0) cuda::add_row_f32(x, 1, count, y, stream());  // one row of `count`: x += y, bit-exact
  }
  void upsample_nearest2(const float* x, int64_t h, int64_t w, int64_t c, FrameElement out, void* y) override {
    cuda::upsample_nearest2(x, h, w, c, out == FrameElement::BF16, y, stream());
  }
  void duplicate_up(const float* x, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int ft, int fs, int dt,
                    float* y) override {
    cuda::duplicate_up(x, h, w, c_in, c_out, ft, fs, dt, y, stream());
  }
  void unpatchify_clamped(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y) override {
    cuda::unpatchify_clamped(x, h, w, c, p, y, stream());
  }
  void channel_slice(const float* x, int64_t positions, int64_t channels, int64_t c0, int64_t c, float* y) override {
    cuda::channel_slice(x, positions, channels, c0, c, y, stream());
  }
  void patchify(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y) override {
    cuda::patchify_pixels(x, h, w, c, p, y, stream());
  }
  void average_down(const float* const* frames, int ft, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int fs,
                    float* y) override {
    if (ft > cuda::ConvFloatFrames::kMaxFrames) fail_on_device("average_down takes at most 4 frames");
    cuda::ConvFloatFrames f;
    for (int t = 0; t < ft; ++t) f.frame[t] = frames[t];
    cuda::average_down(f, ft, h, w, c_in, c_out, fs, y, stream());
  }
  void attention(const float* qkv, int64_t positions, int64_t channels, float* out) override;
  void limit_chunk_bytes(std::size_t bytes) override {
    chunk_bytes_ = std::clamp<std::size_t>(bytes, 1, kVaeDeviceChunkBytes);
  }

 private:
  cuda::StreamHandle stream() const { return stream_.get(); }
  const WeightsOnDevice& on_device(const std::shared_ptr<const kernels::ConvWeights>& weights);

  cuda::Stream stream_;
  cuda::GemmRunner runner_;
  FramePool pool_;
  cuda::DeviceBuffer taps_, scores_, qkv_split_;
  std::size_t chunk_bytes_ = kVaeDeviceChunkBytes;
  std::map<const kernels::ConvWeights*, WeightsOnDevice> weights_;
  cuda_buffers::ResidentConstants gammas_;
};

const WeightsOnDevice& CudaVaeDevice::on_device(const std::shared_ptr<const kernels::ConvWeights>& weights) {
  const auto found = weights_.find(weights.get());
  if (found != weights_.end() && found->second.source.lock() == weights) return found->second;
  // A new layer: copies of layers that are gone are freed first.
  std::erase_if(weights_, [](const auto& entry) { return entry.second.source.expired(); });
  WeightsOnDevice& d = weights_[weights.get()];
  const kernels::ConvWeights& w = *weights;
  if (w.arithmetic != kernels::GemmArithmetic::BF16) fail_on_device("convolutions on the GPU run BF16 arithmetic only");
  const int taps = w.taps();
  std::vector<uint16_t> host(std::size_t(w.c_out * taps * w.c_in));
  for (int64_t o = 0; o < w.c_out; ++o)
    for (int a = 0; a < w.kt; ++a)
      for (int b = 0; b < w.kh; ++b)
        for (int c = 0; c < w.kw; ++c) {
          const int tap = (a * w.kh + b) * w.kw + c;
          for (int64_t i = 0; i < w.c_in; ++i)  // the packed value is a bf16: exact both ways
            host[std::size_t((o * taps + tap) * w.c_in + i)] =
                float_to_bf16_rne(kernels::packed_conv_weight(w, o, i, a, b, c));
        }
  d.weight = with_pool_released([&] { return uploaded(host.data(), host.size() * sizeof(uint16_t), stream()); });
  d.bias = with_pool_released([&] { return uploaded(w.bias.data(), w.bias.size() * sizeof(float), stream()); });
  d.source = weights;
  return d;
}

void CudaVaeDevice::conv3d(const std::shared_ptr<const kernels::ConvWeights>& weights, const kernels::Conv3dArgs& a) {
  kernels::validate_conv3d(a);
  const kernels::ConvWeights& w = *weights;
  if (a.weights != weights.get()) fail_on_device("internal: conv3d arguments name other weights");
  if (a.frames_out != 1 || a.stride_t != 1 || a.y_type != FrameElement::F32 || a.stride_h != a.stride_w)
    fail_on_device("conv3d on the GPU takes one float32 output frame, time stride 1 and one spatial stride");
  if (w.kt > cuda::ConvFrames::kMaxFrames) fail_on_device("conv3d on the GPU takes at most 4 time taps");
  const WeightsOnDevice& d = on_device(weights);
  const int64_t rows = a.h_out * a.w_out, N = w.c_out, K = int64_t(w.taps()) * w.c_in;
  float* y = static_cast<float*>(a.y_frames[0]);
  const float* residual = a.residual_frames ? a.residual_frames[0] : nullptr;
  // The GEMM writes y before the epilogue reads the residual.
  if (residual && residual == y) fail_on_device("conv3d on the GPU takes no residual aliasing its output");
  const bool direct = w.taps() == 1 && a.stride_h == 1 && a.pad_top == 0 && a.pad_left == 0 && a.h_in == a.h_out &&
                      a.w_in == a.w_out && a.x_frames[0];
  if (direct) {  // a 1×1×1 convolution: the input frame is the GEMM's rows
    cuda::gemm_bf16_to_f32(runner_, static_cast<const uint16_t*>(a.x_frames[0]), d.weight.as<uint16_t>(), rows, N, K,
                           y, stream());
  } else {
    // The frames missing at the start of a clip (null, the oldest) add
    // nothing: as on the host, their taps are left out of the product, which
    // then takes the last K' columns of the weights (rows still K apart).
    // A single-frame clip's causal 3×3×3 convolutions do a third of the work.
    int missing = 0;
    while (missing < w.kt - 1 && !a.x_frames[missing]) ++missing;
    for (int t = missing; t < w.kt; ++t)
      if (!a.x_frames[t]) missing = 0;  // a gap after a frame: gather every tap (zeros)
    const int kt = w.kt - missing;
    const int64_t K_used = int64_t(kt) * w.kh * w.kw * w.c_in;
    cuda::ConvFrames frames;
    for (int t = 0; t < kt; ++t) frames.frame[t] = static_cast<const uint16_t*>(a.x_frames[missing + t]);
    const cuda::ConvGeometry g{kt,      w.kh,       w.kw,      w.c_in,    a.h_in, a.w_in,
                               a.w_out, a.stride_h, a.pad_top, a.pad_left};
    const uint16_t* weight = d.weight.as<uint16_t>() + (K - K_used);
    // Chunks of whole 16-row multiples keep every chunk's rows 16-byte aligned.
    const int64_t fit = int64_t(chunk_bytes_ / (std::size_t(K_used) * sizeof(uint16_t)));
    const int64_t chunk = std::min(rows, std::max<int64_t>(16, fit / 16 * 16));
    uint16_t* gathered = with_pool_released([&] { return grown<uint16_t>(taps_, chunk * K_used); });
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t n = std::min(chunk, rows - r0);
      cuda::conv_gather_taps_bf16(frames, g, r0, n, gathered, stream());
      cuda::gemm_bf16_to_f32(runner_, gathered, weight, n, N, K_used, y + r0 * N, stream(), K);
    }
  }
  cuda::conv_epilogue_f32(y, d.bias.as<float>(), residual, rows, N, stream());
}

void CudaVaeDevice::attention(const float* qkv, int64_t P, int64_t C, float* out) {
  if (P < 1 || C < 1) fail_on_device("attention needs positive sizes");
  float* split = with_pool_released([&] { return grown<float>(qkv_split_, 3 * P * C); });
  float *q = split, *k = split + P * C, *vt = split + 2 * P * C;
  cuda::split_qkv(qkv, P, C, q, k, vt, stream());
  const int64_t fit = int64_t(chunk_bytes_ / (std::size_t(P) * sizeof(float)));
  const int64_t block = std::min(P, std::max<int64_t>(16, fit / 16 * 16));
  float* scores = with_pool_released([&] { return grown<float>(scores_, block * P); });
  const float scale = float(1.0 / std::sqrt(double(C)));  // as vae/layers.cpp
  for (int64_t q0 = 0; q0 < P; q0 += block) {
    const int64_t rows = std::min(block, P - q0);
    cuda::gemm_f32(runner_, q + q0 * C, k, rows, P, C, scale, scores, stream());
    cuda::softmax_rows(scores, rows, P, stream());
    cuda::gemm_f32(runner_, scores, vt, rows, C, P, 1.0f, out + q0 * C, stream());
  }
}

}  // namespace

// Made once and never destroyed, as cuda_backend(): its stream and cuBLASLt
// handle would otherwise be torn down after the CUDA runtime at exit.
VaeDevice& cuda_vae_device() {
  static const cuda::DeviceInfo info = cuda::probe_device(0);
  if (!info.usable) throw Error("cuda", "--device cuda: " + info.reason);
  static CudaVaeDevice* device = new CudaVaeDevice();
  return *device;
}

}  // namespace stepmix
