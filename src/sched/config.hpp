// Diffusers scheduler_config.json → SchedulerConfig → Scheduler.
//
// Parsing is strict: `_class_name` picks the scheduler; every
// field must be known, and fields that would change the math to something
// stepmix does not implement are rejected with
//   [scheduler] <file>: <field>: expected ..., got ...
// Missing fields take the Diffusers constructor defaults (then validated).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sched/flow_match_euler.hpp"
#include "sched/scheduler.hpp"
#include "sched/unipc.hpp"

namespace stepmix::sched {

// The sigma shift (flow_shift / shift, and --flow-shift) stepmix accepts:
// the Cosmos3 examples use 1 to 17; far outside, the shifted sigmas leave
// the range where the solvers stay finite.
inline constexpr double kMinFlowShift = 0.01;
inline constexpr double kMaxFlowShift = 1000.0;
// "[0.01, 1000]", for messages.
std::string flow_shift_range_text();

enum class SchedulerKind { unipc_multistep, flow_match_euler };

// The Diffusers class name ("UniPCMultistepScheduler", ...).
std::string_view scheduler_kind_name(SchedulerKind kind);
std::optional<SchedulerKind> scheduler_kind_from_name(std::string_view class_name);

struct SchedulerConfig {
  SchedulerKind kind = SchedulerKind::unipc_multistep;
  std::string source;            // where it came from, for messages
  UniPCOptions unipc;            // used when kind == unipc_multistep
  FlowMatchEulerOptions flow_match;  // used when kind == flow_match_euler
  // One-line remarks worth logging (e.g. which sigma grid is in effect).
  std::vector<std::string> notes;
};

// The shift its sigmas are made with: UniPC's flow_shift or FlowMatch's shift.
double shift_of(const SchedulerConfig& config);

// Throws stepmix::Error("scheduler", ...) for unreadable files, invalid JSON
// and every unsupported value.
SchedulerConfig load_scheduler_config(const std::string& path);
SchedulerConfig parse_scheduler_config(const nlohmann::json& json, const std::string& source);

// Per-request overrides (CLI). Switching the kind carries
// num_train_timesteps and the shift over to the other scheduler's defaults.
struct SchedulerOverrides {
  std::optional<SchedulerKind> kind;
  std::optional<double> flow_shift;        // UniPC flow_shift / FlowMatch shift
  std::optional<bool> use_karras_sigmas;   // false: off for either scheduler; true: UniPC only
  bool native_flow_grid = false;           // model_index.json use_native_flow_schedule: UniPC only
  std::optional<Precision> precision;
};
// Throws stepmix::Error for contradictory requests, e.g. a flow_shift
// override while UniPC uses Karras sigmas (the reference ignores flow_shift
// there): the caller must also turn Karras off.
void apply_overrides(SchedulerConfig& config, const SchedulerOverrides& overrides);

std::unique_ptr<Scheduler> make_scheduler(const SchedulerConfig& config);

}  // namespace stepmix::sched
