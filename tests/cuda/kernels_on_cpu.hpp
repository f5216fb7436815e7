// The CUDA pointwise, Linear, denoising-loop and VAE kernels
// (src/kernels/cuda/pointwise_kernels.cuh, linear_kernels.cuh,
// denoise_loop_kernels.cuh, vae_kernels.cuh) run on the CPU by the SIMT
// emulator: the entry points of
// cuda_kernels.hpp with the same names and arguments (less the stream), on
// host memory, with their launchers' kernels, block sizes and 16-byte-path
// decisions. Grid-stride launches get at most 8 blocks, so their loops go
// round. Argument checks are the launchers' own business and are not
// repeated here. Throws stepmix::Error ("[simt] ...") for anything the
// emulator refuses.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/pointwise.hpp"

namespace stepmix::test::on_cpu {

void rms_norm_to_bf16(const float* x, int64_t rows, int64_t n, const float* weight, float eps, NormKind kind,
                      uint16_t* out);
void head_norm_rotary_bf16(uint16_t* x, int64_t rows, int64_t heads, int64_t head_dim, const float* norm_weight,
                           float eps, NormKind kind, const float* cos, const float* sin);
void silu_gate_bf16(const uint16_t* gate, const uint16_t* up, int64_t count, uint16_t* out);
void silu_f32(float* x, int64_t count);
void relu_squared_bf16(uint16_t* x, int64_t count);
void add_bf16_to_f32(float* residual, const uint16_t* y, int64_t count);
void add_row_f32(float* x, int64_t rows, int64_t n, const float* row);
void widen_bf16(const uint16_t* x, int64_t count, float* out);
void round_to_bf16(const float* x, int64_t count, uint16_t* out);

void quantize_e4m3_f32(const float* x, int64_t count, float input_scale, uint8_t* codes);
void quantize_e4m3_bf16(const uint16_t* x, int64_t count, float input_scale, uint8_t* codes);
void dequantize_e4m3_to_bf16(const uint8_t* codes, int64_t count, float weight_scale, uint16_t* out);
void linear_rows_f32(const float* x, const void* w, bool w_is_bf16, int64_t M, int64_t N, int64_t K,
                     cuda::GemmBias bias, float* y);

void timestep_sinusoid(float timestep, float timestep_scale, float* out);
void cfg_combine(const float* v_uncond, const float* v_cond, int64_t count, float guidance, float* guided);
void euler_step(float* x, const float* v, int64_t count, float dt);
void unipc_step_f32(const sched::UniPCStep& step, int64_t count, float* x, const float* v, const float* x0_prev2,
                    const float* x0_prev, float* x0_now, float* last_sample);
void flag_non_finite_f32(const float* x, int64_t count, uint32_t* flag);
void patchify(const float* latent, const PatchGrid& grid, float* patches);
void unpatchify(const float* patches, const PatchGrid& grid, const int64_t* noisy_frames_host, int64_t frame_count,
                float* out);
void conv_gather_taps_bf16(const cuda::ConvFrames& frames, const cuda::ConvGeometry& geometry, int64_t row0,
                           int64_t rows, uint16_t* a);
void conv_epilogue_f32(float* y, const float* bias, const float* residual, int64_t rows, int64_t c_out);
void channel_rms_norm(const float* x, int64_t positions, int64_t channels, const float* gamma, float scale, bool silu,
                      bool bf16_out, void* y);
void upsample_nearest2(const float* x, int64_t h, int64_t w, int64_t c, bool bf16_out, void* y);
void duplicate_up(const float* x, int64_t h, int64_t w, int64_t c_in, int64_t c_out, int ft, int fs, int dt, float* y);
void channel_slice(const float* x, int64_t positions, int64_t channels, int64_t c0, int64_t c, float* y);
void unpatchify_clamped(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y);
void patchify_pixels(const float* x, int64_t h, int64_t w, int64_t c, int p, float* y);
void average_down(const cuda::ConvFloatFrames& frames, int ft, int64_t h, int64_t w, int64_t c_in, int64_t c_out,
                  int fs, float* y);
void split_qkv(const float* qkv, int64_t P, int64_t C, float* q, float* k, float* vt);
void softmax_rows(float* s, int64_t rows, int64_t n);

// cuda::fill_zero on host memory.
void fill_zero(void* data, std::size_t bytes);

}  // namespace stepmix::test::on_cpu
