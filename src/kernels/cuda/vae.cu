// The video VAE's kernels (frames channels-last [h][w][c], as vae/frame.hpp):
// the gather of a convolution's taps into GEMM rows and its epilogue, the
// channel RMS norm, the decoder's index maps (nearest ×2, duplicate-up,
// channel slices, unpatchify), the encoder's (patchify of the pixels,
// average down) and the pieces of its single-head attention.
// Twins of the CPU code named in cuda_kernels.hpp; the index maps are
// bit-exact, the reductions differ from the CPU only in summation order.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/device_numerics.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/vae_kernels.cuh"

namespace stepmix::cuda {
namespace {

using namespace detail;

void require_positive(const char* function, std::initializer_list<int64_t> sizes) {
  for (int64_t s : sizes) require(s > 0, function, "sizes must be positive, got " + std::to_string(s));
}

}  // namespace

void conv_gather_taps_bf16(const ConvFrames& frames, const ConvGeometry& g, int64_t row0, int64_t rows, uint16_t* a,
                           StreamHandle stream) {
  require_positive("conv_gather_taps_bf16", {g.kt, g.kh, g.kw, g.c_in, g.h_in, g.w_in, g.w_out, g.stride});
  require(g.kt <= ConvFrames::kMaxFrames, "conv_gather_taps_bf16",
          "at most " + std::to_string(ConvFrames::kMaxFrames) + " frames, got " + std::to_string(g.kt));
  require(a != nullptr, "conv_gather_taps_bf16", "null output");
  if (rows <= 0) return;
  const int taps = g.kt * g.kh * g.kw;
  require(rows * taps * g.c_in < (int64_t(1) << 31) && row0 + rows < (int64_t(1) << 31), "conv_gather_taps_bf16",
          "a chunk must hold fewer than 2^31 values and a frame fewer than 2^31 positions");
  bool vector = g.c_in % 8 == 0 && aligned(a, 16);
  for (int t = 0; t < g.kt; ++t) vector = vector && (!frames.frame[t] || aligned(frames.frame[t], 16));
  if (vector) {
    const GatherTaps<8> op{frames, g.kh, g.kw, g.c_in, g.h_in, g.w_in, g.w_out, g.stride, g.pad_top, g.pad_left,
                           row0, g.c_in / 8, taps, a};
    launch_each("conv_gather_taps_bf16", op, rows * taps * (g.c_in / 8), stream);
  } else {
    const GatherTaps<1> op{frames, g.kh, g.kw, g.c_in, g.h_in, g.w_in, g.w_out, g.stride, g.pad_top, g.pad_left,
                           row0, g.c_in, taps, a};
    launch_each("conv_gather_taps_bf16", op, rows * taps * g.c_in, stream);
  }
}

void conv_epilogue_f32(float* y, const float* bias, const float* residual, int64_t rows, int64_t c_out,
                       StreamHandle stream) {
  require(rows >= 0 && c_out > 0, "conv_epilogue_f32", "expected rows >= 0 and c_out > 0");
  require(rows == 0 || (y && bias), "conv_epilogue_f32", "null device pointer");
  launch_each("conv_epilogue_f32", ConvEpilogue{y, bias, residual, c_out}, rows * c_out, stream);
}

void channel_rms_norm(const float* x, int64_t positions, int64_t channels, const float* gamma, float scale, bool silu,
                      bool bf16_out, void* y, StreamHandle stream) {
  require(positions >= 0 && channels > 0, "channel_rms_norm", "expected positions >= 0 and channels > 0");
  require(positions == 0 || (x && gamma && y), "channel_rms_norm", "null device pointer");
  // One warp per position and no loop: the grid (at most 2^30 blocks of 8
  // warps) must cover them all.
  require(positions <= (int64_t(1) << 33), "channel_rms_norm", "at most 2^33 positions");
  if (positions == 0) return;
  constexpr int threads = 256;
  launch_kernel("channel_rms_norm", channel_rms_norm_kernel, grid_for(positions * 32, threads, int64_t(1) << 30),
                threads, 0, stream, x, positions, channels, gamma, scale, silu, bf16_out, y);
}

void upsample_nearest2(const float* x, int64_t h, int64_t w, int64_t c, bool bf16_out, void* y, StreamHandle stream) {
  require_positive("upsample_nearest2", {h, w, c});
  require(x && y, "upsample_nearest2", "null device pointer");
  launch_each("upsample_nearest2", UpsampleNearest2{x, w, c, bf16_out, y}, 4 * h * w * c, stream);
}

void duplicate_up(const float* x, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int ft, int fs, int dt, float* y,
                  StreamHandle stream) {
  require_positive("duplicate_up", {h, w, c_in, c_out, ft, fs});
  require(x && y, "duplicate_up", "null device pointer");
  const int64_t f = int64_t(ft) * fs * fs;
  require((c_out * f) % c_in == 0 && dt >= 0 && dt < ft, "duplicate_up",
          "c_out·ft·fs² must be a multiple of c_in and 0 <= dt < ft");
  launch_each("duplicate_up", DuplicateUp{x, w, c_in, c_out, f, c_out * f / c_in, fs, dt, y}, h * fs * w * fs * c_out,
              stream);
}

void channel_slice(const float* x, int64_t positions, int64_t channels, int64_t c0, int64_t c, float* y,
                   StreamHandle stream) {
  require_positive("channel_slice", {positions, channels, c});
  require(c0 >= 0 && c0 + c <= channels, "channel_slice", "channels [c0, c0 + c) outside the frame");
  require(x && y, "channel_slice", "null device pointer");
  launch_each("channel_slice", ChannelSlice{x, channels, c0, c, y}, positions * c, stream);
}

void unpatchify_clamped(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y, StreamHandle stream) {
  require_positive("unpatchify_clamped", {h, w, c, p});
  require(c % (int64_t(p) * p) == 0, "unpatchify_clamped", "channels must be a multiple of p²");
  require(x && y, "unpatchify_clamped", "null device pointer");
  const int64_t colours = c / (int64_t(p) * p);
  launch_each("unpatchify_clamped", UnpatchifyClamped{x, w, c, colours, p, y}, h * p * w * p * colours, stream);
}

void patchify_pixels(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y, StreamHandle stream) {
  require_positive("patchify_pixels", {h, w, c, p});
  require(h % p == 0 && w % p == 0, "patchify_pixels", "height and width must be multiples of p");
  require(x && y, "patchify_pixels", "null device pointer");
  const int64_t yc = c * p * p;
  launch_each("patchify_pixels", PatchifyPixels{x, w / p, c, yc, p, y}, (h / p) * (w / p) * yc, stream);
}

void average_down(const ConvFloatFrames& frames, int ft, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int fs,
                  float* y, StreamHandle stream) {
  require_positive("average_down", {ft, h, w, c_in, c_out, fs});
  require(ft <= ConvFloatFrames::kMaxFrames, "average_down", "at most 4 frames");
  const int64_t f = int64_t(ft) * fs * fs;
  require((c_in * f) % c_out == 0 && h % fs == 0 && w % fs == 0, "average_down",
          "C_in·ft·fs² must be a multiple of c_out and the frame a multiple of fs");
  require(y != nullptr, "average_down", "null device pointer");
  const int64_t g = c_in * f / c_out, h_out = h / fs, w_out = w / fs;
  const AverageDown op{frames, w, c_in, c_out, w_out, f, g, fs, 1.0f / float(g), y};
  launch_each("average_down", op, h_out * w_out * c_out, stream);
}

void split_qkv(const float* qkv, int64_t P, int64_t C, float* q, float* k, float* vt, StreamHandle stream) {
  require_positive("split_qkv", {P, C});
  require(qkv && q && k && vt, "split_qkv", "null device pointer");
  launch_each("split_qkv", SplitQkv{qkv, P, C, q, k, vt}, P * C, stream);
}

void softmax_rows(float* s, int64_t rows, int64_t n, StreamHandle stream) {
  require(rows >= 0 && n > 0, "softmax_rows", "expected rows >= 0 and n > 0");
  require(rows <= 2147483647, "softmax_rows", "at most 2^31 - 1 rows");
  if (rows == 0) return;
  require(s != nullptr, "softmax_rows", "null device pointer");
  launch_kernel("softmax_rows", softmax_rows_kernel, unsigned(rows), kSoftmaxThreads, 0, stream, s, n);
}

}  // namespace stepmix::cuda
