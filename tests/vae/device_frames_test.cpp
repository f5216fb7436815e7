// The decoder and the encoder on a VAE device (vae/device_frames.hpp,
// RunOptions::device), run here through a device whose memory is host memory
// and whose operations are the CPU's own (HostVaeDevice below): every frame
// between the input upload and the output download lives "on the device",
// so the runs exercise each layer's device branch, the frames' device
// memory, the histories and the tap's host copies, and must give the host
// runs' bits (the CUDA device's arithmetic is tested against the CPU in
// tests/cuda).
#include "vae/device_frames.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "backend/vae_device.hpp"
#include "core/numerics.hpp"
#include "kernels/kernel_set.hpp"
#include "vae_test_util.hpp"

namespace stepmix::test {
namespace {

using kernels::FrameElement;

class HostMemory final : public BackendBuffer {
 public:
  explicit HostMemory(std::size_t bytes) : bytes_(bytes), data_(new float[(bytes + 3) / 4 + 1]) {}
  void* data() const override { return data_.get(); }
  std::size_t bytes() const override { return bytes_; }

 private:
  std::size_t bytes_;
  std::unique_ptr<float[]> data_;
};

// A host frame holding `count` values of `type` at `data` (copied).
vae::Frame host_frame(const void* data, int64_t h, int64_t w, int64_t c, FrameElement type = FrameElement::F32) {
  vae::Frame f = vae::Frame::zeros(h, w, c, type);
  std::memcpy(f.data(), data, f.bytes());
  return f;
}

class HostVaeDevice final : public VaeDevice {
 public:
  std::map<std::string, int> calls;

  std::unique_ptr<BackendBuffer> allocate(std::size_t bytes) override {
    ++calls["allocate"];
    return std::make_unique<HostMemory>(bytes);
  }
  void upload(void* dst, const void* host, std::size_t bytes) override {
    ++calls["upload"];
    std::memcpy(dst, host, bytes);
  }
  void download(void* host, const void* src, std::size_t bytes) override {
    ++calls["download"];
    std::memcpy(host, src, bytes);
  }
  std::size_t memory_free() const override { return std::size_t(1) << 40; }
  std::size_t scratch_bytes() const override { return 0; }

  void conv3d(const std::shared_ptr<const kernels::ConvWeights>& weights, const kernels::Conv3dArgs& args) override {
    ++calls["conv3d"];
    EXPECT_EQ(args.weights, weights.get());
    EXPECT_EQ(args.x_type, FrameElement::BF16);
    EXPECT_EQ(args.y_type, FrameElement::F32);
    EXPECT_EQ(args.frames_out, 1);
    kernels::active_convolution().conv3d(args);
  }
  void channel_rms_norm(const kernels::ChannelNormArgs& args) override {
    ++calls["channel_rms_norm"];
    kernels::active_convolution().channel_rms_norm(args);
  }
  void round_to_bf16(const float* x, int64_t count, uint16_t* y) override {
    ++calls["round_to_bf16"];
    for (int64_t i = 0; i < count; ++i) y[i] = float_to_bf16_rne(x[i]);
  }
  void widen_bf16(const uint16_t* x, int64_t count, float* y) override {
    ++calls["widen_bf16"];
    for (int64_t i = 0; i < count; ++i) y[i] = bf16_to_float(x[i]);
  }
  void add(float* x, const float* y, int64_t count) override {
    ++calls["add"];
    for (int64_t i = 0; i < count; ++i) x[i] += y[i];
  }
  void upsample_nearest2(const float* x, int64_t h, int64_t w, int64_t c, FrameElement out, void* y) override {
    ++calls["upsample_nearest2"];
    const vae::Frame r = vae::upsample_nearest2(host_frame(x, h, w, c), out);
    std::memcpy(y, r.data(), r.bytes());
  }
  void duplicate_up(const float* x, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int ft, int fs, int dt,
                    float* y) override {
    ++calls["duplicate_up"];
    const vae::Frame r = vae::duplicate_up(host_frame(x, h, w, c_in), c_out, ft, fs, dt);
    std::memcpy(y, r.data(), r.bytes());
  }
  void unpatchify_clamped(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y) override {
    ++calls["unpatchify_clamped"];
    const vae::Frame r = vae::unpatchify_clamped(host_frame(x, h, w, c), p);
    std::memcpy(y, r.data(), r.bytes());
  }
  void channel_slice(const float* x, int64_t positions, int64_t channels, int64_t c0, int64_t c, float* y) override {
    ++calls["channel_slice"];
    for (int64_t p = 0; p < positions; ++p) std::memcpy(y + p * c, x + p * channels + c0, std::size_t(c) * 4);
  }
  void patchify(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y) override {
    ++calls["patchify"];
    const vae::Frame r = vae::patchify(host_frame(x, h, w, c), p);
    std::memcpy(y, r.data(), r.bytes());
  }
  void average_down(const float* const* frames, int ft, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int fs,
                    float* y) override {
    ++calls["average_down"];
    std::vector<vae::Frame> held;
    std::vector<const vae::Frame*> inputs;
    held.reserve(std::size_t(ft));
    for (int t = 0; t < ft; ++t) {
      if (frames[t]) held.push_back(host_frame(frames[t], h, w, c_in));
      inputs.push_back(frames[t] ? &held.back() : nullptr);
    }
    const vae::Frame r = vae::average_down(inputs, c_out, fs);
    std::memcpy(y, r.data(), r.bytes());
  }
  void attention(const float* qkv, int64_t positions, int64_t channels, float* out) override {
    ++calls["attention"];
    const vae::Frame r = vae::single_head_attention(host_frame(qkv, 1, positions, 3 * channels));
    std::memcpy(out, r.data(), r.bytes());
  }
};

vae::WanVae bf16_vae() {
  vae::VaeOptions options;
  options.arithmetic = kernels::GemmArithmetic::BF16;
  return vae::WanVae::load(vae_golden("vae"), options);
}

// The tap's frames of two runs: the same modules, the same frames, on the host.
void expect_same_taps(const TapRecorder& on_device, const TapRecorder& on_host) {
  ASSERT_EQ(on_device.frames.size(), on_host.frames.size());
  for (const auto& [module, frames] : on_host.frames) {
    const auto& seen = on_device.frames.at(module);
    ASSERT_EQ(seen.size(), frames.size()) << module;
    for (std::size_t t = 0; t < frames.size(); ++t) {
      EXPECT_FALSE(seen[t].on_device()) << module;
      EXPECT_EQ(seen[t].f32, frames[t].f32) << module << " frame " << t;
    }
  }
}

// A host run and a device run of the same request, each with a tap.
struct PairedRuns {
  HostVaeDevice device;
  TapRecorder on_host, on_device;
  vae::FrameTap host_tap = on_host.tap(), device_tap = on_device.tap();
  vae::RunOptions host_run, device_run;
  PairedRuns() {
    host_run.tap = &host_tap;
    device_run.tap = &device_tap;
    device_run.device = &device;
  }
  PairedRuns(const PairedRuns&) = delete;
};

int count(const std::map<std::string, int>& calls, const std::string& op) {
  const auto found = calls.find(op);
  return found == calls.end() ? 0 : found->second;
}

TEST(VaeDeviceFrames, DecodeOnADeviceGivesTheHostDecodesBits) {
  const vae::WanVae model = bf16_vae();
  for (const std::string name : {"image", "video"}) {
    SCOPED_TRACE(name);
    const auto file = SafetensorsFile::open(vae_golden("decode/" + name + ".safetensors"));
    const TensorView& latent = file->get("latent");
    PairedRuns runs;
    const std::vector<float> want = model.decode_to_tensor(latent.as<float>(), latent.shape, runs.host_run);
    const std::vector<float> got = model.decode_to_tensor(latent.as<float>(), latent.shape, runs.device_run);
    EXPECT_EQ(got, want);
    // The tap saw host copies of the same frames, module by module.
    expect_same_taps(runs.on_device, runs.on_host);
    const auto& calls = runs.device.calls;
    // Everything between the latent frames' uploads and the pixel frames'
    // downloads ran on the device.
    const int64_t T = latent.shape[2];
    EXPECT_EQ(count(calls, "upload"), T);
    EXPECT_EQ(count(calls, "attention"), T);
    EXPECT_EQ(count(calls, "unpatchify_clamped"), int64_t(want.size() / 3) / (latent.shape[3] * latent.shape[4] * 256));
    for (const char* op : {"conv3d", "channel_rms_norm", "round_to_bf16", "upsample_nearest2", "duplicate_up"})
      EXPECT_GT(count(calls, op), 0) << op;
    if (T > 1) EXPECT_GT(count(calls, "channel_slice"), 0);
  }
}

TEST(VaeDeviceFrames, EncodeOnADeviceGivesTheHostEncodesBits) {
  const vae::WanVae model = bf16_vae();
  for (const std::string name : {"image", "video"}) {
    SCOPED_TRACE(name);
    const auto file = SafetensorsFile::open(vae_golden("encode/" + name + ".safetensors"));
    const TensorView& pixels = file->get("pixels");
    PairedRuns runs;
    const vae::EncodeResult want = model.encode(pixels.as<float>(), pixels.shape, runs.host_run);
    const vae::EncodeResult got = model.encode(pixels.as<float>(), pixels.shape, runs.device_run);
    EXPECT_EQ(got.shape, want.shape);
    EXPECT_EQ(got.mu, want.mu);
    EXPECT_EQ(got.latent, want.latent);
    expect_same_taps(runs.on_device, runs.on_host);
    const auto& calls = runs.device.calls;
    EXPECT_EQ(count(calls, "upload"), pixels.shape[2]);
    EXPECT_EQ(count(calls, "patchify"), pixels.shape[2]);
    for (const char* op : {"conv3d", "channel_rms_norm", "average_down", "attention"})
      EXPECT_GT(count(calls, op), 0) << op;
  }
}

TEST(VaeDeviceFrames, FramesMoveBetweenHostAndDeviceUnchanged) {
  HostVaeDevice device;
  vae::Frame x = vae::Frame::zeros(3, 4, 5);
  for (std::size_t i = 0; i < x.f32.size(); ++i) x.f32[i] = float(i) * 0.25f - 2.0f;
  const vae::Frame on_device = vae::upload_frame(device, x);
  EXPECT_TRUE(on_device.on_device());
  EXPECT_TRUE(on_device.f32.empty());
  EXPECT_EQ(on_device.bytes(), x.bytes());
  const vae::Frame back = vae::download_frame(on_device);
  EXPECT_FALSE(back.on_device());
  EXPECT_EQ(back.f32, x.f32);
  // A copy shares the device memory (copies only read it).
  const vae::Frame copy = on_device;
  EXPECT_EQ(copy.data(), on_device.data());
  // Outputs are made where the input lives.
  EXPECT_TRUE(vae::frame_like(on_device, 2, 2, 2).on_device());
  EXPECT_FALSE(vae::frame_like(x, 2, 2, 2).on_device());
  EXPECT_THROW(vae::upload_frame(device, on_device), Error);
}

TEST(VaeDeviceFrames, FloatArithmeticIsRefusedOnADevice) {
  const auto file = SafetensorsFile::open(vae_golden("decode/image.safetensors"));
  const TensorView& latent = file->get("latent");
  HostVaeDevice device;
  vae::RunOptions run;
  run.device = &device;
  try {
    golden_vae().decode_to_tensor(latent.as<float>(), latent.shape, run);
    FAIL() << "decoded with float32 arithmetic on a device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("decoding on the GPU runs BF16 arithmetic"), std::string::npos) << e.what();
  }
  const auto enc = SafetensorsFile::open(vae_golden("encode/image.safetensors"));
  const TensorView& pixels = enc->get("pixels");
  try {
    golden_vae().encode(pixels.as<float>(), pixels.shape, run);
    FAIL() << "encoded with float32 arithmetic on a device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("encoding on the GPU runs BF16 arithmetic"), std::string::npos) << e.what();
  }
  EXPECT_EQ(device.calls["upload"], 0);
}

}  // namespace
}  // namespace stepmix::test
