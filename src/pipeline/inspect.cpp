// stepmix::inspect (include/stepmix/model.hpp): what a checkpoint holds, how
// its step policy resolves, and the precision of every step, after the checks
// a run makes at load (every transformer weight read once for NaN/Inf).
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "io/check_tensors.hpp"
#include "io/checkpoint.hpp"
#include "model/checkpoint_check.hpp"
#include "pipeline/model_setup.hpp"
#include "pipeline/sequence.hpp"
#include "pipeline/vae_stage.hpp"
#include "quant/governed.hpp"
#include "stepmix/model.hpp"
#include "text/prompt_model.hpp"

namespace stepmix {
namespace {

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

std::string printf_string(const char* format, auto... args) {
  const int n = std::snprintf(nullptr, 0, format, args...);
  std::string s(std::size_t(n) + 1, '\0');
  std::snprintf(s.data(), s.size(), format, args...);
  s.resize(std::size_t(n));
  return s;
}

}  // namespace

InspectReport inspect(const std::string& path, const PolicyOverrides& overrides, std::optional<int> steps_option) {
  const ModelDirectory dir = ModelDirectory::open(path);
  // The policy's checks come before the quantization's (the order a run
  // checks in, Model::open), so both report the same first failure.
  const ResolvedPolicy policy = resolve_policy(dir.config, dir.config_path, overrides);
  const QuantizationInfo quant = classify_quantization(dir.config, dir.config_path);
  require_supported_quantization(quant, dir.config_path);
  const TensorStore store = TensorStore::open_folder(dir.transformer_dir);
  const GovernedDiscovery governed = discover_governed_linears(store);
  std::vector<std::string> fp8_modules;
  for (const GovernedLinear& l : governed.linears)
    if (l.fp8) fp8_modules.push_back(l.module);
  require_weights_match_quantization(quant, fp8_modules, store.folder(), dir.config_path);
  check_governed_counts(policy, governed.counts, dir.transformer_dir);
  // The checks a run makes at load time (config, every tensor bound, scale
  // ranges, no unused tensor), then every weight scanned for NaN/Inf.
  const CheckedCheckpoint checked = check_cosmos3_checkpoint(dir, store);
  const CheckTensorsStats scanned = check_tensors(store);
  // The rest of what a run refuses at load: the sequence settings, the
  // scheduler, the VAE's config and tensors, the tokenizer and the defaults.
  (void)read_sequence_settings(dir.config, dir.config_path);
  // The VAE's config and tensor headers, and its channels against the
  // transformer's (weights checked and sized, not read).
  if (const auto vae_folder = vae_folder_of(dir))
    (void)VaeStage(*vae_folder, checked.config.latent_channel, ActivationDType::F32, Device::Cpu);
  if (dir.tokenizer_path) (void)text::PromptModel::open(dir.root);
  const ModelDefaults defaults = read_model_defaults(dir);
  // The same number of steps generate runs for this model's default request
  // (a distilled build's scheduler fixes them).
  if (steps_option) check_steps_value(*steps_option, "inspect", "--steps");
  const bool video = request_frames({}, dir, defaults) > 1;
  const int steps = resolve_sampling(scheduler_config_for({}, dir, defaults, video), steps_option, std::nullopt,
                                     default_steps(defaults, video), 1.0, "inspect")
                        .steps;
  const StepPlan plan = plan_steps(policy, governed.counts, steps);

  InspectReport report;
  report.warnings = policy.warnings;
  report.warnings.insert(report.warnings.end(), checked.warnings.begin(), checked.warnings.end());

  std::set<std::string> families;
  for (const auto& name : governed.kept_16bit) families.insert(tensor_family(name));
  const GovernedCounts& c = governed.counts;

  nlohmann::json out;
  out["model"] = path;
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
  out["steps"] = steps;
  nlohmann::json plan_json = nlohmann::json::array();
  for (Precision p : plan.generation) plan_json.push_back(std::string(precision_json_name(p)));
  out["plan"] = plan_json;
  out["trace"] = trace_string(plan.generation);
  out["warnings"] = report.warnings;
  out["notes"] = policy.notes;
  out["tensors_checked"] = {{"tensors", scanned.tensors}, {"bytes", scanned.bytes}, {"non_finite", 0}};
  report.json = out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);  // a path need not be UTF-8

  std::string family_list;
  for (const auto& f : families) family_list += (family_list.empty() ? "" : ", ") + f;
  std::string& t = report.text;
  t += "checkpoint:   " + path + "\n";
  t += printf_string("transformer:  %s (%zu tensors in %zu file%s)\n", dir.transformer_dir.c_str(), store.size(),
                     store.files().size(), store.files().size() == 1 ? "" : "s");
  t += "quantization: " + quantization_summary(quant) + "\n";
  t += printf_string("governed:     generation %d FP8 + %d 16-bit, reasoner %d FP8 + %d 16-bit\n", c.generation_fp8,
                     c.generation_dense, c.reasoner_fp8, c.reasoner_dense);
  t += printf_string("kept 16-bit:  %zu tensors (%s)\n", governed.kept_16bit.size(), family_list.c_str());
  t += printf_string("policy:       source=%s enabled=%s first=%d last=%d overlap=%s reasoner=%s\n",
                     policy.source.c_str(), policy.enabled ? "yes" : "no", policy.first_steps, policy.last_steps,
                     std::string(tower_mode_name(policy.overlap)).c_str(),
                     std::string(precision_trace_token(plan.reasoner)).c_str());
  t += mixed_precision_log_line(policy, plan) + "\n";
  for (const std::string& note : policy.notes) t += "note:         " + note + "\n";
  t += printf_string("steps:        %d\n", steps);
  t += printf_string("tensors:      %lld checked, all finite (%.1f MiB)\n", (long long)scanned.tensors,
                     double(scanned.bytes) / (1 << 20));
  t += "trace: " + trace_string(plan.generation) + "\n";
  return report;
}

}  // namespace stepmix
