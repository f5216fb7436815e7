// Decode and encode requests: shapes and values that are refused, frame
// streaming and progress, cancellation, the memory estimate, and the bf16
// activation option against the float32 goldens.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error_of.hpp"
#include "io/safetensors.hpp"
#include "kernels/kernel_set.hpp"
#include "vae/vae.hpp"
#include "vae_test_util.hpp"

namespace stepmix::test {
namespace {

std::vector<float> golden_latent(const std::string& file_case, std::vector<int64_t>& shape) {
  const auto file = SafetensorsFile::open(vae_golden("decode/" + file_case + ".safetensors"));
  const TensorView& latent = file->get("latent");
  shape = latent.shape;
  return std::vector<float>(latent.as<float>(), latent.as<float>() + latent.numel());
}

TEST(VaeDecode, RefusesLatentsOfTheWrongShape) {
  const std::vector<float> data(48 * 2 * 3 * 5, 0.1f);
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
           {48, 2, 3, 5}, {1, 47, 2, 3, 5}, {2, 48, 1, 3, 5}, {1, 48, 0, 3, 5}}) {
    const std::string m = error_of([&] { golden_vae().decode_to_tensor(data.data(), shape); });
    EXPECT_NE(m.find("latent: expected shape [1, 48, T, h, w], got " + shape_to_string(shape)), std::string::npos) << m;
  }
}

TEST(VaeDecode, RefusesNonFiniteLatents) {
  std::vector<int64_t> shape;
  std::vector<float> latent = golden_latent("image", shape);
  latent[100] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(error_of([&] { golden_vae().decode_to_tensor(latent.data(), shape); })
                .find("latent [1, 48, 1, 3, 5]: element 100 is NaN; expected finite values"),
            std::string::npos);
  latent[100] = std::numeric_limits<float>::infinity();
  EXPECT_NE(error_of([&] { golden_vae().decode_to_tensor(latent.data(), shape); }).find("element 100 is infinite"),
            std::string::npos);
}

TEST(VaeDecode, StreamsFramesInOrderAndReportsProgressPerLatentFrame) {
  std::vector<int64_t> shape;
  const std::vector<float> latent = golden_latent("video", shape);  // T = 3
  std::vector<int64_t> frames;
  std::vector<std::pair<int64_t, int64_t>> progress;
  vae::RunOptions options;
  options.progress = [&](int64_t done, int64_t total) { progress.emplace_back(done, total); };
  golden_vae().decode(latent.data(), shape, [&](int64_t t, const vae::Frame& rgb) {
    EXPECT_EQ(rgb.h, 64);
    EXPECT_EQ(rgb.w, 96);
    EXPECT_EQ(rgb.c, 3);
    // Latent frame k > 0 completes four pixel frames: progress trails them.
    EXPECT_EQ(int64_t(progress.size()), t == 0 ? 0 : (t - 1) / 4 + 1);
    frames.push_back(t);
  }, options);
  EXPECT_EQ(frames, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(progress, (std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {2, 3}, {3, 3}}));
}

TEST(VaeDecode, CancellationStopsBeforeTheNextLatentFrame) {
  std::vector<int64_t> shape;
  const std::vector<float> latent = golden_latent("video", shape);
  std::atomic<bool> cancel{false};
  vae::RunOptions options;
  options.cancel = &cancel;
  options.progress = [&](int64_t done, int64_t) { cancel = done == 1; };
  int frames = 0;
  const std::string m =
      error_of([&] { golden_vae().decode(latent.data(), shape, [&](int64_t, const vae::Frame&) { ++frames; }, options); });
  EXPECT_NE(m.find("decode cancelled after latent frame 1 of 3; nothing was written"), std::string::npos) << m;
  EXPECT_EQ(frames, 1);
}

// The golden VAE rebuilt with another temporal factor: `flags` replace
// temperal_downsample, and the time convolutions the new flags drop are left
// out of the weights.
vae::WanVae golden_vae_with_temporal_flags(const std::string& folder, const nlohmann::json& flags, int factor,
                                           const std::vector<std::string>& dropped) {
  std::filesystem::create_directories(folder);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(vae_golden("vae/config.json")));
  config["temperal_downsample"] = flags;
  config["scale_factor_temporal"] = factor;
  std::ofstream(folder + "/config.json") << config.dump();
  const auto weights = SafetensorsFile::open(vae_golden("vae/diffusion_pytorch_model.safetensors"));
  std::vector<TensorToWrite> kept;
  for (const auto& [name, t] : weights->tensors()) {
    if (std::any_of(dropped.begin(), dropped.end(), [&](const std::string& d) { return name.rfind(d, 0) == 0; }))
      continue;
    kept.push_back(make_tensor_raw(name, t.dtype, t.shape, t.data, t.nbytes));
  }
  vae::VaeOptions o;
  o.decoder = false;
  // Time convolutions the new flags add are filled with zeros: the loader
  // names each missing tensor with its shape.
  for (int added = 0;; ++added) {
    write_safetensors(folder + "/diffusion_pytorch_model.safetensors", kept);
    const std::string m = error_of([&] { vae::WanVae::load(folder, o); });
    const std::size_t at = m.find("missing tensor '");
    if (m.empty() || at == std::string::npos || added == 8) return vae::WanVae::load(folder, o);
    const std::size_t name_end = m.find('\'', at + 16), shape_at = m.find("expected shape [", name_end);
    std::vector<int64_t> shape;
    std::istringstream dims(m.substr(shape_at + 16, m.find(']', shape_at) - shape_at - 16));
    for (std::string d; std::getline(dims, d, ',');) shape.push_back(std::stoll(d));
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    kept.push_back(make_tensor_f32(m.substr(at + 16, name_end - at - 16), shape, std::vector<float>(std::size_t(n))));
  }
}

// Diffusers encodes frame 0, then chunks of 4 frames, whatever the temporal
// factor, and drops a shorter last chunk: with a factor of 2 it takes 1 + 4k
// frames as well (5 frames make 3 latent frames; 3 frames would lose two),
// and with 8 it cannot encode past one frame.
TEST(VaeEncode, EveryTemporalFactorTakesTheFrameCountsTheReferenceEncodesWhole) {
  const std::string root = ::testing::TempDir() + "/stepmix-vae-factors";
  const vae::WanVae two = golden_vae_with_temporal_flags(
      root + "/two", {false, false, true}, 2,
      {"encoder.down_blocks.1.downsampler.time_conv", "decoder.up_blocks.1.upsampler.time_conv"});
  std::vector<float> pixels(3 * 5 * 32 * 48, 0.25f);
  EXPECT_EQ(two.encode(pixels.data(), {1, 3, 5, 32, 48}).shape, (std::vector<int64_t>{1, 48, 3, 2, 3}));
  EXPECT_NE(error_of([&] {
              two.encode(pixels.data(), {1, 3, 3, 32, 48});
            }).find("expected 1 + 4k frames (1, 5, 9, ...), got 3"),
            std::string::npos);
  const vae::WanVae eight = golden_vae_with_temporal_flags(root + "/eight", {true, true, true}, 8, {});
  EXPECT_EQ(eight.encode(pixels.data(), {1, 3, 1, 32, 48}).shape, (std::vector<int64_t>{1, 48, 1, 2, 3}));
  const std::string m = error_of([&] { eight.encode(pixels.data(), {1, 3, 5, 32, 48}); });
  EXPECT_NE(m.find("expected 1 frame: the temporal factor is 8, and the reference encoder's chunks of 4 frames cannot "
                   "be downsampled by it, got 5"),
            std::string::npos)
      << m;
  std::filesystem::remove_all(root);
}

TEST(VaeEncode, RefusesFrameCountsSizesAndValuesItCannotEncode) {
  const vae::WanVae& model = golden_vae();
  std::vector<float> pixels(3 * 6 * 32 * 48, 0.25f);
  for (int64_t frames : {2, 4, 6}) {
    const std::vector<int64_t> shape{1, 3, frames, 32, 48};
    const std::string m = error_of([&] { model.encode(pixels.data(), shape); });
    EXPECT_NE(m.find("expected 1 + 4k frames (1, 5, 9, ...), got " + std::to_string(frames)), std::string::npos) << m;
  }
  EXPECT_NE(error_of([&] { model.encode(pixels.data(), {1, 3, 1, 40, 48}); })
                .find("height and width must be positive multiples of 16, got 40x48"),
            std::string::npos);
  EXPECT_NE(error_of([&] { model.encode(pixels.data(), {1, 4, 1, 32, 48}); }).find("expected shape [1, 3, F, H, W]"),
            std::string::npos);
  pixels[7] = -std::numeric_limits<float>::infinity();
  EXPECT_NE(error_of([&] { model.encode(pixels.data(), {1, 3, 1, 32, 48}); }).find("element 7 is infinite"),
            std::string::npos);
}

TEST(VaeMemory, StreamingDecodeNeedsTheSameMemoryForAnyLength) {
  const vae::WanVae& model = golden_vae();
  const vae::MemoryEstimate image = model.estimate_decode(1, 45, 80, false);
  const vae::MemoryEstimate one = model.estimate_decode(3, 45, 80, false);
  const vae::MemoryEstimate long_clip = model.estimate_decode(48, 45, 80, false);
  EXPECT_EQ(one.total(), long_clip.total());  // histories full from the third latent frame
  EXPECT_LT(image.histories, one.histories);  // an image fills one frame of each
  EXPECT_GT(one.weights, 0u);
  // Collecting the clip adds its pixels: 3 · 189 · 720 · 1280 float32.
  EXPECT_EQ(model.estimate_decode(48, 45, 80, true).output, std::size_t(3) * 189 * 720 * 1280 * 4);
  EXPECT_EQ(one.total(), one.weights + one.histories + one.working + one.overhead());
  const std::string m = error_of([&] { vae::check_memory(one, 1 << 20, "decoding a 720x1280 clip"); });
  EXPECT_NE(m.find("decoding a 720x1280 clip needs about"), std::string::npos) << m;
  EXPECT_NE(m.find("more than the 1.00 MiB available"), std::string::npos) << m;
  EXPECT_NO_THROW(vae::check_memory(one, one.total(), "decoding"));
}

TEST(VaeMemory, HistoriesMatchWhatAClipKeeps) {
  // Every 3x3x3 conv keeps its last two input frames (one after an image;
  // the time convs, which never see frame 0, none): for the tiny decoder at
  // a 3x5 latent the sum over its convs of frames · c_in · h · w floats.
  const vae::WanVae& model = golden_vae();
  const int64_t h = 3, w = 5;
  for (const int64_t frames : {2, 1}) {  // three or more latent frames, one
    const int64_t time_frames = frames == 2 ? 2 : 0;
    std::size_t expected = frames * 48 * h * w;        // conv_in
    expected += 4 * frames * 48 * h * w;               // mid block: 2 blocks × 2 convs
    const int64_t widths[4][2] = {{48, 48}, {48, 48}, {48, 24}, {24, 12}};
    int64_t s = 1;
    for (int i = 0; i < 4; ++i) {
      const int64_t in = widths[i][0], out = widths[i][1];
      expected += frames * (in + out) * h * w * s * s;        // resnet 0: conv1 (in), conv2 (out)
      expected += frames * (2 * out) * h * w * s * s;         // resnet 1: conv1, conv2 (out)
      if (i < 2) expected += time_frames * out * h * w * s * s;  // time conv
      if (i < 3) s *= 2;
    }
    expected += frames * 12 * h * w * s * s;  // conv_out
    EXPECT_EQ(model.estimate_decode(frames == 2 ? 3 : 1, h, w, false).histories, expected * sizeof(float)) << frames;
  }
}

// --activations bf16: every convolution on bf16 operands with float32 sums.
// The golden README measured 1.7e-2 – 3.2e-2 (decode) and 7e-3 – 8e-3
// (encode) for bf16 operands everywhere; here norms, attention and the
// residual stream stay float32. Measured on these cases: decode 1.9e-2
// (image) and 3.4e-2 (video), encode mean 9.8e-3 and 9.7e-3; bounds at 2x.
TEST(VaeBf16, DecodeAndEncodeStayWithinTheMeasuredBf16Error) {
  vae::VaeOptions options;
  options.arithmetic = kernels::GemmArithmetic::BF16;
  const vae::WanVae model = vae::WanVae::load(vae_golden("vae"), options);
  for (const std::string name : {"image", "video"}) {
    const auto file = SafetensorsFile::open(vae_golden("decode/" + name + ".safetensors"));
    const TensorView& latent = file->get("latent");
    const std::vector<float> pixels = model.decode_to_tensor(latent.as<float>(), latent.shape);
    const double d = deviation(pixels.data(), file->get("pixels"));
    EXPECT_LE(d, 7e-2) << name;
    EXPECT_GE(d, 1e-4) << name << ": no different from float32, so bf16 did not run";
    const auto enc = SafetensorsFile::open(vae_golden("encode/" + name + ".safetensors"));
    const TensorView& px = enc->get("pixels");
    const vae::EncodeResult r = model.encode(px.as<float>(), px.shape);
    const double e = deviation(r.mu.data(), enc->get("mu"));
    EXPECT_LE(e, 2e-2) << name;
    EXPECT_GE(e, 1e-5) << name;
  }
}

// The whole decoder and encoder on the scalar reference convolution give the
// same bits as on the active (optimised) one: the F32 kernels sum in the same
// order (tests/kernels/conv_kernels_test.cpp), and nothing else differs.
TEST(VaeKernels, ReferenceConvolutionGivesTheSameBits) {
  std::vector<int64_t> shape;
  const std::vector<float> latent = golden_latent("image", shape);
  const std::vector<float> fast = golden_vae().decode_to_tensor(latent.data(), shape);
  const auto enc = SafetensorsFile::open(vae_golden("encode/image.safetensors"));
  const TensorView& px = enc->get("pixels");
  const vae::EncodeResult fast_mu = golden_vae().encode(px.as<float>(), px.shape);
  // Only the convolution: the channel norm's variants sum in other orders.
  kernels::ConvolutionFamily reference = kernels::active_convolution();
  reference.conv3d = kernels::reference_kernels().convolution.conv3d;
  kernels::override_convolution(&reference);
  const std::vector<float> slow = golden_vae().decode_to_tensor(latent.data(), shape);
  const vae::EncodeResult slow_mu = golden_vae().encode(px.as<float>(), px.shape);
  kernels::override_convolution(nullptr);
  EXPECT_EQ(fast, slow);
  EXPECT_EQ(fast_mu.mu, slow_mu.mu);
}

}  // namespace
}  // namespace stepmix::test
