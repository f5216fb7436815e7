#include "sched/scheduler.hpp"

#include <sstream>

#include "stepmix/error.hpp"

namespace stepmix::sched {

void Scheduler::check_step_args(std::size_t output_size, double timestep, std::size_t sample_size) {
  if (timesteps_.empty()) throw Error("scheduler", name() + ": step() called before set_timesteps()");
  if (step_index_ >= num_steps())
    throw Error("scheduler", name() + ": step() called after the last of " + std::to_string(num_steps()) +
                                 " steps; call set_timesteps() or reset() to start a new run");
  if (output_size != sample_size)
    throw Error("scheduler", name() + ": model output has " + std::to_string(output_size) +
                                 " elements but the sample has " + std::to_string(sample_size));
  if (sample_size == 0) throw Error("scheduler", name() + ": empty sample");
  if (run_numel_ != 0 && sample_size != run_numel_)
    throw Error("scheduler", name() + ": sample size changed within a run (" + std::to_string(run_numel_) +
                                 " -> " + std::to_string(sample_size) + ")");
  const double expected = timesteps_[std::size_t(step_index_)];
  if (timestep != expected) {
    // stepmix always advances by its own step index (it does not search the
    // schedule for the value like the reference); a different value means
    // the caller's loop and the scheduler disagree.
    std::ostringstream msg;
    msg.precision(9);
    msg << name() << ": step " << step_index_ << " expects timestep " << expected << ", got " << timestep;
    throw Error("scheduler", msg.str());
  }
  run_numel_ = sample_size;
}

}  // namespace stepmix::sched
