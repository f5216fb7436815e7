// The denoising loop's device-side pieces (timestep embedding, CFG
// combination, Euler and UniPC updates, patchify/unpatchify) and the seeded fills the
// tests and benchmarks make their data with.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/cuda_kernels.hpp"
#include "kernels/cuda/denoise_loop_kernels.cuh"
#include "kernels/cuda/device_numerics.cuh"
#include "kernels/cuda/elementwise.cuh"

namespace stepmix::cuda {
namespace {

using namespace detail;

void check_pointer(const char* function, int64_t count, const void* x) {
  require(count == 0 || x, function, "null device pointer");
}

}  // namespace

void timestep_sinusoid(float timestep, float timestep_scale, float* out, StreamHandle stream) {
  require(out != nullptr, "timestep_sinusoid", "null device pointer");
  launch_kernel("timestep_sinusoid", timestep_sinusoid_kernel, 1, unsigned(kTimestepChannels / 2), 0, stream,
                timestep * timestep_scale, sinusoid_log_max_period(), out);
}

void cfg_combine(const float* v_uncond, const float* v_cond, int64_t count, float guidance, float* guided,
                 StreamHandle stream) {
  require(count == 0 || (v_uncond && v_cond && guided), "cfg_combine", "null device pointer");
  launch_each("cfg_combine", Cfg{v_uncond, v_cond, guidance, guided}, count, stream);
}

void euler_step(float* x, const float* v, int64_t count, float dt, StreamHandle stream) {
  require(count == 0 || (x && v), "euler_step", "null device pointer");
  launch_each("euler_step", Euler{x, v, dt}, count, stream);
}

void unipc_step_f32(const sched::UniPCStep& step, int64_t count, float* x, const float* v, const float* x0_prev2,
                    const float* x0_prev, float* x0_now, float* last_sample, StreamHandle stream) {
  require(step.corrector_order >= 0 && step.corrector_order <= 2 && step.predictor_order >= 0 &&
              step.predictor_order <= 2,
          "unipc_step_f32", "orders must be 0, 1 or 2");
  require(count == 0 || (x && v && x0_now && last_sample), "unipc_step_f32", "null device pointer");
  require(count == 0 || ((step.corrector_order == 0 || x0_prev) && (step.corrector_order < 2 || x0_prev2) &&
                         (step.predictor_order < 2 || x0_prev)),
          "unipc_step_f32", "null history pointer for the orders of this step");
  launch_each("unipc_step_f32", UniPC{step, x, v, x0_prev2, x0_prev, x0_now, last_sample}, count, stream);
}

void flag_non_finite_f32(const float* x, int64_t count, uint32_t* flag, StreamHandle stream) {
  require(flag && (count == 0 || x), "flag_non_finite_f32", "null device pointer");
  launch_each("flag_non_finite_f32", NonFinite{x, flag}, count, stream);
}

void patchify(const float* latent, const PatchGrid& grid, float* patches, StreamHandle stream) {
  require(grid.channels > 0 && grid.frames > 0 && grid.height > 0 && grid.width > 0 && grid.patch > 0, "patchify",
          "every latent dimension and the patch size must be positive");
  require(latent && patches, "patchify", "null device pointer");
  const Grid g = grid_of(grid);
  launch_each("patchify", Patchify{latent, g, patches}, g.T * g.Hp * g.Wp * g.F, stream);
}

void unpatchify(const float* patches, const PatchGrid& grid, const int64_t* noisy_frames_host, int64_t frame_count,
                float* out, StreamHandle stream) {
  require(grid.channels > 0 && grid.frames > 0 && grid.height > 0 && grid.width > 0 && grid.patch > 0,
          "unpatchify", "every latent dimension and the patch size must be positive");
  require(out && (frame_count == 0 || (patches && noisy_frames_host)), "unpatchify", "null pointer");
  for (int64_t n = 0; n < frame_count; ++n)
    require(noisy_frames_host[n] >= 0 && noisy_frames_host[n] < grid.frames, "unpatchify",
            "noisy frame " + std::to_string(noisy_frames_host[n]) + " outside [0, " + std::to_string(grid.frames) +
                ")");
  const Grid g = grid_of(grid);
  fill_zero(out, std::size_t(g.C * g.T * g.H * g.W) * sizeof(float), stream);
  for (int64_t n = 0; n < frame_count; ++n)
    launch_each("unpatchify", UnpatchifyFrame{patches, g, n, noisy_frames_host[n], out}, g.Hp * g.Wp * g.F, stream);
}

void fill_uniform_f32(float* x, int64_t count, uint64_t seed, float low, float high, StreamHandle stream) {
  check_pointer("fill_uniform_f32", count, x);
  launch_each("fill_uniform_f32", FillF32{x, seed, low, high}, count, stream);
}

void fill_uniform_bf16(uint16_t* x, int64_t count, uint64_t seed, float low, float high, StreamHandle stream) {
  check_pointer("fill_uniform_bf16", count, x);
  launch_each("fill_uniform_bf16", FillBf16{x, seed, low, high}, count, stream);
}

void fill_random_e4m3(uint8_t* codes, int64_t count, uint64_t seed, StreamHandle stream) {
  check_pointer("fill_random_e4m3", count, codes);
  launch_each("fill_random_e4m3", FillE4m3{codes, seed}, count, stream);
}

}  // namespace stepmix::cuda
