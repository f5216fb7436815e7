// `stepmix inspect MODEL_DIR`: what the checkpoint holds, how its step policy
// resolves, and the precision of every step of an N-step run.
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "io/checkpoint.hpp"
#include "quant/governed.hpp"
#include "stepmix/error.hpp"
#include "stepmix/policy.hpp"
#include "tools/commands.hpp"
#include "tools/policy_options.hpp"

namespace stepmix::cli {
namespace {

struct InspectOptions {
  std::string model_dir;
  int steps = 35;
  bool json = false;
  PolicyOptions policy;
};

// "layers.3.self_attn.norm_q.weight" -> "layers.*.self_attn.norm_q": a short
// family name for the summary of tensors kept in 16-bit.
std::string tensor_family(const std::string& name) {
  static const std::regex layer_index(R"(^layers\.\d+\.)");
  std::string s = std::regex_replace(name, layer_index, "layers.*.");
  for (const char* suffix : {".weight", ".bias"}) {
    const std::string suf(suffix);
    if (s.size() > suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0) s.resize(s.size() - suf.size());
  }
  return s;
}

std::string quantization_summary(const QuantizationInfo& q) {
  switch (q.kind) {
    case QuantizationKind::None: return "none (16-bit checkpoint)";
    case QuantizationKind::ModelOptFp8: return q.quant_method + " / " + q.quant_algo + " (serialised tensorwise FP8, native W8A8)";
    case QuantizationKind::Unsupported: break;
  }
  return "unsupported: " + q.reason;
}

void run_inspect(const InspectOptions& opt) {
  const ModelDirectory dir = ModelDirectory::open(opt.model_dir);
  const QuantizationInfo quant = classify_quantization(dir.config, dir.config_path);
  require_supported_quantization(quant, dir.config_path);
  const ResolvedPolicy policy = resolve_policy(dir.config, dir.config_path, opt.policy.overrides());
  const TensorStore store = TensorStore::open_folder(dir.transformer_dir);
  const GovernedDiscovery governed = discover_governed_linears(store);
  if (quant.kind == QuantizationKind::ModelOptFp8 && !governed.has_fp8())
    throw Error("quant", store.folder() + ": quantization_config declares ModelOpt FP8 but no governed Linear has an "
                                          "F8_E4M3 weight");
  if (quant.kind == QuantizationKind::None && governed.has_fp8())
    throw Error("quant", store.folder() + ": F8_E4M3 weights but " + dir.config_path +
                             " has no quantization_config (expected quant_method \"modelopt\", quant_algo \"FP8\")");
  check_governed_counts(policy, governed.counts, dir.transformer_dir);
  const StepPlan plan = plan_steps(policy, governed.has_fp8(), opt.steps);

  std::vector<std::string> warnings = policy.warnings;
  if (dir.hf_quant_config_path) {
    const auto w = root_quant_config_warnings(read_json_file(*dir.hf_quant_config_path, "config"), *dir.hf_quant_config_path);
    warnings.insert(warnings.end(), w.begin(), w.end());
  }
  for (const auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());

  std::set<std::string> families;
  for (const auto& name : governed.kept_16bit) families.insert(tensor_family(name));
  const GovernedCounts& c = governed.counts;

  if (opt.json) {
    nlohmann::json out;
    out["model"] = opt.model_dir;
    out["transformer_dir"] = dir.transformer_dir;
    out["quantization"] = {{"kind", quant.kind == QuantizationKind::ModelOptFp8 ? "modelopt-fp8" : "none"},
                           {"quant_method", quant.quant_method},
                           {"quant_algo", quant.quant_algo}};
    out["governed"] = {{"generation_fp8", c.generation_fp8}, {"reasoner_fp8", c.reasoner_fp8},
                       {"generation_16bit", c.generation_dense}, {"reasoner_16bit", c.reasoner_dense}};
    out["kept_16bit"] = {{"tensors", governed.kept_16bit.size()}, {"families", families}};
    out["source"] = policy.source;
    out["enabled"] = policy.enabled;
    out["first_steps"] = policy.first_steps;
    out["last_steps"] = policy.last_steps;
    out["overlap"] = std::string(tower_mode_name(policy.overlap));
    out["reasoner"] = std::string(precision_json_name(plan.reasoner));
    out["steps"] = opt.steps;
    nlohmann::json steps = nlohmann::json::array();
    for (Precision p : plan.generation) steps.push_back(std::string(precision_json_name(p)));
    out["plan"] = steps;
    out["trace"] = trace_string(plan.generation);
    out["warnings"] = warnings;
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("checkpoint:   %s\n", opt.model_dir.c_str());
  std::printf("transformer:  %s (%zu tensors in %zu file%s)\n", dir.transformer_dir.c_str(), store.size(),
              store.files().size(), store.files().size() == 1 ? "" : "s");
  std::printf("quantization: %s\n", quantization_summary(quant).c_str());
  std::printf("governed:     generation %d FP8 + %d 16-bit, reasoner %d FP8 + %d 16-bit\n", c.generation_fp8,
              c.generation_dense, c.reasoner_fp8, c.reasoner_dense);
  std::string family_list;
  for (const auto& f : families) family_list += (family_list.empty() ? "" : ", ") + f;
  std::printf("kept 16-bit:  %zu tensors (%s)\n", governed.kept_16bit.size(), family_list.c_str());
  std::printf("policy:       source=%s enabled=%s first=%d last=%d overlap=%s reasoner=%s\n", policy.source.c_str(),
              policy.enabled ? "yes" : "no", policy.first_steps, policy.last_steps,
              std::string(tower_mode_name(policy.overlap)).c_str(), std::string(precision_trace_token(plan.reasoner)).c_str());
  std::printf("%s\n", mixed_precision_log_line(policy, plan).c_str());
  std::printf("steps:        %d\n", opt.steps);
  std::printf("trace: %s\n", trace_string(plan.generation).c_str());
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect", "Summarise a checkpoint, its step policy and the per-step plan");
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("model_dir", opt->model_dir, "Diffusers model directory or transformer folder")->required();
  cmd->add_option("--steps", opt->steps, "Number of denoising steps to plan")->default_val(35);
  cmd->add_flag("--json", opt->json, "Print one JSON object");
  add_policy_options(*cmd, opt->policy);
  cmd->callback([opt] { run_inspect(*opt); });
}

}  // namespace stepmix::cli
