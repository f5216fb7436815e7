// Flow-matching schedulers: the interface the denoising loop talks to.
//
// The loop is
//   sched->set_timesteps(N);
//   for (int i = 0; i < sched->num_steps(); ++i) {
//     const double t = sched->timesteps()[i];
//     velocity = model(latent, t);
//     sched->step(velocity, t, latent);          // latent updated in place
//   }
// All solver state (x0 history, previous sample, current order) lives in the
// scheduler; set_timesteps() or reset() starts a fresh run.
//
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sched/latent_step.hpp"

namespace stepmix::sched {

// Arithmetic of the latent state.
//  fp32: scalar coefficients in float64 on the host, rounded once to float32,
//        applied to an FP32 latent (stepmix's production path).
//  bf16_emulation: the Diffusers BF16 pipeline, for parity tests: every
//        elementwise result is rounded to BF16, and float32 scalars are rounded
//        to BF16 before they meet a tensor (a 0-d float32 tensor does not
//        promote a BF16 tensor in torch). Inputs are expected to hold
//        BF16-representable values already.
enum class Precision { fp32, bf16_emulation };

// Supplies standard-normal noise for stochastic samplers: fills `out` with
// N(0, 1) draws for step `step_index`. The request's generator lives in the
// pipeline, not in the scheduler.
using NoiseSource = std::function<void(int step_index, std::span<float> out)>;

class Scheduler {
 public:
  virtual ~Scheduler() = default;

  // Builds the N-step schedule and resets all solver state. N <= 0 throws.
  virtual void set_timesteps(int num_steps) = 0;
  // Restarts at step 0 with the current schedule (clears history).
  virtual void reset() = 0;

  virtual std::string name() const = 0;

  // Where a stochastic sampler draws its per-step noise (FlowMatch Euler's
  // stochastic mode); schedulers that draw none ignore it.
  virtual void set_noise_source(NoiseSource source) {}

  // Timesteps handed to the model, one per step. UniPC's are integers (the
  // int64 truncation of sigma*T), stored exactly as doubles; FlowMatch's are
  // float32 values, also exact in double.
  const std::vector<double>& timesteps() const { return timesteps_; }
  // N+1 float32 sigmas; the last is 0.
  const std::vector<float>& sigmas() const { return sigmas_; }
  int num_steps() const { return int(timesteps_.size()); }
  // Index of the next step to run (0..num_steps()).
  int step_index() const { return step_index_; }
  bool finished() const { return !timesteps_.empty() && step_index_ >= num_steps(); }

  // One solver step: `model_output` is the (guided) velocity the model
  // returned for `sample` at `timestep`; `sample` is overwritten with the
  // next latent. `timestep` must equal timesteps()[step_index()] (checked:
  // a mismatch is a loop bug). Both spans must have the same length, fixed
  // for the whole run.
  virtual void step(std::span<const float> model_output, double timestep, std::span<float> sample) = 0;

  void step(const float* model_output, double timestep, float* sample, std::size_t n) {
    step(std::span<const float>(model_output, n), timestep, std::span<float>(sample, n));
  }

  // The same step for a latent of n values held elsewhere (backend memory):
  // checks the arguments as step() does, advances the scheduler as step()
  // would, and returns the float32 coefficients the caller applies
  // (latent_step.hpp; apply_latent_step is the host's twin). fp32
  // arithmetic only; a path that needs the host (bf16 emulation, stochastic
  // sampling) throws stepmix::Error. Diagnostics that read the host history
  // (UniPC's last_x0) are not kept.
  virtual LatentStep begin_latent_step(double timestep, std::size_t n) = 0;

  // Why begin_latent_step would refuse this configuration ("FlowMatchEuler:
  // stochastic sampling runs on the host only ..."), or nullopt when a latent
  // held elsewhere can be stepped: a device loop asks before its first
  // forward, so an unsupported run fails before any work.
  virtual std::optional<std::string> host_only_reason() const = 0;

 protected:
  // Shared argument checks for step(); throws stepmix::Error("scheduler", ...).
  void check_step_args(std::size_t output_size, double timestep, std::size_t sample_size);

  std::vector<double> timesteps_;
  std::vector<float> sigmas_;
  int step_index_ = 0;
  std::size_t run_numel_ = 0;  // latent size of the current run (0 = not started)
};

// `s·σ / (1 + (s − 1)·σ)` in float64: the flow shift shared by both schedulers.
double flow_shift(double sigma, double shift);

}  // namespace stepmix::sched
