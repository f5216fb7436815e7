#include "sched/fp_contract.hpp"

#include "sched/flow_match_euler.hpp"

#include <cmath>
#include <string>

#include "sched/rounding.hpp"
#include "sched/schedule.hpp"
#include "stepmix/error.hpp"

namespace stepmix::sched {

FlowMatchEulerDiscreteScheduler::FlowMatchEulerDiscreteScheduler(const FlowMatchEulerOptions& options)
    : options_(options) {
  if (options.num_train_timesteps <= 0)
    throw Error("scheduler", "FlowMatchEuler: num_train_timesteps must be positive");
  if (!(options.shift > 0) || !std::isfinite(options.shift))
    throw Error("scheduler", "FlowMatchEuler: shift must be a positive finite number");
  if (!options.explicit_sigmas.empty())  // validates the list now rather than at the first request
    flow_match_explicit_schedule(options.explicit_sigmas, options.num_train_timesteps, options.shift);
}

void FlowMatchEulerDiscreteScheduler::set_timesteps(int num_steps) {
  if (num_steps <= 0)
    throw Error("scheduler", "FlowMatchEuler: number of steps must be positive, got " + std::to_string(num_steps));
  FlowMatchSchedule s;
  if (!options_.explicit_sigmas.empty()) {
    if (std::size_t(num_steps) != options_.explicit_sigmas.size())
      throw Error("scheduler", "FlowMatchEuler: this build samples with a fixed list of " +
                                   std::to_string(options_.explicit_sigmas.size()) + " sigmas (fixed_step_sampler_config.t_list); " +
                                   "expected " + std::to_string(options_.explicit_sigmas.size()) +
                                   " steps (--steps), got " + std::to_string(num_steps));
    s = flow_match_explicit_schedule(options_.explicit_sigmas, options_.num_train_timesteps, options_.shift);
  } else {
    s = flow_match_default_schedule(num_steps, options_.num_train_timesteps, options_.shift);
  }
  sigmas_ = std::move(s.sigmas);
  timesteps_.assign(s.timesteps.begin(), s.timesteps.end());
  reset();
}

void FlowMatchEulerDiscreteScheduler::set_sigmas(const std::vector<double>& sigmas) {
  FlowMatchSchedule s = flow_match_explicit_schedule(sigmas, options_.num_train_timesteps, options_.shift);
  sigmas_ = std::move(s.sigmas);
  timesteps_.assign(s.timesteps.begin(), s.timesteps.end());
  reset();
}

void FlowMatchEulerDiscreteScheduler::reset() {
  step_index_ = 0;
  run_numel_ = 0;
}

void FlowMatchEulerDiscreteScheduler::step(std::span<const float> model_output, double timestep,
                                           std::span<float> sample) {
  if (options_.stochastic_sampling && !noise_)
    throw Error("scheduler", "FlowMatchEuler: stochastic_sampling needs a noise source (set_noise_source)");
  check_step_args(model_output.size(), timestep, sample.size());
  const std::size_t n = sample.size();
  const bool bf16 = options_.precision == Precision::bf16_emulation;
  // The reference upcasts the sample to FP32, computes in FP32 (a product of
  // a float32 0-d scalar with a BF16 model output stays BF16), and casts the
  // result back to the model-output dtype.
  auto out_round = [bf16](float x) { return bf16 ? detail::RoundBF16::round(x) : x; };
  const float sigma = sigmas_[std::size_t(step_index_)];
  const float sigma_next = sigmas_[std::size_t(step_index_) + 1];
  float* x = sample.data();
  const float* v = model_output.data();

  if (!options_.stochastic_sampling) {
    // x_{k+1} = x_k + (σ_{k+1} − σ_k)·v_k
    const float dt = sigma_next - sigma;
    if (bf16) {
      const float dt_s = out_round(dt);
      for (std::size_t i = 0; i < n; ++i) x[i] = out_round(x[i] + out_round(dt_s * out_round(v[i])));
    } else {
      detail::euler_elements(dt, n, x, v);
    }
  } else {
    // x0 = x_k − σ_k·v_k;  x_{k+1} = (1 − σ_{k+1})·x0 + σ_{k+1}·ε_k
    noise_buffer_.resize(n);
    noise_(step_index_, std::span<float>(noise_buffer_));
    const float sigma_s = out_round(sigma);
    const float keep = 1.0f - sigma_next;
    for (std::size_t i = 0; i < n; ++i) {
      const float x0 = x[i] - out_round(sigma_s * out_round(v[i]));
      x[i] = out_round(keep * x0 + sigma_next * noise_buffer_[i]);
    }
  }
  ++step_index_;
}

std::optional<std::string> FlowMatchEulerDiscreteScheduler::host_only_reason() const {
  if (options_.stochastic_sampling)
    return "FlowMatchEuler: stochastic sampling runs on the host only (its noise is drawn there)";
  if (options_.precision != Precision::fp32)
    return "FlowMatchEuler: the bf16 emulation runs on the host only (a latent in backend memory is fp32)";
  return std::nullopt;
}

LatentStep FlowMatchEulerDiscreteScheduler::begin_latent_step(double timestep, std::size_t n) {
  check_step_args(n, timestep, n);
  if (const auto reason = host_only_reason()) throw Error("scheduler", *reason);
  LatentStep step;
  step.kind = LatentStep::Kind::Euler;
  step.euler_dt = sigmas_[std::size_t(step_index_) + 1] - sigmas_[std::size_t(step_index_)];
  ++step_index_;
  return step;
}

namespace detail {
void euler_elements(float dt, std::size_t n, float* x, const float* v) {
  for (std::size_t i = 0; i < n; ++i) x[i] = x[i] + dt * v[i];
}
}  // namespace detail

}  // namespace stepmix::sched
