// FlowMatch Euler: golden trajectories, the test vectors of docs/schedulers.md §9, the
// stochastic step with injected noise, and misuse.
#include "sched/fp_contract.hpp"  // expected values are computed with the reference roundings

#include <iostream>
#include <vector>

#include <gtest/gtest.h>

#include "core/numerics.hpp"
#include "sched/config.hpp"
#include "sched/flow_match_euler.hpp"
#include "sched_test_util.hpp"
#include "stepmix/error.hpp"

namespace stepmix::sched {
namespace {

const std::vector<double> kDistilledList{1.0, 0.9375, 0.8333333333333334, 0.625};

class FlowMatchGoldenTrajectory : public ::testing::TestWithParam<int> {};

TEST_P(FlowMatchGoldenTrajectory, ReplayAndClosedLoop) {
  const int n = GetParam();
  auto f = test::open_golden("scheduler/flowmatch_euler_shift3_n" + std::to_string(n) + "_trajectory.safetensors");
  const auto noise = test::f32(*f, "noise");
  const auto model_outputs = test::f32(*f, "model_outputs");
  const auto samples = test::f32(*f, "samples");
  const auto timesteps = test::f32(*f, "timesteps");
  const std::size_t numel = noise.size();
  const double bound = 1e-6;  // golden README §9, scheduler_trajectory.flowmatch_nN.samples

  const SchedulerConfig cfg =
      load_scheduler_config(stepmix::test::golden_path("scheduler/flowmatch_euler_shift3.json"));
  ASSERT_EQ(cfg.kind, SchedulerKind::flow_match_euler);
  auto sched = make_scheduler(cfg);
  for (bool replay : {true, false}) {
    sched->set_timesteps(n);
    ASSERT_EQ(sched->timesteps().size(), timesteps.size());
    std::vector<float> x = noise, v, all;
    for (int i = 0; i < n; ++i) {
      const double t = sched->timesteps()[std::size_t(i)];
      EXPECT_EQ(t, double(timesteps[std::size_t(i)]));
      if (replay)
        v.assign(model_outputs.begin() + std::ptrdiff_t(i * numel),
                 model_outputs.begin() + std::ptrdiff_t((i + 1) * numel));
      else
        test::readme_model(x, t, v);
      sched->step(v, t, x);
      all.insert(all.end(), x.begin(), x.end());
    }
    const double err = test::max_rel_err(all.data(), samples.data(), samples.size());
    std::cout << "[ measured ] flowmatch n" << n << (replay ? " replay" : " closed-loop") << ": samples " << err
              << " (bound " << bound << ")\n";
    EXPECT_LE(err, bound);
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, FlowMatchGoldenTrajectory, ::testing::Values(4, 8),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

// Toy model v = x, x_0 = 1, with the distilled list (docs/schedulers.md §9).
std::vector<float> toy_run(FlowMatchEulerDiscreteScheduler& s) {
  s.set_timesteps(4);
  std::vector<float> x{1.0f}, trace;
  for (int i = 0; i < 4; ++i) {
    const std::vector<float> v = x;
    s.step(v, s.timesteps()[std::size_t(i)], x);
    trace.push_back(x[0]);
  }
  return trace;
}

TEST(FlowMatchSpecVectors, Deterministic) {
  FlowMatchEulerOptions o;
  o.explicit_sigmas = kDistilledList;
  FlowMatchEulerDiscreteScheduler s(o);
  const auto trace = toy_run(s);
  const std::vector<double> want{0.93750000, 0.83984375, 0.66487630, 0.24932861};
  for (std::size_t k = 0; k < 4; ++k) EXPECT_NEAR(trace[k], want[k], 1e-7) << k;  // FP32 state: ~1 ulp
}

TEST(FlowMatchSpecVectors, StochasticWithUnitNoise) {
  FlowMatchEulerOptions o;
  o.explicit_sigmas = kDistilledList;
  o.stochastic_sampling = true;
  FlowMatchEulerDiscreteScheduler s(o);
  EXPECT_THROW(toy_run(s), Error);  // no noise source yet
  std::vector<int> steps_asked;
  s.set_noise_source([&](int step, std::span<float> out) {
    steps_asked.push_back(step);
    for (float& e : out) e = 1.0f;
  });
  const auto trace = toy_run(s);
  const std::vector<double> want{0.9375, 0.84309896, 0.67769368, 0.25413513};
  for (std::size_t k = 0; k < 4; ++k) EXPECT_NEAR(trace[k], want[k], 1e-7) << k;  // FP32 state: ~1 ulp
  EXPECT_EQ(steps_asked, (std::vector<int>{0, 1, 2, 3}));
}

TEST(FlowMatchSpecVectors, StochasticLastStepReturnsX0) {
  FlowMatchEulerOptions o;
  o.stochastic_sampling = true;
  FlowMatchEulerDiscreteScheduler s(o);
  s.set_noise_source([](int, std::span<float> out) {
    for (float& e : out) e = 123.0f;  // must not leak into the result when σ_N = 0
  });
  s.set_sigmas({0.5});
  std::vector<float> x{2.0f}, v{1.0f};
  s.step(v, s.timesteps()[0], x);
  EXPECT_EQ(x[0], 2.0f - 0.5f * 1.0f);
}

TEST(FlowMatchState, ResetReproducesAndMisuseIsRejected) {
  FlowMatchEulerOptions o;
  o.shift = 3.0;
  FlowMatchEulerDiscreteScheduler s(o);
  EXPECT_THROW(s.set_timesteps(0), Error);
  s.set_timesteps(5);
  auto run = [&] {
    std::vector<float> x{0.25f, -1.5f}, v;
    for (int i = 0; i < s.num_steps(); ++i) {
      test::readme_model(x, s.timesteps()[std::size_t(i)], v);
      s.step(v, s.timesteps()[std::size_t(i)], x);
    }
    return x;
  };
  const auto a = run();
  EXPECT_THROW(run(), Error);  // finished: needs reset
  s.reset();
  const auto b = run();
  EXPECT_TRUE(test::same_bits(a, b));
  s.reset();
  std::vector<float> x{1.0f, 1.0f}, v{1.0f, 1.0f};
  EXPECT_THROW(s.step(v, 1000.0 - 1e-3, x), Error);  // not the scheduled float timestep

  FlowMatchEulerOptions fixed;
  fixed.explicit_sigmas = kDistilledList;
  FlowMatchEulerDiscreteScheduler f(fixed);
  EXPECT_THROW(f.set_timesteps(8), Error);  // a fixed list of 4
  FlowMatchEulerOptions bad;
  bad.shift = -1;
  EXPECT_THROW(FlowMatchEulerDiscreteScheduler{bad}, Error);
}

TEST(FlowMatchPrecision, Bf16EmulationRoundsTheResult) {
  FlowMatchEulerOptions o;
  o.shift = 3.0;
  o.precision = Precision::bf16_emulation;
  FlowMatchEulerDiscreteScheduler s(o);
  s.set_timesteps(4);
  std::vector<float> x{0.3f, -0.7f, 1.1f}, v;
  for (float& e : x) e = bf16_to_float(float_to_bf16_rne(e));
  for (int i = 0; i < 4; ++i) {
    test::readme_model(x, s.timesteps()[std::size_t(i)], v);
    s.step(v, s.timesteps()[std::size_t(i)], x);
    for (float e : x) EXPECT_EQ(e, bf16_to_float(float_to_bf16_rne(e)));
  }
}

}  // namespace
}  // namespace stepmix::sched
