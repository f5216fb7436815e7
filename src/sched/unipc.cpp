#include "sched/fp_contract.hpp"

#include "sched/unipc.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "sched/rounding.hpp"
#include "sched/schedule.hpp"
#include "stepmix/error.hpp"

namespace stepmix::sched {
namespace {

// One UniP/UniC update from sigma a to sigma b (b < a), bh2, x0 form
// (docs/schedulers.md §4):
//   x_b = (b/a)·x − α(b)·φ·m − α(b)·B·(correction),  φ = B = expm1(−h).
struct UpdateCoeffs {
  double h = 0;          // λ(b) − λ(a) > 0
  double ratio = 0;      // b / a
  double c_m = 0;        // α(b)·φ
  double c_d = 0;        // α(b)·B
  double phi = 0;        // expm1(−h)
};

UpdateCoeffs update_coeffs(double a, double b) {
  UpdateCoeffs c;
  c.h = unipc_lambda(b) - unipc_lambda(a);
  c.phi = std::expm1(-c.h);
  const double alpha_b = 1.0 - b;
  c.ratio = b / a;
  c.c_m = alpha_b * c.phi;
  c.c_d = alpha_b * c.phi;  // bh2: B(h) = φ
  return c;
}

// base = ratio·x − c_m·m   (one rounding per operation, as the reference)
template <class R>
float base_term(float ratio, float x, float c_m, float m) {
  return R::round(R::round(ratio * x) - R::round(c_m * m));
}

}  // namespace

double unipc_lambda(double sigma) {
  if (sigma == 0.0) return std::numeric_limits<double>::infinity();
  return std::log(1.0 - sigma) - std::log(sigma);
}

UniCRhos unipc_corrector_rhos(double sigma_prev2, double sigma_prev, double sigma_cur) {
  const UpdateCoeffs c = update_coeffs(sigma_prev, sigma_cur);
  UniCRhos out;
  out.r = (unipc_lambda(sigma_prev2) - unipc_lambda(sigma_prev)) / c.h;
  const double hh = -c.h;
  const double B = c.phi;
  const double g1 = c.phi / hh - 1.0;
  const double g2 = g1 / hh - 0.5;
  out.b1 = g1 / B;
  out.b2 = 2.0 * g2 / B;
  // [[1, 1], [r, 1]]·[ρ1, ρ2]ᵀ = [b1, b2]ᵀ
  out.rho1 = (out.b1 - out.b2) / (1.0 - out.r);
  out.rho2 = (out.b2 - out.r * out.b1) / (1.0 - out.r);
  return out;
}

UniPCMultistepScheduler::UniPCMultistepScheduler(const UniPCOptions& options) : options_(options) {
  if (options.solver_order != 1 && options.solver_order != 2)
    throw Error("scheduler", "UniPC: solver_order must be 1 or 2, got " + std::to_string(options.solver_order));
  if (options.num_train_timesteps <= 0)
    throw Error("scheduler", "UniPC: num_train_timesteps must be positive");
  if (!(options.flow_shift > 0) || !std::isfinite(options.flow_shift))
    throw Error("scheduler", "UniPC: flow_shift must be a positive finite number");
  if (options.use_karras_sigmas && (!(options.sigma_min > 0) || !(options.sigma_max > options.sigma_min)))
    throw Error("scheduler", "UniPC: Karras sigmas need 0 < sigma_min < sigma_max");
}

void UniPCMultistepScheduler::set_timesteps(int num_steps) {
  if (num_steps <= 0)
    throw Error("scheduler", "UniPC: number of steps must be positive, got " + std::to_string(num_steps));
  UniPCSchedule s = options_.use_karras_sigmas
                        ? unipc_karras_flow_schedule(num_steps, options_.num_train_timesteps, options_.sigma_min,
                                                     options_.sigma_max)
                        : unipc_flow_schedule(num_steps, options_.num_train_timesteps, options_.flow_shift,
                                              options_.native_flow_grid);
  int_timesteps_ = std::move(s.timesteps);
  sigmas_ = std::move(s.sigmas);
  timesteps_.assign(int_timesteps_.begin(), int_timesteps_.end());
  reset();
}

void UniPCMultistepScheduler::reset() {
  step_index_ = 0;
  run_numel_ = 0;
  m1_.clear();
  m2_.clear();
  m_cur_.clear();
  last_sample_.clear();
  prev_order_ = 0;
  last_order_ = 0;
  last_used_corrector_ = false;
}

void UniPCMultistepScheduler::step(std::span<const float> model_output, double timestep, std::span<float> sample) {
  check_step_args(model_output.size(), timestep, sample.size());
  if (options_.precision == Precision::bf16_emulation)
    step_impl<detail::RoundBF16>(model_output, sample);
  else
    step_impl<detail::RoundF32>(model_output, sample);
}

// §6. k = step_index_, N = num_steps():
//  1. m_k = x_k − σ_k·v_k                      (from the uncorrected x_k)
//  2. k ≥ 1: x̃_k = UniC(order p_{k−1})         else x̃_k = x_k
//  3. history ← (m_{k−1}, m_k)
//  4. p_k = min(order, N − k, k + 1); remember x̃_k
//  5. x_{k+1} = UniP(order p_k) from x̃_k
template <class R>
void UniPCMultistepScheduler::step_impl(std::span<const float> model_output, std::span<float> sample) {
  const std::size_t n = sample.size();
  const int k = step_index_;
  const int N = num_steps();
  if (m1_.size() != n) {
    m1_.assign(n, 0.0f);
    m2_.assign(n, 0.0f);
    m_cur_.assign(n, 0.0f);
    last_sample_.assign(n, 0.0f);
  }
  float* x = sample.data();
  const float* v = model_output.data();

  if constexpr (!std::is_same_v<R, detail::RoundF32>) {
    // The emulated pipeline holds BF16 tensors; make the inputs so.
    for (std::size_t i = 0; i < n; ++i) x[i] = R::round(x[i]);
  }

  // 1. x0 prediction (flow): m_k = x_k − σ_k·v_k.
  {
    const float sigma = R::scalar(sigmas_[std::size_t(k)]);
    for (std::size_t i = 0; i < n; ++i) m_cur_[i] = R::round(x[i] - R::round(sigma * R::round(v[i])));
  }

  // 2. UniC corrector: from σ_{k−1} to σ_k, starting at x̃_{k−1}, with the
  //    previous predictor's order. Overwrites x with x̃_k.
  last_used_corrector_ = k >= 1;
  if (k >= 1) {
    const double a = sigmas_[std::size_t(k - 1)];
    const double b = sigmas_[std::size_t(k)];
    const UpdateCoeffs c = update_coeffs(a, b);
    const float ratio = R::scalar(c.ratio), c_m = R::scalar(c.c_m), c_d = R::scalar(c.c_d);
    const float* xl = last_sample_.data();
    const float* m_prev = m1_.data();  // m_{k−1}
    const float* m_now = m_cur_.data();  // m_k
    if (prev_order_ == 1) {
      // x̃_k = base − α(b)·B·(½·(m_k − m_{k−1}))
      const float half = 0.5f;
      for (std::size_t i = 0; i < n; ++i) {
        const float base = base_term<R>(ratio, xl[i], c_m, m_prev[i]);
        const float inner = R::round(half * R::round(m_now[i] - m_prev[i]));
        x[i] = R::round(base - R::round(c_d * inner));
      }
    } else {
      // Order 2: D = (m_{k−2} − m_{k−1}) / r,
      // x̃_k = base − α(b)·B·(ρ1·D + ρ2·(m_k − m_{k−1})).
      const UniCRhos w = unipc_corrector_rhos(sigmas_[std::size_t(k - 2)], a, b);
      const float r = R::scalar(w.r), rho1 = R::scalar(w.rho1), rho2 = R::scalar(w.rho2);
      const float* m_prev2 = m2_.data();  // m_{k−2}
      for (std::size_t i = 0; i < n; ++i) {
        const float base = base_term<R>(ratio, xl[i], c_m, m_prev[i]);
        const float d = R::round(R::round(m_prev2[i] - m_prev[i]) / r);
        const float dt = R::round(m_now[i] - m_prev[i]);
        const float inner = R::round(R::round(rho1 * d) + R::round(rho2 * dt));
        x[i] = R::round(base - R::round(c_d * inner));
      }
    }
  }

  // 3. History: (m_{k−2}, m_{k−1}) ← (m_{k−1}, m_k); m_cur_ becomes scratch.
  std::swap(m2_, m1_);
  std::swap(m1_, m_cur_);

  // 4. Order: warm-up (k + 1 entries of history), lower_order_final.
  const int order = std::min({options_.solver_order, N - k, k + 1});
  std::copy(x, x + n, last_sample_.begin());

  // 5. UniP predictor from σ_k to σ_{k+1}.
  const double a = sigmas_[std::size_t(k)];
  const double b = sigmas_[std::size_t(k + 1)];
  const float* m_now = m1_.data();  // m_k
  if (b == 0.0) {
    // Final step (forced order 1): h = ∞, φ = −1, b/a = 0, α(b) = 1, so
    // x_N = m_{N−1} exactly; skip evaluating the infinities.
    std::copy(m_now, m_now + n, x);
  } else {
    const UpdateCoeffs c = update_coeffs(a, b);
    const float ratio = R::scalar(c.ratio), c_m = R::scalar(c.c_m), c_d = R::scalar(c.c_d);
    if (order == 1) {
      for (std::size_t i = 0; i < n; ++i) x[i] = base_term<R>(ratio, x[i], c_m, m_now[i]);
    } else {
      // r = (λ(σ_{k−1}) − λ(σ_k)) / h < 0, D = (m_{k−1} − m_k) / r,
      // weight fixed at ½ (not solved).
      const float r = R::scalar((unipc_lambda(sigmas_[std::size_t(k - 1)]) - unipc_lambda(a)) / c.h);
      const float half = 0.5f;
      const float* m_prev = m2_.data();  // m_{k−1}
      for (std::size_t i = 0; i < n; ++i) {
        const float base = base_term<R>(ratio, x[i], c_m, m_now[i]);
        const float d = R::round(R::round(m_prev[i] - m_now[i]) / r);
        x[i] = R::round(base - R::round(c_d * R::round(half * d)));
      }
    }
  }

  prev_order_ = order;
  last_order_ = order;
  ++step_index_;
}

}  // namespace stepmix::sched
