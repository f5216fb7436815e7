// The per-iteration rule (docs/step-policy.md §7), the per-run plan, and its
// trace (§11).
#include "stepmix/error.hpp"
#include "stepmix/policy.hpp"
#include "policy/diagnostics.hpp"

namespace stepmix {

namespace {

[[noreturn]] void fail_argument(const std::string& what) { throw Error(policy_detail::kComponent, what); }

void require_positive_steps(int num_steps) {
  if (num_steps <= 0) fail_argument("num_steps: expected an integer >= 1, got " + std::to_string(num_steps));
}

Precision mode_precision(TowerMode mode) { return mode == TowerMode::A16 ? Precision::W8A16 : Precision::W8A8; }

}  // namespace

bool step_is_a16(int i, int num_steps, int first_steps, int last_steps, TowerMode overlap) {
  require_positive_steps(num_steps);
  if (i < 0 || i >= num_steps) {
    fail_argument("step index: expected 0 <= i < " + std::to_string(num_steps) + ", got " + std::to_string(i));
  }
  if (first_steps < 0 || last_steps < 0) {
    fail_argument("window counts: expected integers >= 0, got first_steps=" + std::to_string(first_steps) +
                  " last_steps=" + std::to_string(last_steps));
  }
  // Diffusers' choice, which stepmix follows: a single-iteration run is a
  // warm-up/probe and stays native whatever the counts.
  if (num_steps == 1) return false;
  const bool in_first = i < first_steps;
  const bool in_last = i >= num_steps - last_steps;  // no overflow: num_steps >= 1, last_steps >= 0
  return overlap == TowerMode::A16 ? (in_first || in_last) : (in_first != in_last);
}

StepPlan plan_steps(const ResolvedPolicy& policy, bool checkpoint_has_fp8, int num_steps) {
  // A plan holds an entry per step: bounded before it is allocated.
  if (num_steps < 1 || num_steps > kMaxSteps)
    fail_argument("num_steps: expected an integer in [1, " + std::to_string(kMaxSteps) + "], got " +
                  std::to_string(num_steps));
  StepPlan plan;
  if (!checkpoint_has_fp8) {
    if (policy.enabled) {
      fail_argument("mixed_precision source=" + policy.source +
                    " is on, but the transformer holds no serialised FP8 Linears to schedule");
    }
    plan.native = Precision::BF16;
    plan.reasoner = Precision::BF16;
    plan.generation.assign(num_steps, Precision::BF16);
    return plan;
  }
  plan.native = Precision::W8A8;
  if (!policy.enabled) {
    plan.reasoner = Precision::W8A8;
    plan.generation.assign(num_steps, Precision::W8A8);
    return plan;
  }
  plan.reasoner = mode_precision(policy.reasoner);
  plan.generation.reserve(num_steps);
  for (int i = 0; i < num_steps; ++i) {
    const bool a16 = step_is_a16(i, num_steps, policy.first_steps, policy.last_steps, policy.overlap);
    plan.generation.push_back(a16 ? Precision::W8A16 : Precision::W8A8);
  }
  return plan;
}

StepPlan plan_steps(const ResolvedPolicy& policy, const GovernedCounts& counts, int num_steps) {
  const bool generation_fp8 = counts.generation_fp8 > 0, reasoner_fp8 = counts.reasoner_fp8 > 0;
  if (policy.enabled && !generation_fp8 && reasoner_fp8)
    fail_argument("mixed_precision source=" + policy.source +
                  " is on, but the generation tower holds no serialised FP8 Linears to schedule");
  StepPlan plan = plan_steps(policy, generation_fp8 || reasoner_fp8, num_steps);
  if (!generation_fp8) plan.generation.assign(std::size_t(num_steps), Precision::BF16);
  if (!reasoner_fp8) plan.reasoner = Precision::BF16;
  return plan;
}

std::string trace_string(const std::vector<Precision>& trace) {
  std::string summary;
  std::size_t run_start = 0;
  for (std::size_t i = 1; i <= trace.size(); ++i) {
    if (i < trace.size() && trace[i] == trace[run_start]) continue;
    if (!summary.empty()) summary += " / ";
    summary += std::string(precision_trace_token(trace[run_start])) + "x" + std::to_string(i - run_start);
    run_start = i;
  }
  return summary;
}

std::string mixed_precision_log_line(const ResolvedPolicy& policy, const StepPlan& plan) {
  return "mixed_precision source=" + policy.source + " reasoner=" + std::string(precision_trace_token(plan.reasoner)) +
         " generation=" + trace_string(plan.generation);
}

}  // namespace stepmix
