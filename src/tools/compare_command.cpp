// `stepmix compare`: image metrics, per-step error and pictures of each
// precision mode of an FP8 checkpoint against a reference (stepmix::compare).
#include "stepmix/tools.hpp"
#include "commands.hpp"
#include "options.hpp"

namespace stepmix::cli {
namespace {

struct CompareCommand {
  CompareOptions options;
  RequestOptions request;
  RuntimeOptions runtime;
};

void run_compare(CompareCommand& c) {
  c.options.runtime = c.runtime.model_options();
  c.options.request = c.request.to_request("compare");
  CancelToken cancel;
  with_ctrl_c_cancelling(cancel, [&] { compare(c.options, stdout, &cancel); });
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto c = std::make_shared<CompareCommand>();
  CompareOptions& o = c->options;
  CLI::App* cmd = app.add_subcommand("compare", "Image metrics, per-step error and pictures of each precision mode");
  cmd->footer(
      "Modes: the reference (the --reference BF16 checkpoint, and then also w8a16: W8A16 on every step; else\n"
      "W8A16 on every step of --model), w8a8 (every step), mixed (the checkpoint's schedule, else the forced 3/3)\n"
      "and each --policy. Seeds 0..K-1 give each prompt its initial noise, as\n"
      "stepmix generate --seed does.\n"
      "Prompts file: one prompt per line, text or ids:1,2,3, optionally followed by whitespace and label:K (the\n"
      "class index for classifier accuracy); or JSON lines {\"prompt\": \"...\" | \"ids\": [..], \"label\": K}.\n"
      "Blank lines and lines starting with # are skipped.\n"
      "Writes REPORT_DIR/{report.json, report.md, grid.png, step_error.png} (see README, \"Evidence\").");
  cmd->add_option("-m,--model", o.model_dir, "ModelOpt FP8 model directory")->required();
  cmd->add_option("--reference", o.reference_dir,
                  "BF16 model directory to compare against (default: W8A16 on every step of --model)");
  cmd->add_option("--prompts", o.prompts_file, "Prompts file (see below)")->required();
  cmd->add_option("--seeds", o.seeds, "Seeds per prompt (0..K-1)")->required()->check(non_empty());
  add_request_options(*cmd, c->request, kNegativePrompt | kGeometry | kSampling | kSchedulerConfig);
  cmd->add_option("--policy", o.policies, "Extra mode first-last:F,L (W8A16 windows); repeatable")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--classifier", o.classifier_dir,
                  "Classifier folder (default: classifier/ of --model, else of --reference, when present)");
  cmd->add_option("--diff-gain", o.diff_gain, "Amplification of the difference maps")->default_val(10.0)->check(non_empty());
  cmd->add_flag("--force", o.force, "Replace --out if it exists");
  cmd->add_option("-o,--out", o.out_dir, "Report folder (written whole at the end)")->required();
  add_runtime_options(*cmd, c->runtime);
  cmd->callback([c] { run_compare(*c); });
}

}  // namespace stepmix::cli
