// Command-line options shared by every command that runs or plans a
// checkpoint: --mixed-precision and the per-field overrides (spec §6).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "stepmix/policy.hpp"

namespace stepmix::cli {

struct PolicyOptions {
  std::string mixed_precision = "auto";
  std::optional<int> first_steps;
  std::optional<int> last_steps;
  std::optional<std::string> reasoner;
  std::optional<std::string> overlap;

  // Validates the words (throws stepmix::Error on bad values).
  PolicyOverrides overrides() const {
    PolicyOverrides o;
    o.mode = parse_mixed_precision_mode(mixed_precision);
    o.first_steps = first_steps;
    o.last_steps = last_steps;
    if (reasoner) o.reasoner = parse_reasoner_mode(*reasoner);
    if (overlap) o.overlap = parse_overlap_mode(*overlap);
    return o;
  }
};

inline void add_policy_options(CLI::App& cmd, PolicyOptions& o) {
  cmd.add_option("--mixed-precision", o.mixed_precision,
                 "auto (follow the checkpoint), none (schedule off), fp8 (force; default 3/3)")
      ->default_val("auto");
  cmd.add_option("--first-steps", o.first_steps, "Override the number of leading W8A16 steps");
  cmd.add_option("--last-steps", o.last_steps, "Override the number of trailing W8A16 steps");
  cmd.add_option("--reasoner", o.reasoner, "Reasoner tower precision: a16 or native");
  cmd.add_option("--overlap", o.overlap, "Steps inside both windows: a16 or native");
}

}  // namespace stepmix::cli
