// UniPC multistep (bh2, x0 form, flow sigmas) as Cosmos3 configures it.
// docs/schedulers.md §1–§8; the formulas are reproduced next to the code in
// unipc.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sched/scheduler.hpp"

namespace stepmix::sched {

struct UniPCOptions {
  int num_train_timesteps = 1000;
  double flow_shift = 1.0;
  int solver_order = 2;  // 1 or 2
  // Diffusers' use_karras_sigmas with use_flow_sigmas (the checkpoint's own
  // scheduler_config.json): Karras grid between sigma_max and sigma_min,
  // mapped by σ/(σ+1); flow_shift is unused on that path.
  bool use_karras_sigmas = false;
  // The Cosmos3 pipeline's use_native_flow_schedule (model_index.json): the
  // base grid linspace(1 − 1/T, 0, N+1) without its last point, shifted
  // (docs/schedulers.md §2.2).
  bool native_flow_grid = false;
  // Diffusers' disable_corrector: the corrector is skipped at step k when
  // k − 1 is listed (values that name no such step have no effect).
  std::vector<std::int64_t> disable_corrector;
  double sigma_min = 0.0;
  double sigma_max = 0.0;
  Precision precision = Precision::fp32;
};

class UniPCMultistepScheduler final : public Scheduler {
 public:
  // Throws stepmix::Error for options outside the supported path.
  explicit UniPCMultistepScheduler(const UniPCOptions& options);

  void set_timesteps(int num_steps) override;
  void reset() override;
  std::string name() const override { return "UniPCMultistepScheduler"; }
  using Scheduler::step;
  void step(std::span<const float> model_output, double timestep, std::span<float> sample) override;
  LatentStep begin_latent_step(double timestep, std::size_t n) override;
  std::optional<std::string> host_only_reason() const override;

  const UniPCOptions& options() const { return options_; }
  // The same timesteps as timesteps(), as the integers the model receives.
  const std::vector<std::int64_t>& integer_timesteps() const { return int_timesteps_; }

  // Diagnostics of the most recent step() (for tests and traces):
  // predictor order used, whether the UniC corrector ran, and the x0
  // prediction m_k = x_k − σ_k·v_k of that step.
  int last_order() const { return last_order_; }
  bool last_used_corrector() const { return last_used_corrector_; }
  std::span<const float> last_x0() const { return m1_; }

 private:
  template <class Rounding>
  void step_impl(std::span<const float> model_output, std::span<float> sample);
  template <class Rounding>
  UniPCStep coefficients(int& order) const;
  void finish_step(int order);
  bool corrects(int k) const;  // whether step k runs the corrector
  static void check_solvable(const std::vector<float>& sigmas);

  UniPCOptions options_;
  std::vector<std::int64_t> int_timesteps_;

  // Solver state. m1_ = m_{k−1} (after a step: m_k), m2_ = m_{k−2},
  // m_cur_ = scratch for the incoming x0 prediction; last_sample_ = x̃_{k−1},
  // the (corrected) sample that entered the previous predictor.
  std::vector<float> m1_, m2_, m_cur_, last_sample_;
  int prev_order_ = 0;
  int last_order_ = 0;
  bool last_used_corrector_ = false;
};

// Scalar pieces of the update, exposed so that tests can check them against
// the worked example of docs/schedulers.md. All in float64.
double unipc_lambda(double sigma);  // ln(1 − σ) − ln(σ); +∞ at σ = 0

struct UniCRhos {
  double r = 0, b1 = 0, b2 = 0, rho1 = 0, rho2 = 0;
};
// Order-2 corrector weights at step k: sigma_prev2 = σ_{k−2},
// sigma_prev = σ_{k−1}, sigma_cur = σ_k.
UniCRhos unipc_corrector_rhos(double sigma_prev2, double sigma_prev, double sigma_cur);

}  // namespace stepmix::sched
