// kernels_on_cpu.hpp: the launches of pointwise.cu and linear.cu, replayed on
// the SIMT emulator. This file defines CUDA's spellings as macros
// (cuda_on_cpu.hpp), so CMake keeps it out of the unity batches.
#include "kernels_on_cpu.hpp"

// clang-format off
#include "on_cpu/cuda_on_cpu.hpp"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunknown-pragmas"  // #pragma unroll
#include "kernels/cuda/elementwise_kernels.cuh"
#include "kernels/cuda/pointwise_kernels.cuh"
#include "kernels/cuda/linear_kernels.cuh"
#include "kernels/cuda/denoise_loop_kernels.cuh"
#include "kernels/cuda/vae_kernels.cuh"
#pragma GCC diagnostic pop
// clang-format on

#include <algorithm>
#include <cstring>

namespace stepmix::test::on_cpu {
namespace {

constexpr int kElementwiseThreads = 256;  // elementwise.cuh's block
constexpr int64_t kMaxBlocks = 8;

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

unsigned blocks_for(int64_t work, int threads) {
  return unsigned(std::clamp<int64_t>((work + threads - 1) / threads, 1, kMaxBlocks));
}

void launch(simt::Dim3 grid, int threads, const std::function<void()>& body) {
  simt::LaunchConfig config;
  config.grid = grid;
  config.block = {unsigned(threads), 1, 1};
  simt::launch(config, body);
}

// elementwise.cuh launch_each / launch_each_by_eight.
template <class Op>
void each(const Op& op, int64_t count) {
  if (count == 0) return;
  launch({blocks_for(count, kElementwiseThreads), 1, 1}, kElementwiseThreads,
         [&] { cuda::detail::elementwise_kernel(op, count); });
}
template <class Op>
void each_by_eight(const Op& op, int64_t count, bool vectorizable) {
  if (!vectorizable) return each(op, count);
  if (count == 0) return;
  launch({blocks_for(count / 8 + 1, kElementwiseThreads), 1, 1}, kElementwiseThreads,
         [&] { cuda::detail::elementwise_vec8_kernel(op, count); });
}

}  // namespace

void rms_norm_to_bf16(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                      uint16_t* out) {
  if (rows == 0) return;
  launch({unsigned(rows), 1, 1}, cuda::kThreads,
         [&] { cuda::rms_norm_kernel(x, n, weight, eps, kind == NormKind::Nemotron, out); });
}

void head_norm_rotary_bf16(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                           float eps, NormKind kind, const float* cos, const float* sin) {
  const int64_t vectors = rows * heads;
  if (vectors == 0) return;
  constexpr int kWarpsPerBlock = cuda::kThreads / 32;
  launch({unsigned((vectors + kWarpsPerBlock - 1) / kWarpsPerBlock), 1, 1}, cuda::kThreads, [&] {
    cuda::head_norm_rotary_kernel(x, vectors, int(heads), int(head_dim), norm_weight, eps, kind == NormKind::Nemotron,
                                  cos, sin);
  });
}

void silu_gate_bf16(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out) {
  each_by_eight(cuda::SiluGate{gate, up, out}, count, aligned(gate, 16) && aligned(up, 16) && aligned(out, 16));
}

void silu_f32(float* x, int64_t count) { each(cuda::SiluF32{x}, count); }

void relu_squared_bf16(uint16_t* x, int64_t count) { each_by_eight(cuda::ReluSquared{x}, count, aligned(x, 16)); }

void add_bf16_to_f32(float* residual, const uint16_t* y, int64_t count) {
  each_by_eight(cuda::AddToF32{residual, y}, count, aligned(residual, 16) && aligned(y, 16));
}

void add_row_f32(float* x, int64_t rows, int64_t n, const float* row) { each(cuda::AddRow{x, row, n}, rows * n); }

void widen_bf16(const uint16_t* x, int64_t count, float* out) {
  each_by_eight(cuda::Widen{x, out}, count, aligned(x, 16) && aligned(out, 16));
}

void round_to_bf16(const float* x, int64_t count, uint16_t* out) {
  each_by_eight(cuda::Round{x, out}, count, aligned(x, 16) && aligned(out, 16));
}

void quantize_e4m3_f32(const float* x, int64_t count, float input_scale, uint8_t* codes) {
  each_by_eight(cuda::QuantizeF32{x, input_scale, codes}, count, aligned(x, 16) && aligned(codes, 8));
}

void quantize_e4m3_bf16(const uint16_t* x, int64_t count, float input_scale, uint8_t* codes) {
  each_by_eight(cuda::QuantizeBf16{x, input_scale, codes}, count, aligned(x, 16) && aligned(codes, 8));
}

void dequantize_e4m3_to_bf16(const uint8_t* codes, int64_t count, float weight_scale, uint16_t* out) {
  each_by_eight(cuda::Decode{codes, weight_scale, out}, count, aligned(codes, 8) && aligned(out, 16));
}

void linear_rows_f32(const float* x, const void* w, bool w_is_bf16, int64_t M, int64_t N, int64_t K,
                     cuda::GemmBias bias, float* y) {
  if (M == 0) return;
  const simt::Dim3 grid{unsigned((N + cuda::kRowsWarpsPerBlock - 1) / cuda::kRowsWarpsPerBlock), unsigned(M), 1};
  launch(grid, 32 * cuda::kRowsWarpsPerBlock, [&] {
    if (w_is_bf16)
      cuda::linear_rows_f32_kernel(x, static_cast<const uint16_t*>(w), bias.data, bias.type, N, K, y);
    else
      cuda::linear_rows_f32_kernel(x, static_cast<const float*>(w), bias.data, bias.type, N, K, y);
  });
}

void timestep_sinusoid(float timestep, float timestep_scale, float* out) {
  launch({1, 1, 1}, int(kTimestepChannels / 2),
         [&] { cuda::timestep_sinusoid_kernel(timestep * timestep_scale, cuda::sinusoid_log_max_period(), out); });
}

void cfg_combine(const float* v_uncond, const float* v_cond, int64_t count, float guidance, float* guided) {
  each(cuda::Cfg{v_uncond, v_cond, guidance, guided}, count);
}

void euler_step(float* x, const float* v, int64_t count, float dt) { each(cuda::Euler{x, v, dt}, count); }

void unipc_step_f32(const sched::UniPCStep& step, int64_t count, float* x, const float* v, const float* x0_prev2,
                    const float* x0_prev, float* x0_now, float* last_sample) {
  each(cuda::UniPC{step, x, v, x0_prev2, x0_prev, x0_now, last_sample}, count);
}

void flag_non_finite_f32(const float* x, int64_t count, uint32_t* flag) { each(cuda::NonFinite{x, flag}, count); }

void patchify(const float* latent, const PatchGrid& grid, float* patches) {
  const cuda::Grid g = cuda::grid_of(grid);
  each(cuda::Patchify{latent, g, patches}, g.T * g.Hp * g.Wp * g.F);
}

void unpatchify(const float* patches, const PatchGrid& grid, const int64_t* noisy_frames_host, int64_t frame_count,
                float* out) {
  const cuda::Grid g = cuda::grid_of(grid);
  fill_zero(out, std::size_t(g.C * g.T * g.H * g.W) * sizeof(float));
  for (int64_t n = 0; n < frame_count; ++n)
    each(cuda::UnpatchifyFrame{patches, g, n, noisy_frames_host[n], out}, g.Hp * g.Wp * g.F);
}

void fill_zero(void* data, std::size_t bytes) { std::memset(data, 0, bytes); }

void conv_gather_taps_bf16(const cuda::ConvFrames& frames, const cuda::ConvGeometry& g, int64_t row0, int64_t rows,
                           uint16_t* a) {
  if (rows <= 0) return;
  const int taps = g.kt * g.kh * g.kw;
  bool vector = g.c_in % 8 == 0 && aligned(a, 16);
  for (int t = 0; t < g.kt; ++t) vector = vector && (!frames.frame[t] || aligned(frames.frame[t], 16));
  if (vector) {
    each(cuda::GatherTaps<8>{frames, g.kh, g.kw, g.c_in, g.h_in, g.w_in, g.w_out, g.stride, g.pad_top, g.pad_left, row0,
                             g.c_in / 8, taps, a},
         rows * taps * (g.c_in / 8));
  } else {
    each(cuda::GatherTaps<1>{frames, g.kh, g.kw, g.c_in, g.h_in, g.w_in, g.w_out, g.stride, g.pad_top, g.pad_left, row0,
                             g.c_in, taps, a},
         rows * taps * g.c_in);
  }
}

void conv_epilogue_f32(float* y, const float* bias, const float* residual, int64_t rows, int64_t c_out) {
  each(cuda::ConvEpilogue{y, bias, residual, c_out}, rows * c_out);
}

void channel_rms_norm(const float* x, int64_t positions, int64_t channels, const float* gamma, float scale, bool silu,
                      bool bf16_out, void* y) {
  if (positions == 0) return;
  constexpr int threads = 256;
  launch({unsigned((positions * 32 + threads - 1) / threads), 1, 1}, threads,
         [&] { cuda::channel_rms_norm_kernel(x, positions, channels, gamma, scale, silu, bf16_out, y); });
}

void upsample_nearest2(const float* x, int64_t h, int64_t w, int64_t c, bool bf16_out, void* y) {
  each(cuda::UpsampleNearest2{x, w, c, bf16_out, y}, 4 * h * w * c);
}

void duplicate_up(const float* x, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int ft, int fs, int dt, float* y) {
  const int64_t f = int64_t(ft) * fs * fs;
  each(cuda::DuplicateUp{x, w, c_in, c_out, f, c_out * f / c_in, fs, dt, y}, h * fs * w * fs * c_out);
}

void channel_slice(const float* x, int64_t positions, int64_t channels, int64_t c0, int64_t c, float* y) {
  each(cuda::ChannelSlice{x, channels, c0, c, y}, positions * c);
}

void unpatchify_clamped(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y) {
  const int64_t colours = c / (int64_t(p) * p);
  each(cuda::UnpatchifyClamped{x, w, c, colours, p, y}, h * p * w * p * colours);
}

void patchify_pixels(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y) {
  const int64_t yc = c * p * p;
  each(cuda::PatchifyPixels{x, w / p, c, yc, p, y}, (h / p) * (w / p) * yc);
}

void average_down(const cuda::ConvFloatFrames& frames, int ft, int64_t h, int64_t w, int64_t c_in, int64_t c_out,
                  int fs, float* y) {
  const int64_t f = int64_t(ft) * fs * fs;
  const int64_t g = c_in * f / c_out, h_out = h / fs, w_out = w / fs;
  each(cuda::AverageDown{frames, w, c_in, c_out, w_out, f, g, fs, 1.0f / float(g), y}, h_out * w_out * c_out);
}

void split_qkv(const float* qkv, int64_t P, int64_t C, float* q, float* k, float* vt) {
  each(cuda::SplitQkv{qkv, P, C, q, k, vt}, P * C);
}

void softmax_rows(float* s, int64_t rows, int64_t n) {
  if (rows == 0) return;
  launch({unsigned(rows), 1, 1}, cuda::kSoftmaxThreads, [&] { cuda::softmax_rows_kernel(s, n); });
}

}  // namespace stepmix::test::on_cpu
