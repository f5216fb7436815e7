// The VAE convolution (src/kernels/conv_kernels.hpp): the packed weight
// layout, the scalar reference against a direct formula, and the AVX-512
// variant against the reference on every geometry the VAE uses (causal
// 3×3×3 with 0–2 zero history frames, 3×1×1 in time with stride 1 and 2,
// 2-D 3×3 with stride 1 and 2, 1×1×1), ragged channel counts (12, 48, 70,
// 130 across the 64-channel blocks and 128-channel chunks) and widths.
//
// Bound. Both variants sum the same terms in the same order (taps (a, b, c),
// then channels ascending), F32 with a fused multiply-add per term, BF16 with
// exact products; the F32 results must be identical bit for bit, and so must
// one thread and many. BF16 results are within the bound of two float32
// summation orders (the reference adds the odd channel of each pair first,
// as vdpbf16ps is documented to; on the Xeon measured they were identical).
// The AMX variant (BF16, c_in a multiple of 32, among them 288 channels:
// a full 256-channel chunk and a partial one) sums tap columns inside channel
// chunks and 32 products per tile multiply in the hardware's order: within
// the same bound, and bit-identical across thread counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/numerics.hpp"
#include "core/thread_pool.hpp"
#include "kernels/conv_kernels.hpp"
#include "kernels/kernel_set.hpp"
#include "stepmix/error.hpp"

namespace stepmix::kernels {
namespace {

struct Geometry {
  const char* name;
  int64_t c_in, c_out;
  int kt, kh, kw;
  int64_t h_in, w_in, h_out, w_out;
  int stride, pad_top, pad_left;
  int stride_t;
  int64_t frames_out;
  int zero_frames;  // leading null input frames
  bool residual;
  bool bf16_output;
};

const Geometry kGeometries[] = {
    {"causal_3x3x3_image", 12, 48, 3, 3, 3, 5, 7, 5, 7, 1, 1, 1, 1, 1, 2, false, false},
    {"causal_3x3x3_one_history_frame", 48, 70, 3, 3, 3, 4, 17, 4, 17, 1, 1, 1, 1, 1, 1, true, false},
    {"causal_3x3x3_full_history", 130, 12, 3, 3, 3, 3, 23, 3, 23, 1, 1, 1, 1, 1, 0, false, true},
    {"causal_3x3x3_one_column", 8, 16, 3, 3, 3, 6, 1, 6, 1, 1, 1, 1, 1, 1, 0, true, false},
    {"time_conv_up_two_frames", 16, 32, 3, 1, 1, 3, 5, 3, 5, 1, 0, 0, 1, 2, 2, false, false},
    {"time_conv_down_stride2", 16, 16, 3, 1, 1, 4, 6, 4, 6, 1, 0, 0, 2, 2, 0, false, false},
    {"spatial_3x3_pad1", 24, 24, 1, 3, 3, 6, 10, 6, 10, 1, 1, 1, 1, 1, 0, true, false},
    {"spatial_3x3_stride2_pad_after", 32, 32, 1, 3, 3, 8, 12, 4, 6, 2, 0, 0, 1, 1, 0, false, false},
    {"pointwise_1x1x1", 96, 144, 1, 1, 1, 3, 5, 3, 5, 1, 0, 0, 1, 1, 0, true, true},
    {"wide_row_many_positions", 48, 80, 3, 3, 3, 2, 40, 2, 40, 1, 1, 1, 1, 1, 1, false, false},
};

struct ConvProblem {
  Geometry g;
  bool bf16;
  std::vector<float> weights, bias;
  ConvWeights packed;
  std::vector<std::vector<float>> x_f32;
  std::vector<std::vector<uint16_t>> x_bf16;
  std::vector<const void*> x_frames;
  std::vector<std::vector<float>> residual;
  std::vector<const float*> residual_frames;

  ConvProblem(const Geometry& geometry, bool bf16_arithmetic, uint32_t seed) : g(geometry), bf16(bf16_arithmetic) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    weights.resize(std::size_t(g.c_out * g.c_in * g.kt * g.kh * g.kw));
    for (float& v : weights) v = normal(rng);
    for (int64_t o = 0; o < g.c_out; ++o) bias.push_back(0.1f * normal(rng));
    packed = pack_conv_weights(weights.data(), false, g.c_out, g.c_in, g.kt, g.kh, g.kw, bias.data(),
                               bf16 ? GemmArithmetic::BF16 : GemmArithmetic::F32);
    const int64_t frames_in = (g.frames_out - 1) * g.stride_t + g.kt;
    x_f32.resize(std::size_t(frames_in));
    x_bf16.resize(std::size_t(frames_in));
    for (int64_t t = 0; t < frames_in; ++t) {
      if (t < g.zero_frames) {
        x_frames.push_back(nullptr);
        continue;
      }
      for (int64_t i = 0; i < g.h_in * g.w_in * g.c_in; ++i) {
        const float v = normal(rng);
        x_f32[std::size_t(t)].push_back(v);
        x_bf16[std::size_t(t)].push_back(float_to_bf16_rne(v));
      }
      x_frames.push_back(bf16 ? static_cast<const void*>(x_bf16[std::size_t(t)].data())
                              : static_cast<const void*>(x_f32[std::size_t(t)].data()));
    }
    if (g.residual) {
      for (int64_t t = 0; t < g.frames_out; ++t) {
        residual.emplace_back();
        for (int64_t i = 0; i < g.h_out * g.w_out * g.c_out; ++i) residual.back().push_back(normal(rng));
      }
      for (const auto& r : residual) residual_frames.push_back(r.data());
    }
  }

  // Output bytes of a run of `conv`, all frames concatenated.
  std::vector<uint8_t> run(Conv3dFunction conv) const {
    const std::size_t element = g.bf16_output ? 2 : 4;
    const std::size_t frame_bytes = std::size_t(g.h_out * g.w_out * g.c_out) * element;
    std::vector<uint8_t> out(frame_bytes * std::size_t(g.frames_out), 0xAB);
    std::vector<void*> y;
    for (int64_t t = 0; t < g.frames_out; ++t) y.push_back(out.data() + std::size_t(t) * frame_bytes);
    Conv3dArgs a;
    a.weights = &packed;
    a.h_in = g.h_in;
    a.w_in = g.w_in;
    a.h_out = g.h_out;
    a.w_out = g.w_out;
    a.stride_h = a.stride_w = g.stride;
    a.pad_top = g.pad_top;
    a.pad_left = g.pad_left;
    a.frames_out = g.frames_out;
    a.stride_t = g.stride_t;
    a.x_frames = x_frames.data();
    a.x_type = bf16 ? FrameElement::BF16 : FrameElement::F32;
    a.residual_frames = g.residual ? residual_frames.data() : nullptr;
    a.y_frames = y.data();
    a.y_type = g.bf16_output ? FrameElement::BF16 : FrameElement::F32;
    conv(a);
    return out;
  }

  // The definition, in double: bias + Σ x·w (+ residual), zero outside;
  // `magnitude` gets Σ|x·w| + |bias| + |residual|.
  double expected(int64_t t, int64_t y, int64_t x, int64_t o, double& magnitude) const {
    double acc = 0;
    magnitude = 0;
    for (int a = 0; a < g.kt; ++a) {
      const int64_t frame = t * g.stride_t + a;
      if (!x_frames[std::size_t(frame)]) continue;
      for (int b = 0; b < g.kh; ++b)
        for (int c = 0; c < g.kw; ++c) {
          const int64_t iy = y * g.stride + b - g.pad_top, ix = x * g.stride + c - g.pad_left;
          if (iy < 0 || iy >= g.h_in || ix < 0 || ix >= g.w_in) continue;
          for (int64_t i = 0; i < g.c_in; ++i) {
            const std::size_t xi = std::size_t((iy * g.w_in + ix) * g.c_in + i);
            const double xv = bf16 ? bf16_to_float(x_bf16[std::size_t(frame)][xi]) : x_f32[std::size_t(frame)][xi];
            const double wv = packed_conv_weight(packed, o, i, a, b, c);
            acc += xv * wv;
            magnitude += std::fabs(xv * wv);
          }
        }
    }
    acc += bias[std::size_t(o)];
    magnitude += std::fabs(bias[std::size_t(o)]);
    if (g.residual) {
      const float r = residual[std::size_t(t)][std::size_t((y * g.w_out + x) * g.c_out + o)];
      acc += r;
      magnitude += std::fabs(r);
    }
    return acc;
  }
};

// Elementwise bounds. Any float32 summation of K terms is within
// K·2^-24·Σ|terms| of the exact sum (K = taps·c_in + 2), so `got` is checked
// against the exact definition with that bound (`other` null), or against
// another variant's result with twice it (two orders of the same exact
// products); a bf16 output adds half a bf16 step per side.
void expect_within_rounding(const ConvProblem& p, const std::vector<uint8_t>& got, const std::vector<uint8_t>* other) {
  const Geometry& g = p.g;
  const int sides = other ? 2 : 1;
  for (int64_t i = 0; i < g.frames_out * g.h_out * g.w_out * g.c_out; ++i) {
    const int64_t o = i % g.c_out, x = (i / g.c_out) % g.w_out, y = (i / (g.c_out * g.w_out)) % g.h_out,
                  t = i / (g.c_out * g.w_out * g.h_out);
    auto value = [&](const std::vector<uint8_t>& out) {
      if (g.bf16_output) {
        uint16_t v;
        std::memcpy(&v, out.data() + 2 * i, 2);
        return double(bf16_to_float(v));
      }
      float v;
      std::memcpy(&v, out.data() + 4 * i, 4);
      return double(v);
    };
    double magnitude;
    const double exact = p.expected(t, y, x, o, magnitude);
    double bound = sides * double(g.kt * g.kh * g.kw * g.c_in + 2) * 0x1p-24 * magnitude;
    if (g.bf16_output) bound += sides * std::fabs(exact) * 0x1p-8;
    const double reference = other ? value(*other) : exact;
    ASSERT_LE(std::fabs(value(got) - reference), bound) << g.name << " at " << t << "," << y << "," << x << "," << o;
  }
}

bool avx512_available() { return cpu_features().can_run_avx512_bf16(); }

TEST(ConvPacking, EveryWeightLandsWhereTheLayoutSays) {
  for (bool bf16 : {false, true}) {
    const int64_t c_out = 70, c_in = bf16 ? 13 : 7;
    std::vector<float> w(std::size_t(c_out * c_in * 3 * 1 * 3));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(i) * 0.001f - 1.5f;
    const ConvWeights p =
        pack_conv_weights(w.data(), false, c_out, c_in, 3, 1, 3, nullptr, bf16 ? GemmArithmetic::BF16 : GemmArithmetic::F32);
    EXPECT_EQ(p.blocks(), 2);
    EXPECT_EQ(p.block_width(0), 64);
    EXPECT_EQ(p.block_width(1), 16);  // 6 channels rounded up to 16 lanes
    EXPECT_EQ(p.c_in_packed(), bf16 ? 14 : 7);
    for (int64_t o = 0; o < c_out; ++o)
      for (int64_t i = 0; i < c_in; ++i)
        for (int a = 0; a < 3; ++a)
          for (int c = 0; c < 3; ++c) {
            const float raw = w[std::size_t(((o * c_in + i) * 3 + a) * 3 + c)];
            const float want = bf16 ? bf16_to_float(float_to_bf16_rne(raw)) : raw;
            ASSERT_EQ(packed_conv_weight(p, o, i, a, 0, c), want) << o << " " << i << " " << a << " " << c;
          }
    // Padding lanes (channels 70..79) and the padded input channel are zero.
    const std::size_t total = bf16 ? p.bf16.size() : p.f32.size();
    EXPECT_EQ(total, std::size_t((64 + 16) * 9 * p.c_in_packed()));
    EXPECT_EQ(p.bias, std::vector<float>(std::size_t(c_out), 0.0f));
  }
}

TEST(ConvReference, MatchesTheDefinition) {
  for (bool bf16 : {false, true})
    for (const Geometry& g : kGeometries) {
      if (bf16 && g.c_in % 2) continue;
      const ConvProblem p(g, bf16, 7);
      expect_within_rounding(p, p.run(ref::conv3d), nullptr);
    }
}

// AMX tiles: BF16 geometries with c_in a multiple of 32, partial position
// and channel tiles included. The tile multiply sums its 32 products in the
// hardware's order, so the bound is that of two float32 orders.
const Geometry kAmxGeometries[] = {
    {"amx_causal_3x3x3_partial_tiles", 64, 48, 3, 3, 3, 5, 37, 5, 37, 1, 1, 1, 1, 1, 1, true, false},
    {"amx_causal_3x3x3_image", 96, 70, 3, 3, 3, 4, 16, 4, 16, 1, 1, 1, 1, 1, 2, false, true},
    {"amx_time_conv_two_frames", 32, 64, 3, 1, 1, 3, 20, 3, 20, 1, 0, 0, 1, 2, 2, false, false},
    {"amx_stride2_pad_after", 32, 32, 1, 3, 3, 8, 12, 4, 6, 2, 0, 0, 1, 1, 0, true, false},
    {"amx_pointwise", 96, 144, 1, 1, 1, 3, 5, 3, 5, 1, 0, 0, 1, 1, 0, true, true},
    {"amx_wide_row", 64, 128, 3, 3, 3, 2, 40, 2, 40, 1, 1, 1, 1, 1, 1, false, false},
    // 288 channels: a full 256-channel chunk and a 32-channel one.
    {"amx_channel_chunks", 288, 16, 3, 3, 3, 2, 17, 2, 17, 1, 1, 1, 1, 1, 1, true, false},
};

// Every variant of the registry's convolution family that runs here, on
// every geometry: F32 bit-identical to the reference (same summation order),
// BF16 within the rounding bound (vdpbf16ps rounds twice per pair in the
// reference's order on the CPUs measured, but the instruction's internal
// rounding is not pinned down across vendors; AMX tiles sum 32 products in
// the hardware's order).
TEST(ConvVariants, EveryVariantMatchesTheReferenceOnEveryGeometry) {
  for (const KernelSet& variant : kernel_variants()) {
    if (!variant.convolution.supported()) continue;
    SCOPED_TRACE(variant.name);
    for (bool bf16 : {false, true}) {
      std::vector<Geometry> geometries(std::begin(kGeometries), std::end(kGeometries));
      if (bf16) geometries.insert(geometries.end(), std::begin(kAmxGeometries), std::end(kAmxGeometries));
      for (const Geometry& g : geometries) {
        if (bf16 && g.c_in % 2) continue;
        const ConvProblem p(g, bf16, 11);
        const std::vector<uint8_t> got = p.run(variant.convolution.conv3d), want = p.run(ref::conv3d);
        if (!bf16) {
          EXPECT_EQ(got, want) << g.name << ": F32 must be bit-identical";
          continue;
        }
        expect_within_rounding(p, got, &want);
      }
    }
  }
}

TEST(ConvAmx, TakesEveryAmxGeometryWhereTheCpuHasAmx) {
  if (!cpu_features().can_run_amx_bf16()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  for (const Geometry& g : kAmxGeometries) {
    const ConvProblem p(g, true, 13);
    Conv3dArgs probe;
    probe.weights = &p.packed;
    EXPECT_TRUE(amx::conv3d_applies(probe)) << g.name << ": AMX refused (Linux tile permission?)";
  }
}

// `conv` on the global pool and on one thread give the same bytes. Inside a
// task of another pool the global pool's parallel_for runs inline, i.e. the
// whole convolution on one thread.
void expect_same_bits_on_one_thread(const ConvProblem& p, Conv3dFunction conv) {
  const std::vector<uint8_t> pooled = p.run(conv);
  std::vector<uint8_t> single;
  ThreadPool outer(2);
  outer.parallel_for(2, [&](int64_t task) {
    if (task == 0) single = p.run(conv);
  });
  EXPECT_EQ(single, pooled);
}

TEST(ConvAvx512, OneThreadAndThePoolGiveTheSameBits) {
  if (!avx512_available()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  expect_same_bits_on_one_thread(ConvProblem(kGeometries[9], false, 5), avx512::conv3d);
}

TEST(ConvAmx, OneThreadAndThePoolGiveTheSameBits) {
  if (!cpu_features().can_run_amx_bf16()) GTEST_SKIP() << "no AMX-BF16 on this CPU";
  expect_same_bits_on_one_thread(ConvProblem(kAmxGeometries[6], true, 5), amx::conv3d);
}

TEST(ConvKernels, ZeroFramesAndPaddingAreNotComputed) {
  Geometry g = kGeometries[0];  // causal 3×3×3, two zero frames, 5×7
  const ConvProblem p(g, false, 3);
  Conv3dArgs a;
  a.weights = &p.packed;
  a.h_in = a.h_out = g.h_in;
  a.w_in = a.w_out = g.w_in;
  a.pad_top = a.pad_left = 1;
  a.x_frames = p.x_frames.data();
  // One real frame: 3×3 taps, each row/column tap valid on all but one edge.
  const double rows = 3 * 5 - 2, columns = 3 * 7 - 2;
  EXPECT_DOUBLE_EQ(conv3d_macs(a), rows * columns * double(g.c_in * g.c_out));
}

TEST(ConvKernels, ArgumentsThatDoNotFitAreRefused) {
  const ConvProblem p(kGeometries[1], true, 1);
  std::vector<float> y(std::size_t(4 * 17 * 70));
  void* out = y.data();
  Conv3dArgs a;
  a.weights = &p.packed;
  a.h_in = a.h_out = 4;
  a.w_in = a.w_out = 17;
  a.x_frames = p.x_frames.data();
  a.y_frames = &out;
  a.x_type = FrameElement::F32;  // BF16 weights need bf16 frames
  try {
    ref::conv3d(a);
    FAIL() << "accepted float32 frames for BF16 arithmetic";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input frames must be bf16"), std::string::npos) << e.what();
  }
  const std::vector<float> w(5 * 3, 1.0f);
  const ConvWeights odd = pack_conv_weights(w.data(), false, 5, 3, 1, 1, 1, nullptr, GemmArithmetic::BF16);
  a.weights = &odd;
  a.x_type = FrameElement::BF16;
  try {
    ref::conv3d(a);
    FAIL() << "accepted an odd input channel count for BF16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("even number of input channels"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace stepmix::kernels
