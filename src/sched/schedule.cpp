#include "sched/fp_contract.hpp"

#include "sched/schedule.hpp"

#include <cmath>
#include <string>

#include "stepmix/error.hpp"

namespace stepmix::sched {
namespace {

void check_steps(int num_steps, int num_train_timesteps) {
  if (num_steps <= 0)
    throw Error("scheduler", "number of steps must be positive, got " + std::to_string(num_steps));
  if (num_train_timesteps <= 0)
    throw Error("scheduler", "num_train_timesteps must be positive, got " + std::to_string(num_train_timesteps));
}

// numpy.linspace(start, stop, num) in float64, reproducing its arithmetic:
// y_k = k·step + start with step = (stop − start)/(num − 1), and the last
// point set to `stop` exactly.
std::vector<double> linspace(double start, double stop, int num) {
  std::vector<double> y(static_cast<std::size_t>(num));
  const int div = num - 1;
  const double delta = stop - start;
  if (div > 0) {
    const double step = delta / div;
    for (int k = 0; k < num; ++k) {
      const double scaled = (step == 0) ? (double(k) / div) * delta : double(k) * step;
      y[std::size_t(k)] = scaled + start;
    }
    y.back() = stop;
  } else {
    for (int k = 0; k < num; ++k) y[std::size_t(k)] = double(k) * delta + start;
  }
  return y;
}

// The shift evaluated the way torch/numpy do on float32 arrays with a Python
// float: both scalars rounded to float32, every operation in float32.
float flow_shift_f32(float sigma, double shift) {
  const float s = float(shift);
  const float s_minus_1 = float(shift - 1.0);
  const float numerator = s * sigma;
  const float denominator = 1.0f + s_minus_1 * sigma;
  return numerator / denominator;
}

}  // namespace

double flow_shift(double sigma, double shift) { return shift * sigma / (1.0 + (shift - 1.0) * sigma); }

UniPCSchedule unipc_flow_schedule(int num_steps, int num_train_timesteps, double shift, bool native_grid) {
  check_steps(num_steps, num_train_timesteps);
  const double T = num_train_timesteps;
  std::vector<double> sigma =
      native_grid ? linspace(1.0 - 1.0 / T, 0.0, num_steps + 1) : linspace(1.0, 1.0 / T, num_steps + 1);
  sigma.pop_back();
  for (double& s : sigma) s = flow_shift(s, shift);
  // Keeps λ(σ_0) = ln(1 − σ_0) − ln(σ_0) finite. The reference applies it to
  // the grid the pipeline passes in too: the native grid starts at 1 − 1/T,
  // which a shift brings within 1e-6 of 1 only when T·s exceeds about 10^6.
  if (std::fabs(sigma[0] - 1.0) < 1e-6) sigma[0] -= 1e-6;

  UniPCSchedule out;
  for (double s : sigma) {
    out.timesteps.push_back(std::int64_t(s * T));  // truncation toward zero, as numpy's astype
    out.sigmas.push_back(float(s));
  }
  out.sigmas.push_back(0.0f);
  return out;
}

UniPCSchedule unipc_karras_flow_schedule(int num_steps, int num_train_timesteps, double sigma_min,
                                         double sigma_max) {
  check_steps(num_steps, num_train_timesteps);
  if (!(sigma_min > 0) || !(sigma_max > sigma_min))
    throw Error("scheduler", "Karras sigmas need 0 < sigma_min < sigma_max, got sigma_min " +
                                 std::to_string(sigma_min) + ", sigma_max " + std::to_string(sigma_max));
  const double T = num_train_timesteps;
  const double rho = 7.0;
  const double min_inv_rho = std::pow(sigma_min, 1.0 / rho);
  const double max_inv_rho = std::pow(sigma_max, 1.0 / rho);
  const std::vector<double> ramp = linspace(0.0, 1.0, num_steps);

  UniPCSchedule out;
  for (double r : ramp) {
    const double vp_sigma = std::pow(max_inv_rho + r * (min_inv_rho - max_inv_rho), rho);
    const double s = vp_sigma / (vp_sigma + 1.0);  // VP sigma -> flow sigma
    out.timesteps.push_back(std::int64_t(s * T));
    out.sigmas.push_back(float(s));
  }
  out.sigmas.push_back(0.0f);
  return out;
}

FlowMatchSchedule flow_match_default_schedule(int num_steps, int num_train_timesteps, double shift) {
  check_steps(num_steps, num_train_timesteps);
  const double T = num_train_timesteps;
  // Training table endpoints, computed in float32 like the reference's
  // __init__ (timesteps j = T..1 as float32, σ = j / T, shifted).
  const float T32 = float(num_train_timesteps);
  const double sigma_max = flow_shift_f32(T32 / T32, shift);
  const double sigma_min = flow_shift_f32(1.0f / T32, shift);

  std::vector<double> t = linspace(sigma_max * T, sigma_min * T, num_steps);
  FlowMatchSchedule out;
  for (double tk : t) {
    const float s = float(flow_shift(tk / T, shift));  // the shift is applied a second time
    out.sigmas.push_back(s);
    out.timesteps.push_back(s * T32);
  }
  out.sigmas.push_back(0.0f);
  return out;
}

FlowMatchSchedule flow_match_explicit_schedule(const std::vector<double>& sigmas, int num_train_timesteps,
                                               double shift) {
  check_steps(int(sigmas.size()), num_train_timesteps);
  const float T32 = float(num_train_timesteps);
  FlowMatchSchedule out;
  for (std::size_t k = 0; k < sigmas.size(); ++k) {
    const double v = sigmas[k];
    if (!(v > 0.0) || !(v <= 1.0))
      throw Error("scheduler", "explicit sigmas must lie in (0, 1], got " + std::to_string(v));
    if (k > 0 && !(v < sigmas[k - 1]))
      throw Error("scheduler", "explicit sigmas must be strictly decreasing, got " + std::to_string(sigmas[k - 1]) +
                                   " then " + std::to_string(v));
    const float s = flow_shift_f32(float(v), shift);
    out.sigmas.push_back(s);
    out.timesteps.push_back(s * T32);
  }
  out.sigmas.push_back(0.0f);
  return out;
}

}  // namespace stepmix::sched
