// §10 lifecycle: one selection per iteration, native outside a run, reset on
// every exit path, and the recorded trace of the iterations actually run.
#include <stdexcept>

#include "policy/policy_fixtures.hpp"

namespace stepmix::test {
namespace {

StepPlan mixed_plan(int num_steps) {
  ResolvedPolicy policy;
  policy.enabled = true;
  policy.source = "checkpoint";
  policy.first_steps = policy.last_steps = 3;
  policy.reasoner = TowerMode::A16;
  return plan_steps(policy, true, num_steps);
}

TEST(StepController, StartsNative) {
  const StepController controller(mixed_plan(8));
  EXPECT_EQ(controller.generation(), Precision::W8A8);
  EXPECT_EQ(controller.reasoner(), Precision::W8A8);
  EXPECT_TRUE(controller.recorded_trace().empty());
}

TEST(StepController, BeginStepSelectsThePlannedPrecision) {
  StepController controller(mixed_plan(8));
  controller.begin_step(0);
  EXPECT_EQ(controller.generation(), Precision::W8A16);
  EXPECT_EQ(controller.reasoner(), Precision::W8A16);
  controller.begin_step(3);
  EXPECT_EQ(controller.generation(), Precision::W8A8);
  EXPECT_EQ(controller.reasoner(), Precision::W8A16);  // static for the run
}

TEST(StepController, SelectionHoldsForEveryCallOfTheIteration) {
  StepController controller(mixed_plan(8));
  controller.begin_step(7);
  const Precision cond_pass = controller.generation();
  const Precision uncond_pass = controller.generation();
  EXPECT_EQ(cond_pass, Precision::W8A16);
  EXPECT_EQ(uncond_pass, cond_pass);
}

TEST(StepController, OutOfRangeStepIsAnError) {
  StepController controller(mixed_plan(8));
  error_message([&] { controller.begin_step(8); }, {"[policy] begin_step: expected 0 <= i < 8", "got 8"});
  error_message([&] { controller.begin_step(-1); }, {"got -1"});
  EXPECT_TRUE(controller.recorded_trace().empty());
}

TEST(StepController, ResetReturnsToNative) {
  StepController controller(mixed_plan(8));
  controller.begin_step(0);
  controller.reset();
  EXPECT_EQ(controller.generation(), Precision::W8A8);
  EXPECT_EQ(controller.reasoner(), Precision::W8A8);
}

TEST(StepController, RunScopeRecordsTheStepsRunAndResetsAtTheEnd) {
  StepController controller(mixed_plan(35));
  {
    auto run = controller.run_scope();
    for (int i = 0; i < 35; ++i) controller.begin_step(i);
    EXPECT_EQ(controller.generation(), Precision::W8A16);
  }
  EXPECT_EQ(controller.generation(), Precision::W8A8);
  EXPECT_EQ(controller.reasoner(), Precision::W8A8);
  EXPECT_EQ(trace_string(controller.recorded_trace()), "W8A16x3 / W8A8x29 / W8A16x3");
}

TEST(StepController, RunScopeResetsWhenTheLoopThrows) {
  StepController controller(mixed_plan(8));
  EXPECT_THROW(
      {
        auto run = controller.run_scope();
        controller.begin_step(0);
        controller.begin_step(1);
        throw std::runtime_error("transformer failed");
      },
      std::runtime_error);
  EXPECT_EQ(controller.generation(), Precision::W8A8);
  EXPECT_EQ(controller.reasoner(), Precision::W8A8);
  EXPECT_EQ(trace_string(controller.recorded_trace()), "W8A16x2");
}

TEST(StepController, EachRunStartsAFreshTrace) {
  StepController controller(mixed_plan(8));
  {
    auto run = controller.run_scope();
    for (int i = 0; i < 8; ++i) controller.begin_step(i);
  }
  {
    auto run = controller.run_scope();
    controller.begin_step(0);
  }
  EXPECT_EQ(trace_string(controller.recorded_trace()), "W8A16x1");
}

TEST(StepController, Bf16PlanIsBf16Throughout) {
  StepController controller(plan_steps(ResolvedPolicy{}, false, 4));
  EXPECT_EQ(controller.generation(), Precision::BF16);
  controller.begin_step(2);
  EXPECT_EQ(controller.generation(), Precision::BF16);
  EXPECT_EQ(controller.reasoner(), Precision::BF16);
}

}  // namespace
}  // namespace stepmix::test
