// The VAE's CUDA kernels one by one (like every GPU test, also run on the
// CPU's SIMT emulator by test_cuda_on_cpu), against the CPU code they
// replace (tests/cuda/vae_test.cpp holds the GPU's VAE device, which runs
// them, to the CPU's layers and the goldens):
// - the index maps (nearest ×2, duplicate-up, average-down, channel slice,
//   patchify, unpatchify with its clamp), the tap gather, the epilogue and
//   the qkv split bit for bit against vae/layers.hpp or their definitions;
// - the channel norm within 1e-5 relative (one bf16 step for bf16 output)
//   of kernels::ref::channel_rms_norm, as CudaVae.ChannelNormAgreesWithTheReference;
// - the softmax rows within (n + 4)·2^-24 relative of float64 (float32
//   sums of n exponentials, each within half an ulp).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_test_util.hpp"
#include "kernels/channel_norm_kernels.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "vae/layers.hpp"

namespace stepmix::test {
namespace {

using kernels::FrameElement;

class CudaVaeKernels : public CudaTest {};

TEST_F(CudaVaeKernels, IndexMapsAreTheCpuLayersBitForBit) {
  const vae::Frame x = random_frame(5, 7, 12, 1);
  const auto on_device = [&](const vae::Frame& frame) { return to_device(frame.f32); };
  {
    cuda::DeviceBuffer dx = on_device(x), y = poisoned<float>(std::size_t(4 * x.size()));
    cuda::upsample_nearest2(dx.as<float>(), x.h, x.w, x.c, false, y.as<void>(), nullptr);
    expect_same_floats(to_host<float>(y, std::size_t(4 * x.size())), vae::upsample_nearest2(x).f32, "nearest x2");
    cuda::DeviceBuffer y16 = poisoned<uint16_t>(std::size_t(4 * x.size()));
    cuda::upsample_nearest2(dx.as<float>(), x.h, x.w, x.c, true, y16.as<void>(), nullptr);
    EXPECT_EQ(to_host<uint16_t>(y16, std::size_t(4 * x.size())), vae::upsample_nearest2(x, FrameElement::BF16).bf16);
  }
  for (const auto& [c_out, ft, fs] : {std::tuple<int64_t, int, int>{6, 2, 2}, {12, 1, 2}, {24, 2, 1}}) {
    for (int dt = 0; dt < ft; ++dt) {
      const vae::Frame want = vae::duplicate_up(x, c_out, ft, fs, dt);
      cuda::DeviceBuffer dx = on_device(x), y = poisoned<float>(want.f32.size());
      cuda::duplicate_up(dx.as<float>(), x.h, x.w, x.c, c_out, ft, fs, dt, y.as<float>(), nullptr);
      expect_same_floats(to_host<float>(y, want.f32.size()), want.f32, "duplicate-up");
    }
  }
  {
    // Average-down over two frames of 6 × 8 (the second missing once: zeros).
    const vae::Frame a = random_frame(6, 8, 4, 2), b = random_frame(6, 8, 4, 3);
    cuda::DeviceBuffer da = on_device(a), db = on_device(b);
    for (const auto& [c_out, ft, fs] : {std::tuple<int64_t, int, int>{8, 2, 2}, {32, 2, 2}, {4, 1, 2}}) {
      for (bool missing : {false, true}) {
        if (ft == 1 && missing) continue;
        const std::vector<const vae::Frame*> frames =
            ft == 1 ? std::vector<const vae::Frame*>{&a} : std::vector<const vae::Frame*>{&a, missing ? nullptr : &b};
        const vae::Frame want = vae::average_down(frames, c_out, fs);
        cuda::ConvFloatFrames device_frames;
        device_frames.frame[0] = da.as<float>();
        if (ft == 2 && !missing) device_frames.frame[1] = db.as<float>();
        cuda::DeviceBuffer y = poisoned<float>(want.f32.size());
        cuda::average_down(device_frames, ft, a.h, a.w, a.c, c_out, fs, y.as<float>(), nullptr);
        expect_same_floats(to_host<float>(y, want.f32.size()), want.f32, "average-down");
      }
    }
  }
  {
    cuda::DeviceBuffer dx = on_device(x), y = poisoned<float>(std::size_t(x.positions() * 5));
    cuda::channel_slice(dx.as<float>(), x.positions(), x.c, 4, 5, y.as<float>(), nullptr);
    std::vector<float> want;
    for (int64_t p = 0; p < x.positions(); ++p)
      for (int64_t c = 4; c < 9; ++c) want.push_back(x.f32[std::size_t(p * x.c + c)]);
    expect_same_floats(to_host<float>(y, want.size()), want, "channel slice");
  }
  {
    vae::Frame pixels = random_frame(8, 6, 3, 4);
    const vae::Frame want = vae::patchify(pixels, 2);
    cuda::DeviceBuffer dp = on_device(pixels), y = poisoned<float>(want.f32.size());
    cuda::patchify_pixels(dp.as<float>(), pixels.h, pixels.w, pixels.c, 2, y.as<float>(), nullptr);
    expect_same_floats(to_host<float>(y, want.f32.size()), want.f32, "patchify");

    vae::Frame latent = random_frame(4, 3, 12, 5);
    for (float& v : latent.f32) v *= 2.0f;  // values beyond the clamp
    latent.f32[7] = std::nanf("");
    const vae::Frame back = vae::unpatchify_clamped(latent, 2);
    cuda::DeviceBuffer dl = on_device(latent), z = poisoned<float>(back.f32.size());
    cuda::unpatchify_clamped(dl.as<float>(), latent.h, latent.w, latent.c, 2, z.as<float>(), nullptr);
    const std::vector<float> got = to_host<float>(z, back.f32.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_TRUE(float_bits(got[i]) == float_bits(back.f32[i]) || (std::isnan(got[i]) && std::isnan(back.f32[i])))
          << "unpatchify " << i;
  }
}

// The rows of a convolution's implicit GEMM, from the definition: row r (output
// position row0 + r = y·w_out + x), tap (t, b, c), channel i holds input frame
// t at (y·stride + b − pad_top, x·stride + c − pad_left), zero outside or for
// a missing frame.
std::vector<uint16_t> gathered(const std::vector<const std::vector<uint16_t>*>& frames, const cuda::ConvGeometry& g,
                               int64_t row0, int64_t rows) {
  std::vector<uint16_t> a;
  for (int64_t r = 0; r < rows; ++r)
    for (int t = 0; t < g.kt; ++t)
      for (int b = 0; b < g.kh; ++b)
        for (int c = 0; c < g.kw; ++c)
          for (int64_t i = 0; i < g.c_in; ++i) {
            const int64_t y = (row0 + r) / g.w_out, x = (row0 + r) % g.w_out;
            const int64_t iy = y * g.stride + b - g.pad_top, ix = x * g.stride + c - g.pad_left;
            const bool inside = frames[std::size_t(t)] && iy >= 0 && iy < g.h_in && ix >= 0 && ix < g.w_in;
            a.push_back(inside ? (*frames[std::size_t(t)])[std::size_t((iy * g.w_in + ix) * g.c_in + i)] : 0);
          }
  return a;
}

TEST_F(CudaVaeKernels, TapGatherEpilogueAndQkvSplitFollowTheirDefinitions) {
  // Causal 3×3×3 with a missing oldest frame (16 channels: the 16-byte path;
  // 3: one value at a time), and a 3×3 stride-2 convolution with asymmetric
  // padding, in two row chunks.
  struct Case {
    cuda::ConvGeometry g;
    bool oldest_missing;
    int64_t h_out;
  };
  for (const Case& k : {Case{{3, 3, 3, 16, 5, 6, 6, 1, 1, 1}, true, 5}, Case{{3, 3, 3, 3, 5, 6, 6, 1, 1, 1}, false, 5},
                        Case{{1, 3, 3, 8, 7, 9, 4, 2, 0, 1}, false, 3}}) {
    const cuda::ConvGeometry& g = k.g;
    std::vector<std::vector<uint16_t>> frames;
    for (int t = 0; t < g.kt; ++t) frames.push_back(normal_bf16(std::size_t(g.h_in * g.w_in * g.c_in), 10 + t, 1.0f));
    std::vector<cuda::DeviceBuffer> device;
    cuda::ConvFrames device_frames;
    std::vector<const std::vector<uint16_t>*> host;
    for (int t = 0; t < g.kt; ++t) {
      device.push_back(to_device(frames[std::size_t(t)]));
      const bool missing = k.oldest_missing && t == 0;
      device_frames.frame[t] = missing ? nullptr : device.back().as<uint16_t>();
      host.push_back(missing ? nullptr : &frames[std::size_t(t)]);
    }
    const int64_t positions = k.h_out * g.w_out, first = positions / 2 + 1, width = g.kt * g.kh * g.kw * g.c_in;
    for (const auto& [row0, rows] : {std::pair<int64_t, int64_t>{0, first}, {first, positions - first}}) {
      cuda::DeviceBuffer a = poisoned<uint16_t>(std::size_t(rows * width));
      cuda::conv_gather_taps_bf16(device_frames, g, row0, rows, a.as<uint16_t>(), nullptr);
      EXPECT_EQ(to_host<uint16_t>(a, std::size_t(rows * width)), gathered(host, g, row0, rows))
          << "c_in " << g.c_in << " rows from " << row0;
    }
  }

  const int64_t rows = 37, c_out = 20;
  const std::vector<float> y = normal_floats(std::size_t(rows * c_out), 20, 1.0f);
  const std::vector<float> bias = normal_floats(std::size_t(c_out), 21, 1.0f);
  const std::vector<float> residual = normal_floats(y.size(), 22, 1.0f);
  for (bool with_residual : {false, true}) {
    std::vector<float> want = y;
    for (std::size_t i = 0; i < want.size(); ++i) {
      want[i] = want[i] + bias[i % std::size_t(c_out)];
      if (with_residual) want[i] = want[i] + residual[i];
    }
    cuda::DeviceBuffer dy = to_device(y), db = to_device(bias), dr = to_device(residual);
    cuda::conv_epilogue_f32(dy.as<float>(), db.as<float>(), with_residual ? dr.as<float>() : nullptr, rows, c_out,
                            nullptr);
    expect_same_floats(to_host<float>(dy, y.size()), want, "epilogue");
  }

  const int64_t P = 30, C = 8;
  const std::vector<float> qkv = normal_floats(std::size_t(P * 3 * C), 23, 1.0f);
  cuda::DeviceBuffer dqkv = to_device(qkv), q = poisoned<float>(std::size_t(P * C)),
                     kk = poisoned<float>(std::size_t(P * C)), vt = poisoned<float>(std::size_t(P * C));
  cuda::split_qkv(dqkv.as<float>(), P, C, q.as<float>(), kk.as<float>(), vt.as<float>(), nullptr);
  std::vector<float> want_q, want_k, want_vt(std::size_t(P * C));
  for (int64_t p = 0; p < P; ++p)
    for (int64_t c = 0; c < C; ++c) {
      want_q.push_back(qkv[std::size_t(p * 3 * C + c)]);
      want_k.push_back(qkv[std::size_t(p * 3 * C + C + c)]);
      want_vt[std::size_t(c * P + p)] = qkv[std::size_t(p * 3 * C + 2 * C + c)];
    }
  expect_same_floats(to_host<float>(q, want_q.size()), want_q, "q");
  expect_same_floats(to_host<float>(kk, want_k.size()), want_k, "k");
  expect_same_floats(to_host<float>(vt, want_vt.size()), want_vt, "v transposed");
}

TEST_F(CudaVaeKernels, ChannelNormAgreesWithTheReference) {
  for (int64_t channels : {96, 1024, 5}) {
    for (bool silu : {false, true}) {
      for (FrameElement out : {FrameElement::F32, FrameElement::BF16}) {
        SCOPED_TRACE(std::to_string(channels) + (silu ? " silu " : " ") + (out == FrameElement::BF16 ? "bf16" : "f32"));
        const int64_t positions = 37;  // not a multiple of the 8 warps of a block
        const std::vector<float> x = normal_floats(std::size_t(positions * channels), uint32_t(channels) + silu, 3.0f);
        const std::vector<float> gamma = normal_floats(std::size_t(channels), 7, 1.0f);
        const float scale = float(std::sqrt(double(channels)));
        vae::Frame want = vae::Frame::zeros(positions, 1, channels, out);
        kernels::ChannelNormArgs args;
        args.x = x.data();
        args.positions = positions;
        args.channels = channels;
        args.gamma = gamma.data();
        args.scale = scale;
        args.silu = silu;
        args.y_type = out;
        args.y = want.data();
        kernels::ref::channel_rms_norm(args);
        cuda::DeviceBuffer dx = to_device(x), dg = to_device(gamma),
                           y = poisoned<float>(std::size_t(positions * channels));
        cuda::channel_rms_norm(dx.as<float>(), positions, channels, dg.as<float>(), scale, silu,
                               out == FrameElement::BF16, y.as<void>(), nullptr);
        if (out == FrameElement::BF16) {
          EXPECT_LE(compare_bf16(to_host<uint16_t>(y, want.bf16.size()), want.bf16).worst_ulps, 1);
        } else {
          const std::vector<float> got = to_host<float>(y, want.f32.size());
          for (std::size_t i = 0; i < got.size(); ++i)
            ASSERT_LE(std::fabs(got[i] - want.f32[i]), 1e-5f * std::fabs(want.f32[i]) + 1e-7f) << i;
        }
      }
    }
  }
}

TEST_F(CudaVaeKernels, SoftmaxRowsAgreeWithFloat64) {
  for (int64_t n : {1, 31, 300, 1000}) {
    const int64_t rows = 5;
    std::vector<float> s = normal_floats(std::size_t(rows * n), uint32_t(n), 4.0f);
    cuda::DeviceBuffer ds = to_device(s);
    cuda::softmax_rows(ds.as<float>(), rows, n, nullptr);
    const std::vector<float> got = to_host<float>(ds, s.size());
    for (int64_t r = 0; r < rows; ++r) {
      double top = -INFINITY, sum = 0;
      for (int64_t j = 0; j < n; ++j) top = std::max(top, double(s[std::size_t(r * n + j)]));
      for (int64_t j = 0; j < n; ++j) sum += std::exp(double(s[std::size_t(r * n + j)]) - top);
      for (int64_t j = 0; j < n; ++j) {
        const double want = std::exp(double(s[std::size_t(r * n + j)]) - top) / sum;
        ASSERT_LE(std::fabs(got[std::size_t(r * n + j)] - want), double(n + 4) * std::ldexp(want, -24) + 1e-30)
            << "n " << n << " row " << r << " " << j;
      }
    }
  }
}

}  // namespace
}  // namespace stepmix::test
