// begin_latent_step + apply_latent_step (sched/latent_step.hpp), the form a
// backend with its own memory runs the scheduler in, against step(): the
// same latent bit for bit after every step of whole runs, UniPC at orders 1
// and 2 (warm-up, corrector of each order, the final step) and Euler; the
// same argument checks; the host-only paths refused.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "common/error_of.hpp"
#include "sched/flow_match_euler.hpp"
#include "sched/unipc.hpp"
#include "stepmix/error.hpp"

namespace stepmix::sched {
namespace {

using stepmix::test::error_of;

std::vector<float> normals(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// A velocity that depends on the latent and the step, so that a wrong
// history shows up in the next steps.
std::vector<float> velocity(const std::vector<float>& x, int step) {
  std::vector<float> v(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) v[i] = 0.7f * x[i] - std::sin(float(i) * 0.01f + float(step));
  return v;
}

void expect_same_run(Scheduler& host, Scheduler& elsewhere, int steps) {
  const std::size_t n = 1031;
  host.set_timesteps(steps);
  elsewhere.set_timesteps(steps);
  std::vector<float> a = normals(n, 7), b = a;
  std::vector<float> history(4 * n, 0.0f);
  LatentHistory h{history.data(), history.data() + n, history.data() + 2 * n, history.data() + 3 * n};
  for (int k = 0; k < steps; ++k) {
    const double t = host.timesteps()[std::size_t(k)];
    const std::vector<float> va = velocity(a, k), vb = velocity(b, k);
    host.step(va.data(), t, a.data(), n);
    const LatentStep s = elsewhere.begin_latent_step(t, n);
    apply_latent_step(s, n, b.data(), vb.data(), h);
    h.advance();
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << host.name() << " step " << k << " " << i;
    EXPECT_EQ(elsewhere.step_index(), host.step_index());
  }
  EXPECT_TRUE(elsewhere.finished());
}

TEST(LatentStep, UniPCIsBitIdenticalToStepAtBothOrders) {
  for (int order : {1, 2}) {
    for (int steps : {1, 2, 3, 8, 35}) {
      UniPCOptions o;
      o.flow_shift = 10.0;
      o.solver_order = order;
      UniPCMultistepScheduler host(o), elsewhere(o);
      SCOPED_TRACE("order " + std::to_string(order) + ", " + std::to_string(steps) + " steps");
      expect_same_run(host, elsewhere, steps);
    }
  }
}

TEST(LatentStep, UniPCOrder2UsesTheCorrectorOfEachOrderAndTheFinalStep) {
  UniPCOptions o;
  o.flow_shift = 10.0;
  UniPCMultistepScheduler s(o);
  s.set_timesteps(4);
  std::vector<int> correctors, predictors;
  for (int k = 0; k < 4; ++k) {
    const LatentStep step = s.begin_latent_step(s.timesteps()[std::size_t(k)], 8);
    EXPECT_EQ(step.kind, LatentStep::Kind::UniPC);
    correctors.push_back(step.unipc.corrector_order);
    predictors.push_back(step.unipc.predictor_order);
  }
  EXPECT_EQ(correctors, (std::vector<int>{0, 1, 2, 2}));
  EXPECT_EQ(predictors, (std::vector<int>{1, 2, 2, 0}));
}

TEST(LatentStep, EulerIsBitIdenticalToStep) {
  for (int steps : {1, 6, 35}) {
    FlowMatchEulerOptions o;
    o.shift = 3.0;
    FlowMatchEulerDiscreteScheduler host(o), elsewhere(o);
    SCOPED_TRACE(std::to_string(steps) + " steps");
    expect_same_run(host, elsewhere, steps);
  }
}

TEST(LatentStep, ChecksItsArgumentsAsStepDoesAndRefusesTheHostOnlyPaths) {
  UniPCOptions o;
  UniPCMultistepScheduler s(o);
  EXPECT_THROW(s.begin_latent_step(999, 8), Error);  // before set_timesteps
  s.set_timesteps(2);
  EXPECT_THROW(s.begin_latent_step(s.timesteps()[1], 8), Error);  // the wrong timestep
  EXPECT_THROW(s.begin_latent_step(s.timesteps()[0], 0), Error);  // an empty latent
  EXPECT_EQ(s.host_only_reason(), std::nullopt);
  s.begin_latent_step(s.timesteps()[0], 8);
  EXPECT_THROW(s.begin_latent_step(s.timesteps()[1], 9), Error);  // the size changed within the run

  o.precision = Precision::bf16_emulation;
  UniPCMultistepScheduler emulated(o);
  emulated.set_timesteps(2);
  EXPECT_THROW(emulated.begin_latent_step(emulated.timesteps()[0], 8), Error);
  // The reason a device loop reads before its first forward is the message.
  ASSERT_TRUE(emulated.host_only_reason().has_value());
  EXPECT_NE(error_of([&] { emulated.begin_latent_step(emulated.timesteps()[0], 8); }).find(*emulated.host_only_reason()),
            std::string::npos);

  FlowMatchEulerOptions e;
  e.stochastic_sampling = true;
  FlowMatchEulerDiscreteScheduler stochastic(e);
  stochastic.set_timesteps(2);
  EXPECT_THROW(stochastic.begin_latent_step(stochastic.timesteps()[0], 8), Error);
  ASSERT_TRUE(stochastic.host_only_reason().has_value());
  EXPECT_NE(stochastic.host_only_reason()->find("stochastic sampling"), std::string::npos);
  FlowMatchEulerDiscreteScheduler deterministic{FlowMatchEulerOptions{}};
  EXPECT_EQ(deterministic.host_only_reason(), std::nullopt);
}

}  // namespace
}  // namespace stepmix::sched
