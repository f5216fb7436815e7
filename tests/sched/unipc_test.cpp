// UniPC: golden trajectories, the worked example of docs/schedulers.md §8, state handling.
#include "sched/fp_contract.hpp"  // expected values are computed with the reference roundings

#include <array>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <vector>

#include <gtest/gtest.h>

#include "core/numerics.hpp"
#include "sched/config.hpp"
#include "sched/unipc.hpp"
#include "sched_test_util.hpp"
#include "stepmix/error.hpp"

namespace stepmix::sched {
namespace {

using test::max_rel_err;

UniPCOptions shift10() {
  UniPCOptions o;
  o.flow_shift = 10.0;
  return o;
}

// ------------------------------------------------------------ golden trajectories

struct TrajectoryCase {
  int n;
  double bound;  // golden README §9, scheduler_trajectory.nN.samples
};

class UniPCGoldenTrajectory : public ::testing::TestWithParam<TrajectoryCase> {};

// Runs the golden loop with the scheduler built from the golden config file.
// replay = true feeds the stored model_outputs; false recomputes v with the
// README's function from our own samples (closed loop).
void run_golden(const TrajectoryCase& c, bool replay) {
  auto f = test::open_golden("scheduler/unipc_flowshift10_n" + std::to_string(c.n) + "_trajectory.safetensors");
  const auto noise = test::f32(*f, "noise");
  const auto timesteps = test::i64(*f, "timesteps");
  const auto sigmas = test::f32(*f, "sigmas");
  const auto model_outputs = test::f32(*f, "model_outputs");
  const auto x0_preds = test::f32(*f, "x0_preds");
  const auto samples = test::f32(*f, "samples");
  const auto this_order = test::i64(*f, "this_order");
  const auto used_corrector = test::i64(*f, "used_corrector");
  const std::size_t numel = noise.size();
  ASSERT_EQ(samples.size(), numel * std::size_t(c.n));

  const SchedulerConfig cfg = load_scheduler_config(stepmix::test::golden_path("scheduler/unipc_flowshift10.json"));
  auto sched = make_scheduler(cfg);
  auto* unipc = dynamic_cast<UniPCMultistepScheduler*>(sched.get());
  ASSERT_NE(unipc, nullptr);
  sched->set_timesteps(c.n);
  ASSERT_EQ(unipc->integer_timesteps(), timesteps);
  ASSERT_TRUE(test::same_bits(sched->sigmas(), sigmas));

  std::vector<float> x = noise, v, all_samples, all_x0, all_v;
  for (int i = 0; i < c.n; ++i) {
    const double t = sched->timesteps()[std::size_t(i)];
    if (replay)
      v.assign(model_outputs.begin() + std::ptrdiff_t(i * numel), model_outputs.begin() + std::ptrdiff_t((i + 1) * numel));
    else
      test::readme_model(x, t, v);
    all_v.insert(all_v.end(), v.begin(), v.end());
    sched->step(v, t, x);
    all_samples.insert(all_samples.end(), x.begin(), x.end());
    const auto m = unipc->last_x0();
    all_x0.insert(all_x0.end(), m.begin(), m.end());
    EXPECT_EQ(unipc->last_order(), this_order[std::size_t(i)]) << "step " << i;
    EXPECT_EQ(int(unipc->last_used_corrector()), used_corrector[std::size_t(i)]) << "step " << i;
  }
  EXPECT_TRUE(sched->finished());
  const double e_samples = max_rel_err(all_samples.data(), samples.data(), samples.size());
  const double e_x0 = max_rel_err(all_x0.data(), x0_preds.data(), x0_preds.size());
  const double e_v = max_rel_err(all_v.data(), model_outputs.data(), model_outputs.size());
  std::cout << "[ measured ] unipc n" << c.n << (replay ? " replay" : " closed-loop") << ": samples " << e_samples
            << ", x0_preds " << e_x0 << ", model_outputs " << e_v << " (bound " << c.bound << ")\n";
  EXPECT_LE(e_samples, c.bound);
  EXPECT_LE(e_x0, c.bound);
  EXPECT_LE(e_v, c.bound);
  // The last sample is exactly the last x0 prediction (§6, final step).
  const auto m_last = unipc->last_x0();
  EXPECT_TRUE(std::equal(m_last.begin(), m_last.end(), x.begin()));
}

TEST_P(UniPCGoldenTrajectory, ReplayStoredModelOutputs) { run_golden(GetParam(), true); }
TEST_P(UniPCGoldenTrajectory, ClosedLoopWithReadmeModel) { run_golden(GetParam(), false); }

INSTANTIATE_TEST_SUITE_P(Golden, UniPCGoldenTrajectory,
                         ::testing::Values(TrajectoryCase{4, 1e-6}, TrajectoryCase{8, 2e-6},
                                           TrajectoryCase{35, 5e-6}),
                         [](const auto& info) { return "n" + std::to_string(info.param.n); });

// ------------------------------------------------------------ worked example (docs/schedulers.md §8)

// Toy model v = x, x_0 = 1 (a one-element latent).
std::vector<float> toy_run(UniPCMultistepScheduler& s, int n, std::vector<int>* orders = nullptr) {
  s.set_timesteps(n);
  std::vector<float> x{1.0f}, trace;
  for (int i = 0; i < n; ++i) {
    const std::vector<float> v = x;
    s.step(v, s.timesteps()[std::size_t(i)], x);
    trace.push_back(x[0]);
    if (orders) orders->push_back(s.last_order());
  }
  return trace;
}

TEST(UniPCSpecExample, FourStepsShift10) {
  UniPCMultistepScheduler s(shift10());
  std::vector<int> orders;
  const auto trace = toy_run(s, 4, &orders);
  // x_{k+1} after each step (float64 column of the table; FP32 state agrees
  // to ~1e-7).
  const std::array<double, 4> expected{0.96778458, 0.91171390, 0.79007575, 0.18176533};
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(trace[std::size_t(k)], expected[std::size_t(k)], 3e-7) << "k=" << k;
  EXPECT_EQ(orders, (std::vector<int>{1, 2, 2, 1}));
}

TEST(UniPCSpecExample, FinalValuesForOtherN) {
  UniPCMultistepScheduler s(shift10());
  std::vector<int> orders;
  EXPECT_NEAR(toy_run(s, 6, &orders).back(), 0.23706677, 3e-7);
  EXPECT_EQ(orders, (std::vector<int>{1, 2, 2, 2, 2, 1}));
  EXPECT_NEAR(toy_run(s, 35).back(), 0.35840409, 1e-6);
  EXPECT_NEAR(toy_run(s, 50).back(), 0.36353097, 1e-6);
}

TEST(UniPCSpecExample, OrderSchedule) {
  UniPCMultistepScheduler s(shift10());
  for (auto [n, want] : std::vector<std::pair<int, std::vector<int>>>{
           {1, {1}}, {2, {1, 1}}, {3, {1, 2, 1}}, {4, {1, 2, 2, 1}}}) {
    std::vector<int> orders;
    toy_run(s, n, &orders);
    EXPECT_EQ(orders, want) << "N=" << n;
  }
}

TEST(UniPCSpecExample, CoefficientsOfTheTable) {
  UniPCMultistepScheduler s(shift10());
  s.set_timesteps(4);
  const auto& sg = s.sigmas();
  const std::array<double, 4> lambdas{-13.80231798, -3.40253192, -2.30458482, -1.20796885};
  for (int k = 0; k < 4; ++k) EXPECT_NEAR(unipc_lambda(sg[std::size_t(k)]), lambdas[std::size_t(k)], 1e-7);
  EXPECT_TRUE(std::isinf(unipc_lambda(0.0)));
  // Step 2 corrector (σ0, σ1 → σ2) and step 3 corrector (σ1, σ2 → σ3).
  const UniCRhos c2 = unipc_corrector_rhos(sg[0], sg[1], sg[2]);
  EXPECT_NEAR(c2.r, -9.47202843, 1e-7);
  EXPECT_NEAR(c2.b1, 0.58970853, 1e-8);
  EXPECT_NEAR(c2.b2, 0.42629714, 1e-8);
  EXPECT_NEAR(c2.rho1, 0.01560456, 1e-8);
  EXPECT_NEAR(c2.rho2, 0.57410397, 1e-8);
  const UniCRhos c3 = unipc_corrector_rhos(sg[1], sg[2], sg[3]);
  EXPECT_NEAR(c3.r, -1.00121384, 1e-8);
  EXPECT_NEAR(c3.b1, 0.58960398, 1e-8);
  EXPECT_NEAR(c3.b2, 0.42618492, 1e-8);
  EXPECT_NEAR(c3.rho1, 0.08165997, 1e-8);
  EXPECT_NEAR(c3.rho2, 0.50794401, 1e-8);
}

TEST(UniPCSpecExample, SingleStepReturnsX0) {
  UniPCMultistepScheduler s(shift10());
  s.set_timesteps(1);
  std::vector<float> x{0.5f, -2.0f}, v{1.25f, 3.0f};
  const float sigma0 = s.sigmas()[0];
  EXPECT_EQ(sigma0, 0.99999899f);
  const std::vector<float> want{x[0] - sigma0 * v[0], x[1] - sigma0 * v[1]};
  s.step(v, 999, x);
  EXPECT_EQ(x, want);
  EXPECT_EQ(s.last_order(), 1);
  EXPECT_FALSE(s.last_used_corrector());
}

// ------------------------------------------------------------ independent float64 reference

// A direct float64 transcription of docs/schedulers.md §5/§6 with a general 2×2 solve,
// used to check paths the goldens do not cover (solver_order 1, long runs).
std::vector<double> reference_run(const std::vector<float>& sigmas_f, int solver_order, double x_init) {
  const int n = int(sigmas_f.size()) - 1;
  std::vector<double> sg(sigmas_f.begin(), sigmas_f.end()), out, m;
  auto lam = [](double s) { return std::log(1 - s) - std::log(s); };
  double x = x_init, x_tilde_prev = 0;
  int prev_order = 0;
  for (int k = 0; k < n; ++k) {
    m.push_back(x - sg[std::size_t(k)] * x);  // v = x
    double xt = x;
    if (k >= 1) {
      const double a = sg[std::size_t(k - 1)], b = sg[std::size_t(k)], h = lam(b) - lam(a), phi = std::expm1(-h);
      const double base = b / a * x_tilde_prev - (1 - b) * phi * m[std::size_t(k - 1)];
      const double dt = m[std::size_t(k)] - m[std::size_t(k - 1)];
      if (prev_order == 1) {
        xt = base - (1 - b) * phi * 0.5 * dt;
      } else {
        const double r = (lam(sg[std::size_t(k - 2)]) - lam(a)) / h, hh = -h;
        const double g1 = phi / hh - 1, b1 = g1 / phi, b2 = 2 * (g1 / hh - 0.5) / phi;
        const double det = 1 * 1 - 1 * r;  // [[1, 1], [r, 1]]
        const double rho1 = (b1 * 1 - 1 * b2) / det, rho2 = (1 * b2 - r * b1) / det;
        const double d = (m[std::size_t(k - 2)] - m[std::size_t(k - 1)]) / r;
        xt = base - (1 - b) * phi * (rho1 * d + rho2 * dt);
      }
    }
    const int order = std::min({solver_order, n - k, k + 1});
    const double a = sg[std::size_t(k)], b = sg[std::size_t(k + 1)];
    if (b == 0) {
      x = m[std::size_t(k)];
    } else {
      const double h = lam(b) - lam(a), phi = std::expm1(-h);
      x = b / a * xt - (1 - b) * phi * m[std::size_t(k)];
      if (order == 2) {
        const double r = (lam(sg[std::size_t(k - 1)]) - lam(a)) / h;
        x -= (1 - b) * phi * 0.5 * (m[std::size_t(k - 1)] - m[std::size_t(k)]) / r;
      }
    }
    x_tilde_prev = xt;
    prev_order = order;
    out.push_back(x);
  }
  return out;
}

TEST(UniPCReference, MatchesFloat64TranscriptionForBothOrders) {
  for (int order : {1, 2}) {
    for (double shift : {1.0, 3.0, 10.0}) {
      for (int n : {1, 2, 3, 7, 20}) {
        UniPCOptions o;
        o.flow_shift = shift;
        o.solver_order = order;
        UniPCMultistepScheduler s(o);
        const auto got = toy_run(s, n);
        const auto want = reference_run(s.sigmas(), order, 1.0);
        for (int k = 0; k < n; ++k)
          EXPECT_NEAR(got[std::size_t(k)], want[std::size_t(k)], 1e-6)
              << "order " << order << " shift " << shift << " N " << n << " k " << k;
      }
    }
  }
}

// ------------------------------------------------------------ state and errors

TEST(UniPCState, ResetAndNewScheduleReproduceTheRunExactly) {
  auto f = test::open_golden("scheduler/unipc_flowshift10_n8_trajectory.safetensors");
  const auto noise = test::f32(*f, "noise");
  UniPCMultistepScheduler s(shift10());
  auto run = [&](bool via_reset) {
    if (via_reset)
      s.reset();
    else
      s.set_timesteps(8);
    std::vector<float> x = noise, v;
    for (int i = 0; i < s.num_steps(); ++i) {
      test::readme_model(x, s.timesteps()[std::size_t(i)], v);
      s.step(v, s.timesteps()[std::size_t(i)], x);
    }
    return x;
  };
  const auto first = run(false);
  const auto second = run(true);
  // A run of a different length in between must not leak history.
  s.set_timesteps(3);
  std::vector<float> y = noise;
  s.step(noise, s.timesteps()[0], y);
  const auto third = run(false);
  EXPECT_TRUE(test::same_bits(first, second));
  EXPECT_TRUE(test::same_bits(first, third));
}

TEST(UniPCState, RejectsMisuse) {
  UniPCMultistepScheduler s(shift10());
  std::vector<float> x(4, 1.0f), v(4, 0.5f), short_v(3, 0.5f);
  EXPECT_THROW(s.step(v, 999, x), Error);  // before set_timesteps
  EXPECT_THROW(s.set_timesteps(0), Error);
  EXPECT_THROW(s.set_timesteps(-3), Error);
  s.set_timesteps(2);
  EXPECT_THROW(s.step(short_v, 999, x), Error);  // size mismatch
  EXPECT_THROW(s.step(v, 998, x), Error);        // wrong timestep
  try {
    s.step(v, 909, x);
    FAIL() << "expected a timestep mismatch error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expects timestep 999, got 909"), std::string::npos) << e.what();
  }
  s.step(v, 999, x);
  std::vector<float> bigger(5, 1.0f), bigger_v(5, 0.5f);
  EXPECT_THROW(s.step(bigger_v, 909, bigger), Error);  // latent size changed mid-run
  s.step(v, 909, x);
  EXPECT_TRUE(s.finished());
  EXPECT_THROW(s.step(v, 909, x), Error);  // past the end
  UniPCOptions bad;
  bad.solver_order = 3;
  EXPECT_THROW(UniPCMultistepScheduler{bad}, Error);
  bad.solver_order = 2;
  bad.flow_shift = 0.0;
  EXPECT_THROW(UniPCMultistepScheduler{bad}, Error);
}

TEST(UniPCState, DuplicateLeadingTimestepsStartAtIndexZero) {
  // With s = 10 and N >= 101 the first two truncated timesteps are both 999;
  // the reference would skip σ_0 (docs/schedulers.md §7), stepmix runs every step.
  UniPCMultistepScheduler s(shift10());
  const auto trace = toy_run(s, 101);
  EXPECT_EQ(s.timesteps()[0], 999);
  EXPECT_EQ(s.timesteps()[1], 999);
  EXPECT_TRUE(s.finished());
  EXPECT_TRUE(std::isfinite(trace.back()));
  const auto want = reference_run(s.sigmas(), 2, 1.0);
  EXPECT_NEAR(trace.back(), want.back(), 2e-6);
}

// ------------------------------------------------------------ BF16 emulation

TEST(UniPCPrecision, Bf16EmulationKeepsBf16ValuesAndTracksFp32) {
  auto f = test::open_golden("scheduler/unipc_flowshift10_n8_trajectory.safetensors");
  const auto noise = test::f32(*f, "noise");
  const auto golden = test::f32(*f, "samples");
  UniPCOptions o = shift10();
  o.precision = Precision::bf16_emulation;
  UniPCMultistepScheduler s(o);
  s.set_timesteps(8);
  std::vector<float> x = noise, v;
  for (float& e : x) e = bf16_to_float(float_to_bf16_rne(e));
  for (int i = 0; i < 8; ++i) {
    test::readme_model(x, s.timesteps()[std::size_t(i)], v);
    for (float& e : v) e = bf16_to_float(float_to_bf16_rne(e));
    s.step(v, s.timesteps()[std::size_t(i)], x);
    for (float e : x) ASSERT_EQ(e, bf16_to_float(float_to_bf16_rne(e)));
  }
  // BF16 has an 8-bit significand: a few ulps (2^-8 relative) over 8 steps.
  const double err = max_rel_err(x.data(), golden.data() + 7 * noise.size(), noise.size());
  EXPECT_LT(err, 3e-2);
  EXPECT_GT(err, 0.0);  // it is a different arithmetic
}

}  // namespace
}  // namespace stepmix::sched
