// Effective configuration from checkpoint policy + user overrides
// (docs/step-policy.md §6), and
// the API-config overlay that gives the on-disk policy Diffusers' precedence.
#include <nlohmann/json.hpp>

#include <utility>

#include "stepmix/error.hpp"
#include "stepmix/policy.hpp"
#include "policy/diagnostics.hpp"

namespace stepmix {

namespace {

using nlohmann::json;

void require_non_negative(const std::optional<int>& count, const char* option) {
  if (count && *count < 0) {
    throw Error(policy_detail::kComponent,
                std::string("override ") + option + ": expected an integer >= 0, got " + std::to_string(*count));
  }
}

ResolvedPolicy schedule_off(const char* source, QuantizationInfo quant, std::vector<std::string> warnings) {
  ResolvedPolicy off;
  off.enabled = false;
  off.source = source;
  off.quant = std::move(quant);
  off.warnings = std::move(warnings);
  return off;
}

const json* runtime_of(const json& config) {
  if (!config.is_object()) return nullptr;
  const auto quant = config.find("quantization_config");
  if (quant == config.end() || !quant->is_object()) return nullptr;
  const auto runtime = quant->find("runtime");
  return runtime == quant->end() ? nullptr : &*runtime;
}

bool declares_no_policy(const json* runtime) {
  return runtime == nullptr || runtime->is_null() || (runtime->is_object() && !runtime->contains("diffusion_step_policy"));
}

}  // namespace

ResolvedPolicy resolve_policy(const json& transformer_config, const std::string& config_path,
                              const PolicyOverrides& overrides) {
  ParsedPolicy parsed = parse_step_policy(transformer_config, config_path);
  QuantizationInfo quant = classify_quantization(transformer_config, config_path);
  // stepmix cannot execute any other format, schedule or not.
  require_supported_quantization(quant, config_path);
  parsed.warnings.insert(parsed.warnings.end(), quant.warnings.begin(), quant.warnings.end());
  require_non_negative(overrides.first_steps, "first_steps");
  require_non_negative(overrides.last_steps, "last_steps");

  const bool overridden = overrides.any_field();
  if (overrides.mode == MixedPrecisionMode::None) {
    if (overridden) {
      throw Error(policy_detail::kComponent,
                  "overrides conflict with mixed_precision=none (first_steps/last_steps/reasoner/overlap need the "
                  "schedule on)");
    }
    return schedule_off("disabled", std::move(quant), std::move(parsed.warnings));
  }
  if (quant.kind == QuantizationKind::None) {
    if (overrides.mode == MixedPrecisionMode::Fp8 || overridden) {
      throw Error(policy_detail::kComponent,
                  config_path + ": mixed_precision=" + std::string(mixed_precision_mode_name(overrides.mode)) +
                      (overridden ? " with overrides" : "") +
                      " needs a serialised ModelOpt FP8 checkpoint (quant_method \"modelopt\", quant_algo \"FP8\"), "
                      "got no quantization_config (BF16 checkpoint)");
    }
    // The trace says it: every step BF16.
    return schedule_off("no-policy", std::move(quant), std::move(parsed.warnings));
  }
  if (overrides.mode == MixedPrecisionMode::Auto && !parsed.applies()) {
    if (overridden) {
      throw Error(policy_detail::kComponent,
                  config_path + ": checkpoint has no policy" + (parsed.exists ? " for the transformer (inert scope)" : "") +
                      "; overrides need one: use mixed_precision=fp8 to force the schedule");
    }
    ResolvedPolicy off = schedule_off("no-policy", std::move(quant), std::move(parsed.warnings));
    if (parsed.exists)
      off.notes.push_back(config_path +
                          ": the step policy's scope leaves out \"transformer\": validated and not applied (inert)");
    return off;
  }

  // Here: ModelOpt FP8, and either an applying checkpoint policy or mode fp8.
  const bool from_checkpoint = parsed.applies();
  const StepPolicy base = from_checkpoint ? parsed.policy : StepPolicy{};
  ResolvedPolicy on;
  on.enabled = true;
  on.source = std::string(from_checkpoint ? "checkpoint" : "forced") + (overridden ? "+override" : "");
  on.first_steps = overrides.first_steps.value_or(base.first_steps);
  on.last_steps = overrides.last_steps.value_or(base.last_steps);
  on.overlap = overrides.overlap.value_or(base.overlap);
  on.reasoner = overrides.reasoner.value_or(base.reasoner);
  on.quant = std::move(quant);
  on.warnings = std::move(parsed.warnings);
  return on;
}

json overlay_runtime_from_disk(const json& api_config, const json& disk_config) {
  json merged = api_config;
  if (!declares_no_policy(runtime_of(api_config))) return merged;
  const json* disk_runtime = runtime_of(disk_config);
  if (disk_runtime == nullptr || disk_runtime->is_null()) return merged;
  if (!merged.is_object() || !merged.contains("quantization_config") || !merged["quantization_config"].is_object()) {
    return merged;
  }
  merged["quantization_config"]["runtime"] = *disk_runtime;
  return merged;
}

}  // namespace stepmix
