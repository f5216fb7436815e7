// Per-request precision state (docs/step-policy.md §10): chosen once per loop
// iteration, shared by every transformer call of that iteration, native
// outside a run.
#include "stepmix/error.hpp"
#include "stepmix/policy.hpp"
#include "policy/diagnostics.hpp"

namespace stepmix {

StepController::StepController(StepPlan plan) : plan_(std::move(plan)), generation_(plan_.native) {}

void StepController::begin_step(int i) {
  const int num_steps = static_cast<int>(plan_.generation.size());
  if (i < 0 || i >= num_steps) {
    throw Error(policy_detail::kComponent, "begin_step: expected 0 <= i < " + std::to_string(num_steps) +
                                               " (iterations in the plan), got " + std::to_string(i));
  }
  generation_ = plan_.generation[static_cast<std::size_t>(i)];
  in_step_ = true;
  recorded_.push_back(generation_);
}

Precision StepController::generation() const { return generation_; }

// The reasoner's precision is static for a run (§9) but, like the generation
// tower, returns to native between runs.
Precision StepController::reasoner() const { return in_step_ ? plan_.reasoner : plan_.native; }

void StepController::reset() {
  generation_ = plan_.native;
  in_step_ = false;
}

StepController::RunScope::RunScope(StepController& controller) : controller_(controller) {
  controller_.reset();
  controller_.recorded_.clear();
}

StepController::RunScope::~RunScope() { controller_.reset(); }

}  // namespace stepmix
