// FlowMatch Euler with shift: the deterministic Euler step, and the
// stochastic ("sde") step of the distilled 4-step builds with noise supplied
// by the caller.
#pragma once

#include <vector>

#include "sched/scheduler.hpp"

namespace stepmix::sched {

struct FlowMatchEulerOptions {
  int num_train_timesteps = 1000;
  double shift = 1.0;
  // x_{k+1} = (1 − σ_{k+1})·x0 + σ_{k+1}·ε_k instead of the Euler step;
  // needs a NoiseSource (set_noise_source) before the first step.
  bool stochastic_sampling = false;
  // Non-empty: the fixed sigma list of a distilled build (before the shift).
  // set_timesteps(N) then requires N == explicit_sigmas.size().
  std::vector<double> explicit_sigmas;
  Precision precision = Precision::fp32;
  // Karras sigmas are not implemented for FlowMatch Euler (make_scheduler
  // refuses them); the Cosmos3 pipeline turns a file's true off, as it does
  // for UniPC (apply_overrides).
  bool use_karras_sigmas = false;
};

class FlowMatchEulerDiscreteScheduler final : public Scheduler {
 public:
  // Throws stepmix::Error for invalid options.
  explicit FlowMatchEulerDiscreteScheduler(const FlowMatchEulerOptions& options);

  void set_timesteps(int num_steps) override;
  // Explicit (unshifted) sigmas, as Diffusers' set_timesteps(sigmas=...):
  // N = sigmas.size(); the shift is applied to them.
  void set_sigmas(const std::vector<double>& sigmas);
  void reset() override;
  std::string name() const override { return "FlowMatchEulerDiscreteScheduler"; }
  using Scheduler::step;
  void step(std::span<const float> model_output, double timestep, std::span<float> sample) override;
  LatentStep begin_latent_step(double timestep, std::size_t n) override;
  std::optional<std::string> host_only_reason() const override;

  void set_noise_source(NoiseSource source) override { noise_ = std::move(source); }
  const FlowMatchEulerOptions& options() const { return options_; }

 private:
  FlowMatchEulerOptions options_;
  NoiseSource noise_;
  std::vector<float> noise_buffer_;
};

namespace detail {
// The deterministic fp32 Euler update x[i] = x[i] + dt·v[i] (step() and
// apply_latent_step both run it).
void euler_elements(float dt, std::size_t n, float* x, const float* v);
}  // namespace detail

}  // namespace stepmix::sched
