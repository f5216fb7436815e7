// `stepmix quantize --model BF16_DIR --out FP8_DIR`: static "max" calibration
// over full sampling trajectories, then the ModelOpt tensorwise FP8 layout.
#include <cstdio>
#include <fstream>
#include <regex>

#include "io/checkpoint.hpp"
#include "model/transformer.hpp"
#include "pipeline/model_setup.hpp"
#include "pipeline/quantize.hpp"
#include "stepmix/error.hpp"
#include "tools/commands.hpp"

namespace stepmix::cli {
namespace {

struct QuantizeOptions {
  std::string model_dir, out_dir;
  std::optional<std::string> calib_prompts;
  int calib_seeds = 2;
  std::optional<int> steps;
  std::optional<double> guidance;
  std::optional<std::string> policy;
  bool no_policy = false;
  std::optional<std::string> negative_prompt, negative_prompt_ids;
  std::optional<std::string> latent_shape;
  std::optional<int> height, width, frames;
  std::optional<std::string> scheduler_config;
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

// One prompt per line: text, or "ids:1,2,3" for a complete prefix. Blank
// lines and lines starting with '#' are skipped.
std::vector<std::vector<int64_t>> read_calibration_prompts(const std::string& path, PromptEncoder& encoder) {
  std::ifstream in(path);
  if (!in) throw Error("quantize", path + ": cannot open");
  std::vector<std::vector<int64_t>> prompts;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    prompts.push_back(line.rfind("ids:", 0) == 0 ? parse_id_list(line.substr(4), path) : encoder.encode(line));
  }
  if (prompts.empty()) throw Error("quantize", path + ": no prompts");
  return prompts;
}

void run_quantize(const QuantizeOptions& opt) {
  if (opt.policy && opt.no_policy) throw Error("quantize", "give --policy or --no-policy, not both");
  const ModelDirectory dir = ModelDirectory::open(opt.model_dir);
  const ModelDefaults defaults = read_model_defaults(dir);
  PromptEncoder encoder(dir);
  QuantizeSettings s;
  s.model_dir = opt.model_dir;
  s.out_dir = opt.out_dir;
  if (opt.no_policy) s.policy.reset();
  if (opt.policy) s.policy = parse_policy_option(*opt.policy);

  CalibrationSettings& c = s.calibration;
  std::string prompts_file = opt.calib_prompts.value_or((std::filesystem::path(dir.root) / "calibration_prompts.txt").string());
  if (!opt.calib_prompts && !std::filesystem::exists(prompts_file))
    throw Error("quantize", "--calib-prompts FILE is required (" + prompts_file + " does not exist)");
  c.prompts = read_calibration_prompts(prompts_file, encoder);
  c.negative_prompt = opt.negative_prompt_ids ? parse_id_list(*opt.negative_prompt_ids, "--negative-prompt-ids")
                                              : encoder.encode(opt.negative_prompt.value_or(""));
  c.seeds = opt.calib_seeds;
  c.steps = opt.steps ? *opt.steps : defaults.steps.value_or(8);
  c.guidance = opt.guidance ? *opt.guidance : defaults.guidance.value_or(3.0);
  c.scheduler_config = opt.scheduler_config;
  const int64_t channels = parse_cosmos3_config(dir.config, dir.config_path).config.latent_channel;
  c.latent_shape = latent_shape_for({opt.latent_shape, opt.height, opt.width, opt.frames}, dir, channels, defaults);

  const QuantizeReport report = quantize_checkpoint(s);
  std::printf("calibrated %zu governed Linears over %zu prompts x %d seeds x %d steps (%d transformer calls)\n",
              report.input_amax.size(), c.prompts.size(), c.seeds, c.steps, report.transformer_calls);
  std::printf("policy: %s\n", s.policy ? ("first_last_n " + std::to_string(s.policy->first_steps) + "/" +
                                          std::to_string(s.policy->last_steps) + ", reasoner a16").c_str()
                                       : "none (runtime: null)");
  std::printf("wrote %s\n", opt.out_dir.c_str());
}

}  // namespace

void add_quantize_command(CLI::App& app) {
  auto opt = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand("quantize", "Quantize a BF16 checkpoint to ModelOpt FP8 with static calibration");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--model", opt->model_dir, "BF16 Diffusers model directory")->required();
  cmd->add_option("--out", opt->out_dir, "Output directory (must not exist)")->required();
  cmd->add_option("--calib-prompts", opt->calib_prompts,
                  "Calibration prompts, one per line (text, or ids:1,2,3); default MODEL/calibration_prompts.txt");
  cmd->add_option("--calib-seeds", opt->calib_seeds, "Seeds per prompt")->default_val(2);
  cmd->add_option("--steps", opt->steps, "Sampling steps per calibration trajectory");
  cmd->add_option("--guidance", opt->guidance, "CFG scale of the calibration trajectories");
  cmd->add_option("--policy", opt->policy, "Step policy to write: first-last:F,L (default first-last:3,3)");
  cmd->add_flag("--no-policy", opt->no_policy, "Write runtime: null (no step policy)");
  cmd->add_option("--negative-prompt", opt->negative_prompt, "Unconditional prompt (default: empty)");
  cmd->add_option("--negative-prompt-ids", opt->negative_prompt_ids, "Unconditional prefix as ids");
  cmd->add_option("--latent-shape", opt->latent_shape, "Calibration latent C,T,H,W");
  cmd->add_option("--height", opt->height, "Calibration image height");
  cmd->add_option("--width", opt->width, "Calibration image width");
  cmd->add_option("--frames", opt->frames, "Calibration frames");
  cmd->add_option("--scheduler-config", opt->scheduler_config, "Scheduler config for the calibration runs");
  cmd->callback([opt] { run_quantize(*opt); });
}

}  // namespace stepmix::cli
