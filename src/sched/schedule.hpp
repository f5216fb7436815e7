// Sigma / timestep grids for N steps, computed exactly as the reference does
// (operation order and float64/float32 roundings matter: a truncated
// timestep can sit within 2e-5 of an integer, see docs/schedulers.md).
#pragma once

#include <cstdint>
#include <vector>

namespace stepmix::sched {

struct UniPCSchedule {
  std::vector<std::int64_t> timesteps;  // N
  std::vector<float> sigmas;            // N + 1, last = 0 (final_sigmas_type "zero")
};

struct FlowMatchSchedule {
  std::vector<float> timesteps;  // N, float32 sigma·T
  std::vector<float> sigmas;     // N + 1, last = 0
};

// docs/schedulers.md §2.1: σ̂_k = linspace(1, 1/T, N+1)[k], flow shift, 1e-6
// nudge of σ_0, t_k = int64(σ_k·T) in float64, sigmas rounded once to float32.
// With native_grid (docs/schedulers.md §2.2): σ̂_k = linspace(1 − 1/T, 0, N+1)[k],
// the same shift, no nudge.
UniPCSchedule unipc_flow_schedule(int num_steps, int num_train_timesteps, double shift, bool native_grid = false);

// Diffusers' use_karras_sigmas + use_flow_sigmas path: a Karras (ρ = 7) grid
// between sigma_max and sigma_min in VP-sigma space, mapped to flow sigmas by
// σ/(σ+1); t_k = int64(σ_k·T). flow_shift is not applied on this path.
UniPCSchedule unipc_karras_flow_schedule(int num_steps, int num_train_timesteps, double sigma_min,
                                         double sigma_max);

// §9 default grid: training sigmas shift(j/T) in float32, then
// linspace(σ_max·T, σ_min·T, N)/T in float64, shifted again, float32.
FlowMatchSchedule flow_match_default_schedule(int num_steps, int num_train_timesteps, double shift);

// §9 explicit sigmas (distilled builds): the list is rounded to float32
// first and shifted in float32 arithmetic; timesteps = σ·T in float32.
FlowMatchSchedule flow_match_explicit_schedule(const std::vector<double>& sigmas, int num_train_timesteps,
                                               double shift);

}  // namespace stepmix::sched
