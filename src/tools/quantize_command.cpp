// `stepmix quantize --model BF16_DIR --out FP8_DIR`: static "max" calibration
// over full sampling trajectories, then the ModelOpt tensorwise FP8 layout.
#include <cstdlib>
#include <regex>

#include "stepmix/tools.hpp"
#include "commands.hpp"
#include "options.hpp"

namespace stepmix::cli {
namespace {

struct QuantizeCommand {
  QuantizeOptions options;
  RequestOptions request;
  std::optional<std::string> policy;
  bool no_policy = false;
};

// "first-last:F,L" -> the default policy with those window counts.
StepPolicy parse_policy_option(const std::string& text) {
  static const std::regex form(R"(first-last:(\d{1,6}),(\d{1,6}))");
  std::smatch m;
  if (!std::regex_match(text, m, form))
    throw Error("quantize", "--policy: expected first-last:F,L (e.g. first-last:3,3), got '" + text + "'");
  StepPolicy p;
  p.first_steps = std::stoi(m[1]);
  p.last_steps = std::stoi(m[2]);
  return p;
}

void run_quantize(QuantizeCommand& c) {
  // Calibration runs on the CPU only; a device asked for in the environment
  // is refused like an unsupported --device, not silently ignored.
  if (const char* device = std::getenv("STEPMIX_DEVICE"); device && *device && std::string(device) != "cpu")
    throw Error("quantize", std::string("STEPMIX_DEVICE=") + device +
                                ": quantize calibrates on the CPU only; unset it or set it to cpu");
  if (c.policy && c.no_policy) throw Error("quantize", "give --policy or --no-policy, not both");
  if (c.no_policy) c.options.policy.reset();
  if (c.policy) c.options.policy = parse_policy_option(*c.policy);
  c.options.request = c.request.to_request("quantize");
  quantize(c.options, stdout);
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto c = std::make_shared<QuantizeCommand>();
  CLI::App* cmd = app.add_subcommand("quantize", "Quantize a BF16 checkpoint to ModelOpt FP8 with static calibration");
  cmd->add_option("-m,--model", c->options.model_dir, "BF16 Diffusers model directory")->required();
  cmd->add_option("-o,--out", c->options.out_dir, "Output directory (must not exist)")->required();
  cmd->add_option("--calib-prompts", c->options.calib_prompts,
                  "Calibration prompts, one per line (text, or ids:1,2,3); default MODEL/calibration_prompts.txt");
  cmd->add_option("--calib-seeds", c->options.calib_seeds, "Seeds per prompt")->default_val(2)->check(non_empty());
  add_request_options(*cmd, c->request, kNegativePrompt | kGeometry | kSampling | kSchedulerConfig,
                      "the model's, else 8 steps and guidance 3");
  cmd->add_option("--policy", c->policy, "Step policy to write: first-last:F,L (default first-last:3,3)");
  cmd->add_flag("--no-policy", c->no_policy, "Write runtime: null (no step policy)");
  cmd->callback([c] { run_quantize(*c); });
}

}  // namespace stepmix::cli
