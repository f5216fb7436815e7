#include "sched/fp_contract.hpp"

#include "sched/unipc.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "sched/rounding.hpp"
#include "sched/flow_match_euler.hpp"
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

// One step over every element (each element is independent of the others):
// the operations of docs/schedulers.md §6 in the reference's order, every
// result rounded by R.
template <class R>
void unipc_elements(const UniPCStep& s, std::size_t n, float* x, const float* v, const LatentHistory& h) {
  const float half = 0.5f;
  for (std::size_t i = 0; i < n; ++i) {
    // The emulated pipeline holds BF16 tensors; make the inputs so.
    float xi = std::is_same_v<R, detail::RoundF32> ? x[i] : R::round(x[i]);
    // 1. x0 prediction (flow).
    const float m = R::round(xi - R::round(s.sigma * R::round(v[i])));
    h.x0_now[i] = m;
    // 2. Corrector.
    if (s.corrector_order != 0) {
      const float base = base_term<R>(s.c_ratio, h.last_sample[i], s.c_m, h.x0_prev[i]);
      const float dt = R::round(m - h.x0_prev[i]);
      float inner;
      if (s.corrector_order == 1) {
        inner = R::round(half * dt);
      } else {
        const float d = R::round(R::round(h.x0_prev2[i] - h.x0_prev[i]) / s.c_r);
        inner = R::round(R::round(s.c_rho1 * d) + R::round(s.c_rho2 * dt));
      }
      xi = R::round(base - R::round(s.c_d * inner));
    }
    // 3. Remembered for the next corrector.
    h.last_sample[i] = xi;
    // 4. Predictor.
    if (s.predictor_order == 0) {
      x[i] = m;
    } else if (s.predictor_order == 1) {
      x[i] = base_term<R>(s.p_ratio, xi, s.p_m, m);
    } else {
      const float base = base_term<R>(s.p_ratio, xi, s.p_m, m);
      const float d = R::round(R::round(h.x0_prev[i] - m) / s.p_r);
      x[i] = R::round(base - R::round(s.p_d * R::round(half * d)));
    }
  }
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
  check_solvable(s.sigmas);
  int_timesteps_ = std::move(s.timesteps);
  sigmas_ = std::move(s.sigmas);
  timesteps_.assign(int_timesteps_.begin(), int_timesteps_.end());
  reset();
}

// Every update divides by h = λ(σ_{k+1}) − λ(σ_k) and takes λ(σ_0). The
// reference evaluates λ on float32 tensors: a σ_0 of 1, or neighbours whose
// float32 log-SNRs coincide (repeated float32 sigmas, or sigmas a few float32
// steps apart: a Karras grid with a huge sigma_max, or sigma_min and
// sigma_max nearly equal) make its latent NaN. Refused before any step,
// naming the pair.
void UniPCMultistepScheduler::check_solvable(const std::vector<float>& sigmas) {
  const auto at = [&](std::size_t k) { return "sigma " + std::to_string(k) + " = " + Error::number(sigmas[k]); };
  const auto lambda32 = [](float s) { return std::log(1.0f - s) - std::log(s); };
  if (!(sigmas[0] < 1.0f))
    throw Error("scheduler", "UniPC: the schedule starts at " + at(0) +
                                 ", where the log-SNR is infinite (Karras sigma_max too large?)");
  for (std::size_t k = 0; k + 2 < sigmas.size(); ++k)
    if (!(lambda32(sigmas[k + 1]) > lambda32(sigmas[k])))
      throw Error("scheduler", "UniPC: " + at(k) + " and " + at(k + 1) +
                                   " have the same float32 log-SNR: the solver divides by their difference (fewer "
                                   "steps, or Karras sigma_min and sigma_max further apart)");
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

std::optional<std::string> UniPCMultistepScheduler::host_only_reason() const {
  if (options_.precision != Precision::fp32)
    return "UniPC: the bf16 emulation runs on the host only (a latent in backend memory is fp32)";
  return std::nullopt;
}

LatentStep UniPCMultistepScheduler::begin_latent_step(double timestep, std::size_t n) {
  check_step_args(n, timestep, n);
  if (const auto reason = host_only_reason()) throw Error("scheduler", *reason);
  int order = 0;
  LatentStep step;
  step.kind = LatentStep::Kind::UniPC;
  step.unipc = coefficients<detail::RoundF32>(order);
  finish_step(order);
  return step;
}

// §6. k = step_index_, N = num_steps():
//  1. m_k = x_k − σ_k·v_k                      (from the uncorrected x_k)
//  2. k ≥ 1: x̃_k = UniC(order p_{k−1})         else x̃_k = x_k
//  3. history ← (m_{k−1}, m_k)
//  4. p_k = min(order, N − k, k + 1); remember x̃_k
//  5. x_{k+1} = UniP(order p_k) from x̃_k
// The float64 coefficients of both updates, each rounded once by R::scalar;
// `order` receives p_k.
template <class R>
UniPCStep UniPCMultistepScheduler::coefficients(int& order) const {
  const int k = step_index_;
  const int N = num_steps();
  UniPCStep s;
  s.sigma = R::scalar(sigmas_[std::size_t(k)]);

  // 2. UniC corrector: from σ_{k−1} to σ_k, starting at x̃_{k−1}, with the
  //    previous predictor's order; skipped where disable_corrector lists k − 1.
  if (corrects(k)) {
    const double a = sigmas_[std::size_t(k - 1)];
    const double b = sigmas_[std::size_t(k)];
    const UpdateCoeffs c = update_coeffs(a, b);
    s.c_ratio = R::scalar(c.ratio), s.c_m = R::scalar(c.c_m), s.c_d = R::scalar(c.c_d);
    s.corrector_order = prev_order_ == 1 ? 1 : 2;
    if (s.corrector_order == 2) {
      const UniCRhos w = unipc_corrector_rhos(sigmas_[std::size_t(k - 2)], a, b);
      s.c_r = R::scalar(w.r), s.c_rho1 = R::scalar(w.rho1), s.c_rho2 = R::scalar(w.rho2);
    }
  }

  // 4. Order: warm-up (k + 1 entries of history), lower_order_final.
  order = std::min({options_.solver_order, N - k, k + 1});

  // 5. UniP predictor from σ_k to σ_{k+1}. The final step (σ = 0, forced
  //    order 1) has h = ∞, φ = −1, b/a = 0, α(b) = 1, so x_N = m_{N−1}
  //    exactly: predictor order 0, the infinities never evaluated.
  const double a = sigmas_[std::size_t(k)];
  const double b = sigmas_[std::size_t(k + 1)];
  if (b != 0.0) {
    const UpdateCoeffs c = update_coeffs(a, b);
    s.p_ratio = R::scalar(c.ratio), s.p_m = R::scalar(c.c_m), s.p_d = R::scalar(c.c_d);
    s.predictor_order = order;
    // r = (λ(σ_{k−1}) − λ(σ_k)) / h < 0; the order-2 weight is fixed at ½.
    if (order == 2) s.p_r = R::scalar((unipc_lambda(sigmas_[std::size_t(k - 1)]) - unipc_lambda(a)) / c.h);
  }
  return s;
}

bool UniPCMultistepScheduler::corrects(int k) const {
  const auto& off = options_.disable_corrector;
  return k >= 1 && std::find(off.begin(), off.end(), std::int64_t(k - 1)) == off.end();
}

void UniPCMultistepScheduler::finish_step(int order) {
  last_used_corrector_ = corrects(step_index_);
  prev_order_ = order;
  last_order_ = order;
  ++step_index_;
}

template <class R>
void UniPCMultistepScheduler::step_impl(std::span<const float> model_output, std::span<float> sample) {
  const std::size_t n = sample.size();
  if (m1_.size() != n) {
    m1_.assign(n, 0.0f);
    m2_.assign(n, 0.0f);
    m_cur_.assign(n, 0.0f);
    last_sample_.assign(n, 0.0f);
  }
  int order = 0;
  const UniPCStep s = coefficients<R>(order);
  unipc_elements<R>(s, n, sample.data(), model_output.data(),
                    {m2_.data(), m1_.data(), m_cur_.data(), last_sample_.data()});
  // 3. History: (m_{k−2}, m_{k−1}) ← (m_{k−1}, m_k); m_cur_ becomes scratch.
  std::swap(m2_, m1_);
  std::swap(m1_, m_cur_);
  finish_step(order);
}

void apply_latent_step(const LatentStep& step, std::size_t n, float* x, const float* v, const LatentHistory& history) {
  if (step.kind == LatentStep::Kind::UniPC)
    unipc_elements<detail::RoundF32>(step.unipc, n, x, v, history);
  else
    detail::euler_elements(step.euler_dt, n, x, v);
}

}  // namespace stepmix::sched
