// `stepmix inspect MODEL_DIR`: what the checkpoint holds, how its step policy
// resolves, and the precision of every step of an N-step run.
#include <cstdio>

#include "commands.hpp"
#include "options.hpp"

namespace stepmix::cli {
namespace {

struct InspectOptions {
  std::string model_dir;
  std::optional<int> steps;
  bool json = false;
  PolicyOptions policy;
};

void run_inspect(const InspectOptions& opt) {
  const InspectReport report = inspect(opt.model_dir, opt.policy.overrides(), opt.steps);
  for (const auto& w : report.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::fputs(opt.json ? (report.json + "\n").c_str() : report.text.c_str(), stdout);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Summarise a checkpoint, its step policy and the per-step plan");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("model_dir", opt->model_dir, "Diffusers model directory or transformer folder")->required();
  cmd->add_option("--steps", opt->steps,
                  "Number of denoising steps to plan (default: what generate runs: the model's, else " +
                      std::to_string(kDefaultSteps) + ")");
  cmd->add_flag("--json", opt->json, "Print one JSON object");
  add_policy_options(*cmd, opt->policy);
  cmd->callback([opt] { run_inspect(*opt); });
}

}  // namespace stepmix::cli
