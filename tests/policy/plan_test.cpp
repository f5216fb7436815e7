// §7 step rule and per-run plan (every example row), §11 trace and log line.
#include "policy/policy_fixtures.hpp"

namespace stepmix::test {
namespace {

using nlohmann::json;

ResolvedPolicy schedule_on(int first, int last, TowerMode overlap = TowerMode::A16, TowerMode reasoner = TowerMode::A16) {
  ResolvedPolicy policy;
  policy.enabled = true;
  policy.source = "checkpoint";
  policy.first_steps = first;
  policy.last_steps = last;
  policy.overlap = overlap;
  policy.reasoner = reasoner;
  return policy;
}

std::vector<int> a16_iterations(const StepPlan& plan) {
  std::vector<int> indices;
  for (std::size_t i = 0; i < plan.generation.size(); ++i) {
    if (plan.generation[i] == Precision::W8A16) indices.push_back(static_cast<int>(i));
  }
  return indices;
}

std::vector<int> range(int begin, int end) {
  std::vector<int> values;
  for (int i = begin; i < end; ++i) values.push_back(i);
  return values;
}

std::vector<int> concat(std::vector<int> a, const std::vector<int>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string planned_trace(const ResolvedPolicy& policy, int num_steps) {
  return trace_string(plan_steps(policy, true, num_steps).generation);
}

TEST(PlanTable, Fifty3And3) {
  const StepPlan plan = plan_steps(schedule_on(3, 3), true, 50);
  EXPECT_EQ(a16_iterations(plan), (std::vector<int>{0, 1, 2, 47, 48, 49}));
  EXPECT_EQ(trace_string(plan.generation), "W8A16x3 / W8A8x44 / W8A16x3");
}

TEST(PlanTable, ThirtyFive3And3) {
  const StepPlan plan = plan_steps(schedule_on(3, 3), true, 35);
  EXPECT_EQ(a16_iterations(plan), concat(range(0, 3), range(32, 35)));
  EXPECT_EQ(trace_string(plan.generation), "W8A16x3 / W8A8x29 / W8A16x3");
}

TEST(PlanTable, Ten2And2) {
  const StepPlan plan = plan_steps(schedule_on(2, 2), true, 10);
  EXPECT_EQ(a16_iterations(plan), (std::vector<int>{0, 1, 8, 9}));
  EXPECT_EQ(trace_string(plan.generation), "W8A16x2 / W8A8x6 / W8A16x2");
}

TEST(PlanTable, Ten2And4) {
  const StepPlan plan = plan_steps(schedule_on(2, 4), true, 10);
  EXPECT_EQ(a16_iterations(plan), concat({0, 1}, range(6, 10)));
  EXPECT_EQ(trace_string(plan.generation), "W8A16x2 / W8A8x4 / W8A16x4");
}

TEST(PlanTable, Seven0And2) {
  const StepPlan plan = plan_steps(schedule_on(0, 2), true, 7);
  EXPECT_EQ(a16_iterations(plan), (std::vector<int>{5, 6}));
  EXPECT_EQ(trace_string(plan.generation), "W8A8x5 / W8A16x2");
}

TEST(PlanTable, WindowsCoveringEverythingAreAllA16) {
  EXPECT_EQ(planned_trace(schedule_on(4, 4), 7), "W8A16x7");
  EXPECT_EQ(planned_trace(schedule_on(3, 3), 6), "W8A16x6");  // F + L == N
}

TEST(PlanTable, OverlapNativeIsExclusiveOr) {
  const StepPlan plan = plan_steps(schedule_on(3, 3, TowerMode::Native), true, 5);
  EXPECT_EQ(a16_iterations(plan), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(trace_string(plan.generation), "W8A16x2 / W8A8x1 / W8A16x2");
}

TEST(PlanTable, ForcedDefaultOnFourSteps) {
  const ResolvedPolicy forced = resolve_policy(fp8_config_without_runtime(), kConfigPath, {.mode = MixedPrecisionMode::Fp8});
  EXPECT_EQ(planned_trace(forced, 4), "W8A16x4");
}

TEST(PlanTable, DistilledBuildWithNullRuntimeIsW8A8Everywhere) {
  const ResolvedPolicy off = resolve_policy(fp8_config_with_runtime(nullptr), kConfigPath, {});
  const StepPlan plan = plan_steps(off, true, 4);
  EXPECT_EQ(trace_string(plan.generation), "W8A8x4");
  EXPECT_EQ(plan.reasoner, Precision::W8A8);
}

TEST(PlanTable, SingleIterationStaysNative) {
  const StepPlan plan = plan_steps(schedule_on(1, 1), true, 1);
  EXPECT_EQ(trace_string(plan.generation), "W8A8x1");
  EXPECT_EQ(plan.reasoner, Precision::W8A16);  // the reasoner keeps its static policy
  EXPECT_EQ(planned_trace(schedule_on(999, 999), 1), "W8A8x1");
}

TEST(Plan, ZeroCountsKeepTheGenerationTowerNative) {
  const StepPlan plan = plan_steps(schedule_on(0, 0, TowerMode::A16, TowerMode::Native), true, 8);
  EXPECT_EQ(trace_string(plan.generation), "W8A8x8");
  EXPECT_EQ(plan.reasoner, Precision::W8A8);
}

TEST(Plan, LargeCountsMakeEveryIterationA16) {
  EXPECT_EQ(planned_trace(schedule_on(999, 0), 35), "W8A16x35");
  EXPECT_EQ(planned_trace(schedule_on(0, 999), 2), "W8A16x2");
  EXPECT_EQ(planned_trace(schedule_on(999, 999, TowerMode::Native), 5), "W8A8x5");  // every iteration doubly covered
}

TEST(Plan, ScheduleOffOnFp8IsW8A8Everywhere) {
  ResolvedPolicy off;
  off.source = "disabled";
  const StepPlan plan = plan_steps(off, true, 35);
  EXPECT_EQ(trace_string(plan.generation), "W8A8x35");
  EXPECT_EQ(plan.reasoner, Precision::W8A8);
  EXPECT_EQ(plan.native, Precision::W8A8);
}

TEST(Plan, Bf16CheckpointIsBf16Everywhere) {
  const ResolvedPolicy unquantized = resolve_policy(bf16_config(), kConfigPath, {});
  const StepPlan plan = plan_steps(unquantized, false, 4);
  EXPECT_EQ(trace_string(plan.generation), "BF16x4");
  EXPECT_EQ(plan.reasoner, Precision::BF16);
  EXPECT_EQ(plan.native, Precision::BF16);
}

TEST(Plan, EnabledScheduleWithoutFp8WeightsIsAnError) {
  error_message([] { plan_steps(schedule_on(3, 3), false, 8); }, {"no serialised FP8 Linears"});
}

TEST(Plan, NonPositiveStepCountIsAnError) {
  error_message([] { plan_steps(schedule_on(3, 3), true, 0); },
                {"[policy] num_steps: expected an integer in [1, 10000], got 0"});
  error_message([] { plan_steps(ResolvedPolicy{}, false, -2); }, {"got -2"});
  // A plan is one entry per step: an absurd count is refused, not allocated.
  error_message([] { plan_steps(schedule_on(3, 3), true, 2147483647); }, {"got 2147483647"});
  EXPECT_EQ(plan_steps(schedule_on(3, 3), true, 10000).generation.size(), 10000u);
}

TEST(StepRule, BoundaryIndices) {
  EXPECT_TRUE(step_is_a16(2, 50, 3, 3, TowerMode::A16));
  EXPECT_FALSE(step_is_a16(3, 50, 3, 3, TowerMode::A16));
  EXPECT_FALSE(step_is_a16(46, 50, 3, 3, TowerMode::A16));
  EXPECT_TRUE(step_is_a16(47, 50, 3, 3, TowerMode::A16));
}

TEST(StepRule, SingleIterationIsNative) { EXPECT_FALSE(step_is_a16(0, 1, 1, 1, TowerMode::A16)); }

TEST(StepRule, IndexOutOfRangeIsAnError) {
  error_message([] { step_is_a16(-1, 10, 3, 3, TowerMode::A16); }, {"step index: expected 0 <= i < 10, got -1"});
  error_message([] { step_is_a16(10, 10, 3, 3, TowerMode::A16); }, {"got 10"});
  error_message([] { step_is_a16(0, 0, 3, 3, TowerMode::A16); }, {"num_steps"});
}

TEST(StepRule, NegativeCountsAreAnError) {
  error_message([] { step_is_a16(0, 10, -1, 3, TowerMode::A16); }, {"first_steps=-1"});
}

TEST(Trace, RunLengthEncodingInLoopOrder) {
  using enum Precision;
  EXPECT_EQ(trace_string({}), "");
  EXPECT_EQ(trace_string({W8A8}), "W8A8x1");
  EXPECT_EQ(trace_string({W8A16, W8A8, W8A16, W8A16}), "W8A16x1 / W8A8x1 / W8A16x2");
  EXPECT_EQ(trace_string({BF16, BF16, BF16}), "BF16x3");
}

TEST(Trace, LogLineNamesSourceReasonerAndGeneration) {
  const ResolvedPolicy policy = schedule_on(3, 3);
  EXPECT_EQ(mixed_precision_log_line(policy, plan_steps(policy, true, 35)),
            "mixed_precision source=checkpoint reasoner=W8A16 generation=W8A16x3 / W8A8x29 / W8A16x3");
  ResolvedPolicy off;
  off.source = "disabled";
  EXPECT_EQ(mixed_precision_log_line(off, plan_steps(off, true, 35)),
            "mixed_precision source=disabled reasoner=W8A8 generation=W8A8x35");
}

// §11: a token names what a tower's governed Linears run. A tower without
// serialised FP8 Linears runs BF16 beside an FP8 one (schedule off, or a
// reasoner run native); with the schedule on, a generation tower without FP8
// is refused.
TEST(PlanPerTower, ATowerWithoutFp8LinearsRunsBf16) {
  ResolvedPolicy off;
  off.source = "disabled";
  GovernedCounts dense_generation;
  dense_generation.generation_dense = 42;
  dense_generation.reasoner_fp8 = 28;
  StepPlan plan = plan_steps(off, dense_generation, 4);
  EXPECT_EQ(trace_string(plan.generation), "BF16x4");
  EXPECT_EQ(plan.reasoner, Precision::W8A8);
  EXPECT_EQ(mixed_precision_log_line(off, plan), "mixed_precision source=disabled reasoner=W8A8 generation=BF16x4");
  error_message([&] { plan_steps(schedule_on(3, 3), dense_generation, 8); },
                {"is on, but the generation tower holds no serialised FP8 Linears"});

  GovernedCounts dense_reasoner;
  dense_reasoner.generation_fp8 = 42;
  dense_reasoner.reasoner_dense = 28;
  plan = plan_steps(schedule_on(3, 3, TowerMode::A16, TowerMode::Native), dense_reasoner, 8);
  EXPECT_EQ(trace_string(plan.generation), "W8A16x3 / W8A8x2 / W8A16x3");
  EXPECT_EQ(plan.reasoner, Precision::BF16);
  plan = plan_steps(off, dense_reasoner, 2);
  EXPECT_EQ(trace_string(plan.generation), "W8A8x2");
  EXPECT_EQ(plan.reasoner, Precision::BF16);

  // Both towers FP8 (or both dense): what the checkpoint-wide plan gives.
  GovernedCounts both;
  both.generation_fp8 = 42;
  both.reasoner_fp8 = 28;
  EXPECT_EQ(trace_string(plan_steps(schedule_on(3, 3), both, 8).generation),
            trace_string(plan_steps(schedule_on(3, 3), true, 8).generation));
  EXPECT_EQ(trace_string(plan_steps(off, GovernedCounts{}, 3).generation), "BF16x3");
}

}  // namespace
}  // namespace stepmix::test
