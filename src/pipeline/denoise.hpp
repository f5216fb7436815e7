// The denoising loop: per iteration, pick the precision once, run the
// conditional and (with CFG) the unconditional pass, guide
// (v = v_u + g·(v_c − v_u)), and step the scheduler. The latent state stays in
// FP32 between steps, on the host or, with denoise_on_backend, in the
// transformer's backend memory. With CFG the two passes of a step go through
// one batched forward (Cosmos3Transformer::forward_batch on the host,
// forward_resident with two samples on the backend: each weight read once
// per step, bit-identical to running them one after the other).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "model/transformer.hpp"
#include "pipeline/sequence.hpp"
#include "sched/scheduler.hpp"
#include "stepmix/model.hpp"
#include "stepmix/policy.hpp"

namespace stepmix {

enum class CfgPass { Conditional, Unconditional };

struct DenoiseRequest {
  std::vector<int64_t> cond_ids;    // complete understanding prefix (ends with eos, <|vision_start|>)
  std::vector<int64_t> uncond_ids;  // used only when guidance != 1
  std::array<int64_t, 4> latent_shape{};  // C, T, H, W
  double fps = 24.0;
  double guidance = 1.0;            // 1 disables CFG (one pass per iteration)
  std::vector<float> noise;         // initial latent, [1, C, T, H, W]
  // [T] or empty: 1 marks a conditioned latent frame (image-to-video): its
  // initial latent is the clean one, the transformer treats it as clean, its
  // velocity is zero, and it keeps its initial values through every step.
  std::vector<int64_t> condition_frames;
  bool conditions_any_frame() const {
    return std::any_of(condition_frames.begin(), condition_frames.end(), [](int64_t f) { return f != 0; });
  }
  ActivationDType activations = ActivationDType::F32;
  // The latent in BF16 between steps (GenerateRequest::bf16_latents): the CFG
  // combination in BF16 elementwise; the caller rounds the initial latent and
  // gives the scheduler BF16 arithmetic. The host loop only.
  bool bf16_latents = false;
  // CFG passes in one batched forward; false runs them one after the other
  // (same results bit for bit; for tests and debugging). A transformer with
  // an activation-code hook always runs them one at a time, since the hook
  // expects one pass's codes per call.
  bool batch_cfg = true;
};

// Optional hooks into the loop (progress, tests, calibration).
class DenoiseObserver {
 public:
  virtual ~DenoiseObserver() = default;
  // After the precision of iteration i is chosen, before any transformer call.
  virtual void on_step_begin(int step, int num_steps, Precision generation, Precision reasoner) {}
  // Before each pass (a batched CFG step announces both passes, then runs them).
  virtual void on_pass(int step, CfgPass pass) {}
  // After the scheduler update; v_uncond is null without CFG. All [1,C,T,H,W].
  virtual void on_step_end(int step, const std::vector<float>& v_cond, const std::vector<float>* v_uncond,
                           const std::vector<float>& v_guided, const std::vector<float>& latent) {}
  // What on_step_end reads. A loop whose latent lives in backend memory
  // copies only these to the host each step; on_step_end gets empty vectors
  // for the rest.
  virtual bool wants_velocities() const { return true; }
  virtual bool wants_latent() const { return true; }
};

struct DenoiseResult {
  std::vector<float> latent;         // final latent [1, C, T, H, W]
  std::vector<Precision> trace;      // generation precision per iteration
  Precision reasoner = Precision::W8A8;
  int transformer_calls = 0;  // passes: 2 per CFG step, batched or not
  int batched_steps = 0;      // CFG steps whose two passes ran as one forward
};

// STEPMIX_CFG_BATCH: unset or 1 → true, 0 → false; anything else throws.
bool cfg_batching_from_environment();

// Runs the loop with `scheduler` set to the controller's N steps. The
// controller is reset when the loop ends, also on error or cancellation;
// when `cancel` becomes true the loop stops after the current step and
// throws Cancelled (stepmix/model.hpp).
// A transformer on a backend other than the CPU runs denoise_on_backend.
DenoiseResult denoise(Cosmos3Transformer& transformer, sched::Scheduler& scheduler, StepController& controller,
                      const DenoiseRequest& request, const SequenceSettings& settings,
                      DenoiseObserver* observer = nullptr, const std::atomic<bool>* cancel = nullptr);

// The latent-sized float32 buffers denoise_on_backend holds at most: the
// latent, the conditional velocity, with CFG the unconditional and the
// guided ones, and UniPC's four history buffers (for the memory estimate);
// image-to-video adds the guided one without CFG and the clean planes with a
// zero plane (at most two latents).
inline int64_t denoise_on_backend_latent_buffers(bool cfg, bool conditioned = false) {
  return (cfg ? 4 : 2) + 4 + (conditioned ? (cfg ? 2 : 3) : 0);
}
// Both loops run a step's CFG passes as one forward (so the memory estimate
// counts two passes' activations at once) when this holds.
inline bool denoise_batches_cfg(const Cosmos3Transformer& transformer, const DenoiseRequest& request) {
  return request.guidance != 1.0 && request.batch_cfg && !transformer.has_activation_code_hook();
}

// The same loop with the latent, the velocities, the CFG combination and the
// scheduler update (Scheduler::begin_latent_step, fp32) in the transformer's
// backend memory for the whole run (Cosmos3Transformer::forward_resident,
// both CFG passes in one call when batched as on the host): the noise goes up
// once, the final latent comes down once, and per step only what the
// observer wants. On the CPU backend it gives denoise()'s bits (tested),
// which is what makes it checkable without a GPU.
DenoiseResult denoise_on_backend(Cosmos3Transformer& transformer, sched::Scheduler& scheduler,
                                 StepController& controller, const DenoiseRequest& request,
                                 const SequenceSettings& settings, DenoiseObserver* observer = nullptr,
                                 const std::atomic<bool>* cancel = nullptr);

}  // namespace stepmix
