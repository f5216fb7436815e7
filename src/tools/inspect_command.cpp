// `stepmix inspect MODEL_DIR`: what the checkpoint holds, how its step policy
// resolves, and the precision of every step of an N-step run.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "options.hpp"

namespace stepmix::cli {
namespace {

struct InspectOptions {
  std::string model_dir;
  std::optional<std::string> image;
  std::optional<int> steps;
  bool json = false;
  PolicyOptions policy;
};

// The text chunks of a PNG stepmix (or another tool) wrote.
void run_inspect_image(const InspectOptions& opt) {
  const auto chunks = read_png_metadata(*opt.image);
  if (opt.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const auto& [key, text] : chunks) out[key] = text;
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  if (chunks.empty()) std::printf("%s: no text chunks\n", opt.image->c_str());
  for (const auto& [key, text] : chunks) std::printf("%s:\n%s\n", key.c_str(), text.c_str());
}

void run_inspect(const InspectOptions& opt) {
  if (opt.image) {
    if (!opt.model_dir.empty()) throw Error("inspect", "give a model folder or --image FILE.png, not both");
    return run_inspect_image(opt);
  }
  if (opt.model_dir.empty()) throw Error("inspect", "give a model folder (or --image FILE.png)");
  const InspectReport report = inspect(opt.model_dir, opt.policy.overrides(), opt.steps);
  for (const auto& w : report.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::fputs(opt.json ? (report.json + "\n").c_str() : report.text.c_str(), stdout);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Summarise a checkpoint, its step policy and the per-step plan");
  cmd->add_option("model_dir,-m,--model", opt->model_dir, "Diffusers model directory or transformer folder");
  cmd->add_option("--image", opt->image, "Print the metadata (text chunks) of a PNG instead");
  cmd->add_option("--steps", opt->steps,
                  "Number of denoising steps to plan (default: what generate runs without --steps: the model's, "
                  "else 35 for a video, the default, and 50 for an image)")
      ->check(non_empty());
  cmd->add_flag("--json", opt->json, "Print one JSON object");
  add_policy_options(*cmd, opt->policy);
  cmd->callback([opt] { run_inspect(*opt); });
}

}  // namespace stepmix::cli
