// An image-to-video denoising run on a golden transformer, shared by the CPU
// backend's tests of the device loop (denoise_backend_test.cpp) and the CUDA
// tests: latent {4, 3, 4, 4} whose frame 0 is a clean latent (seed 5) marked
// conditioned, the other frames noise (seed 11), 6 steps of the checkpoint's
// policy.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "io/checkpoint.hpp"
#include "model/model_test_util.hpp"
#include "pipeline/denoise.hpp"
#include "pipeline/noise.hpp"

namespace stepmix::test {

struct ImageToVideoShape {
  static constexpr int64_t C = 4, T = 3, plane = 4 * 4;
  static constexpr int steps = 6;
};

// The clean latent of frame 0, [C][plane].
inline std::vector<float> image_to_video_clean_frame() {
  return NormalGenerator(5).normals(std::size_t(ImageToVideoShape::C * ImageToVideoShape::plane));
}

// Latent frame t of `latent` [C][T][plane], as [C][plane].
inline std::vector<float> latent_frame(const std::vector<float>& latent, int64_t t) {
  using S = ImageToVideoShape;
  std::vector<float> out;
  for (int64_t c = 0; c < S::C; ++c)
    out.insert(out.end(), latent.begin() + (c * S::T + t) * S::plane, latent.begin() + (c * S::T + t + 1) * S::plane);
  return out;
}

// resident: denoise_on_backend whatever the backend, else denoise().
inline DenoiseResult run_image_to_video(const std::string& folder, Backend& backend, sched::Scheduler& scheduler,
                                        double guidance, ActivationDType activations, bool batch_cfg, bool resident,
                                        DenoiseObserver* observer = nullptr) {
  using S = ImageToVideoShape;
  const ModelDirectory dir = ModelDirectory::open(golden_path(folder));
  Cosmos3Transformer transformer = Cosmos3Transformer::load(dir, WeightCache::None, backend);
  const ResolvedPolicy policy = resolve_policy(dir.config, dir.config_path, {});
  StepController controller(plan_steps(policy, transformer.has_fp8(), S::steps));
  DenoiseRequest request;
  request.cond_ids = {28, 93, 12, 94, 95};
  request.uncond_ids = {94, 95};
  request.latent_shape = {S::C, S::T, 4, 4};
  request.guidance = guidance;
  request.noise = NormalGenerator(11).normals(std::size_t(S::C * S::T * S::plane));
  const std::vector<float> clean = image_to_video_clean_frame();
  for (int64_t c = 0; c < S::C; ++c)
    std::copy_n(clean.begin() + c * S::plane, S::plane, request.noise.begin() + c * S::T * S::plane);
  request.condition_frames = {1, 0, 0};
  request.activations = activations;
  request.batch_cfg = batch_cfg;
  const SequenceSettings settings = read_sequence_settings(dir.config, dir.config_path);
  return resident ? denoise_on_backend(transformer, scheduler, controller, request, settings, observer)
                  : denoise(transformer, scheduler, controller, request, settings, observer);
}

}  // namespace stepmix::test
