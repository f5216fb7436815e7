// One VAE convolution call at the Wan2.2 decoder's real shapes, each kernel
// variant beside the linear family's GEMM on the equivalent implicit-GEMM
// shape (M = output positions, N = c_out, K = c_in · executed taps), which is
// the ceiling a convolution on the same instruction can aim for. Run by
// bench/run-conv.sh, which measures the single-thread instruction peaks in
// the same run (bench/peak_dot_bf16.cpp) and passes them in.
//
// usage: bench_conv [--shape NAME] [--variant NAME] [--f32|--bf16] [--no-gemm] [--min-seconds S]
//                   [--peak-f32 G] [--peak-bf16 G] [--peak-amx G]
// Prints one JSON line per (shape, arithmetic, variant): the best call's
// CPU time (with STEPMIX_THREADS=1 the calling thread's, so the neighbours'
// share of the machine does not count; with more threads the process's, so
// GFLOP/s are per CPU second, against the same one-thread peak), GFLOP/s
// of the multiply-accumulates executed (2 × conv3d_macs) and, when the peak
// of the instruction it runs on was given, the fraction of it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "core/numerics.hpp"
#include "core/thread_pool.hpp"
#include "kernels/conv_kernels.hpp"
#include "kernels/kernel_set.hpp"

namespace {

using namespace stepmix;
using namespace stepmix::kernels;

// A decoder convolution: kernel (kt, kh, kw) on h × w frames with `history`
// real frames before the current one (the rest of kt − 1 are causal zeros).
struct Shape {
  const char* name;
  int kt, kh, kw;
  int64_t c_in, c_out, h, w;
  int history;
};

// Where the decoder spends its multiply-accumulates (1-frame 512×512 image:
// latent 32×32, levels 32, 64, 128, 256; the 5-frame video runs the same
// convolutions at half the size with full causal histories).
const Shape kShapes[] = {
    {"causal3_1024_1024_32x32_image", 3, 3, 3, 1024, 1024, 32, 32, 0},
    {"causal3_1024_1024_64x64_image", 3, 3, 3, 1024, 1024, 64, 64, 0},
    {"causal3_1024_512_128x128_image", 3, 3, 3, 1024, 512, 128, 128, 0},
    {"causal3_512_512_128x128_image", 3, 3, 3, 512, 512, 128, 128, 0},
    {"causal3_512_256_256x256_image", 3, 3, 3, 512, 256, 256, 256, 0},
    {"causal3_256_256_256x256_image", 3, 3, 3, 256, 256, 256, 256, 0},
    {"causal3_1024_1024_32x32_history2", 3, 3, 3, 1024, 1024, 32, 32, 2},
    {"causal3_512_512_64x64_history2", 3, 3, 3, 512, 512, 64, 64, 2},
    {"causal3_256_256_128x128_history2", 3, 3, 3, 256, 256, 128, 128, 2},
    {"spatial3x3_1024_1024_64x64", 1, 3, 3, 1024, 1024, 64, 64, 0},
    {"spatial3x3_1024_1024_128x128", 1, 3, 3, 1024, 1024, 128, 128, 0},
    {"spatial3x3_512_512_256x256", 1, 3, 3, 512, 512, 256, 256, 0},
    {"time3_1024_2048_32x32_history2", 3, 1, 1, 1024, 2048, 32, 32, 2},
    {"pointwise_1024_512_128x128", 1, 1, 1, 1024, 512, 128, 128, 0},
    {"pointwise_512_256_256x256", 1, 1, 1, 512, 256, 256, 256, 0},
};

using bench::best_seconds;

struct Peaks {
  double f32 = 0, bf16 = 0, amx = 0;
};

void report(const Shape& s, const char* arithmetic, const char* what, double macs, double seconds, const char* unit,
            double peak) {
  const double gflops = 2 * macs / seconds / 1e9;
  std::printf("{\"shape\": \"%s\", \"arithmetic\": \"%s\", \"kernel\": \"%s\", \"threads\": %d, \"gmac\": %.3f, "
              "\"cpu_ms\": %.2f, \"gflops\": %.1f, \"peak_unit\": \"%s\"",
              s.name, arithmetic, what, ThreadPool::global().size(), macs / 1e9, 1e3 * seconds, gflops, unit);
  if (peak > 0) std::printf(", \"peak_gflops\": %.1f, \"fraction_of_peak\": %.3f", peak, gflops / peak);
  std::printf("}\n");
  std::fflush(stdout);
}

void run_shape(const Shape& s, bool bf16, const std::string& only_variant, bool gemm, double min_seconds,
               const Peaks& peaks) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(std::size_t(s.c_out * s.c_in * s.kt * s.kh * s.kw)), bias(std::size_t(s.c_out));
  for (float& v : w) v = 0.05f * normal(rng);
  for (float& v : bias) v = normal(rng);
  const ConvWeights packed = pack_conv_weights(w.data(), false, s.c_out, s.c_in, s.kt, s.kh, s.kw, bias.data(),
                                               bf16 ? GemmArithmetic::BF16 : GemmArithmetic::F32);
  const int64_t frame = s.h * s.w * s.c_in;
  std::vector<std::vector<float>> x_f32(std::size_t(s.history + 1));
  std::vector<std::vector<uint16_t>> x_bf16(std::size_t(s.history + 1));
  for (std::size_t f = 0; f <= std::size_t(s.history); ++f) {
    if (bf16) {
      x_bf16[f].resize(std::size_t(frame));
      for (uint16_t& v : x_bf16[f]) v = float_to_bf16_rne(normal(rng));
    } else {
      x_f32[f].resize(std::size_t(frame));
      for (float& v : x_f32[f]) v = normal(rng);
    }
  }
  std::vector<const void*> frames(std::size_t(s.kt), nullptr);
  for (int f = 0; f <= s.history && f < s.kt; ++f)
    frames[std::size_t(s.kt - 1 - f)] = bf16 ? static_cast<const void*>(x_bf16[std::size_t(f)].data())
                                               : static_cast<const void*>(x_f32[std::size_t(f)].data());
  std::vector<float> y(std::size_t(s.h * s.w * s.c_out));
  void* y_frame = y.data();
  Conv3dArgs a;
  a.weights = &packed;
  a.h_in = a.h_out = s.h;
  a.w_in = a.w_out = s.w;
  a.pad_top = s.kh / 2;
  a.pad_left = s.kw / 2;
  a.x_frames = frames.data();
  a.x_type = bf16 ? FrameElement::BF16 : FrameElement::F32;
  a.y_frames = &y_frame;
  const double macs = conv3d_macs(a);
  const char* arithmetic = bf16 ? "bf16" : "f32";

  for (const KernelSet& variant : kernel_variants()) {
    if (!variant.convolution.supported() || std::string(variant.name) == "ref") continue;
    if (!only_variant.empty() && only_variant != variant.name) continue;
    const bool tiles = bf16 && std::string(variant.name) == "amx" && amx::conv3d_applies(a);
    const char* unit = !bf16 ? "vfmadd231ps" : tiles ? "tdpbf16ps" : "vdpbf16ps";
    const double peak = !bf16 ? peaks.f32 : tiles ? peaks.amx : peaks.bf16;
    const double seconds = best_seconds([&] { variant.convolution.conv3d(a); }, min_seconds);
    report(s, arithmetic, (std::string("conv3d:") + variant.name).c_str(), macs, seconds, unit, peak);

    if (!gemm) continue;
    // The implicit GEMM as one dense GEMM: every position against every
    // executed tap (K = c_in · taps that ran, the taps of real frames).
    int taps = 0;
    for (int f = 0; f < s.kt; ++f) taps += frames[std::size_t(f)] ? s.kh * s.kw : 0;
    const int64_t M = s.h * s.w, N = s.c_out, K = s.c_in * taps;
    std::vector<float> a_f32, w_f32;
    std::vector<uint16_t> a_bf16, w_bf16;
    GemmArgs g;
    g.M = M;
    g.N = N;
    g.K = K;
    if (bf16) {
      a_bf16.assign(std::size_t(M * K), float_to_bf16_rne(0.5f));
      w_bf16.assign(std::size_t(N * K), float_to_bf16_rne(0.25f));
      g.arithmetic = GemmArithmetic::BF16;
      g.a_type = ActivationOperand::BF16;
      g.a = a_bf16.data();
      g.w_type = WeightOperand::BF16;
      g.w = w_bf16.data();
    } else {
      a_f32.assign(std::size_t(M * K), 0.5f);
      w_f32.assign(std::size_t(N * K), 0.25f);
      g.a = a_f32.data();
      g.w = w_f32.data();
    }
    std::vector<float> gy(std::size_t(M * N));
    g.y = gy.data();
    const double gemm_seconds = best_seconds([&] { variant.linear.gemm(g); }, min_seconds);
    const bool gemm_tiles = bf16 && std::string(variant.name) == "amx";
    report(s, arithmetic, (std::string("gemm:") + variant.name).c_str(), double(M) * double(N) * double(K),
           gemm_seconds, !bf16 ? "vfmadd231ps" : gemm_tiles ? "tdpbf16ps" : "vdpbf16ps",
           !bf16 ? peaks.f32 : gemm_tiles ? peaks.amx : peaks.bf16);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string only_shape, only_variant;
  bool f32 = true, bf16 = true, gemm = true;
  double min_seconds = 0.5;
  Peaks peaks;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", key.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (key == "--shape") only_shape = value();
    else if (key == "--variant") only_variant = value();
    else if (key == "--f32") bf16 = false;
    else if (key == "--bf16") f32 = false;
    else if (key == "--no-gemm") gemm = false;
    else if (key == "--min-seconds") min_seconds = std::atof(value().c_str());
    else if (key == "--peak-f32") peaks.f32 = std::atof(value().c_str());
    else if (key == "--peak-bf16") peaks.bf16 = std::atof(value().c_str());
    else if (key == "--peak-amx") peaks.amx = std::atof(value().c_str());
    else {
      std::fprintf(stderr,
                   "usage: %s [--shape NAME] [--variant NAME] [--f32|--bf16] [--no-gemm] [--min-seconds S] "
                   "[--peak-f32 G] [--peak-bf16 G] [--peak-amx G]\n",
                   argv[0]);
      return 2;
    }
  }
  bool any = false;
  for (const Shape& s : kShapes) {
    if (!only_shape.empty() && only_shape != s.name) continue;
    any = true;
    if (f32) run_shape(s, false, only_variant, gemm, min_seconds, peaks);
    if (bf16) run_shape(s, true, only_variant, gemm, min_seconds, peaks);
  }
  if (!any) {
    std::fprintf(stderr, "bench_conv: no shape named %s\n", only_shape.c_str());
    return 2;
  }
  return 0;
}
